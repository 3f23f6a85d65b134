"""One cause per stretch of GPU idle time: the attribution every idle-time rule draws on.

Definitions (integer ns, per device, across streams):

* **idle** = the analysed windows (:mod:`traceclass.facts.analysed`: the steady steps, the
  whole trace without steps) minus the device's busy time (union of kernels, copies, memsets).
  Idle before the device's first work in a step counts: a step that spends 222 ms preprocessing
  on the host before its first kernel kept the GPU idle for those 222 ms.
* **idle interval** = one maximal stretch of idle. Its **next work** is the GPU row that starts
  where it ends (none when it ends at a window edge). The **host thread** is the thread whose
  launch call queued the next work; without one, the thread that launched the most GPU work.
* Each interval is cut into **segments**, each with exactly one cause; the segments of all
  intervals tile the idle time exactly once (no time counted twice, none left out):

  1. *queue*: from the end of the next work's launch call to the interval end: the GPU had the
     work and waited on something else (a stream/event dependency): ``unknown``.
  2. *call*: the launch call itself: ``host-sync`` when it blocks (``cudaMemcpy`` from pageable
     memory), ``initialisation`` when it is an initialisation call (:func:`init_api_mask`: the
     first launch of a kernel taking at least :data:`INIT_CALL_NS`, module loading, lazy
     cuDNN/cuBLAS setup), else ``launch-overhead``.
  3. *host window*: interval start -> start of that launch call (the whole interval when no
     launch ends it). When the GPU went idle while the host thread was blocked in a sync (the
     wait drained the queue), the first ``min(window, blocked time of that wait)`` is
     ``host-sync``: removing the sync lets the host run ahead by at most the time it was
     blocked, so a sync followed by serial host work is credited with no more than that. The
     rest of the window is one of, by the share (>= :data:`MAJORITY`) of it that the host
     thread spent in: data-loading ranges (``data-loading``), communication ops/ranges
     (``communication``), initialisation calls or a first CUDA allocation before any GPU work
     (:func:`init_op_mask`: ``initialisation``), other sync waits
     (``host-sync``); else, a window of at least :data:`HOST_PHASE_NS` is ``host-work`` when
     the thread was active (ops, Python, runtime calls) for most of it (a host phase of its
     own: preprocessing, Python between bursts) and ``unknown`` when it shows no recorded
     activity; a shorter window is ``launch-overhead`` (the dispatch path between two launches,
     recorded or not: the host is too slow to keep the queue filled), or ``profiler-overhead``
     when it looks like the profiler's own cost (see :func:`_profiler_suspect`). Without a
     known host thread the window is ``unknown``.
  4. A next work without a recorded launch call, in a trace that records launch calls, was
     queued before the profiler window: ``outside-window``.

Graph replays: an interval between two rows replayed by one graph launch is ``unknown`` in
its queue part by construction (the launch call returned long before).
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any, Callable, Sequence

import numpy as np

from traceclass import timeline as tl
from traceclass.analysis.backlog import backlog_mask
from traceclass.analysis.labels import stage_rows
from traceclass.facts.analysed import AnalysedTime
from traceclass.facts.gaps import Gaps, active_devices, device_gaps, device_rows
from traceclass.facts.host import HostView, covering_rows, host_view, merged_per_thread
from traceclass.facts.syncs import SyncEvents, blocking_api_mask, sync_events
from traceclass.heap import release_free_heap
from traceclass.model import AnnotationKind, ApiKind, GpuKind, Trace
from traceclass.model.nesting import innermost_containing
from traceclass.model.table import row_index_dtype

HOST_SYNC, HOST_WORK, DATA_LOADING, LAUNCH_OVERHEAD, COMMUNICATION, INITIALISATION, OUTSIDE_WINDOW, \
    PROFILER_OVERHEAD, UNKNOWN = range(9)
CAUSES = ("host-sync", "host-work", "data-loading", "launch-overhead", "communication", "initialisation",
          "outside-window", "profiler-overhead", "unknown")
#: causes a fix on the host side can remove (what rules may claim as recoverable)
RECOVERABLE = frozenset({HOST_SYNC, HOST_WORK, DATA_LOADING, LAUNCH_OVERHEAD, COMMUNICATION})

#: a part of a host window is the cause when it fills at least half of it (the majority)
MAJORITY = 0.5
#: a host window this long is a host phase of its own, not per-launch overhead: TC201's
#: ``max_gap_us`` (p99 launch gap under the profiler 0.29-0.39 ms in the corpus eager traces)
HOST_PHASE_NS = 1_000_000
#: a runtime call this long is not launch cost: context creation, module loading, allocator
#: growth (steady-state launch calls take 2-20 us in the corpus; the first cuDNN call of a
#: fresh process spends seconds in them)
INIT_CALL_NS = 1_000_000
#: a queued stretch shorter than this is the device's start-up latency (a launch call's return
#: to its work's start), not a wait on something else: 1-17 us in the corpus GPU traces (p99
#: 2-15 us per trace), while the dependency waits seen there are 20 us to 463 ms
LAUNCH_LATENCY_NS = 20_000
#: profiler overhead is suspected when the host window is at least this many times the thread's
#: median launch call while ops and runtime calls fill less than :data:`PROFILER_OPS_SHARE` of it
PROFILER_GAP_RATIO = 20.0
PROFILER_OPS_SHARE = 0.25

#: the function named for a stretch of host work holds at least this share of it (the phase the
#: stretch belongs to, e.g. the pipeline's ``preprocess``, not the leaf that runs at its middle)
COVERS = 0.95
#: runtime/driver calls that set up a process: context creation, allocations, module and library loading
INIT_API = re.compile(
    r"^(cu|cuda|hip)(Init|DeviceGetStreamPriorityRange|GetDeviceCount|SetDevice|DevicePrimaryCtx\w*|CtxCreate\w*|"
    r"Free|Malloc\w*|HostAlloc|HostRegister|MallocHost|FreeHost|ModuleLoad\w*|LibraryLoad\w*|ModuleGetFunction|"
    r"FuncGetAttributes|GetDeviceProperties\w*|DeviceGetAttribute)(_v\d+)?$"
    r"|^(cudnn|cublas|cublasLt|miopen|rocblas|hipblas|hipblasLt)Create\w*$")
#: host ranges and ops that wait for a collective
COMM_NAME = re.compile(r"(?i)(nccl|rccl|c10d::|record_param_comms|gloo|allreduce|all_reduce|allgather|all_gather|"
                       r"reduce_scatter|alltoall|all_to_all|broadcast_|barrier)")


def init_api_mask(trace: Trace) -> np.ndarray:
    """Mask over ``trace.api``: initialisation calls of at least :data:`INIT_CALL_NS`: setup calls
    (:data:`INIT_API`), and kernel launch calls that are the first launch of their kernel in the
    trace (lazy module loading, first-call cuDNN/cuBLAS setup). A later long launch call is a full
    launch queue (the host ran far ahead), not initialisation."""
    api, gpu = trace.api, trace.gpu

    def long(r: np.ndarray) -> np.ndarray:  # for the rows asked about only: the call table is tens of millions
        return (api.end_ns[r] - api.start_ns[r]) >= INIT_CALL_NS

    named = trace.strings.mask(api.name, lambda s: INIT_API.search(s) is not None)
    r = np.flatnonzero(named)
    named[r[~long(r)]] = False
    rows = np.flatnonzero((gpu.api >= 0) & (gpu.kind == GpuKind.KERNEL))
    if len(rows):
        a = gpu.api[rows]
        ok = long(a) & (api.kind[a] == ApiKind.LAUNCH)
        rows, a = rows[ok], a[ok]
    if len(rows):
        # first launch of each kernel name: the earliest launch call among all of that name's rows
        every = np.flatnonzero((gpu.api >= 0) & (gpu.kind == GpuKind.KERNEL))
        t = api.start_ns[gpu.api[every]]
        # the full (templated) name tells instantiations apart that share a short display name
        key = np.where(gpu.full_name[every] >= 0, gpu.full_name[every], gpu.name[every])
        order = np.lexsort((t, key))
        names = key[order]
        first = np.r_[True, names[1:] != names[:-1]]
        first_api = gpu.api[every][order][first]
        named[np.intersect1d(a, first_api)] = True
    return named


#: the allocation ops whose first CUDA call creates the context (lazy CUDA initialisation)
ALLOC_OPS = frozenset({"aten::empty", "aten::empty_strided", "aten::empty_like"})


def init_op_mask(trace: Trace) -> np.ndarray:
    """Mask over ``trace.ops``: allocation ops of at least :data:`INIT_CALL_NS` that run before the
    trace's first GPU work: the first CUDA allocation of a process creates the context (lazy
    initialisation), which the profiler shows as a long ``aten::empty`` with no runtime call."""
    ops, gpu = trace.ops, trace.gpu
    if len(ops) == 0 or len(gpu) == 0:
        return np.zeros(len(ops), bool)
    first = int(gpu.start_ns[gpu.kind != GpuKind.SYNC].min()) if (gpu.kind != GpuKind.SYNC).any() else 0
    out = trace.strings.mask(ops.name, lambda x: x in ALLOC_OPS)
    r = np.flatnonzero(out)  # the durations of these rows only: ops are tens of millions
    out[r[(ops.end_ns[r] - ops.start_ns[r] < INIT_CALL_NS) | (ops.end_ns[r] > first)]] = False
    return out


@dataclasses.dataclass(frozen=True)
class IdleCauses:
    """Idle segments of every active device, sorted by (device, start); see the module docstring."""

    device: np.ndarray
    start_ns: np.ndarray
    end_ns: np.ndarray
    # narrow columns where the values allow (device and thread int32, cause int8, row numbers
    # int32 below 2**31 rows): the attribution stays cached for every rule, and on a trace of
    # GBs it has millions of segments
    cause: np.ndarray  # index into CAUSES
    interval: np.ndarray  # idle interval the segment belongs to (index into iv_*)
    thread: np.ndarray  # host thread index (HostView), -1 unknown
    event: np.ndarray  # sync event behind a host-sync segment (index into ``syncs``), else -1
    next_row: np.ndarray  # GPU row that ends the interval, -1 at a window edge
    host_window_ns: np.ndarray  # per segment: its interval's host window
    iv_device: np.ndarray
    iv_start_ns: np.ndarray
    iv_end_ns: np.ndarray
    busy_ns: dict[int, int]  # per device: busy time inside the analysed windows
    backlog_busy_ns: dict[int, int]  # per device: the part of it only work queued before the window covers
    analysed_ns: int
    syncs: SyncEvents
    host: HostView
    launch_median_ns: np.ndarray  # per host thread: median launch-call duration (0 if none)

    def __len__(self) -> int:
        return len(self.start_ns)

    @property
    def length_ns(self) -> np.ndarray:
        return self.end_ns - self.start_ns

    def mask(self, cause: int | None = None, device: int | None = None) -> np.ndarray:
        m = np.ones(len(self), dtype=bool)
        if cause is not None:
            m &= self.cause == cause
        if device is not None:
            m &= self.device == device
        return m

    def total(self, cause: int | None = None, device: int | None = None) -> int:
        return int(self.length_ns[self.mask(cause, device)].sum())

    def idle_ns(self, device: int | None = None) -> int:
        return self.total(None, device)

    def by_cause(self, device: int | None = None) -> dict[str, int]:
        """Idle per cause name (all causes, zeros included), in :data:`CAUSES` order."""
        m = self.mask(None, device)
        w = np.bincount(self.cause[m], weights=self.length_ns[m].astype(np.float64), minlength=len(CAUSES))
        return {c: int(v) for c, v in zip(CAUSES, w.tolist())}

    def queued(self, trace: Trace) -> np.ndarray:
        """Mask: the ``unknown`` segments in which the GPU already had its next work (the launch
        call had returned, part 1 of the module docstring) and did not start it: the device's
        start-up latency when shorter than :data:`LAUNCH_LATENCY_NS`, else a stream or event
        dependency, a wait inside a graph replay, or work the trace does not show. The other
        ``unknown`` time is host time with little recorded activity, or no known host thread."""
        m = np.flatnonzero((self.cause == UNKNOWN) & (self.next_row >= 0))
        out = np.zeros(len(self), dtype=bool)
        if len(m) == 0:
            return out
        nxt = self.next_row[m]
        a = trace.gpu.api[nxt]
        launched = np.where(a >= 0, _take(trace.api.end_ns, a), np.iinfo(np.int64).max)
        out[m] = (self.start_ns[m] >= launched) & (self.end_ns[m] == trace.gpu.start_ns[nxt])
        return out

    def intervals(self, cause: int, device: int | None = None) -> tl.Intervals:
        m = self.mask(cause, device)
        return tl.merge(self.start_ns[m], self.end_ns[m])

    @property
    def devices(self) -> list[int]:
        return sorted(self.busy_ns)


def _empty_i64() -> np.ndarray:
    return np.zeros(0, dtype=np.int64)


def idle_causes(trace: Trace, at: AnalysedTime, syncs: SyncEvents | None = None,
                host: HostView | None = None, gaps_of: Callable[[int], Gaps] | None = None) -> IdleCauses:
    """Attribute every idle stretch of every active device inside ``at`` (module docstring);
    ``syncs``/``host``/``gaps_of``: the Facts' sync events, host view and per-device gaps, so
    they are computed once."""
    gpu, api = trace.gpu, trace.api
    syncs = sync_events(trace) if syncs is None else syncs
    host = host_view(trace, syncs) if host is None else host
    extra = _thread_sets(trace, host)
    launch_med = _launch_medians(trace, host)
    main_thread = _main_thread(trace, host)
    release_free_heap()  # the per-thread merges' temporaries, before the attribution's columns grow
    blocking = blocking_api_mask(trace)
    init_calls = init_api_mask(trace)
    has_launches = bool(np.isin(api.kind, np.array([ApiKind.LAUNCH, ApiKind.GRAPH_LAUNCH], np.int8)).any())
    cols: dict[str, list[np.ndarray]] = {k: [] for k in ("device", "s", "e", "cause", "interval", "thread", "event",
                                                        "next", "hw")}
    ivd, ivs, ive = [], [], []
    busy_by: dict[int, int] = {}
    backlog_by: dict[int, int] = {}
    back = backlog_mask(trace)
    n_iv = 0
    row_dtype = row_index_dtype(max(len(gpu), len(syncs.pid)))
    for dev in active_devices(trace):
        gaps = device_gaps(trace, dev) if gaps_of is None else gaps_of(dev)
        busy = gaps.busy
        in_window = at.clip(busy)
        if tl.total(in_window) == 0 and not at.synthetic:
            continue
        busy_by[dev] = tl.total(in_window)
        del in_window
        own = (gpu.device == dev) & (gpu.kind != GpuKind.SYNC) & ~back  # device_rows without the backlog
        backlog_by[dev] = busy_by[dev] - tl.total(at.clip(tl.merge(gpu.start_ns, gpu.end_ns, where=own)))
        del own
        i0, i1 = _split(tl.subtract(at.intervals, busy), at.step_start_ns)
        keep = i1 > i0
        i0, i1 = i0[keep], i1[keep]
        del keep
        n = len(i0)
        if n == 0:
            ivd.append(np.zeros(0, np.int32))
            ivs.append(_empty_i64())
            ive.append(_empty_i64())
            continue
        rows = device_rows(trace, dev)
        rows = rows[gpu.end_ns[rows] > gpu.start_ns[rows]]
        by_start = rows[np.argsort(gpu.start_ns[rows], kind="stable")].astype(row_dtype)
        start_by = gpu.start_ns[by_start]
        del rows

        def launch_of(j0: np.ndarray, j1: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
            """The GPU row starting at each interval's end (-1: none), its launch call (-1:
            none recorded), and the call's start and end (the interval end without one)."""
            if len(by_start):
                k = np.searchsorted(start_by, j1, side="left")
                nxt = by_start[np.minimum(k, len(by_start) - 1)]
                nxt[(k >= len(by_start)) | (start_by[np.minimum(k, len(by_start) - 1)] != j1)] = -1
                del k
            else:
                nxt = np.full(len(j0), -1, np.int64)
            a = _take(gpu.api, nxt, -1) if len(gpu) else np.full(len(j0), -1, np.int64)
            has = a >= 0
            return nxt, a, np.where(has, _take(api.start_ns, a), j1), np.where(has, _take(api.end_ns, a), j1)

        # The attribution is per interval, so it runs in blocks: its dozen interval-sized
        # temporaries are a block's, not the device's (millions of idle intervals at 10 GB of
        # trace). Only the per-thread cause of the host window (part 3 of the docstring) looks
        # at all of a thread's intervals at once, so each thread's coverage sets are indexed once.
        # The launch lookup runs twice per block (here and when the segments are cut) rather
        # than keeping four more interval-sized columns between the passes.
        thread = np.empty(n, np.int32)
        h1 = np.empty(n, np.int64)  # host window end
        ev = np.full(n, -1, row_dtype)
        sync_end = np.empty(n, np.int64)
        for b0 in range(0, n, IDLE_BLOCK):
            j0, j1 = i0[b0:b0 + IDLE_BLOCK], i1[b0:b0 + IDLE_BLOCK]
            _, a, l0, _ = launch_of(j0, j1)
            th = np.where(a >= 0, host.thread(_take(api.pid, a), _take(api.tid, a)), main_thread)
            hb = np.clip(l0, j0, j1)
            del a, l0
            thread[b0:b0 + len(j0)] = th
            h1[b0:b0 + len(j0)] = hb
            sync_end[b0:b0 + len(j0)] = j0
            for t in np.unique(th[th >= 0]).tolist():
                sel = np.flatnonzero(th == t)
                ev[b0 + sel], sync_end[b0 + sel] = _drained(syncs, host, t, j0[sel], hb[sel], dev)
            del th, hb
        # host window: a sync that drained the queue first, then one cause for the rest
        rest_cause = np.full(n, UNKNOWN, np.int8)
        for t in np.unique(thread[thread >= 0]).tolist():
            sel = np.flatnonzero(thread == t)
            rest_cause[sel] = _rest_cause(trace, host, extra, t, sync_end[sel], h1[sel], launch_med[t])
        for b0 in range(0, n, IDLE_BLOCK):
            blk = slice(b0, b0 + IDLE_BLOCK)
            j0, j1 = i0[blk], i1[blk]
            m = len(j0)
            nxt, a, l0, l1 = launch_of(j0, j1)
            has = a >= 0
            c0 = np.clip(l0, j0, j1)
            c1 = np.clip(l1, j0, j1)  # call part [c0, c1)
            del l0, l1
            q0 = c1  # queue part [c1, j1) when a launch is recorded
            call_cause = np.where(_take(blocking, a, False), HOST_SYNC,
                                  np.where(_take(init_calls, a, False), INITIALISATION, LAUNCH_OVERHEAD))
            outside = (nxt >= 0) & ~has & has_launches
            th, hb, se = thread[blk], h1[blk], sync_end[blk]
            # an interval's segments in time order, one row per interval: host sync [j0, se),
            # rest of the host window [se, hb), launch call [c0, c1), queue [c1, j1), and the
            # whole interval when it lies outside the profiled launches. Intervals are sorted
            # and disjoint, so the segments come out sorted by start without a final sort.
            s_ = np.stack([j0, se, c0, q0, j0], axis=1)
            e_ = np.stack([se, hb, np.where(has, c1, c0), np.where(has, j1, q0), np.where(outside, j1, j0)], axis=1)
            s_[:, :4][outside] = j0[outside, None]
            e_[:, :4][outside] = j0[outside, None]
            ok = (e_ > s_).ravel()
            seg_of = np.repeat(np.arange(m), 5)[ok]  # the interval of each kept segment (in the block)
            cause = np.stack([np.full(m, HOST_SYNC, np.int8), rest_cause[blk], call_cause.astype(np.int8),
                              np.full(m, UNKNOWN, np.int8), np.full(m, OUTSIDE_WINDOW, np.int8)], axis=1).ravel()[ok]
            event = np.full((m, 5), -1, row_dtype)
            event[:, 0] = ev[blk]
            hw = np.where(outside, j1 - j0, hb - j0)
            cols["device"].append(np.full(len(seg_of), dev, np.int32))
            cols["s"].append(s_.ravel()[ok])
            cols["e"].append(e_.ravel()[ok])
            cols["cause"].append(cause)
            cols["interval"].append((n_iv + b0 + seg_of).astype(row_dtype))
            cols["thread"].append(th[seg_of].astype(np.int32))
            cols["event"].append(event.ravel()[ok])
            cols["next"].append(nxt[seg_of].astype(row_dtype))
            cols["hw"].append(hw[seg_of].astype(np.int64))
            del s_, e_, ok, seg_of, cause, event, hw
        del thread, h1, ev, sync_end, rest_cause, by_start, start_by
        release_free_heap()
        ivd.append(np.full(n, dev, np.int32))
        ivs.append(i0)
        ive.append(i1)
        n_iv += n
    # already in (device, start) order; one column at a time, each part list dropped once joined
    cat = {k: _join(cols.pop(k), _DTYPES.get(k, row_dtype)) for k in list(cols)}
    return IdleCauses(
        device=cat["device"], start_ns=cat["s"], end_ns=cat["e"],
        cause=cat["cause"], interval=cat["interval"], thread=cat["thread"],
        event=cat["event"], next_row=cat["next"], host_window_ns=cat["hw"],
        iv_device=_join(ivd, np.int32), iv_start_ns=_join(ivs), iv_end_ns=_join(ive),
        busy_ns=busy_by, backlog_busy_ns=backlog_by, analysed_ns=at.total_ns, syncs=syncs, host=host, launch_median_ns=launch_med,
    )


