"""A result as pandas DataFrames, for notebooks (``traceclass.analyze(...).frames()``).

Names are text, times integer nanoseconds, sizes bytes, shares percent; the report frames hold
exactly the numbers of the JSON report (one row per report row, one column per field; lists
stay lists). Frames:

============  =========================  =====================================================
frame         one row per                columns
============  =========================  =====================================================
``ops``       op group (name, shapes,    the JSON report's ``ops`` fields: ``name``, ``shapes``,
              dtype), most time first    ``dtype``, ``kind``, ``count``, ``kernels``,
                                         ``total_ns``, ``share_pct``, ``host_ns``, ``device``,
                                         ``family``, ``flops``/``bytes`` (per call),
                                         ``intensity``, ``ridge``, ``precision``, ``unit``,
                                         ``bound``, ``heuristic``, ``achieved_flops_per_s``,
                                         ``achieved_bytes_per_s``, ``attainable_flops_per_s``,
                                         ``pct_of_roof``, ``lower_bound_ns`` (per call),
                                         ``gap_ns`` (all calls), ``note``, ``top_kernels``,
                                         ``causal``, ``step_ns``
``kernels``   GPU activity name (up to   the JSON report's ``kernels`` fields: ``name``,
              200), most time first      ``family``, ``device``, ``count``, ``total_ns``,
                                         ``mean_ns``, ``p50_ns``, ``max_ns``, ``share_pct``,
                                         ``bound``, ``ops``, ``full_name``, roofline fields
``gpu``       GPU activity in the trace  ``start_ns``, ``end_ns`` (trace clock), ``dur_ns``,
              (kernels, copies,          ``device``, ``stream``, ``kind`` (kernel, memcpy,
              memsets, sync records)     memset, sync), ``name``, ``full_name``, ``family``,
                                         ``bytes`` (-1 unknown), ``copy_kind`` (htod, dtoh...),
                                         ``src_mem``, ``dst_mem`` (pageable, pinned, device...),
                                         ``grid``, ``block``, ``registers``, ``shared_mem``,
                                         ``graph``, ``correlation``, ``external_id``,
                                         ``op_name`` (launching op, "" when unknown)
``stages``    stage (step, range)        the JSON report's ``stages`` fields: ``name``,
                                         ``kind``, ``count``, ``warmup_count``, ``total_ns``,
                                         ``p50_ns``/``p90_ns``/``p99_ns``, ``mean_ns``,
                                         ``min_ns``, ``max_ns``, ``gpu_busy_ns``,
                                         ``gpu_share_pct``, ``dominant_bound``, roofline
                                         fields, ``wall_ns`` (per steady occurrence)
``findings``  finding, most recoverable  ``code``, ``name``, ``severity``, ``recoverable_ns``,
              time first                 ``message``, ``estimate``, ``fix``, ``location``,
                                         ``fingerprint``, ``evidence`` (instance count)
``devices``   GPU                        the JSON report's ``devices`` fields (window, busy,
                                         idle, compute, copy, communication in ns and %)
============  =========================  =====================================================

Missing values are ``None``/``NaN`` as in the JSON report (non-finite floats become ``None``).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Iterable

if TYPE_CHECKING:
    import pandas as pd

    from traceclass.model import Trace
    from traceclass.report.model import Report

FRAMES = ("ops", "kernels", "gpu", "stages", "findings", "devices")


def frames(trace: Trace, analysis: Any, report: Report) -> dict[str, pd.DataFrame]:
    """Every frame of the table above, by name."""
    from traceclass.report.model import DeviceRow, KernelRow, OpRow, StageRow

    return {
        "ops": _rows(report.ops, OpRow),
        "kernels": _rows(report.kernels, KernelRow),
        "gpu": gpu_frame(trace, analysis),
        "stages": _rows(report.stages, StageRow),
        "findings": _findings(report),
        "devices": _rows(report.devices, DeviceRow),
    }


def _rows(rows: Iterable[Any], cls: type) -> pd.DataFrame:
    import pandas as pd

    from traceclass.report.plain import plain

    columns = [f.name for f in dataclasses.fields(cls)]
    return pd.DataFrame([plain(r) for r in rows], columns=columns)


def _findings(report: Report) -> pd.DataFrame:
    import pandas as pd

    from traceclass.report.plain import plain

    cols = ["code", "name", "severity", "recoverable_ns", "message", "estimate", "fix", "location",
            "fingerprint", "evidence"]
    out = []
    for f in report.findings:
        d = plain(f, evidence=False)
        d["evidence"] = len(f.evidence)
        out.append({c: d.get(c) for c in cols})
    return pd.DataFrame(out, columns=cols)


def gpu_frame(trace: Trace, analysis: Any) -> pd.DataFrame:
    """Every row of ``trace.gpu`` with names and enum values as text (see the table above)."""
    import numpy as np

    gpu = trace.gpu
    df = gpu.to_pandas(trace.strings)
    df.insert(2, "dur_ns", gpu.end_ns - gpu.start_ns)
    family = getattr(analysis, "gpu_family", None)
    df.insert(df.columns.get_loc("full_name") + 1, "family",
              np.asarray(family, dtype=object) if family is not None and len(family) == len(gpu)
              else np.full(len(gpu), "", dtype=object))
    op_name = np.full(len(gpu), "", dtype=object)
    has_op = gpu.op >= 0
    if has_op.any():
        op_name[has_op] = trace.strings.decode(trace.ops.name[gpu.op[has_op]])
    df["op_name"] = op_name
    return df.drop(columns=["api", "op"])
