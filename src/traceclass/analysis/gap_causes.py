"""Cause of each GPU idle gap (launch overhead, host sync, data loading, unknown): TC202 and TC601."""

from __future__ import annotations

import dataclasses

import numpy as np

from traceclass import timeline as tl
from traceclass.facts.gaps import Gaps, take
from traceclass.facts.host import HostView
from traceclass.facts.syncs import blocking_api_mask
from traceclass.model import Trace

#: GPU-side gap between two kernels that were already queued (what remains after graph replay
#: or with a host that runs ahead): median 0.8-1.6 us, p75 1.3-2.4 us on V100, A100, H100 and
#: B200 in the corpus (5,932 / 910 / 1,164 / 76 such gaps in v100_ns_resolution,
#: a100_nccl_collectives, h100_qwen1.5-0.5b_inference, b200_eager). Fixing a host-side cause
#: leaves this much of each gap.
QUEUED_GAP_FLOOR_NS = 2_000

LAUNCH_OVERHEAD, HOST_SYNC, DATA_LOADING, UNKNOWN = 0, 1, 2, 3
CAUSES = ("launch-overhead", "host-sync", "data-loading", "unknown")


@dataclasses.dataclass(frozen=True)
class GapCauses:
    """Cause per gap, from the launch of the work that ends it. A gap splits into the *host
    window* (gap start -> start of that launch call), the *call* (the launch call itself) and
    the *queue* (call return -> work start); per host window, what the launching thread did."""

    cause: np.ndarray
    host_window_ns: np.ndarray
    call_ns: np.ndarray
    queue_ns: np.ndarray
    busy_ns: np.ndarray  # host window time in ops / Python / runtime calls
    wait_ns: np.ndarray  # host window time blocked in sync events
    drained: np.ndarray  # the gap began while the launching thread was blocked in a wait
    data_ns: np.ndarray  # host window time inside data-loading ranges
    thread: np.ndarray  # HostView thread index of the launching thread, -1 unknown
    launched: np.ndarray  # a launch call is recorded for the next work


def gap_causes(trace: Trace, gaps: Gaps, host: HostView, min_share_pct: float = 50.0) -> GapCauses:
    """Attribute each gap; the rules and their order are documented in TC202.

    The largest of the three parts decides first: queue -> ``unknown`` (the GPU had the work and
    waited on something else), call -> ``launch-overhead`` (``host-sync`` when the call blocks,
    e.g. ``cudaMemcpy``), host window -> data loading, a wait in progress when the GPU went idle
    (the same gaps TC203 charges to a sync), host activity, or unknown.
    """
    api, gpu = trace.api, trace.gpu
    n = len(gaps.start_ns)
    a = gpu.api[gaps.next_row] if n else np.zeros(0, np.int64)
    has = a >= 0
    g0, g1 = gaps.start_ns, gaps.end_ns
    l0 = np.where(has, take(api.start_ns, a), g1)
    l1 = np.where(has, take(api.end_ns, a), g1)
    h1 = np.clip(l0, g0, g1)
    h = h1 - g0
    call = np.maximum(np.minimum(l1, g1) - np.maximum(l0, g0), 0)
    queue = np.where(has, np.maximum(g1 - np.maximum(l1, g0), 0), 0)
    thread = np.where(has, host.thread(take(api.pid, a), take(api.tid, a)), -1)
    busy = np.zeros(n, np.int64)
    wait = np.zeros(n, np.int64)
    data = np.zeros(n, np.int64)
    drained = np.zeros(n, bool)  # the GPU went idle while the thread was blocked in a wait
    for k in np.unique(thread[thread >= 0]).tolist():
        sel = np.flatnonzero(thread == k)
        busy[sel] = tl.overlap_each(g0[sel], h1[sel], host.busy[k])
        wait[sel] = tl.overlap_each(g0[sel], h1[sel], host.wait[k])
        data[sel] = tl.overlap_each(g0[sel], h1[sel], host.data[k])
        ws, we = host.wait[k]
        j = np.searchsorted(ws, g0[sel], side="right") - 1
        drained[sel] = (j >= 0) & (we[np.maximum(j, 0)] >= g0[sel]) if len(ws) else False
    share = min_share_pct / 100.0
    blocking = take(blocking_api_mask(trace), a, False) & has
    by_queue = has & (queue >= h) & (queue >= call) & (queue > 0)
    by_call = has & ~by_queue & (call >= h) & (call > 0)
    by_host = has & ~by_queue & ~by_call
    cause = np.full(n, UNKNOWN, dtype=np.int64)
    cause[by_call] = np.where(blocking[by_call], HOST_SYNC, LAUNCH_OVERHEAD)
    cause[by_host & (busy >= share * h)] = LAUNCH_OVERHEAD
    cause[by_host & drained] = HOST_SYNC
    cause[by_host & (data >= share * h)] = DATA_LOADING
    return GapCauses(cause, h, call, queue, busy, wait, drained, data, thread, has)

