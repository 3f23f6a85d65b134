"""Host-side waits for the GPU (sync events) and the GPU idle each one caused.

* **sync event** = one host-side wait: an outermost ``aten::item``/``aten::_local_scalar_dense``
  op, or the blocking CUDA/HIP calls inside one innermost op, or a lone blocking call (stream /
  event / device synchronize, blocking memcpy/memset, an async memcpy from/to pageable memory,
  which the driver performs synchronously, a call with a GPU-side sync record). Its *wait* runs
  from the first blocking call to the end of the event. ``.item()`` of a CPU tensor has no
  blocking call inside and is no event.
* **gap caused by a sync event** = the device gap that starts while the host waits and ends
  after the wait returned (the queue drained during the wait and stayed empty until the host
  issued new work), counted until the launch call of the work that ends it returned, once.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from traceclass.facts.gaps import Gaps, dominant_device, take
from traceclass.model import ApiKind, CopyKind, GpuKind, MemKind, Trace
from traceclass.model.enums import BLOCKING_API_KINDS
from traceclass.model.nesting import ancestors_until
from traceclass.model.strings import StringTable

ITEM_OPS = frozenset({"aten::item", "aten::_local_scalar_dense"})


@dataclasses.dataclass(frozen=True)
class SyncEvents:
    """One row per host-side wait (see the module docstring), in no particular order."""

    start_ns: np.ndarray  # start of the op or call
    wait_ns: np.ndarray  # start of the first blocking call inside (= start for bare calls)
    end_ns: np.ndarray
    pid: np.ndarray
    tid: np.ndarray
    op: np.ndarray  # item op / innermost op holding the calls, -1 for bare calls
    api: np.ndarray  # first blocking call, -1 for item ops without recorded calls
    device: np.ndarray
    call_event: np.ndarray  # per blocking call (or lone GPU sync record): its event (non-decreasing)
    call_name: np.ndarray  # per blocking call: name (string code)
    strings: StringTable

    def __len__(self) -> int:
        return len(self.start_ns)

    def call_counts(self, events: np.ndarray) -> dict[str, int]:
        """Blocking calls of these events by name, most frequent first."""
        codes, counts = np.unique(self.call_name[self._calls_of(events)], return_counts=True)
        order = np.lexsort((codes, -counts))
        return {self.strings[int(codes[k])]: int(counts[k]) for k in order}

    def calls(self, event: int) -> tuple[str, ...]:
        """Names of one event's blocking calls, in order, each once."""
        return tuple(dict.fromkeys(self.strings[int(c)] for c in self.call_name[self._calls_of(np.array([event]))]))

    def _calls_of(self, events: np.ndarray) -> np.ndarray:
        """Positions of the calls of these events (each event once), by binary search over
        ``call_event`` (sorted: calls are stored event by event), so a caller asking per window
        pays for its own events, not for every call of the trace."""
        ev = np.unique(np.asarray(events, dtype=np.int64))
        lo = np.searchsorted(self.call_event, ev, side="left")
        n = np.searchsorted(self.call_event, ev, side="right") - lo
        return np.repeat(lo - np.r_[0, np.cumsum(n)[:-1]], n) + np.arange(int(n.sum()))


def blocking_api_mask(trace: Trace) -> np.ndarray:
    """API calls during which the host waits for the GPU."""
    api, gpu = trace.api, trace.gpu
    block = np.isin(api.kind, np.array([int(k) for k in BLOCKING_API_KINDS], dtype=np.int8))
    pageable = (gpu.kind == GpuKind.MEMCPY) & (gpu.api >= 0) & (
        ((gpu.copy_kind == CopyKind.HTOD) & (gpu.src_mem == MemKind.PAGEABLE))
        | ((gpu.copy_kind == CopyKind.DTOH) & (gpu.dst_mem == MemKind.PAGEABLE)))
    block[gpu.api[pageable]] = True
    # a GPU-side sync record (Kineto cuda_sync, nsys SYNCHRONIZATION) marks its call as a wait,
    # whatever its name, unless the call only polls or orders streams
    recorded = (gpu.kind == GpuKind.SYNC) & (gpu.api >= 0)
    calls = gpu.api[recorded]
    block[calls[~np.isin(api.kind[calls], np.array([ApiKind.EVENT_QUERY, ApiKind.STREAM_WAIT], dtype=np.int8))]] = True
    return block