#: idle intervals attributed at a time (per device)
IDLE_BLOCK = 1 << 17


#: column dtypes of the attribution other than the row-number columns (interval, event, next: row_dtype)
_DTYPES = {"device": np.int32, "cause": np.int8, "thread": np.int32, "s": np.int64, "e": np.int64,
           "hw": np.int64}


def _join(parts: list[np.ndarray], dtype: Any = np.int64) -> np.ndarray:
    """The parts as one column of ``dtype`` (copied only when they need joining or converting)."""
    if not parts:
        return np.zeros(0, dtype)
    return (np.concatenate(parts) if len(parts) > 1 else parts[0]).astype(dtype, copy=False)


def _split(iv: tl.Intervals, cuts: np.ndarray) -> tl.Intervals:
    """Cut intervals at the given points (step starts), so no idle interval spans two steps."""
    s, e = iv
    cuts = np.unique(np.asarray(cuts, np.int64))
    if len(s) == 0 or len(cuts) == 0:
        return s, e
    k0 = np.searchsorted(cuts, s, side="right")
    k1 = np.searchsorted(cuts, e, side="left")
    n_in = np.maximum(k1 - k0, 0)  # cut points strictly inside each interval
    if not n_in.any():
        return s, e
    rep = n_in + 1
    owner = np.repeat(np.arange(len(s)), rep)
    pos = np.arange(len(owner)) - np.repeat(np.cumsum(rep) - rep, rep)  # index within its interval
    starts = np.where(pos == 0, s[owner], cuts[np.minimum(k0[owner] + pos - 1, len(cuts) - 1)])
    ends = np.where(pos == rep[owner] - 1, e[owner], cuts[np.minimum(k0[owner] + pos, len(cuts) - 1)])
    return starts.astype(np.int64), ends.astype(np.int64)


