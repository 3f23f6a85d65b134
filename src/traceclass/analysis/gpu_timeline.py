"""Per-device GPU time breakdown: window, busy, idle, compute, copy, communication.

Definitions (all exact integer-ns interval unions across streams):

* window  = first GPU activity start -> last GPU activity end on the device (HTA's definition;
  GPU-side sync records are not activity).
* busy    = union of kernels, memcpys and memsets.
* idle    = window - busy.
* compute = union of kernels that are not communication kernels.
* comm    = union of communication kernels (NCCL/RCCL, ``ncclDevKernel_*``, symmetric-memory
  all-reduce kernels).
* copy    = union of memcpy and memset activity.
* exposed_copy = copy not overlapped by compute or comm; exposed_comm = comm not overlapped by
  compute.

HTA classifies the same way (memsets with memcpys as "memory", everything else that is not
communication as computation) but rounds every timestamp to whole microseconds first; on
ns-resolution traces that moves idle by up to a few percentage points. We do not round.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

import numpy as np

from traceclass import timeline as tl
from traceclass.analysis.kernel_families import FAMILY_ORDER, gpu_family_codes
from traceclass.model import GpuKind, Trace
from traceclass.model.table import BLOCK_ROWS, row_index_dtype


@dataclasses.dataclass(frozen=True)
class DeviceTimeline:
    device: int
    window_start_ns: int
    window_end_ns: int
    busy_ns: int
    idle_ns: int
    compute_ns: int
    copy_ns: int
    comm_ns: int
    exposed_copy_ns: int
    exposed_comm_ns: int
    kernels: int
    memcpys: int
    memsets: int
    streams: int
    profiler_window_ns: int | None  # the profiler's recording window, when known
    idle_in_profiler_window_ns: int | None
    comm_overlap_pct: float | None = None  # comm time overlapped by compute / comm time (HTA)
    longest_idle_start_ns: int | None = None  # the longest gap between GPU activity
    longest_idle_end_ns: int | None = None
    launches: int = 0  # kernel launches with a linked API call (graph launches excluded)
    launch_delay_p50_ns: float | None = None  # kernel start - launch call end, clipped at 0 (HTA)
    launch_delay_p90_ns: float | None = None
    launch_delay_max_ns: int | None = None
    kernels_shorter_than_launch: int = 0  # kernels that ran shorter than their launch call took

    @property
    def window_ns(self) -> int:
        return self.window_end_ns - self.window_start_ns

    def share(self, value_ns: int) -> float:
        w = self.window_ns
        return 100.0 * value_ns / w if w > 0 else 0.0


_COMM = FAMILY_ORDER.index("comm")


def device_timelines(trace: Trace, fam_code: np.ndarray | None = None,
                     cached: Callable[[int], tuple[tl.Intervals, tl.Intervals]] | None = None) -> list[DeviceTimeline]:
    """One timeline per device with GPU work. ``fam_code``: the kernel family codes
    (:func:`~traceclass.analysis.kernel_families.gpu_family_codes`) if already computed;
    ``cached``: a device's busy set and its gaps if already computed (the cached gaps hold
    both). Overlaps are measured by intersecting the smaller set with the larger (exposed =
    total - overlap), never by building the gaps of a set of millions of intervals."""
    gpu = trace.gpu
    if len(gpu) == 0:
        return []
    out = []
    fam_code = gpu_family_codes(trace) if fam_code is None else fam_code
    active = gpu.kind != GpuKind.SYNC
    is_comm = fam_code == _COMM
    lim = np.iinfo(np.int64)
    for dev in np.unique(gpu.device[active]).tolist():
        # masks over the whole table, merged in place: no copy of the device's rows
        on = active & (gpu.device == dev)
        kernel = on & (gpu.kind == GpuKind.KERNEL)
        comm_m = kernel & is_comm
        comp_m = kernel & ~comm_m
        copy_m = on & ((gpu.kind == GpuKind.MEMCPY) | (gpu.kind == GpuKind.MEMSET))
        w0 = int(np.min(gpu.start_ns, where=on, initial=lim.max))
        w1 = int(np.max(gpu.end_ns, where=on, initial=lim.min))
        streams = int(len(np.unique(gpu.stream[on])))
        counts = dict(kernels=int(np.count_nonzero(kernel)), memcpys=int(np.count_nonzero(on & (gpu.kind == GpuKind.MEMCPY))),
                      memsets=int(np.count_nonzero(on & (gpu.kind == GpuKind.MEMSET))))
        if cached is None:
            busy = tl.merge(gpu.start_ns, gpu.end_ns, where=on)
            gaps = tl.gaps(busy)
        else:
            busy, gaps = cached(int(dev))
        compute = busy if np.array_equal(comp_m, on) else tl.merge(gpu.start_ns, gpu.end_ns, where=comp_m)
        comm = tl.merge(gpu.start_ns, gpu.end_ns, where=comm_m)
        copy = tl.merge(gpu.start_ns, gpu.end_ns, where=copy_m)
        del on, kernel, comp_m, comm_m, copy_m
        busy_ns = tl.total(busy)
        compute_ns, comm_ns, copy_ns = tl.total(compute), tl.total(comm), tl.total(copy)
        comm_in_compute = tl.total(tl.intersect(comm, compute))
        covered = tl.union(compute, comm)
        copy_covered = tl.total(tl.intersect(copy, covered))
        del covered
        pw = trace.window
        prof_ns = idle_pw = None
        if pw is not None and pw[1] > pw[0]:
            prof_ns = pw[1] - pw[0]
            idle_pw = prof_ns - tl.total_within(busy, pw[0], pw[1])
        longest = tl.longest(gaps)
        launch = _launch_stats(trace, (gpu.device == dev) & (gpu.kind == GpuKind.KERNEL) & ~gpu.graph)
        out.append(
            DeviceTimeline(
                comm_overlap_pct=100.0 * comm_in_compute / comm_ns if comm_ns else None,
                longest_idle_start_ns=int(gaps[0][longest]) if longest >= 0 else None,
                longest_idle_end_ns=int(gaps[1][longest]) if longest >= 0 else None,
                **launch,
                device=int(dev),
                window_start_ns=w0,
                window_end_ns=w1,
                busy_ns=busy_ns,
                idle_ns=(w1 - w0) - busy_ns,
                compute_ns=compute_ns,
                copy_ns=copy_ns,
                comm_ns=comm_ns,
                exposed_copy_ns=copy_ns - copy_covered,
                exposed_comm_ns=comm_ns - comm_in_compute,
                **counts,
                streams=streams,
                profiler_window_ns=prof_ns,
                idle_in_profiler_window_ns=idle_pw,
            )
        )
    return out


def _launch_stats(trace: Trace, rows_mask: np.ndarray) -> dict[str, object]:
    """HTA's kernel launch statistics: launch delay (kernel start - end of its launch call,
    clipped at 0) and kernels that ran shorter than the call that launched them."""
    gpu, api = trace.gpu, trace.api
    rows = np.flatnonzero(rows_mask & (gpu.api >= 0)).astype(row_index_dtype(len(gpu)))
    if not len(rows) or not len(api):
        return {}
    # per block of launches: only the delays (needed whole for the percentiles) are kept
    delay = np.empty(len(rows), dtype=np.float64)
    shorter = 0
    for lo in range(0, len(rows), _BLOCK):
        r = rows[lo:lo + _BLOCK]
        a = gpu.api[r]
        call_end = api.end_ns[a]
        d = gpu.start_ns[r] - call_end
        delay[lo:lo + len(r)] = np.maximum(d, 0, out=d)
        shorter += int(np.count_nonzero((gpu.end_ns[r] - gpu.start_ns[r]) < (call_end - api.start_ns[a])))
    p50, p90 = np.percentile(delay, [50, 90])
    return {
        "launches": int(len(rows)),
        "launch_delay_p50_ns": float(p50),
        "launch_delay_p90_ns": float(p90),
        "launch_delay_max_ns": int(delay.max()),
        "kernels_shorter_than_launch": shorter,
    }


_BLOCK = BLOCK_ROWS  # launches per block
