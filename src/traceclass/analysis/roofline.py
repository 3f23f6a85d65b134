"""Roofline classification of a unit of work (op group, kernel, stage).

For work of ``F`` FLOPs moving ``B`` bytes (ideal traffic: each tensor once) that took ``T``:

* arithmetic intensity ``I = F / B`` (FLOP/byte)
* ridge point ``R = peak / bandwidth`` for the device, precision and unit (matrix/vector)
* attainable FLOP/s ``min(peak, I * bandwidth)``; achieved FLOP/s ``F / T``
* percent of roof = achieved / attainable (for zero-FLOP work, achieved bytes/s / bandwidth),
  capped at 100 within the ``OVER_ROOF_PCT`` slack; beyond it the point is ``over_roof``
* lower-bound time ``max(F / peak, B / bandwidth)``; gap = T - lower bound
* label: ``latency-bound`` when the lower-bound time is below ``latency_floor_ns`` (the work
  is too small for either roof to matter: fixed launch/dispatch costs dominate) *and* a call
  took at most ``latency_call_ns`` (a call far slower than any fixed cost is an inefficient
  kernel, not a latency-bound one: it keeps its intensity label and a low % of roof), else
  ``compute-bound`` when ``I >= R``, else ``memory-bound``; ``unclassified`` without a cost
  model. Labels derived from kernel names only (no shapes) carry ``heuristic = True``.
"""

from __future__ import annotations

import dataclasses
import math

COMPUTE = "compute-bound"
MEMORY = "memory-bound"
LATENCY = "latency-bound"
UNCLASSIFIED = "unclassified"
COMMUNICATION = "communication"


@dataclasses.dataclass(frozen=True)
class Roof:
    """The roof one piece of work is judged against."""

    device: str
    precision: str
    unit: str  # "matrix" or "vector"
    peak_flops: float | None  # FLOP/s; None when the device lacks that precision path
    bandwidth_bps: float  # bytes/s

    @property
    def ridge(self) -> float | None:
        if not self.peak_flops or not self.bandwidth_bps:
            return None
        return self.peak_flops / self.bandwidth_bps


@dataclasses.dataclass(frozen=True)
class Point:
    flops: float
    bytes: float
    time_ns: float
    intensity: float | None
    ridge: float | None
    attainable_flops_per_s: float | None
    achieved_flops_per_s: float | None
    achieved_bytes_per_s: float | None
    pct_of_roof: float | None
    lower_bound_ns: float | None
    gap_ns: float | None
    bound: str
    heuristic: bool = False
    #: achieved exceeded the roof by more than OVER_ROOF_PCT: the spec does not describe the
    #: hardware that ran the work (another device, more CPU cores); no label is given
    over_roof: bool = False


#: achieved/attainable above this is treated as "the spec does not fit", not as a measurement
#: (5 % of slack covers boost clocks above the datasheet and timer granularity)
OVER_ROOF_PCT = 105.0


def classify(flops: float, nbytes: float, time_ns: float, roof: Roof | None,
             latency_floor_ns: float, latency_call_ns: float = math.inf) -> Point:
    """Roofline point for work of ``flops``/``nbytes`` measured at ``time_ns`` (per instance)."""
    intensity = flops / nbytes if nbytes > 0 else (math.inf if flops > 0 else None)
    secs = time_ns / 1e9 if time_ns > 0 else None
    achieved_f = flops / secs if secs else None
    achieved_b = nbytes / secs if secs else None
    if roof is None or not roof.bandwidth_bps:
        return Point(flops, nbytes, time_ns, intensity, None, None, achieved_f, achieved_b,
                     None, None, None, UNCLASSIFIED)
    peak = roof.peak_flops
    t_mem = nbytes / roof.bandwidth_bps
    if flops > 0 and not peak:
        # the device has no peak for this precision: judge by memory only and say so upstream
        return Point(flops, nbytes, time_ns, intensity, None, None, achieved_f, achieved_b,
                     None, None, None, UNCLASSIFIED)
    t_comp = flops / peak if (flops > 0 and peak) else 0.0
    lb_ns = max(t_comp, t_mem) * 1e9
    ridge = roof.ridge
    if flops > 0 and peak:
        attainable = min(peak, (intensity or 0.0) * roof.bandwidth_bps)
        pct = 100.0 * achieved_f / attainable if (achieved_f is not None and attainable > 0) else None
    else:
        attainable = None
        pct = 100.0 * achieved_b / roof.bandwidth_bps if achieved_b is not None else None
    if pct is not None and pct > OVER_ROOF_PCT:
        return Point(flops, nbytes, time_ns, intensity, ridge, attainable, achieved_f, achieved_b,
                     pct, lb_ns, None, UNCLASSIFIED, over_roof=True)
    if pct is not None and pct > 100.0:
        pct = 100.0  # within the slack: boost clocks or timer granularity, never above the roof
    if lb_ns < latency_floor_ns and time_ns <= latency_call_ns:
        bound = LATENCY
    elif ridge is not None and intensity is not None and intensity >= ridge:
        bound = COMPUTE
    else:
        bound = MEMORY
    gap = max(time_ns - lb_ns, 0.0) if time_ns > 0 else None
    return Point(flops, nbytes, time_ns, intensity, ridge, attainable, achieved_f, achieved_b,
                 pct, lb_ns, gap, bound)


#: Name-family labels for kernels without shapes (nsys exports, unattributed kernels).
FAMILY_BOUND = {
    "gemm": COMPUTE,
    "conv": COMPUTE,
    "attention": COMPUTE,
    "elementwise": MEMORY,
    "reduction": MEMORY,
    "norm": MEMORY,
    "softmax": MEMORY,
    "embedding": MEMORY,
    "copy": MEMORY,
    "layout": MEMORY,
    "memcpy": MEMORY,
    "memset": MEMORY,
    "comm": COMMUNICATION,
}


def heuristic_point(family: str, time_ns: float, latency_floor_ns: float) -> Point:
    """Label from the kernel family when no cost model applies (marked heuristic).

    Without FLOPs or bytes the only latency evidence is the measured time per kernel.
    """
    if time_ns < latency_floor_ns and family != "comm":
        bound = LATENCY
    else:
        bound = FAMILY_BOUND.get(family, UNCLASSIFIED)
    return Point(0.0, 0.0, time_ns, None, None, None, None, None, None, None, None, bound,
                 heuristic=bound != UNCLASSIFIED)