# --------------------------------------------------------------------------- host threads

@dataclasses.dataclass(frozen=True)
class _ThreadSets:
    """Per HostView thread: intervals of communication, initialisation calls, ops + runtime calls
    (without Python), Python frames."""

    comm: list[tl.Intervals]
    init: list[tl.Intervals]
    recorded: list[tl.Intervals]
    python: list[tl.Intervals]


def _thread_sets(trace: Trace, host: HostView) -> _ThreadSets:
    ops, api, ann, py = trace.ops, trace.api, trace.annotations, trace.python
    names = trace.strings
    comm_ops = names.mask(ops.name, lambda s: COMM_NAME.search(s) is not None)
    comm_ann = (ann.kind == AnnotationKind.COMMUNICATION) | names.mask(ann.name, lambda s: COMM_NAME.search(s) is not None)
    init_api = init_api_mask(trace)
    init_ops = init_op_mask(trace)

    def per_thread(*parts: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]) -> list[tl.Intervals]:
        return merged_per_thread(host.pid, host.tid, list(parts))

    o, f, a = covering_rows(trace)  # the same unions as every op, frame and call

    return _ThreadSets(
        comm=per_thread((ops.pid[comm_ops], ops.tid[comm_ops], ops.start_ns[comm_ops], ops.end_ns[comm_ops]),
                        (ann.pid[comm_ann], ann.tid[comm_ann], ann.start_ns[comm_ann], ann.end_ns[comm_ann])),
        init=per_thread((api.pid[init_api], api.tid[init_api], api.start_ns[init_api], api.end_ns[init_api]),
                        (ops.pid[init_ops], ops.tid[init_ops], ops.start_ns[init_ops], ops.end_ns[init_ops])),
        recorded=per_thread((ops.pid[o], ops.tid[o], ops.start_ns[o], ops.end_ns[o]),
                            (api.pid[a], api.tid[a], api.start_ns[a], api.end_ns[a])),
        python=per_thread((py.pid[f], py.tid[f], py.start_ns[f], py.end_ns[f])),
    )


