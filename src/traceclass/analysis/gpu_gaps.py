"""GPU idle gaps, host syncs and small-kernel runs: the shared logic of TC201, TC202, TC203, TC601.

Everything here is columnar: loops run over devices, threads, steps, n-gram lengths or a
bounded number of evidence rows, never over the rows of a table.

Definitions used by the rules (all integer ns, per device, across streams):

* **busy** = union of kernels, memcpys and memsets (GPU-side sync records are not work);
  zero-length rows vanish, as in :mod:`traceclass.analysis.gpu_timeline`.
* **gap** = an idle stretch between two consecutive busy stretches of one device (the time
  before the first and after the last GPU work is not a gap). ``prev_row``/``next_row`` are the
  GPU rows that end at / start at its edges. A gap whose two edges were replayed by the same
  graph launch is *in a replay*: graph replay removes launch gaps by design, so such gaps are
  never blamed on the host.
* **step** of a GPU row = the step that was open when its launch call started, on any thread
  (the stage projection of :mod:`traceclass.analysis.stages`, by time); rows queued before the
  profiler window have none.
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
import re
from collections import Counter
from typing import Iterable, Sequence

import numpy as np

from traceclass.analysis.data_loading import DEFAULT_PATTERN as DEFAULT_DATA_PATTERN

from traceclass import timeline as tl
from traceclass.analysis import Analysis
from traceclass.analysis.per_trace import per_trace
from traceclass.analysis.source_lines import source_for_points
from traceclass.model import AnnotationKind, ApiKind, CopyKind, GpuKind, MemKind, Trace
from traceclass.model.enums import BLOCKING_API_KINDS
from traceclass.model.nesting import ContainmentIndex, ancestors_until, group_ids, lookup2
from traceclass.model.strings import StringTable

#: GPU-side gap between two kernels that were already queued (what remains after graph replay
#: or with a host that runs ahead): median 0.8-1.6 us, p75 1.3-2.4 us on V100, A100, H100 and
#: B200 in the corpus (5,932 / 910 / 1,164 / 76 such gaps in v100_ns_resolution,
#: a100_nccl_collectives, h100_qwen1.5-0.5b_inference, b200_eager). Fixing a host-side cause
#: leaves this much of each gap.
QUEUED_GAP_FLOOR_NS = 2_000

LAUNCH_OVERHEAD, HOST_SYNC, DATA_LOADING, UNKNOWN = 0, 1, 2, 3
CAUSES = ("launch-overhead", "host-sync", "data-loading", "unknown")

ITEM_OPS = frozenset({"aten::item", "aten::_local_scalar_dense"})
_STAGE_KINDS = np.array([int(k) for k in (AnnotationKind.USER, AnnotationKind.DATALOADER, AnnotationKind.OPTIMIZER,
                                          AnnotationKind.COMPILED, AnnotationKind.COMMUNICATION)], dtype=np.int8)
#: user ranges that hold input-pipeline work: "stage:data", "## load_batch ##", "wait_for_batch"
DATA_STAGE = re.compile(DEFAULT_DATA_PATTERN)  # the same words as TC204's data ranges


# --------------------------------------------------------------------------- steps

@dataclasses.dataclass(frozen=True)
class Steps:
    """Step occurrences in time order (``(whole trace)`` when the trace has no steps)."""

    names: tuple[str, ...]
    start_ns: np.ndarray
    end_ns: np.ndarray
    warmup: np.ndarray
    occurrence: np.ndarray  # index into analysis.occurrences
    synthetic: bool

    @property
    def steady(self) -> np.ndarray:
        return np.flatnonzero(~self.warmup)

    @property
    def steady_ns(self) -> int:
        """Analysed step time: wall time of the steady-state steps."""
        return int((self.end_ns - self.start_ns)[~self.warmup].sum())

    def at(self, t: np.ndarray) -> np.ndarray:
        """Index of the step whose [start, end) holds each time, -1 where none."""
        t = np.asarray(t, dtype=np.int64)
        if len(self.start_ns) == 0:
            return np.full(len(t), -1, dtype=np.int64)
        k = np.searchsorted(self.start_ns, t, side="right") - 1
        ok = (k >= 0) & (t < self.end_ns[np.maximum(k, 0)])
        return np.where(ok, k, -1)


def steps(trace: Trace, analysis: Analysis) -> Steps:
    occ = analysis.occurrences
    kinds = np.asarray(occ.kinds, dtype=np.int64)
    rows = np.flatnonzero(kinds[occ.stage] == AnnotationKind.STEP) if len(occ.stage) else np.zeros(0, np.int64)
    rows = rows[~occ.empty[rows]]  # steps without any work are profiler artifacts
    rows = rows[np.argsort(occ.start_ns[rows], kind="stable")]
    names = [occ.names[occ.stage[r]] for r in rows.tolist()]
    if not occ.synthetic and len(rows):
        ann = trace.annotations
        is_step = np.flatnonzero(ann.kind == AnnotationKind.STEP)
        hit = lookup2(ann.start_ns[is_step], ann.tid[is_step], occ.start_ns[rows], occ.tid[rows])
        names = [trace.strings[ann.name[is_step[h]]] if h >= 0 else n for h, n in zip(hit.tolist(), names)]
    return Steps(tuple(names), occ.start_ns[rows], occ.end_ns[rows], occ.warmup[rows], rows, occ.synthetic)


def gpu_steps(trace: Trace, st: Steps) -> np.ndarray:
    """Step index per ``trace.gpu`` row: the step open when its launch call started (on any
    thread), -1 for none; without steps every row belongs to the whole trace, including work
    queued before the profiler started."""
    gpu = trace.gpu
    out = np.full(len(gpu), -1, dtype=np.int64)
    has = gpu.api >= 0
    out[has] = st.at(trace.api.start_ns[gpu.api[has]])
    if st.synthetic and len(st.names):
        out[~has] = 0
    return out


# --------------------------------------------------------------------------- device gaps

def active_devices(trace: Trace) -> list[int]:
    gpu = trace.gpu
    return sorted(np.unique(gpu.device[gpu.kind != GpuKind.SYNC]).tolist())


def device_rows(trace: Trace, device: int) -> np.ndarray:
    gpu = trace.gpu
    return np.flatnonzero((gpu.device == device) & (gpu.kind != GpuKind.SYNC))


@dataclasses.dataclass(frozen=True)
class Gaps:
    device: int
    busy: tl.Intervals
    start_ns: np.ndarray
    end_ns: np.ndarray
    prev_row: np.ndarray  # gpu row ending at the gap start
    next_row: np.ndarray  # gpu row starting at the gap end
    in_replay: np.ndarray  # both edges replayed by the same graph launch

    @property
    def length_ns(self) -> np.ndarray:
        return self.end_ns - self.start_ns


def device_gaps(trace: Trace, device: int) -> Gaps:
    gpu = trace.gpu
    rows = device_rows(trace, device)
    rows = rows[gpu.end_ns[rows] > gpu.start_ns[rows]]
    busy = tl.merge(gpu.start_ns[rows], gpu.end_ns[rows])
    g0, g1 = tl.gaps(busy)
    by_start = rows[np.argsort(gpu.start_ns[rows], kind="stable")]
    by_end = rows[np.argsort(gpu.end_ns[rows], kind="stable")]
    nxt = by_start[np.searchsorted(gpu.start_ns[by_start], g1, side="left")] if len(g1) else g1
    prv = by_end[np.searchsorted(gpu.end_ns[by_end], g0, side="left")] if len(g0) else g0
    replay = gpu.graph[prv] & gpu.graph[nxt] & (gpu.api[prv] == gpu.api[nxt]) & (gpu.api[nxt] >= 0)
    return Gaps(device, busy, g0, g1, prv.astype(np.int64), nxt.astype(np.int64), replay)


def dominant_device(trace: Trace) -> int:
    gpu = trace.gpu
    act = gpu.kind != GpuKind.SYNC
    if not act.any():
        return -1
    devs, inv = np.unique(gpu.device[act], return_inverse=True)
    dur = (gpu.end_ns - gpu.start_ns)[act].astype(np.float64)
    return int(devs[np.argmax(np.bincount(inv.reshape(-1), weights=dur))])


# --------------------------------------------------------------------------- host syncs

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
    call_event: np.ndarray  # per blocking call (or lone GPU sync record): its event
    call_name: np.ndarray  # per blocking call: name (string code)
    strings: StringTable

    def __len__(self) -> int:
        return len(self.start_ns)

    def call_counts(self, events: np.ndarray) -> dict[str, int]:
        """Blocking calls of these events by name, most frequent first."""
        inside = np.zeros(len(self), dtype=bool)
        inside[np.asarray(events, dtype=np.int64)] = True
        codes, counts = np.unique(self.call_name[inside[self.call_event]], return_counts=True)
        order = np.lexsort((codes, -counts))
        return {self.strings[int(codes[k])]: int(counts[k]) for k in order}

    def calls(self, event: int) -> tuple[str, ...]:
        """Names of one event's blocking calls, in order, each once."""
        return tuple(dict.fromkeys(self.strings[int(c)] for c in self.call_name[self.call_event == event]))


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
    s0 = np.where(op_of >= 0, _take(ops.start_ns, op_of), w0)
    s1 = np.where(op_of >= 0, np.maximum(_take(ops.end_ns, op_of), w1), w1)
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
    stop = np.clip(np.where(a >= 0, _take(trace.api.end_ns, a), g1[gap_ok]), g0[gap_ok], g1[gap_ok])
    idle[ev_ok] = stop - g0[gap_ok]
    i0[ev_ok] = g0[gap_ok]
    i1[ev_ok] = stop
    return idle, i0, i1


