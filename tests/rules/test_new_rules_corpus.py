"""TC204, TC602, TC701 on every corpus trace and sample: no crash, stable fingerprints, sane values."""

from __future__ import annotations

from functools import lru_cache
from types import MappingProxyType

import pytest

from conftest import CORPUS, ROOT
from traceclass.analysis import analyze
from traceclass.engine import check_rule
from traceclass.config import default_thresholds
from traceclass.errors import TraceclassError
from traceclass.ingest import load
from traceclass.registry import find
from traceclass.rule import SEVERITIES, Context

CODES = ("TC204", "TC602", "TC701")


def _files() -> list[str]:
    out = sorted(str(p) for p in (ROOT / "sample_traces").glob("*.json.gz"))
    if CORPUS.exists():
        out += sorted(str(p) for sub in ("torch", "nsys", "pyspy") for p in (CORPUS / sub).rglob("*")
                      if p.is_file() and "scripts" not in p.parts and "workloads" not in p.parts
                      and p.name.endswith((".json", ".json.gz", ".sqlite", ".txt")))
    return out


@lru_cache(maxsize=2)
def _context(path: str) -> Context:
    t = load(path)
    return Context(trace=t, analysis=analyze(t))


@pytest.mark.parametrize("path", _files(), ids=lambda p: p.rsplit("/", 2)[-1])
def test_new_rules_run_on_every_trace(path):
    try:
        ctx = _context(path)
    except TraceclassError:
        pytest.skip("not a trace (rejected with its reason)")
    for code in CODES:
        rule = find(code)
        th = MappingProxyType(dict(default_thresholds()[code]))
        fs = check_rule(rule, ctx, th)
        again = check_rule(rule, ctx, th)
        assert [f.fingerprint for f in fs] == [f.fingerprint for f in again]
        assert len({f.location for f in fs}) == len(fs)
        for f in fs:
            assert f.code == code and f.severity in SEVERITIES and f.recoverable_ns >= 0
            assert f.message and f.estimate and f.fix and f.location and len(f.evidence) <= 50
            assert f.recoverable_ns <= max(ctx.analysed_ns, 0) or code == "TC602"
            if f.recoverable_ns == 0 and code != "TC602":
                assert f.severity == "info"