def _launch_medians(trace: Trace, host: HostView) -> np.ndarray:
    """Median kernel-launch call duration per host thread (0 where the thread launched nothing)."""
    api = trace.api
    out = np.zeros(len(host.pid), np.int64)
    launch = np.flatnonzero(api.kind == ApiKind.LAUNCH)
    if len(launch) == 0 or len(host.pid) == 0:
        return out
    th = host.thread(api.pid[launch], api.tid[launch])
    dur = api.end_ns[launch] - api.start_ns[launch]
    for k in np.unique(th[th >= 0]).tolist():
        out[k] = int(np.median(dur[th == k]))
    return out


def _main_thread(trace: Trace, host: HostView) -> int:
    """The thread that launched the most GPU work (the step's thread), -1 without launches."""
    api = trace.api
    launch = np.flatnonzero(np.isin(api.kind, np.array([ApiKind.LAUNCH, ApiKind.GRAPH_LAUNCH, ApiKind.MEMCPY_ASYNC,
                                                        ApiKind.MEMCPY_SYNC], np.int8)))
    if len(launch) == 0 or len(host.pid) == 0:
        return -1
    th = host.thread(api.pid[launch], api.tid[launch])
    th = th[th >= 0]
    return int(np.argmax(np.bincount(th))) if len(th) else -1


