"""Stages: ``ProfilerStep#N`` and user ranges (``record_function``, NVTX), with GPU projection.

A stage is every occurrence of one range name. For each occurrence we know its CPU range
(wall time) and the GPU work it launched: GPU rows whose launching API call started inside
the range on the range's own thread, or on a *helper thread* (a thread that launches GPU work
but carries no ranges of its own, such as PyTorch's autograd thread, which runs
``loss.backward()`` for a range opened on the main thread). This is nsys's
``nvtx_gpu_proj`` rule extended to helper threads. Steps are the exception: a step is the
whole iteration, so launches from every thread while it is open count.

Steps: when the trace has no ``ProfilerStep#N``, the whole trace is one step, named
``(whole trace)``. The first ``warmup_steps`` steps are warm-up; occurrences of other stages
that start inside a warm-up step are warm-up too, and both are reported apart.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from traceclass import timeline as tl
from traceclass.model import AnnotationKind, GpuKind, Trace
from traceclass.model.nesting import group_ids
from traceclass.model.table import BLOCK_ROWS, row_index_dtype

WHOLE_TRACE = "(whole trace)"
STEP_NAME = "ProfilerStep"

_STAGE_KINDS = (
    AnnotationKind.STEP,
    AnnotationKind.USER,
    AnnotationKind.DATALOADER,
    AnnotationKind.OPTIMIZER,
    AnnotationKind.COMPILED,
    AnnotationKind.COMMUNICATION,
)


@dataclasses.dataclass(frozen=True)
class Occurrences:
    """All stage occurrences, columnar. ``stage`` indexes ``names``."""

    names: list[str]
    kinds: list[int]
    stage: np.ndarray
    start_ns: np.ndarray
    end_ns: np.ndarray
    pid: np.ndarray
    tid: np.ndarray
    warmup: np.ndarray  # bool
    gpu_busy_ns: np.ndarray  # union of launched GPU work, -1 when the trace has no GPU
    gpu_start_ns: np.ndarray  # projection span, -1 when nothing was launched
    gpu_end_ns: np.ndarray
    synthetic: bool  # True when the only step is the whole trace
    # row lists are int32 where the table allows (they stay cached for every rule: on a
    # trace of tens of millions of events they are GBs as int64)
    gpu_rows: list[np.ndarray]  # per occurrence: trace.gpu rows it launched
    op_rows: list[np.ndarray]  # per occurrence: trace.ops rows that started inside it
    empty: np.ndarray  # steps with no op and no GPU work (left out of the statistics)
    warmup_ignored: bool = False  # fewer steps than --warmup: none was set apart

    def steady(self) -> np.ndarray:
        """Occurrences that count: not warm-up, not an empty step."""
        return ~self.warmup & ~self.empty

    def basis(self, j: int) -> np.ndarray:
        """Mask of the occurrences of stage ``j`` that its statistics cover: the steady ones;
        a stage seen only in warm-up, its warm-up ones; else all of them."""
        m = self.stage == j
        steady = m & self.steady()
        if steady.any():
            return steady
        warm = m & self.warmup
        return warm if warm.any() else m


@dataclasses.dataclass(frozen=True)
class StageStats:
    name: str
    kind: str  # "step", "user", "dataloader", ...
    count: int
    warmup_count: int
    total_ns: int
    p50_ns: float
    p90_ns: float
    p99_ns: float
    mean_ns: float
    min_ns: int
    max_ns: int
    gpu_busy_ns: int | None  # steady-state occurrences only
    gpu_share_pct: float | None  # gpu busy / span (start to the later of end and last GPU end), steady state
    warmup_p50_ns: float | None
    empty_count: int = 0  # empty steps left out


def stage_occurrences(trace: Trace, warmup_steps: int = 1) -> Occurrences:
    ann = trace.annotations
    keep = np.isin(ann.kind, np.array([int(k) for k in _STAGE_KINDS], dtype=np.int8))
    rows = np.flatnonzero(keep)
    names_full = [trace.strings[c] for c in ann.name[rows].tolist()]
    kinds_row = ann.kind[rows]
    key = [STEP_NAME if k == AnnotationKind.STEP else n for n, k in zip(names_full, kinds_row.tolist())]
    start, end = ann.start_ns[rows], ann.end_ns[rows]
    pid, tid = ann.pid[rows], ann.tid[rows]
    synthetic = False
    if not (kinds_row == AnnotationKind.STEP).any():
        bounds = trace.time_bounds()
        if bounds is not None:
            w0, w1 = trace.window if trace.window else bounds
            key.append(WHOLE_TRACE)
            kinds_row = np.r_[kinds_row, int(AnnotationKind.STEP)].astype(np.int8)
            start, end = np.r_[start, w0], np.r_[end, w1]
            pid, tid = np.r_[pid, -1], np.r_[tid, -1]  # -1: spans every thread
            synthetic = True
    names: list[str] = []
    kinds: list[int] = []
    index: dict[str, int] = {}
    stage = np.empty(len(key), dtype=np.int64)
    for i, (k, kd) in enumerate(zip(key, kinds_row.tolist())):
        j = index.get(k)
        if j is None:
            j = index[k] = len(names)
            names.append(k)
            kinds.append(kd)
        stage[i] = j

    warmup = np.zeros(len(key), dtype=bool)
    is_step = kinds_row == AnnotationKind.STEP
    warmup_ignored = warmup_steps > 0 and not synthetic and 0 < is_step.sum() <= warmup_steps
    if warmup_steps > 0 and not synthetic and is_step.sum() > warmup_steps:
        step_rows = np.flatnonzero(is_step)
        step_rows = step_rows[np.argsort(start[step_rows], kind="stable")]
        warm = step_rows[:warmup_steps]
        warmup[warm] = True
        warm_end = int(end[warm].max())
        warmup |= start < warm_end
        # stages that merely overlap the first steady step stay steady
        first_steady = int(start[step_rows[warmup_steps]])
        warmup &= start < first_steady

    # a step is the whole iteration: work launched from any thread while it is open belongs
    # to it (autograd and DDP threads open ranges of their own); other stages keep to their
    # thread and its helper threads
    scope_pid = np.where(is_step_row(kinds_row), -1, pid)
    whole = np.zeros(len(start), dtype=bool)
    if synthetic:
        whole[-1] = True
    helpers = helper_threads(trace)
    busy, g0, g1, gpu_rows = _gpu_projection(trace, start, end, scope_pid, tid, whole, helpers)
    ops = trace.ops
    op_rows = rows_within(ops.pid, ops.tid, ops.start_ns, start, end, scope_pid, tid, helpers)
    # a step with no op and no GPU work is the profiler closing a step it never ran (the last
    # ProfilerStep of a schedule often is): it would skew the percentiles, so it is set apart
    empty = is_step & ~whole & np.array([len(o) == 0 for o in op_rows], dtype=bool) & \
        np.array([len(g) == 0 for g in gpu_rows], dtype=bool) & (len(ops) + len(trace.gpu) > 0)
    if warmup.any() and not (is_step & ~warmup & ~empty).any():
        # nothing would be left: a short trace is analysed whole rather than not at all
        warmup[:] = False
        warmup_ignored = True
    return Occurrences(
        names=names,
        kinds=kinds,
        stage=stage,
        start_ns=start.astype(np.int64),
        end_ns=end.astype(np.int64),
        pid=pid.astype(np.int64),
        tid=tid.astype(np.int64),
        warmup=warmup,
        gpu_busy_ns=busy,
        gpu_start_ns=g0,
        gpu_end_ns=g1,
        synthetic=synthetic,
        gpu_rows=gpu_rows,
        op_rows=op_rows,
        empty=empty,
        warmup_ignored=bool(warmup_ignored),
    )


def is_step_row(kinds: np.ndarray) -> np.ndarray:
    return np.asarray(kinds) == AnnotationKind.STEP


def helper_threads(trace: Trace) -> set[tuple[int, int]]:
    """Threads that run ops or launch GPU work but open no stage ranges of their own.

    Readers whose ranges are projected the nsys way (``meta["stage_projection"] ==
    "same-thread"``) get none: an NVTX range owns only the work of its own thread.
    """
    if trace.meta.get("stage_projection") == "same-thread":
        return set()
    api, ops = trace.api, trace.ops
    working = _threads(api.pid, api.tid) | _threads(ops.pid, ops.tid)
    ann = trace.annotations
    # communication ranges (DDP's nccl:all_reduce on the autograd thread) do not make a thread
    # a stage owner of its own
    own = np.isin(ann.kind, np.array([int(k) for k in _OWNING_KINDS], dtype=np.int8))
    with_ranges = _threads(ann.pid[own], ann.tid[own])
    return working - with_ranges


_OWNING_KINDS = (AnnotationKind.STEP, AnnotationKind.USER, AnnotationKind.DATALOADER,
                 AnnotationKind.OPTIMIZER, AnnotationKind.COMPILED)


def _threads(pid: np.ndarray, tid: np.ndarray) -> set[tuple[int, int]]:
    if len(pid) == 0:
        return set()
    gid, n = group_ids(pid, tid)
    first = np.zeros(n, dtype=np.int64)
    first[gid[::-1]] = np.arange(len(gid))[::-1]
    return set(zip(pid[first].tolist(), tid[first].tolist()))


def rows_within(
    row_pid: np.ndarray,
    row_tid: np.ndarray,
    row_t: np.ndarray,
    start: np.ndarray,
    end: np.ndarray,
    pid: np.ndarray,
    tid: np.ndarray,
    helpers: set[tuple[int, int]],
) -> list[np.ndarray]:
    """Rows whose time lies in each range, on the range's thread or a helper thread.

    A range with ``pid < 0`` spans every thread (the synthetic whole-trace step).
    """
    out: list[np.ndarray] = []
    if len(row_t) == 0:
        return [np.zeros(0, dtype=row_index_dtype(0)) for _ in range(len(start))]
    th, _ = group_ids(row_pid, row_tid)
    order = np.lexsort((row_t, th)).astype(row_index_dtype(len(row_t)), copy=False)
    order.setflags(write=False)  # the ranges' rows are views of it
    th_sorted, t_sorted = th[order], row_t[order]
    thread_key = {}
    firsts = np.r_[0, np.flatnonzero(np.diff(th_sorted)) + 1]
    for f in firsts.tolist():
        r = order[f]
        thread_key[(int(row_pid[r]), int(row_tid[r]))] = int(th_sorted[f])
    helper_keys = [thread_key[h] for h in helpers if h in thread_key]
    all_threads = sorted(thread_key.values())
    bounds = {k: (int(np.searchsorted(th_sorted, k, "left")), int(np.searchsorted(th_sorted, k, "right")))
              for k in all_threads}
    for s, e, p, t in zip(start.tolist(), end.tolist(), pid.tolist(), tid.tolist()):
        if p < 0:
            threads = all_threads
        else:
            own = thread_key.get((p, t))
            threads = ([own] if own is not None else []) + [h for h in helper_keys if h != own]
        parts = []
        for k in threads:
            a, b = bounds[k]
            lo = a + int(np.searchsorted(t_sorted[a:b], s, side="left"))
            hi = a + int(np.searchsorted(t_sorted[a:b], e, side="right"))
            if hi > lo:
                parts.append(order[lo:hi])
        # one part is a view of the shared order (no copy: ranges nest, so copies would hold
        # every row once per range around it); callers only read these arrays
        out.append(parts[0] if len(parts) == 1 else np.concatenate(parts) if parts else order[:0])
    return out


def _gpu_projection(trace, start, end, pid, tid, whole, helpers):  # type: ignore[no-untyped-def]
    """Union of launched GPU work per range, its span, and the GPU rows themselves.

    (range, GPU row) pairs are gathered through the launch calls, then one grouped interval
    union per batch of ranges gives every range's busy time.
    """
    n = len(start)
    busy = np.full(n, -1, dtype=np.int64)
    g0 = np.full(n, -1, dtype=np.int64)
    g1 = np.full(n, -1, dtype=np.int64)
    gpu = trace.gpu
    rows_per: list[np.ndarray] = [np.zeros(0, dtype=row_index_dtype(len(trace.gpu)))] * n
    if len(gpu) == 0:
        return busy, g0, g1, rows_per
    active = (gpu.kind != GpuKind.SYNC) & (gpu.api >= 0)
    rows = np.flatnonzero(active)
    by_api = rows[np.argsort(gpu.api[rows], kind="stable")]
    api_of = gpu.api[by_api]
    api = trace.api
    calls = rows_within(api.pid, api.tid, api.start_ns, start, end, pid, tid, helpers)
    busy[:] = 0
    row_dtype = row_index_dtype(len(gpu))

    def project(occ: np.ndarray, pair_rows: np.ndarray) -> None:
        """Busy time, span and rows of a batch of ranges, from their (range, GPU row) pairs."""
        if len(pair_rows) == 0:
            return
        order = np.lexsort((pair_rows, occ))
        occ, pair_rows = occ[order], pair_rows[order]
        del order
        s, e = gpu.start_ns[pair_rows], gpu.end_ns[pair_rows]
        occ_u, lengths = tl.union_length_by_group(occ, s, e)
        busy[occ_u] = lengths
        first = np.r_[0, np.flatnonzero(np.diff(occ)) + 1]
        g0[occ[first]] = np.minimum.reduceat(s, first)
        g1[occ[first]] = np.maximum.reduceat(e, first)
        del s, e
        bounds = np.r_[first, len(occ)]
        pair_rows = pair_rows.astype(row_dtype, copy=False)
        for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
            rows_per[int(occ[a])] = pair_rows[a:b]

    if whole.any():  # the synthetic whole-trace step owns all GPU work, launched or not
        all_active = np.flatnonzero(gpu.kind != GpuKind.SYNC)
        for w in np.flatnonzero(whole).tolist():
            project(np.full(len(all_active), w, dtype=np.int64), all_active)
    # ranges in batches of about PROJECTION_BATCH launch calls: the pair arrays and their sort
    # are a batch's, not the trace's (ranges nest, so every kernel is paired with each range
    # around it: several times the GPU table at 10 GB of trace)
    todo = [i for i in range(n) if not whole[i] and len(calls[i])]
    k = 0
    while k < len(todo):
        batch = [todo[k]]
        size = len(calls[todo[k]])
        k += 1
        while k < len(todo) and size + len(calls[todo[k]]) <= PROJECTION_BATCH:
            batch.append(todo[k])
            size += len(calls[todo[k]])
            k += 1
        batch_calls = np.concatenate([calls[i] for i in batch])
        occ_of_call = np.repeat(np.array(batch, dtype=np.int64), [len(calls[i]) for i in batch])
        lo = np.searchsorted(api_of, batch_calls, side="left")
        cnt = np.searchsorted(api_of, batch_calls, side="right")
        cnt -= lo
        del batch_calls
        if cnt.sum():
            project(np.repeat(occ_of_call, cnt), by_api[np.repeat(lo, cnt) + _ragged_arange(cnt)])
        del occ_of_call, lo, cnt
    return busy, g0, g1, rows_per


#: launch calls per batch of ranges in the GPU projection (each call brings its kernels)
PROJECTION_BATCH = BLOCK_ROWS


def _ragged_arange(counts: np.ndarray) -> np.ndarray:
    """[0..c0-1, 0..c1-1, ...] for counts c."""
    total = int(counts.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    starts = np.repeat(np.cumsum(counts) - counts, counts)
    return np.arange(total) - starts


_KIND_LABEL = {
    AnnotationKind.STEP: "step",
    AnnotationKind.USER: "user",
    AnnotationKind.DATALOADER: "dataloader",
    AnnotationKind.OPTIMIZER: "optimizer",
    AnnotationKind.COMPILED: "compiled",
    AnnotationKind.COMMUNICATION: "communication",
}


def stage_stats(occ: Occurrences, has_gpu: bool) -> list[StageStats]:
    """Per stage name: percentiles over steady occurrences (warm-up-only stages over their
    warm-up occurrences, with ``count`` 0). GPU share = launched GPU busy time divided by the
    span from the range's start to the later of its end and its last GPU work, so work that runs
    after a short CPU range (an async collective) cannot push the share past 100 %."""
    out = []
    wall = occ.end_ns - occ.start_ns
    span = np.maximum(occ.end_ns, occ.gpu_end_ns) - occ.start_ns
    steady_all = occ.steady()
    for j, name in enumerate(occ.names):
        m = occ.stage == j
        steady = m & steady_all
        warm = m & occ.warmup
        basis = occ.basis(j)
        w = wall[basis]
        busy = occ.gpu_busy_ns[basis]
        gpu_busy = int(busy[busy >= 0].sum()) if has_gpu else None
        denom = int(span[basis].sum())
        share = 100.0 * gpu_busy / denom if (has_gpu and gpu_busy is not None and denom > 0) else None
        out.append(
            StageStats(
                name=name,
                kind=_KIND_LABEL.get(AnnotationKind(occ.kinds[j]), "user"),
                count=int(steady.sum()),
                warmup_count=int(warm.sum()),
                total_ns=int(w.sum()),
                p50_ns=tl.percentile(w, 50),
                p90_ns=tl.percentile(w, 90),
                p99_ns=tl.percentile(w, 99),
                mean_ns=float(w.mean()) if len(w) else float("nan"),
                min_ns=int(w.min()) if len(w) else 0,
                max_ns=int(w.max()) if len(w) else 0,
                gpu_busy_ns=gpu_busy,
                gpu_share_pct=share,
                warmup_p50_ns=tl.percentile(wall[warm], 50) if warm.any() else None,
                empty_count=int((m & occ.empty).sum()),
            )
        )
    out.sort(key=lambda s: (s.kind != "step", -s.total_ns))
    return out
