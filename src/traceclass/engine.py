"""Run the pipeline: trace -> analyses -> rules -> report.

A rule that raises does not sink the report: its error is recorded and shown, unless
``strict`` (tests) asks for the exception.
"""

from __future__ import annotations

import traceback
from types import MappingProxyType
from typing import Sequence

from traceclass.analysis import Analysis, analyze
from traceclass.config import Config, load_config
from traceclass.model import Trace
from traceclass.registry import selected
from traceclass.report.build import build_report
from traceclass.report.model import Report
from traceclass.rule import SEVERITIES, Context, Finding
from traceclass.timings import stage


def run_rules(trace: Trace, analysis: Analysis, config: Config, strict: bool = False) -> tuple[list[Finding], list[str]]:
    ctx = Context(trace=trace, analysis=analysis)
    findings: list[Finding] = []
    errors: list[str] = []
    for rule in selected(config.select, config.ignore):
        th = MappingProxyType(dict(config.rules.get(rule.info.code, {})))
        try:
            with stage(f"rule {rule.info.code}"):
                for f in rule.module.check(ctx, th):
                    if f.severity not in SEVERITIES:
                        raise ValueError(f"severity {f.severity!r} not in {SEVERITIES}")
                    findings.append(f)
        except Exception as exc:  # noqa: BLE001 - one failing rule must not sink the report
            if strict:
                raise
            last = traceback.extract_tb(exc.__traceback__)[-1]
            errors.append(f"{rule.info.code} {rule.info.name} failed: {type(exc).__name__}: {exc} "
                          f"(at {last.filename.rsplit('/', 1)[-1]}:{last.lineno})")
    findings.sort(key=lambda f: (-f.recoverable_ns, f.code, f.location))
    return findings, errors


def run(trace: Trace, config: Config | None = None, strict: bool = False) -> tuple[Analysis, Report]:
    cfg = config or load_config()
    with stage("analyses"):
        analysis = analyze(trace, cfg.analysis)
    findings, errors = run_rules(trace, analysis, cfg, strict=strict)
    with stage("report"):
        report = build_report(trace, analysis, findings, cfg, errors)
    return analysis, report


__all__: Sequence[str] = ("run", "run_rules")