def _drained(syncs: SyncEvents, host: HostView, th: int, g0: np.ndarray, h1: np.ndarray,
             dev: int) -> tuple[np.ndarray, np.ndarray]:
    """Per interval: the thread's sync event whose wait holds the interval start (the wait drained
    the queue), and the end of the host-sync part: ``g0 + min(h1 - g0, blocked time)``."""
    ev = np.full(len(g0), -1, np.int64)
    end = g0.copy()
    on = np.flatnonzero((syncs.pid == host.pid[th]) & (syncs.tid == host.tid[th]))
    if len(on) == 0:
        return ev, end
    on = on[np.argsort(syncs.wait_ns[on], kind="stable")]
    j = np.searchsorted(syncs.wait_ns[on], g0, side="right") - 1
    jj = on[np.maximum(j, 0)]
    ok = (j >= 0) & (syncs.end_ns[jj] >= g0) & (h1 > g0)
    blocked = syncs.end_ns[jj] - syncs.wait_ns[jj]
    ev[ok] = jj[ok]
    end[ok] = g0[ok] + np.minimum(h1[ok] - g0[ok], blocked[ok])
    return ev, end


def _rest_cause(trace: Trace, host: HostView, extra: _ThreadSets, th: int, r0: np.ndarray, r1: np.ndarray,
                launch_median_ns: int) -> np.ndarray:
    """Cause of the host window after any drained sync (module docstring, part 3)."""
    w = np.maximum(r1 - r0, 0)
    need = MAJORITY * w

    def most(cover: tl.Intervals) -> np.ndarray:  # kept as a mask: one window-sized int64 at a time
        return tl.overlap_each(r0, r1, cover) >= need

    out = np.full(len(r0), UNKNOWN, np.int8)
    long = w >= HOST_PHASE_NS
    out[most(host.busy[th]) & long] = HOST_WORK
    # a short window on the thread that launches the next work is the dispatch path, recorded
    # or not (Python between ops, framework code nsys without NVTX does not show)
    short = ~long
    del long
    out[short] = LAUNCH_OVERHEAD
    suspect = short & _profiler_suspect(extra, th, r0, r1, launch_median_ns)
    out[suspect] = PROFILER_OVERHEAD
    del short, suspect
    out[most(host.wait[th])] = HOST_SYNC
    out[most(extra.init[th])] = INITIALISATION
    out[most(extra.comm[th])] = COMMUNICATION
    out[most(host.data[th])] = DATA_LOADING
    out[w <= 0] = UNKNOWN
    return out