def _take(col: np.ndarray, idx: np.ndarray, fill: int = 0) -> np.ndarray:
    """``col[idx]`` with ``fill`` where ``idx < 0`` (safe on empty columns)."""
    if len(col) == 0:
        return np.full(len(idx), fill, dtype=col.dtype)
    return np.where(idx >= 0, col[np.maximum(idx, 0)], fill)


def _call_devices(trace: Trace, blk: np.ndarray, firsts: np.ndarray) -> np.ndarray:
    """Device of each event: a GPU row (sync record, copy) linked to one of its calls, else -1."""
    gpu = trace.gpu
    dev_of_api = np.full(len(trace.api), -1, dtype=np.int64)
    linked = gpu.api >= 0
    dev_of_api[gpu.api[linked]] = gpu.device[linked]
    if len(blk) == 0:
        return np.zeros(0, dtype=np.int64)
    return np.maximum.reduceat(dev_of_api[blk], firsts)


# --------------------------------------------------------------------------- host activity

@dataclasses.dataclass(frozen=True)
class HostView:
    """Per host thread: merged intervals of activity (ops, Python, runtime calls), of sync
    waits, and of data-loading ranges (DataLoader annotations, user ranges named like data)."""

    pid: np.ndarray  # per thread index
    tid: np.ndarray
    busy: list[tl.Intervals]
    wait: list[tl.Intervals]
    data: list[tl.Intervals]

    def thread(self, pid: np.ndarray, tid: np.ndarray) -> np.ndarray:
        """Thread index of each (pid, tid), -1 for threads with no host activity."""
        return lookup2(self.pid, self.tid, np.asarray(pid, np.int64), np.asarray(tid, np.int64))


