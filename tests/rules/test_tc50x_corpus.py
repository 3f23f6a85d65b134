"""The CPU-sample rules (TC501-TC506) on every corpus file: no crash, silent without samples."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import CORPUS
from ruletest import findings_for
from traceclass.errors import TraceFormatError
from traceclass.ingest import load
from traceclass.registry import all_rules

CODES = [r.info.code for r in all_rules() if r.info.code.startswith("TC5")]
DIRS = ("pyspy", "speedscope", "torch", "nsys")


def _files() -> list[Path]:
    out = []
    for d in DIRS:
        root = CORPUS / d
        if root.is_dir():
            out += sorted(p for p in root.rglob("*") if p.is_file())
    return out


def test_all_cpu_rules_are_there():
    assert CODES == ["TC501", "TC502", "TC503", "TC504", "TC505", "TC506"]
    for r in all_rules():
        if r.info.code in CODES:
            assert r.info.needs == ("samples",) and r.info.family == "cpu"


@pytest.mark.parametrize("path", _files(), ids=lambda p: str(p.relative_to(CORPUS)))
def test_cpu_rules_run_on_every_corpus_file(path):
    try:
        trace = load(path)
    except TraceFormatError:
        pytest.skip("not a trace (rejected with its reason)")
    for code in CODES:
        findings = findings_for(trace, code)
        if len(trace.samples) == 0:
            assert findings == [], code
        for f in findings:
            assert f.code == code and f.location and f.recoverable_ns >= 0
            assert f.severity in ("high", "medium", "low", "info")
            assert "pid" not in f.location and "tid" not in f.location  # stable across runs


def test_corpus_is_there_or_skipped():
    if not _files():
        pytest.skip("corpus not available")
    assert any(p.suffix == ".sqlite" for p in _files())