def _profiler_suspect(extra: _ThreadSets, th: int, r0: np.ndarray, r1: np.ndarray, launch_median_ns: int) -> np.ndarray:
    """Host windows that look like the profiler's own cost: the trace records Python frames
    (``with_stack``), the window is >= :data:`PROFILER_GAP_RATIO` times the thread's median
    launch call, it holds ops or runtime calls but they fill < :data:`PROFILER_OPS_SHARE` of it,
    and Python frames most of it: trivial ops far apart while a launch takes microseconds."""
    if launch_median_ns <= 0 or tl.total(extra.python[th]) == 0:
        return np.zeros(len(r0), bool)
    w = r1 - r0
    rec = tl.overlap_each(r0, r1, extra.recorded[th])
    py = tl.overlap_each(r0, r1, extra.python[th])
    # the trivial ops must be there: a window without any op is Python work, not the profiler's
    return (w >= PROFILER_GAP_RATIO * launch_median_ns) & (rec > 0) & (rec < PROFILER_OPS_SHARE * w) & \
        (py >= MAJORITY * w)


def _take(col: np.ndarray, idx: np.ndarray, fill: int = 0) -> np.ndarray:
    if len(col) == 0:
        return np.full(len(idx), fill, dtype=col.dtype if col.dtype != bool else bool)
    return np.where(idx >= 0, col[np.maximum(idx, 0)], fill)


