"""Helpers for the comparison tests: the sample diff pair, a stretched copy, cached runs."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "sample_traces"
BASELINE = SAMPLES / "torch_cpu_diff_baseline.json.gz"
CANDIDATE = SAMPLES / "torch_cpu_diff_candidate.json.gz"


def stretch_trace(src: Path, dst: Path, factor: float) -> Path:
    """The same trace with every duration (and every gap) stretched by ``factor``."""
    doc = json.loads(gzip.decompress(src.read_bytes()))
    events = doc["traceEvents"]
    t0 = min(e["ts"] for e in events if isinstance(e.get("ts"), (int, float)))
    for e in events:
        if isinstance(e.get("ts"), (int, float)):
            e["ts"] = round(t0 + (e["ts"] - t0) * factor, 3)
        if isinstance(e.get("dur"), (int, float)):
            e["dur"] = round(e["dur"] * factor, 3)
    dst.write_bytes(gzip.compress(json.dumps(doc).encode()))
    return dst


@pytest.fixture(scope="session")
def stretched(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The baseline sample with every duration stretched by 30%."""
    return stretch_trace(BASELINE, tmp_path_factory.mktemp("stretch") / "stretched_1.3.json.gz", 1.3)


_RUNS: dict[str, object] = {}


def run_of(path: Path):  # type: ignore[no-untyped-def]
    """Analysed run of a trace, cached for the session (analysis takes ~0.5 s a trace)."""
    from traceclass.compare.run import run_from_report
    from traceclass.engine import run

    from traceclass.ingest import load

    key = str(path)
    if key not in _RUNS:
        _RUNS[key] = run_from_report(run(load(path))[1])
    return _RUNS[key]


def assert_tables_intact(md: str) -> None:
    """Every row of every markdown table has as many cells as its header."""
    header_cells = None
    for line in md.splitlines():
        if not line.startswith("|"):
            header_cells = None
            continue
        cells = len(re.findall(r"(?<!\\)\|", line)) - 1
        if header_cells is None:
            header_cells = cells
        assert cells == header_cells, line
