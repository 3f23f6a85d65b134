"""Per stage: the work inside its analysed occurrences, classified on the roofline.

For each stage name, over the occurrences its statistics use (:meth:`Occurrences.basis`):
the share of work time per roofline label, modeled FLOPs and bytes, the work time (GPU busy
for GPU traces, op time for CPU traces), the roofline point of that work as a whole, and each
occurrence's wall and GPU busy time in time order (for noise estimates).
"""

from __future__ import annotations

import dataclasses
from typing import Callable

import numpy as np

from traceclass.analysis.ops import OpAnalysis
from traceclass.analysis.roofline import Point, Roof, classify
from traceclass.analysis.stages import Occurrences, StageStats
from traceclass.model import Trace

MAX_SAMPLES = 10_000  # per stage: enough for percentiles and noise tests

RoofFor = Callable[[int, str, str], "Roof | None"]


@dataclasses.dataclass(frozen=True)
class StageWork:
    dominant_bound: str  # by time of the work inside the stage; "" when nothing classified
    bound_shares_pct: dict[str, float]
    flops: float | None
    bytes: float | None
    work_ns: int
    point: Point | None  # the stage's modeled work over all of its work time
    roof: str  # "bf16 matrix, h100-sxm": the roof of the group holding most FLOPs
    wall_ns: tuple[int, ...]  # per occurrence, time order (at most MAX_SAMPLES)
    gpu_busy_each_ns: tuple[int, ...]  # per occurrence (GPU traces)

    @property
    def intensity(self) -> float | None:
        return (self.flops / self.bytes) if (self.flops is not None and self.bytes) else None


def stage_work(trace: Trace, occ: Occurrences, stages: list[StageStats], opa: OpAnalysis,
               roof: RoofFor) -> dict[str, StageWork]:
    """Stage name -> its work (see the module docstring), in the order of ``stages``."""
    groups = opa.groups
    group_bound = np.array([g.point.bound for g in groups] + [""], dtype=object)
    group_flops = np.array([g.flops if g.flops is not None else np.nan for g in groups] + [np.nan])
    group_bytes = np.array([g.bytes if g.bytes is not None else np.nan for g in groups] + [np.nan])
    gpu = trace.gpu
    has_gpu = len(gpu) > 0
    index = {n: j for j, n in enumerate(occ.names)}
    out: dict[str, StageWork] = {}
    for st in stages:
        which = np.flatnonzero(occ.basis(index[st.name]))
        which = which[np.argsort(occ.start_ns[which], kind="stable")]
        shares: dict[str, float] = {}
        g = np.zeros(0, np.int64)
        work_ns = 0
        flops = nbytes = None
        if has_gpu:
            sel = _union_rows([occ.gpu_rows[i] for i in which], len(gpu))
            sel = sel[opa.gpu_group[sel] >= 0] if len(sel) else sel
            if len(sel):
                dur = (gpu.end_ns[sel] - gpu.start_ns[sel]).astype(np.float64)
                shares = _group_shares(opa.gpu_group[sel], dur, group_bound)
                owners = _union_rows([opa.gpu_owner[sel]], len(trace.ops))
                g = opa.op_group[owners]
                g = g[g >= 0]
                flops, nbytes = _sum_or_none(group_flops[g]), _sum_or_none(group_bytes[g])
            busy = occ.gpu_busy_ns[which]
            work_ns = int(busy[busy >= 0].sum())
        else:
            sel = _union_rows([occ.op_rows[i] for i in which], len(trace.ops))
            if len(sel) and len(opa.op_group):
                sel = sel[opa.op_group[sel] >= 0]
                if len(sel):
                    shares = _group_shares(opa.op_group[sel], opa.owner_time.of(sel).astype(np.float64),
                                           group_bound)
                    g = opa.op_group[sel]
                    flops, nbytes = _sum_or_none(group_flops[g]), _sum_or_none(group_bytes[g])
                    work_ns = int(opa.owner_time.of(sel).sum())
        dominant = max(shares, key=lambda k: shares[k]) if shares else ""
        point, roof_label = _stage_point(groups, roof, g, flops, nbytes, work_ns)
        out[st.name] = StageWork(
            dominant_bound=dominant, bound_shares_pct=shares, flops=flops, bytes=nbytes, work_ns=work_ns,
            point=point, roof=roof_label,
            wall_ns=tuple(int(x) for x in (occ.end_ns[which] - occ.start_ns[which])[:MAX_SAMPLES].tolist()),
            gpu_busy_each_ns=tuple(int(x) for x in occ.gpu_busy_ns[which][:MAX_SAMPLES].tolist()) if has_gpu else (),
        )
    return out


def _stage_point(groups: list, roof_for: RoofFor, g: np.ndarray, flops: float | None, nbytes: float | None,
                 work_ns: int) -> tuple[Point | None, str]:
    """Roofline point of a stage's modeled work over all of its measured work time.

    The roof is that of the op group holding most of the stage's FLOPs (its device, precision
    and unit); unmodeled work still counts in the time, so achieved FLOP/s is a lower bound.
    """
    if not flops or not nbytes or work_ns <= 0 or not len(g):
        return None, ""
    fl = np.array([groups[k].flops or 0.0 for k in g.tolist()])
    top = groups[int(g[int(np.argmax(fl))])]
    roof = roof_for(top.device, top.precision, top.unit)
    if roof is None:
        return None, ""
    return classify(flops, nbytes, float(work_ns), roof, 0.0), f"{top.precision} {top.unit}, {roof.device}"


def _sum_or_none(values: np.ndarray) -> float | None:
    v = values[~np.isnan(values)]
    return float(v.sum()) if len(v) else None


def _union_rows(parts: list[np.ndarray], n: int) -> np.ndarray:
    """Sorted distinct rows of several index arrays (a mask: no sort of the concatenation)."""
    mask = np.zeros(n, dtype=bool)
    for p in parts:
        if len(p):
            mask[p[p >= 0]] = True
    return np.flatnonzero(mask)


def _group_shares(group: np.ndarray, weights: np.ndarray, group_bound: np.ndarray) -> dict[str, float]:
    """Percent of ``weights`` per roofline label, summed per group first."""
    per_group = np.bincount(group, weights=weights, minlength=len(group_bound) - 1)
    g = np.flatnonzero(per_group)
    return _shares(group_bound[g], per_group[g])


def _shares(labels: np.ndarray, weights: np.ndarray) -> dict[str, float]:
    total = float(weights.sum())
    if total <= 0:
        return {}
    out: dict[str, float] = {}
    for lab in np.unique(labels).tolist():
        if lab:
            out[str(lab)] = 100.0 * float(weights[labels == lab].sum()) / total
    return dict(sorted(out.items(), key=lambda kv: -kv[1]))