# --------------------------------------------------------------------------- naming host work

def host_frames(trace: Trace, segs: IdleCauses, sel: np.ndarray) -> list[tuple[str, int]]:
    """Top Python functions by self time inside the segments ``sel`` on their host threads
    (``file.py(LINE): function``, ns), else ops by self time, else user ranges; most time first."""
    s, e, th = segs.start_ns[sel], segs.end_ns[sel], segs.thread[sel]
    host = segs.host
    for table in (trace.python, trace.ops, trace.annotations):
        if not len(table):
            continue
        totals: dict[int, int] = {}
        for k in np.unique(th[th >= 0]).tolist():
            cover = tl.merge(s[th == k], e[th == k])
            on = np.flatnonzero((table.pid == host.pid[k]) & (table.tid == host.tid[k]))
            if table is trace.annotations:
                on = on[table.kind[on] != AnnotationKind.STEP]
            if not len(on):
                continue
            inside = tl.overlap_each(table.start_ns[on], table.end_ns[on], cover)
            parent = table.parent[on].astype(np.int64)
            self_ns = inside.astype(np.int64).copy()
            # children's time inside the cover is not their parent's self time
            pos = np.full(len(table), -1, np.int64)
            pos[on] = np.arange(len(on))
            has_p = (parent >= 0)
            ppos = np.where(has_p, pos[np.maximum(parent, 0)], -1)
            ok = ppos >= 0
            np.subtract.at(self_ns, ppos[ok], inside[ok])
            names = table.name[on]
            u, inv = np.unique(names, return_inverse=True)
            agg = np.bincount(inv.reshape(-1), weights=np.maximum(self_ns, 0).astype(np.float64), minlength=len(u))
            for code, v in zip(u.tolist(), agg.tolist()):
                if v > 0:
                    totals[code] = totals.get(code, 0) + int(v)
        if totals:
            return sorted(((trace.strings[c], v) for c, v in totals.items()), key=lambda kv: (-kv[1], kv[0]))
    return []


