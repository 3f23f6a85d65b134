"""Run one rule on a trace, the way the engine does, for rule tests."""

from __future__ import annotations

from pathlib import Path
from types import MappingProxyType
from typing import Any

from traceclass.analysis import analyze
from traceclass.config import AnalysisConfig, default_thresholds
from traceclass.engine import check_rule
from traceclass.ingest import load
from traceclass.model import Trace
from traceclass.registry import find
from traceclass.rule import Context, Finding


def findings_for(trace: Trace | str | Path, code: str, analysis_config: AnalysisConfig | None = None,
                 **overrides: Any) -> list[Finding]:
    """Findings of rule ``code`` (default thresholds, with ``overrides``) on ``trace``."""
    t = trace if isinstance(trace, Trace) else load(trace)
    rule = find(code)
    th = dict(default_thresholds().get(rule.info.code, {}))
    unknown = set(overrides) - set(th)
    assert not unknown, f"unknown thresholds for {code}: {unknown}"
    th.update(overrides)
    ctx = Context(trace=t, analysis=analyze(t, analysis_config or AnalysisConfig()))
    return check_rule(rule, ctx, MappingProxyType(th))
