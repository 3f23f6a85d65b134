"""TRACECLASS_TIMINGS=1: one line per stage with its time, peak and current resident memory,
in the form ``timings.LINE`` (which benchmarks/bench_kineto.py parses with) matches."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from traceclass.timings import LINE

SAMPLE = Path(__file__).resolve().parent.parent / "sample_traces" / "torch_ddp-nccl-train_a100.json.gz"


def test_stage_lines_carry_time_peak_and_resident_memory(tmp_path):
    env = dict(os.environ, TRACECLASS_TIMINGS="1")
    proc = subprocess.run([sys.executable, "-m", "traceclass", "analyze", str(SAMPLE), "-o", str(tmp_path / "r.md")],
                          capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr
    got = [LINE.match(line) for line in proc.stderr.splitlines() if line.startswith("timing ")]
    assert got and all(got)
    names = [m.group(1) for m in got]
    assert {"read", "link", "analyses", "report", "render"} <= set(names) and "rule TC202" in names
    for m in got:
        secs, peak, now = float(m.group(2)), int(m.group(3)), int(m.group(4))
        assert secs >= 0 and peak >= now > 0
    peaks = [int(m.group(3)) for m in got]
    assert peaks == sorted(peaks)  # VmHWM never goes down (Linux: CI and the benchmarks)