def covering_label(trace: Trace, segs: IdleCauses, sel: np.ndarray) -> list[str]:
    """What covers the middle of each segment on its host thread: the innermost user range,
    else the outermost op, else the innermost Python frame; "" where nothing is recorded."""
    host = segs.host
    th = segs.thread[sel]
    ok = th >= 0
    pid = np.where(ok, host.pid[np.maximum(th, 0)], -1)
    tid = np.where(ok, host.tid[np.maximum(th, 0)], -1)
    mid = (segs.start_ns[sel] + segs.end_ns[sel]) // 2
    out = [""] * len(sel)
    stage = stage_rows(trace, pid, tid, mid)
    ops = trace.ops
    op = innermost_containing(ops.pid, ops.tid, ops.start_ns, ops.end_ns, ops.depth, pid, tid, mid) \
        if len(ops) else np.full(len(sel), -1, np.int64)
    py = trace.python
    fr = innermost_containing(py.pid, py.tid, py.start_ns, py.end_ns, py.depth, pid, tid, mid) \
        if len(py) else np.full(len(sel), -1, np.int64)
    for i in range(len(sel)):
        if stage[i] >= 0:
            out[i] = trace.strings[int(trace.annotations.name[stage[i]])]
        elif op[i] >= 0:
            o = int(op[i])
            while ops.parent[o] >= 0:
                o = int(ops.parent[o])
            out[i] = trace.strings[int(ops.name[o])]
        elif fr[i] >= 0:
            # the innermost frame that holds (nearly: >= COVERS) the whole segment, else the outermost
            f = int(fr[i])
            s0, s1 = int(segs.start_ns[sel[i]]), int(segs.end_ns[sel[i]])
            while (min(py.end_ns[f], s1) - max(py.start_ns[f], s0)) < COVERS * (s1 - s0) and py.parent[f] >= 0:
                f = int(py.parent[f])
            out[i] = trace.strings[int(py.name[f])]
    return out


def thread_ids(segs: IdleCauses, th: int) -> tuple[int, int]:
    return int(segs.host.pid[th]), int(segs.host.tid[th])


__all__: Sequence[str] = ("CAUSES", "IdleCauses", "idle_causes", "host_frames", "covering_label", "RECOVERABLE",
                          "HOST_SYNC", "HOST_WORK", "DATA_LOADING", "LAUNCH_OVERHEAD", "COMMUNICATION",
                          "INITIALISATION", "OUTSIDE_WINDOW", "PROFILER_OVERHEAD", "UNKNOWN")