def sync_events(trace: Trace) -> SyncEvents:
    api, ops, gpu = trace.api, trace.ops, trace.gpu
    is_item = trace.strings.mask(ops.name, lambda s: s in ITEM_OPS)
    parent = ops.parent.astype(np.int64)
    outer_item = is_item & ~np.where(parent >= 0, is_item[np.maximum(parent, 0)], False)
    blk = np.flatnonzero(blocking_api_mask(trace))
    holder = np.full(len(blk), -1, dtype=np.int64)
    if len(blk) and len(ops):
        has_op = api.op[blk] >= 0
        holder[has_op] = ancestors_until(parent, api.op[blk][has_op], outer_item)
        holder = np.where(holder >= 0, holder, api.op[blk])
    # key: holder op (item or innermost op), or the call itself (encoded negative)
    key = np.where(holder >= 0, holder, -2 - blk)
    order = np.lexsort((api.start_ns[blk], key))
    blk, key = blk[order], key[order]
    firsts = np.r_[0, np.flatnonzero(np.diff(key)) + 1] if len(blk) else np.zeros(0, np.int64)
    lasts = np.r_[firsts[1:], len(blk)] if len(blk) else np.zeros(0, np.int64)
    first_api = blk[firsts]
    ev_key = key[firsts]
    op_of = np.where(ev_key >= 0, ev_key, -1)
    w0 = api.start_ns[first_api]
    w1 = np.maximum.reduceat(api.end_ns[blk], firsts) if len(blk) else np.zeros(0, np.int64)
    s0 = np.where(op_of >= 0, take(ops.start_ns, op_of), w0)
    s1 = np.where(op_of >= 0, np.maximum(take(ops.end_ns, op_of), w1), w1)
    call_event = np.repeat(np.arange(len(firsts)), lasts - firsts)
    # an item op with no blocking call inside read a CPU tensor (no wait); only a trace without
    # runtime calls at all leaves the op itself as the best record of a wait
    bare_items = np.flatnonzero(outer_item) if (len(api) == 0 and len(gpu)) else np.zeros(0, np.int64)
    dev = _call_devices(trace, blk, firsts)
    fallback = dominant_device(trace)
    # GPU-side sync records without a recorded call: a wait on an unknown host thread
    lone = np.flatnonzero((gpu.kind == GpuKind.SYNC) & (gpu.api < 0)
                          & ~trace.strings.mask(gpu.name, lambda x: x == "Stream Wait Event"))
    nb, nl = len(bare_items), len(lone)
    first_lone = len(firsts) + nb
    return SyncEvents(
        start_ns=np.r_[s0, ops.start_ns[bare_items], gpu.start_ns[lone]].astype(np.int64),
        wait_ns=np.r_[w0, ops.start_ns[bare_items], gpu.start_ns[lone]].astype(np.int64),
        end_ns=np.r_[s1, ops.end_ns[bare_items], gpu.end_ns[lone]].astype(np.int64),
        pid=np.r_[api.pid[first_api], ops.pid[bare_items], np.full(nl, -1)].astype(np.int64),
        tid=np.r_[api.tid[first_api], ops.tid[bare_items], np.full(nl, -1)].astype(np.int64),
        op=np.r_[op_of, bare_items, np.full(nl, -1)].astype(np.int64),
        api=np.r_[first_api, np.full(nb + nl, -1)].astype(np.int64),
        device=np.r_[np.where(dev >= 0, dev, fallback), np.full(nb, fallback), gpu.device[lone]].astype(np.int64),
        call_event=np.r_[call_event, first_lone + np.arange(nl)].astype(np.int64),
        call_name=np.r_[api.name[blk], gpu.name[lone]].astype(np.int64),
        strings=trace.strings,
    )


def caused_idle(trace: Trace, ev: SyncEvents, gaps: Gaps) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """GPU idle each event caused on ``gaps.device`` (see the module docstring).

    Returns ``(idle_ns, idle_start_ns, idle_end_ns)`` per event; 0 / -1 where none. The gap
    must start inside the wait and end after it returned; it counts from its start until the
    launch call of the work that ends it returned (time after that is a GPU-side wait, not the
    host's), once: when waits of several threads hold its start, the latest wait gets it.
    """
    n = len(ev)
    idle = np.zeros(n, np.int64)
    i0 = np.full(n, -1, np.int64)
    i1 = np.full(n, -1, np.int64)
    on = np.flatnonzero(ev.device == gaps.device)
    g0, g1 = gaps.start_ns, gaps.end_ns
    if len(on) == 0 or len(g0) == 0:
        return idle, i0, i1
    k = np.searchsorted(g0, ev.end_ns[on], side="right") - 1
    kk = np.maximum(k, 0)
    ok = (k >= 0) & (g0[kk] >= ev.wait_ns[on]) & (g1[kk] > ev.end_ns[on]) & ~gaps.in_replay[kk]
    ev_ok, gap_ok = on[ok], kk[ok]
    order = np.lexsort((ev.wait_ns[ev_ok], gap_ok))
    last = np.r_[gap_ok[order][1:] != gap_ok[order][:-1], True] if len(order) else np.zeros(0, bool)
    ev_ok, gap_ok = ev_ok[order][last], gap_ok[order][last]
    a = trace.gpu.api[gaps.next_row[gap_ok]]
    stop = np.clip(np.where(a >= 0, take(trace.api.end_ns, a), g1[gap_ok]), g0[gap_ok], g1[gap_ok])
    idle[ev_ok] = stop - g0[gap_ok]
    i0[ev_ok] = g0[gap_ok]
    i1[ev_ok] = stop
    return idle, i0, i1


def _call_devices(trace: Trace, blk: np.ndarray, firsts: np.ndarray) -> np.ndarray:
    """Device of each event: a GPU row (sync record, copy) linked to one of its calls, else -1."""
    gpu = trace.gpu
    dev_of_api = np.full(len(trace.api), -1, dtype=np.int64)
    linked = gpu.api >= 0
    dev_of_api[gpu.api[linked]] = gpu.device[linked]
    if len(blk) == 0:
        return np.zeros(0, dtype=np.int64)
    return np.maximum.reduceat(dev_of_api[blk], firsts)

