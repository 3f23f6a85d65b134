"""Kernel statistics: per kernel name, and per kernel family with the per-step series."""

from __future__ import annotations

import numpy as np

from traceclass.analysis.devices import modal_device
from traceclass.analysis.gpu_timeline import DeviceTimeline
from traceclass.analysis.kernel_families import FAMILY_ORDER
from traceclass.analysis.ops import OpAnalysis
from traceclass.facts.rows import KernelFamilyStats, KernelStats
from traceclass.model import GpuKind, Trace
from traceclass.model.table import row_index_dtype


def kernel_stats(trace: Trace, opa: OpAnalysis, timelines: list[DeviceTimeline], family_code: np.ndarray,
                 limit: int = 200) -> tuple[KernelStats, ...]:
    """Per kernel name: count, durations, share of GPU busy time, launching ops and, where the
    kernel is the only GPU work of its op, that op's roofline point; most time first
    (``family_code``: :func:`~traceclass.analysis.kernel_families.gpu_family_codes`)."""
    gpu = trace.gpu
    if len(gpu) == 0:
        return ()
    active = np.flatnonzero(gpu.kind != GpuKind.SYNC).astype(row_index_dtype(len(gpu)))
    if len(active) == 0:
        return ()
    dur = gpu.end_ns[active] - gpu.start_ns[active]
    names = gpu.name[active]
    order = np.lexsort((dur, names))
    # each sorted column made as its unsorted one is dropped: a few row-sized arrays at a time
    names_s = names[order]
    del names
    dur_s = dur[order]
    del dur
    rows_s = active[order]
    del active, order
    cut = np.r_[0, np.flatnonzero(np.diff(names_s)) + 1, len(names_s)]
    busy = sum(t.busy_ns for t in timelines) or 1
    groups = opa.groups
    out = []
    for lo, hi in zip(cut[:-1], cut[1:]):
        d = dur_s[lo:hi]
        rows = rows_s[lo:hi]
        n = hi - lo
        med = float(d[n // 2]) if n % 2 else float(d[n // 2 - 1] + d[n // 2]) / 2.0
        gg = opa.gpu_group[rows]
        bound = ""
        point = None
        ugg = np.unique(gg[gg >= 0])
        if len(ugg) == 1:
            g = groups[int(ugg[0])]
            if g.kind == "op" and g.kernels == g.count:
                bound = g.point.bound
                point = g.point if g.flops is not None else None
        fn = gpu.full_name[rows]
        fn = fn[fn >= 0]
        op_names: list[str] = []
        if len(ugg):
            w = np.bincount(np.searchsorted(ugg, gg[gg >= 0]), weights=d[gg >= 0].astype(np.float64))
            for k in np.argsort(-w)[:3]:
                g = groups[int(ugg[k])]
                if g.kind == "op" and g.name not in op_names:
                    op_names.append(g.name)
        out.append(
            KernelStats(
                name=trace.strings[int(names_s[lo])],
                family=FAMILY_ORDER[int(family_code[rows[0]])],
                device=modal_device(gpu.device[rows]),
                count=int(n),
                total_ns=int(d.sum()),
                mean_ns=float(d.mean()),
                p50_ns=med,
                max_ns=int(d.max()),
                share_pct=100.0 * float(d.sum()) / busy,
                bound=bound,
                ops=tuple(op_names),
                full_name=trace.strings[int(fn[0])] if len(fn) else "",
                flops=point.flops if point else None,
                bytes=point.bytes if point else None,
                intensity=point.intensity if point and point.intensity not in (None, float("inf")) else None,
                achieved_flops_per_s=point.achieved_flops_per_s if point else None,
                achieved_bytes_per_s=point.achieved_bytes_per_s if point else None,
                pct_of_roof=point.pct_of_roof if point else None,
            )
        )
    out.sort(key=lambda k: -k.total_ns)
    return tuple(out[:limit])


def kernel_families(trace: Trace, family_code: np.ndarray, steps: dict[str, np.ndarray],
                    n_steps: int) -> tuple[KernelFamilyStats, ...]:
    """GPU activity per kernel family (all rows but sync records), most time first; ``step_ns``
    from the step series."""
    gpu = trace.gpu
    if len(gpu) == 0:
        return ()
    active = np.flatnonzero(gpu.kind != GpuKind.SYNC)
    code = family_code[active].astype(np.int64)
    dur = (gpu.end_ns[active] - gpu.start_ns[active]).astype(np.float64)
    counts = np.bincount(code, minlength=len(FAMILY_ORDER))
    totals = np.bincount(code, weights=dur, minlength=len(FAMILY_ORDER))
    out = []
    for c in np.flatnonzero(counts).tolist():
        f = FAMILY_ORDER[c]
        s = steps.get(f)
        each = s.tolist() if s is not None else [0] * n_steps
        out.append(KernelFamilyStats(family=f, count=int(counts[c]), total_ns=int(round(totals[c])),
                                   step_ns=tuple(int(x) for x in each)))
    out.sort(key=lambda r: -r.total_ns)
    return tuple(out)
