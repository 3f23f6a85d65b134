"""Report -> JSON: the same content as the markdown, full names, base units in key names.

Top-level keys: ``schema_version``, ``traceclass_version``, ``source``, ``verdict``,
``devices``, ``stages``, ``ops``, ``kernels``, ``kernel_families``, ``memory``,
``step_series_steps``, ``findings``, ``opportunities``, ``hardware``,
``cpu_profile``, ``notes``, ``thresholds``. Times are integer ns (``*_ns``), sizes bytes,
rates per second, shares percent (``*_pct``); non-finite numbers become ``null``.
"""

from __future__ import annotations

import dataclasses
import json
import math
from typing import Any

from traceclass.render.verdict import bound_mix, verdict_sentences
from traceclass.report.model import Report
from traceclass.rule import Finding


def _plain(obj: Any) -> Any:
    if isinstance(obj, Finding):
        d = {f.name: _plain(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
        d["fingerprint"] = obj.fingerprint
        return d
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: _plain(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, (list, tuple)):
        return [_plain(x) for x in obj]
    if isinstance(obj, dict):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if hasattr(obj, "item") and callable(obj.item):  # numpy scalars
        return _plain(obj.item())
    return obj


def to_dict(report: Report) -> dict[str, Any]:
    d = _plain(report)
    cpu = report.cpu_profile
    if cpu is not None:
        try:
            from traceclass.render.cpu_markdown import cpu_profile_json

            d["cpu_profile"] = _plain(cpu_profile_json(cpu))
        except ImportError:
            d["cpu_profile"] = None
    d["verdict"] = {
        "summary": " ".join(verdict_sentences(report, lambda s: s)),
        "bound_mix_pct": bound_mix(report),
    }
    order = ["schema_version", "traceclass_version", "source", "verdict", "devices", "stages", "ops",
             "ops_total_ns", "ops_time_basis", "unmodeled_ops", "kernels", "kernel_families", "memory",
             "step_series_steps", "findings", "opportunities", "hardware", "cpu_profile", "notes",
             "rule_errors", "thresholds"]
    return {k: d[k] for k in order if k in d}


def render(report: Report) -> str:
    return json.dumps(to_dict(report), indent=1, ensure_ascii=False, allow_nan=False) + "\n"