def host_view(trace: Trace, ev: SyncEvents) -> HostView:
    ops, py, api, ann = trace.ops, trace.python, trace.api, trace.annotations
    names = trace.strings
    data_ann = (ann.kind == AnnotationKind.DATALOADER) | (
        (ann.kind == AnnotationKind.USER) & names.mask(ann.name, lambda s: DATA_STAGE.search(s) is not None))
    parts = [
        (0, ops.pid, ops.tid, ops.start_ns, ops.end_ns),
        (0, py.pid, py.tid, py.start_ns, py.end_ns),
        (0, api.pid, api.tid, api.start_ns, api.end_ns),
        (1, ev.pid, ev.tid, ev.wait_ns, ev.end_ns),
        (2, ann.pid[data_ann], ann.tid[data_ann], ann.start_ns[data_ann], ann.end_ns[data_ann]),
    ]
    cat = np.concatenate([np.full(len(p[1]), p[0], dtype=np.int64) for p in parts])
    pid = np.concatenate([p[1] for p in parts]).astype(np.int64)
    tid = np.concatenate([p[2] for p in parts]).astype(np.int64)
    s = np.concatenate([p[3] for p in parts]).astype(np.int64)
    e = np.concatenate([p[4] for p in parts]).astype(np.int64)
    th, _ = group_ids(pid, tid)
    sets: list[list[tl.Intervals]] = [[], [], []]
    order = np.lexsort((cat, th))
    cut = np.flatnonzero(np.diff(th[order])) + 1
    firsts = np.r_[0, cut].astype(np.int64) if len(order) else np.zeros(0, np.int64)
    for lo, hi in zip(firsts.tolist(), np.r_[cut, len(order)].tolist()):
        rows = order[lo:hi]
        for c in range(3):
            m = rows[cat[rows] == c]
            sets[c].append(tl.merge(s[m], e[m]))
    return HostView(pid[order[firsts]], tid[order[firsts]], sets[0], sets[1], sets[2])


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
    l0 = np.where(has, _take(api.start_ns, a), g1)
    l1 = np.where(has, _take(api.end_ns, a), g1)
    h1 = np.clip(l0, g0, g1)
    h = h1 - g0
    call = np.maximum(np.minimum(l1, g1) - np.maximum(l0, g0), 0)
    queue = np.where(has, np.maximum(g1 - np.maximum(l1, g0), 0), 0)
    thread = np.where(has, host.thread(_take(api.pid, a), _take(api.tid, a)), -1)
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
    blocking = _take(blocking_api_mask(trace), a, False) & has
    by_queue = has & (queue >= h) & (queue >= call) & (queue > 0)
    by_call = has & ~by_queue & (call >= h) & (call > 0)
    by_host = has & ~by_queue & ~by_call
    cause = np.full(n, UNKNOWN, dtype=np.int64)
    cause[by_call] = np.where(blocking[by_call], HOST_SYNC, LAUNCH_OVERHEAD)
    cause[by_host & (busy >= share * h)] = LAUNCH_OVERHEAD
    cause[by_host & drained] = HOST_SYNC
    cause[by_host & (data >= share * h)] = DATA_LOADING
    return GapCauses(cause, h, call, queue, busy, wait, drained, data, thread, has)


