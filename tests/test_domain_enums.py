"""Domain values that were strings are str-valued enums: they still compare, hash and serialise
as their strings (``"gpu" in trace.captured``; the JSON report writes the plain codes)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from traceclass.analysis.cpu_profile import profile_samples
from traceclass.analysis.frame_kinds import KIND_CODES, FrameKind, Rule
from traceclass.engine import run
from traceclass.ingest import load
from traceclass.model import Captured
from traceclass.render import json_report

ROOT = Path(__file__).resolve().parents[1]
KINETO = ROOT / "sample_traces" / "torch_cpu_diff_baseline.json.gz"
PYSPY = ROOT / "tests" / "data" / "pyspy" / "loader_workers.raw.txt.gz"


def test_captured_is_an_enum_that_answers_string_membership():
    trace = load(KINETO)
    assert trace.captured and all(type(c) is Captured for c in trace.captured)
    assert "ops" in trace.captured and Captured.OPS in trace.captured and "gpu" not in trace.captured
    assert {"ops", "shapes"} <= trace.captured
    report = run(trace)[1]
    d = json.loads(json_report.render(report))
    assert d["source"]["captured"] == sorted(c.value for c in trace.captured)
    with pytest.raises(ValueError):
        trace.replace(captured=frozenset({"gpus"}))  # a reader's typo fails at once


def test_frame_kinds_are_an_enum_written_as_their_codes():
    prof = profile_samples(load(PYSPY))
    assert all(type(k.kind) is FrameKind for k in prof.kinds if k.kind != "none")
    assert KIND_CODES[0] is FrameKind.PYTHON and "lock" in KIND_CODES
    d = json.loads(json_report.render(run(load(PYSPY))[1]))
    kinds = [k["kind"] for k in d["cpu_profile"]["kinds"]]
    assert "lock" in kinds and all(type(k) is str for k in kinds)
    with pytest.raises(ValueError):
        Rule("locks", "leaf", "function", "x")
