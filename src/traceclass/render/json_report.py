"""Report -> JSON: the same content as the markdown, full names, base units in key names.

Top-level keys: ``schema_version``, ``traceclass_version``, ``source``, ``verdict``,
``devices``, ``stages``, ``ops``, ``kernels``, ``kernel_families``, ``memory``,
``step_series_steps``, ``findings``, ``opportunities``, ``idle`` (analysed time, GPU busy in it
and its idle by cause: the shared idle attribution), ``hardware``,
``cpu_profile``, ``notes``, ``thresholds``. Times are integer ns (``*_ns``), sizes bytes,
rates per second, shares percent (``*_pct``); non-finite numbers become ``null``.

The layout is the report model's (:func:`traceclass.report.plain.plain`) plus ``verdict``, so
``Report.from_json`` reads it back. The CPU section (:mod:`traceclass.report.cpu`) keeps the keys
it had when ``render/cpu_markdown.py`` laid it out, with two changes: its shares are no longer
rounded to 0.001 %, and threads of a profile whose values are not time carry ``weight``.
"""

from __future__ import annotations

import json
from typing import Any

from traceclass.render.verdict import bound_mix, verdict_sentences
from traceclass.report.model import Report
from traceclass.report.plain import plain


def _plain(obj: Any) -> Any:
    return plain(obj)


def to_dict(report: Report) -> dict[str, Any]:
    d = _plain(report)
    d["verdict"] = {
        "summary": " ".join(verdict_sentences(report, lambda s: s)),
        "bound_mix_pct": bound_mix(report),
    }
    order = ["schema_version", "traceclass_version", "source", "verdict", "devices", "stages", "ops",
             "ops_total_ns", "ops_time_basis", "ops_cover", "unmodeled_ops", "kernels", "kernel_families", "memory",
             "step_series_steps", "findings", "opportunities", "idle", "hardware", "cpu_profile", "notes",
             "rule_errors", "thresholds"]
    return {k: d[k] for k in order if k in d}


NAME = "json"
EXTENSION = ".json"


def render(report: Report, top_n: int | None = None) -> str:
    """Every row, whatever ``top_n`` (the JSON report is the complete one)."""
    return json.dumps(to_dict(report), indent=1, ensure_ascii=False, allow_nan=False) + "\n"