# --------------------------------------------------------------------------- small-item runs

@dataclasses.dataclass(frozen=True)
class Run:
    rows: np.ndarray  # member rows (gpu or op rows) in time order
    start_ns: int
    end_ns: int
    busy_ns: int
    gaps_ns: np.ndarray  # idle gaps inside the window

    @property
    def window_ns(self) -> int:
        return self.end_ns - self.start_ns

    @property
    def idle_ns(self) -> int:
        return self.window_ns - self.busy_ns


def runs_of_short(rows: np.ndarray, s: np.ndarray, e: np.ndarray, short: np.ndarray, busy: tl.Intervals,
                  max_gap_ns: int, min_count: int, part: np.ndarray | None = None) -> list[Run]:
    """Maximal runs of consecutive (by start) short items with at most ``max_gap_ns`` of idle
    (time not covered by ``busy``) between consecutive starts, of at least ``min_count`` items;
    a change of ``part`` (the step of each item) also ends a run."""
    order = np.argsort(s, kind="stable")
    rows, s, e, short = rows[order], s[order], e[order], short[order]
    n = len(s)
    if n == 0:
        return []
    idle_between = np.r_[0, (s[1:] - s[:-1]) - tl.overlap_each(s[:-1], s[1:], busy)]
    cut = idle_between > max_gap_ns
    if part is not None:
        p = part[order]
        cut |= np.r_[False, p[1:] != p[:-1]]
    new = short & (np.r_[True, ~short[:-1]] | cut)
    firsts = np.flatnonzero(new)
    stops = np.flatnonzero(~short | new)
    lasts = np.r_[stops, n][np.searchsorted(stops, firsts, side="right")]
    keep = (lasts - firsts) >= min_count
    firsts, lasts = firsts[keep], lasts[keep]
    if len(firsts) == 0:
        return []
    w0 = s[firsts]
    w1 = np.maximum.reduceat(np.r_[e, 0], np.column_stack([firsts, lasts]).ravel())[::2]
    bz = tl.overlap_each(w0, w1, busy)
    g0, g1 = tl.gaps(busy)
    lo = np.searchsorted(g0, w0, side="left")
    hi = np.searchsorted(g1, w1, side="right")
    # the gap lengths once; each run copies its own slices, so no run pins a whole-device array
    # (a view would keep the 1M-row parent alive for as long as any run lives)
    glen = g1 - g0
    return [Run(rows[a:b].copy(), int(x0), int(x1), int(b_), glen[p:q].copy())
            for a, b, x0, x1, b_, p, q in zip(firsts.tolist(), lasts.tolist(), w0.tolist(), w1.tolist(),
                                             bz.tolist(), lo.tolist(), hi.tolist())]


def gpu_runs(trace: Trace, gaps: Gaps, max_item_ns: int, max_gap_ns: int, min_count: int,
             step_of_row: np.ndarray) -> list[Run]:
    """Runs of short kernels/memsets on one device, within one step (by launch); graph-replayed
    rows are never short."""
    gpu = trace.gpu
    rows = device_rows(trace, gaps.device)
    rows = rows[(gpu.kind[rows] == GpuKind.KERNEL) | (gpu.kind[rows] == GpuKind.MEMSET)]
    s, e = gpu.start_ns[rows], gpu.end_ns[rows]
    short = ((e - s) < max_item_ns) & ~gpu.graph[rows]
    return runs_of_short(rows, s, e, short, gaps.busy, max_gap_ns, min_count, step_of_row[rows])


def host_runs(trace: Trace, max_op_ns: int, max_gap_ns: int, min_count: int, st: Steps) -> list[Run]:
    """Runs of short top-level ops per host thread, within one step."""
    ops = trace.ops
    top = np.flatnonzero(ops.parent < 0)
    th, _ = group_ids(ops.pid[top], ops.tid[top])
    out: list[Run] = []
    for k in np.unique(th).tolist():
        rows = top[th == k]
        s, e = ops.start_ns[rows], ops.end_ns[rows]
        out += runs_of_short(rows, s, e, (e - s) < max_op_ns, tl.merge(s, e), max_gap_ns, min_count, st.at(s))
    return out


def _greedy_count(pos: np.ndarray, length: int) -> int:
    """Most non-overlapping occurrences among sorted start positions (greedy, by doubling)."""
    m = len(pos)
    if m == 0:
        return 0
    jump = np.r_[np.searchsorted(pos, pos + length, side="left"), m]
    levels = [jump]
    while (1 << len(levels)) <= m:
        levels.append(levels[-1][levels[-1]])
    count, cur = 1, 0
    for k in range(len(levels) - 1, -1, -1):
        j = int(levels[k][cur])
        if j < m:
            cur, count = j, count + (1 << k)
    return count


def top_sequences(codes: np.ndarray, min_len: int = 3, max_len: int = 8, top: int = 3) -> list[tuple[tuple[int, ...], int]]:
    """Most frequent kernel-name n-grams, as ``(codes, non-overlapping occurrences)``.

    Codes below -1 are separators: no n-gram holding one is a candidate.
    Candidates are ranked by the kernels they cover without overlap (occurrences x length),
    shorter first on ties, so a repeated period wins over its multiples; stretches of a chosen
    n-gram's repetition (its rotations, sub-sequences and multiples) are skipped.
    """
    codes = np.asarray(codes, dtype=np.int64)
    n = len(codes)
    cands = []
    # ids[i] = id of the n-gram starting at i, built one length at a time from numeric keys
    ids = codes
    for length in range(1, min(max_len, n) + 1):
        ids, _ = group_ids(codes) if length == 1 else group_ids(ids[: n - length + 1], codes[length - 1:])
        if length < min_len:
            continue
        cnt = np.bincount(ids)
        for k in np.argsort(-cnt, kind="stable")[:top].tolist():
            if cnt[k] < 2:
                break
            pos = np.flatnonzero(ids == k)
            gram = tuple(codes[pos[0]:pos[0] + length].tolist())
            if min(gram) < -1:
                continue
            occ = _greedy_count(pos, length)
            cands.append((occ * length, -length, occ, gram))
    cands.sort(key=lambda c: (-c[0], -c[1], c[3]))
    chosen: list[tuple[tuple[int, ...], int]] = []
    for _, _, occ, gram in cands:
        if occ < 2 or any(_inside(gram, g * (len(gram) // len(g) + 2)) for g, _ in chosen):
            continue
        chosen.append((gram, occ))
        if len(chosen) == top:
            break
    return chosen


def _inside(small: tuple[int, ...], big: tuple[int, ...]) -> bool:
    n = len(small)
    return any(big[i:i + n] == small for i in range(len(big) - n + 1))


# --------------------------------------------------------------------------- labels

def stage_rows(trace: Trace, pid: np.ndarray, tid: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Innermost user stage (``record_function``/NVTX range, DataLoader, optimizer...) around
    each point, as an annotation row, -1 where none (ProfilerStep is not a stage)."""
    ann = trace.annotations
    sel = np.flatnonzero(np.isin(ann.kind, _STAGE_KINDS))
    if len(sel) == 0 or len(t) == 0:
        return np.full(len(t), -1, dtype=np.int64)
    index = per_trace(trace, "stage_index", lambda: ContainmentIndex(
        ann.pid[sel], ann.tid[sel], ann.start_ns[sel], ann.end_ns[sel], ann.depth[sel]))
    hit = index.query(pid, tid, t)
    return np.where(hit >= 0, sel[np.maximum(hit, 0)], -1)


def short_label(name: str, limit: int = 60) -> str:
    """A range name fit for a location: NVTX payloads (pyprof writes op arguments) get cut."""
    name = " ".join(name.split())
    return name if len(name) <= limit else name[: limit - 1] + "…"


def common_source(trace: Trace, pid: np.ndarray, tid: np.ndarray, t: np.ndarray, limit: int = 200) -> str | None:
    """Most frequent user-code ``file:line`` among the points (sampled evenly), None without stacks."""
    if len(trace.python) == 0 or len(t) == 0:
        return None
    pick = np.unique(np.linspace(0, len(t) - 1, min(limit, len(t))).astype(np.int64))
    found = [s for s in source_for_points(trace, pid[pick], tid[pick], t[pick]) if s]
    return Counter(found).most_common(1)[0][0] if found else None


def name_counts(trace: Trace, codes: np.ndarray) -> list[tuple[str, int]]:
    """(name, count) for a code column, most frequent first; unknown (-1) codes dropped."""
    codes = np.asarray(codes)
    codes = codes[codes >= 0]
    if len(codes) == 0:
        return []
    u, c = np.unique(codes, return_counts=True)
    order = np.lexsort((u, -c))
    return [(trace.strings[int(u[k])], int(c[k])) for k in order]


def counted(pairs: Iterable[tuple[str, int]], limit: int = 8) -> tuple[str, ...]:
    return tuple(f"{n} x{c}" for n, c in list(pairs)[:limit])


def op_chain(trace: Trace, op: int, levels: int = 3) -> str:
    """``outer > ... > op`` names of an op and up to ``levels - 1`` ancestors."""
    names: list[str] = []
    cur = op
    while cur >= 0 and len(names) < levels:
        names.append(trace.strings[trace.ops.name[cur]])
        cur = int(trace.ops.parent[cur])
    return " > ".join(reversed(names))


def worst_first(order_key: np.ndarray, limit: int = 50) -> np.ndarray:
    """Indices sorted by descending key, at most ``limit``."""
    return np.argsort(-np.asarray(order_key), kind="stable")[:limit]


def us(ns: float) -> str:
    """Compact duration text for messages (the report formats evidence itself)."""
    ns = float(ns)
    if abs(ns) >= 1e9:
        return f"{ns / 1e9:.2f} s"
    if abs(ns) >= 1e6:
        return f"{ns / 1e6:.2f} ms"
    if abs(ns) >= 1e3:
        return f"{ns / 1e3:.1f} us"
    return f"{ns:.0f} ns"


def pct(part: float, whole: float) -> float:
    return round(100.0 * part / whole, 1) if whole > 0 else 0.0


__all__: Sequence[str] = (
    "CAUSES", "QUEUED_GAP_FLOOR_NS", "Steps", "steps", "gpu_steps", "Gaps", "device_gaps", "SyncEvents",
    "sync_events", "HostView", "host_view", "GapCauses", "gap_causes", "Run", "gpu_runs", "host_runs",
    "top_sequences", "stage_rows", "common_source", "name_counts", "counted", "op_chain",
)
