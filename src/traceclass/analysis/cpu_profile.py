"""Sampled CPU profile: self/total time per frame, hot spots with a kind, per-thread shares.

Works on ``trace.samples`` (aggregated rows allowed) and the stack trie, all vectorized:
values are summed with ``bincount`` over node and frame ids, the trie is walked one level
(or one ancestor step) at a time across all nodes at once.

Units. A profile is measured in ``ns`` when its rows carry weights (speedscope weights, self
time of timed frames), else in ``samples`` (collapsed stacks, nsys samples); samples convert
to time only when the sampling interval is known. Shares are exact either way.

Total time counts a frame once per sample even when it recurses: a node contributes to its
frame's total only if no ancestor has the same frame.

Waiting vs running. Thread states recorded in the trace (nsys) are used as they are.
py-spy records none, so a sample counts as waiting when its kind (from
:mod:`traceclass.analysis.frame_kinds`) is lock wait, sleep or I/O: a frame-based estimate.
It only means "idle share" when idle samples were recorded (py-spy ``--idle``); without
``--idle`` py-spy drops most idle samples and the profile is close to on-CPU time.

Lines without source. A Python leaf line whose text is unknown is *blocked or computing*
(kind ``unverified``): neither running nor waiting. :func:`sample_kinds` settles it only
from evidence in the profile, and records which:

* a GIL-only profile (py-spy ``--gil``) or one recorded without idle samples: the line runs
  (sleep, lock and socket calls release the GIL; py-spy drops idle threads' samples) -> Python
  compute;
* a thread, not its process's main one, whose samples sit on one such line (at least
  ``ONE_LINE_SHARE`` of them, for at least ``ONE_LINE_MIN_NS`` / ``ONE_LINE_MIN_SAMPLES``)
  while it is sampled about as often as the busiest thread (idle samples kept) and the line
  never calls a Python function -> likely blocked (``blocked``);
* a thread whose name says it waits (``sleeper-io``, ``watchdog``: ``WAITING_THREAD_WORDS``)
  -> its lines without source are likely blocked.

Both ``blocked`` rules are guesses, stated as such in the report; ``--source-root`` settles
the line from its text instead.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Callable

import numpy as np

from traceclass.analysis.frame_kinds import (
    KIND_CODES,
    PRIORITY,
    WAITING,
    Classifier,
    default_kind,
    label,
    source_known,
)
from traceclass.model import StackNodes, Trace
from traceclass.model.nesting import FRONTIER_ROUNDS, euler_intervals, has_ancestor_with_same_key, path_max

NO_FRAMES = "none"  # kind of a sample with an empty stack
NO_FRAMES_LABEL = "empty stack (no frames recorded)"
KEEP_FRAMES = 50
KEEP_THREAD_FRAMES = 5
#: idle inference: a thread with at least this many samples in waiting calls, making up at
#: least IDLE_EVIDENCE_SHARE of its samples, and sampled at least IDLE_EVIDENCE_PEER times as
#: often as the busiest thread, shows that idle samples were kept
IDLE_EVIDENCE_SAMPLES = 20
IDLE_EVIDENCE_SHARE = 0.5
IDLE_EVIDENCE_PEER = 0.5
_WAIT_P = np.array([PRIORITY[k] for k in sorted(WAITING, key=PRIORITY.get)], dtype=np.int64)
#: waits read from frames or source text (not inferred): the evidence for idle sampling
_SEEN_WAIT_P = np.array([PRIORITY[k] for k in sorted(WAITING - {"blocked"}, key=PRIORITY.get)], dtype=np.int64)
UNVERIFIED = PRIORITY["unverified"]
BLOCKED = PRIORITY["blocked"]
#: "one line" evidence for a blocked thread: share of its samples (after start-up) on one
#: line without source, and how long that is (time when known, else samples: 1 s at py-spy's 100 Hz)
ONE_LINE_SHARE = 0.95
ONE_LINE_MIN_NS = 1_000_000_000
ONE_LINE_MIN_SAMPLES = 100
#: ... and the thread is sampled at least this share as often as the busiest thread
ONE_LINE_PEER = 0.5
#: words in a thread's name that say it waits (split at non-alphanumerics, lower case)
WAITING_THREAD_WORDS = frozenset(
    "io sleep sleeper sleeping wait waiter waiting idle poll poller polling listen listener "
    "watchdog heartbeat timer monitor".split()
)
_INLINE_FRAME = re.compile(r"<(listcomp|dictcomp|setcomp|genexpr|lambda)>$")
#: why lines without source count as compute, by profile flag
COMPUTE_BASIS = {
    "gil": ("GIL-only profile (py-spy --gil): every sample holds the GIL, which sleep, lock and socket "
            "calls release, so lines without source count as Python compute"),
    "no-idle": ("recorded without idle samples: py-spy kept only samples of running threads, so lines "
                "without source count as Python compute"),
}


@dataclasses.dataclass(frozen=True)
class FrameStat:
    """One frame (function, file, line) with its self and total time."""

    function: str
    file: str
    line: int | None
    kind: str  # code in frame_kinds.KINDS; the kind of most of its self time
    self_value: int  # in CpuProfile.unit
    total_value: int
    self_pct: float  # of all sampled time
    total_pct: float
    self_ns: int | None
    total_ns: int | None
    threads: tuple[str, ...] = ()  # threads with the most self time here, largest first

    @property
    def location(self) -> str:
        if not self.file:
            return ""
        return f"{self.file}:{self.line}" if self.line is not None else self.file


@dataclasses.dataclass(frozen=True)
class KindShare:
    kind: str
    label: str
    value: int
    pct: float
    ns: int | None


@dataclasses.dataclass(frozen=True)
class ThreadProfile:
    row: int  # row in trace.threads
    pid: int
    tid: int
    name: str
    value: int
    ns: int | None
    samples: int | None  # None when rows are not samples (timed frames)
    share_pct: float  # of all sampled time
    running_pct: float  # of this thread's time
    waiting_pct: float
    no_frames_pct: float  # samples with an empty stack
    unverified_pct: float  # at Python lines without source: blocked or computing
    dominant_kind: str
    kinds: tuple[KindShare, ...]
    hot_spots: tuple[FrameStat, ...]

    @property
    def label(self) -> str:
        return _thread_label(self.name, self.pid, self.tid)


@dataclasses.dataclass(frozen=True)
class CpuProfile:
    source_format: str
    producer: str
    unit: str  # "ns", "samples" or "units" (weights that are not time)
    interval_ns: int | None
    total_value: int
    total_ns: int | None
    samples: int | None
    includes_idle: bool | None
    #: "recorded" (the reader or `record` knows), "inferred" (see idle_evidence), "unknown",
    #: "thread state" (states per sample, idle or not), "timed" (wall-clock frames, no sampling),
    #: "unitless" (values are not time: speedscope unit none or bytes)
    includes_idle_basis: str
    gil_only: bool | None
    waiting_basis: str  # "thread state" or "frames"
    running_pct: float
    waiting_pct: float
    from_intervals: bool  # values are self times of timed frames, not samples
    has_line_numbers: bool
    source_lines: int  # leaf frames whose source line the reader found
    #: share of all time in Python lines counted as compute only because their source file
    #: was not found: a line calling time.sleep or lock.acquire looks the same there
    unverified_pct: float
    threads: tuple[ThreadProfile, ...]
    hot_spots: tuple[FrameStat, ...]  # by self time, largest first
    top_total: tuple[FrameStat, ...]  # by total time, largest first
    kinds: tuple[KindShare, ...]
    notes: tuple[str, ...] = ()
    #: (thread label, waiting samples, waiting % of the thread) behind an "inferred" idle flag
    idle_evidence: tuple[str, int, float] | None = None
    #: (thread label, line location or "" for several lines, reason) for lines without source
    #: taken as blocked
    blocked_evidence: tuple[tuple[str, str, str], ...] = ()
    #: why lines without source count as compute ("gil", "no-idle"), or ""
    unverified_basis: str = ""
    #: the file's unit for values that are not time (speedscope "none", "bytes"), or ""
    weight_unit: str = ""

    @property
    def blocked_pct(self) -> float:
        return sum(k.pct for k in self.kinds if k.kind == "blocked")

    def verdict(self, name: Callable[[str], str] | None = None) -> str:
        """One sentence for the report's summary: the running, waiting and unknown shares, and
        the hottest *on-CPU* line (a wait is never called hot), kept short (the report's verdict
        cuts long sentences): at most two kinds per share, the line's file by its base name.

        ``name`` formats the line's function and location (untrusted text from the profile).
        Everything else in the sentence is our own words and numbers, plain text that needs no
        escaping. Without ``name`` the names are left as they are: the caller then escapes the
        whole sentence as prose (the report's verdict does)."""
        if not self.total_value or not self.kinds:
            return ""
        fmt = name or _same
        if self.unit == "units":
            top = self.kinds[0]
            unit = "bytes" if self.weight_unit == "bytes" else "unitless, not time"
            text = f"CPU profile: {top.pct:.0f}% of profile weight ({unit}) is {top.label}"
            if len(self.kinds) > 1 and self.kinds[1].pct >= 10:
                text += f", {self.kinds[1].pct:.0f}% {self.kinds[1].label}"
            hot = self.hottest_running()
            if hot is not None:
                text += f"; the heaviest frame is {_frame_text(hot, fmt)} with {hot.self_pct:.0f}%"
            return text + "."
        what = "timed frames' self time" if self.from_intervals else "sampled thread time"
        if self.gil_only:
            what += " (GIL-only profile, py-spy --gil)"
        running = [k for k in self.kinds if _running(k.kind)]
        waiting = [k for k in self.kinds if k.kind in WAITING]
        segs = []
        run_pct = sum(k.pct for k in running)
        wait_pct = sum(k.pct for k in waiting)
        if running and run_pct >= 1:
            segs.append(f"{_p(run_pct)} running ({_kind_list(running)})")
        if waiting and wait_pct >= 1:
            segs.append(f"{_p(wait_pct)} waiting ({_kind_list(waiting)})")
        if self.unverified_pct >= 1:
            segs.append(f"{_p(self.unverified_pct)} blocked or computing (no source: pass --source-root)")
        if not segs:
            top = self.kinds[0]
            segs.append(f"{_p(top.pct)} {top.label}")
        text = f"CPU profile of {what}: " + ", ".join(segs)
        hot = self.hottest_running()
        if hot is not None and hot.self_pct >= 1:
            what = "line" if hot.line is not None else "function"
            text += f"; hottest on-CPU {what} {_frame_text(hot, fmt, short=True)}, {hot.self_pct:.0f}%"
        elif self.unverified_pct >= 50:
            text += "; no line is known to be on-CPU"
        return text + "."

    def hottest_running(self) -> FrameStat | None:
        """The hot spot with the most self time whose kind runs on the CPU (not a wait, not a
        line without source, not an empty stack)."""
        return next((h for h in self.hot_spots if _running(h.kind)), None)


def _running(kind: str) -> bool:
    return kind not in WAITING and kind not in ("unverified", NO_FRAMES)


def _p(x: float) -> str:
    return f"{x:.0f}%" if x >= 1 or x == 0 else "<1%"


def _kind_list(kinds: list[KindShare], limit: int = 2) -> str:
    shown = [k for k in kinds if k.pct >= 1][:limit] or kinds[:1]
    return ", ".join(f"{_p(k.pct)} {k.label}" for k in shown)


def _frame_text(f: FrameStat, fmt: Callable[[str], str], short: bool = False) -> str:
    loc = f.location
    if short and f.file:
        base = f.file.replace("\\", "/").rsplit("/", 1)[-1]
        loc = f"{base}:{f.line}" if f.line is not None else base
    return f"{fmt(f.function)} ({fmt(loc)})" if loc else fmt(f.function)


def _same(text: str) -> str:
    return text


@dataclasses.dataclass(frozen=True)
class SampleKinds:
    """Kind (priority index in :data:`KIND_CODES`, ``len(KIND_CODES)`` for an empty stack) and
    leaf frame per sample row, with what settled the lines without source."""

    kind: np.ndarray
    leaf: np.ndarray  # leaf frame row, -1 for an empty stack
    #: (thread row, frame row or -1 for all its lines, reason) for rows made ``blocked``
    blocked: tuple[tuple[int, int, str], ...] = ()
    compute_basis: str = ""  # key of COMPUTE_BASIS when lines without source count as compute


_DEFAULT: list[Classifier] = []


def _default_classifier() -> Classifier:
    """One shared classifier: its per-text memo then serves every pass over the same frames
    (the profile and the hot-spot sites classify them both); renewed when the memo is big."""
    if not _DEFAULT or _DEFAULT[0].memo_size() > 1_000_000:
        _DEFAULT[:] = [Classifier()]
    return _DEFAULT[0]


def sample_kinds(trace: Trace, classifier: Classifier | None = None) -> SampleKinds:
    """Per sample row: its kind from the frames (leaf and stack rules, default kinds), then
    lines without source settled from the profile's evidence (see the module docstring)."""
    cls = classifier or _default_classifier()
    s, st = trace.samples, trace.stacks
    node = s.node.astype(np.int64)
    has_stack = (node >= 0) & (len(st) > 0)
    nsafe = np.maximum(node, 0)
    leaf_frame = np.where(has_stack, st.frame[nsafe] if len(st) else -1, -1).astype(np.int64)
    leaf_p, stack_p = _frame_priorities(trace, cls)
    node_kind = _node_kinds(st, leaf_p, stack_p)
    kind = np.where(has_stack, node_kind[nsafe] if len(st) else 0, len(KIND_CODES)).astype(np.int64)
    unv = kind == UNVERIFIED
    if not unv.any():
        return SampleKinds(kind, leaf_frame)
    sampling = trace.sampling
    basis = ""
    if sampling is not None and sampling.gil_only:
        basis = "gil"
    elif sampling is not None and sampling.includes_idle is False:
        basis = "no-idle"
    if basis:
        kind[unv] = PRIORITY["python"]
        return SampleKinds(kind, leaf_frame, compute_basis=basis)
    blocked = _infer_blocked(trace, kind, leaf_frame, has_stack)
    return SampleKinds(kind, leaf_frame, blocked=blocked)


def _infer_blocked(trace: Trace, kind: np.ndarray, leaf: np.ndarray, has_stack: np.ndarray) -> tuple[tuple[int, int, str], ...]:
    """Turn ``unverified`` rows into ``blocked`` where the profile shows the thread waits
    (in place); the evidence per thread."""
    s, st, th = trace.samples, trace.stacks, trace.threads
    strings = trace.strings
    thread = s.thread.astype(np.int64)
    n_threads = max(len(th), int(thread.max()) + 1 if len(thread) else 0)
    timed = trace.meta.get("samples_from") == "intervals"
    weighted = bool((s.weight_ns > 0).any()) and not trace.meta.get("weight_unit")
    value = s.weight_ns.astype(np.int64) if weighted else s.count.astype(np.int64)
    names = _thread_names(trace, n_threads)
    pids = [int(th.pid[t]) if t < len(th) else -1 for t in range(n_threads)]
    tids = [int(th.tid[t]) if t < len(th) else -1 for t in range(n_threads)]
    # how often each thread was sampled (time for timed frames: they carry no sample counts)
    per_thread = np.bincount(thread, weights=value if timed else s.count, minlength=n_threads)
    sampled = np.flatnonzero(per_thread > 0)
    busiest = float(per_thread.max()) if len(per_thread) else 0.0
    unv = kind == UNVERIFIED
    steady = has_stack & (kind != PRIORITY["import"])
    steady_t = np.bincount(thread[steady], weights=value[steady], minlength=n_threads)
    callers = np.zeros(len(trace.frames), dtype=bool)
    if len(st):
        par = st.parent.astype(np.int64)
        callers[st.frame.astype(np.int64)[par[par >= 0]]] = True
    out: list[tuple[int, int, str]] = []
    for t in sampled.tolist():
        rows_t = unv & (thread == t)
        if not rows_t.any():
            continue
        name = names[t]
        if not name and tids[t] < 0:
            continue  # stacks of all threads together (no thread roots): nothing to tell them by
        main = name == "MainThread" or (pids[t] >= 0 and tids[t] == pids[t])
        one_line = False
        if not main and len(sampled) >= 2 and per_thread[t] >= ONE_LINE_PEER * busiest:
            f_rows = np.flatnonzero(rows_t)
            fr, inv = np.unique(leaf[f_rows], return_inverse=True)
            v = np.bincount(inv.reshape(-1), weights=value[f_rows], minlength=len(fr))
            c = np.bincount(inv.reshape(-1), weights=s.count[f_rows], minlength=len(fr))
            i = int(np.argmax(v))
            f = int(fr[i])
            long_enough = bool(v[i] >= ONE_LINE_MIN_NS) if (weighted or timed) else bool(c[i] >= ONE_LINE_MIN_SAMPLES)
            if not timed:
                long_enough = long_enough and c[i] >= IDLE_EVIDENCE_SAMPLES
            fn = strings[int(trace.frames.function[f])]
            if (v[i] >= ONE_LINE_SHARE * steady_t[t] and long_enough and not callers[f]
                    and not _INLINE_FRAME.search(fn)):
                kind[f_rows[leaf[f_rows] == f]] = BLOCKED
                share = 100.0 * v[i] / steady_t[t] if steady_t[t] else 100.0
                what = "one line" if int(trace.frames.line[f]) >= 0 else "one function (no line numbers)"
                if timed:
                    held = f"{share:.0f}% of its time after start-up ({v[i] / 1e9:.3g} s)"
                else:
                    held = f"{share:.0f}% of its samples after start-up ({int(c[i]):,} samples)"
                out.append((t, f, f"{what} holds {held} while it was sampled about as often as the busiest "
                                  "thread, and calls no Python function"))
                rows_t = rows_t & (kind == UNVERIFIED)
                one_line = True
        words = set(w for w in re.split(r"[^0-9a-z]+", name.lower()) if w)
        said = sorted(words & WAITING_THREAD_WORDS)
        if said and rows_t.any():
            kind[rows_t] = BLOCKED
            which = "its other lines without source" if one_line else "its lines without source"
            out.append((t, -1, f"{which}: the thread's name has " + ", ".join(repr(w) for w in said)))
    return tuple(out)


def profile_samples(trace: Trace, classifier: Classifier | None = None) -> CpuProfile:
    s = trace.samples
    st = trace.stacks
    fr = trace.frames
    n_frames = len(fr)
    sampling = trace.sampling
    interval = sampling.interval_ns if sampling is not None else None

    weight_unit = trace.meta.get("weight_unit")
    weighted = len(s) > 0 and bool((s.weight_ns[s.count > 0] > 0).all()) and bool((s.weight_ns > 0).any())
    if weighted:
        value = s.weight_ns.astype(np.int64)
        unit = "units" if weight_unit else "ns"
    else:
        value = s.count.astype(np.int64)
        unit = "samples"
    ns_per = 1 if unit == "ns" else (interval if unit == "samples" and interval else None)
    from_intervals = trace.meta.get("samples_from") == "intervals"
    sample_based = not from_intervals and unit != "units"

    node = s.node.astype(np.int64)
    has_stack = (node >= 0) & (len(st) > 0)
    sk = sample_kinds(trace, classifier)
    leaf_frame = sk.leaf
    n_kinds = len(KIND_CODES)
    row_kind = sk.kind  # n_kinds = none
    unverified_row = row_kind == UNVERIFIED

    states_known = len(s) > 0 and bool((s.state >= 0).all())
    if states_known:
        waiting_row = s.state == 1
        seen_wait_row = waiting_row
        waiting_basis = "thread state"
    else:
        waiting_row = np.isin(row_kind, _WAIT_P)
        seen_wait_row = np.isin(row_kind, _SEEN_WAIT_P)
        waiting_basis = "frames"
    # a line without source is neither running nor waiting (thread states, when recorded, decide)
    unknown_row = unverified_row if not states_known else np.zeros(len(s), dtype=bool)

    total = int(value.sum())
    threads = trace.threads
    n_threads = max(len(threads), int(s.thread.max()) + 1 if len(s) else 0)
    thread = s.thread.astype(np.int64)

    # self per (thread, frame) and per (frame, kind)
    # (thread, frame) pairs are sparse: keep them as sorted keys thread * F + frame with sums
    F = max(n_frames, 1)
    self_k, self_v = _group_sum(thread[has_stack] * F + leaf_frame[has_stack], value[has_stack])
    self_f = _bincount(self_k % F, self_v, n_frames)
    total_k, total_v = _totals(st, thread[has_stack], node[has_stack], value[has_stack], F)
    total_f = _bincount(total_k % F, total_v, n_frames)
    frame_kind = _dominant_kind(leaf_frame[has_stack], row_kind[has_stack], value[has_stack], n_frames, n_kinds + 1)
    kind_t = _bincount(thread * (n_kinds + 1) + row_kind, value, n_threads * (n_kinds + 1)).reshape(n_threads, n_kinds + 1)

    names = _thread_names(trace, n_threads)
    tpid = [int(threads.pid[t]) if t < len(threads) else -1 for t in range(n_threads)]
    ttid = [int(threads.tid[t]) if t < len(threads) else -1 for t in range(n_threads)]
    labels = [_thread_label(names[t], tpid[t], ttid[t]) for t in range(n_threads)]
    strings = trace.strings

    def stat(f: int, self_v: int, total_v: int, kind_idx: int, thread_names: tuple[str, ...] = ()) -> FrameStat:
        line = int(fr.line[f])
        return FrameStat(
            function=strings[int(fr.function[f])],
            file=strings[int(fr.file[f])] if fr.file[f] >= 0 else "",
            line=line if line >= 0 else None,
            kind=_kind_code(kind_idx),
            self_value=self_v,
            total_value=total_v,
            self_pct=_pct(self_v, total),
            total_pct=_pct(total_v, total),
            self_ns=self_v * ns_per if ns_per else None,
            total_ns=total_v * ns_per if ns_per else None,
            threads=thread_names,
        )

    hot = _top(self_f, KEEP_FRAMES)
    hot_spots = tuple(
        stat(f, int(self_f[f]), int(total_f[f]), int(frame_kind[f]), _top_threads(self_k, self_v, F, f, labels))
        for f in hot
    )
    top_total = tuple(
        stat(f, int(self_f[f]), int(total_f[f]), int(frame_kind[f])) for f in _top(total_f, KEEP_FRAMES)
    )

    counts_t = np.bincount(thread, weights=s.count, minlength=n_threads) if len(s) else np.zeros(n_threads)
    waiting_t = _bincount(thread[waiting_row], value[waiting_row], n_threads)
    seen_wait_t = _bincount(thread[seen_wait_row], value[seen_wait_row], n_threads)
    empty_t = _bincount(thread[~has_stack], value[~has_stack], n_threads)
    unknown_t = _bincount(thread[unknown_row], value[unknown_row], n_threads)
    value_t = kind_t.sum(axis=1)
    per_thread = []
    for t in np.argsort(-value_t, kind="stable").tolist():
        v = int(value_t[t])
        if v == 0:
            continue
        lo, hi = np.searchsorted(self_k, [t * F, (t + 1) * F])
        t_frames, t_self = self_k[lo:hi] - t * F, self_v[lo:hi]
        kinds_here = _kind_shares(kind_t[t], v, ns_per)
        per_thread.append(
            ThreadProfile(
                row=t,
                pid=tpid[t],
                tid=ttid[t],
                name=names[t],
                value=v,
                ns=v * ns_per if ns_per else None,
                samples=int(round(counts_t[t])) if sample_based else None,
                share_pct=_pct(v, total),
                running_pct=_pct(v - int(waiting_t[t]) - int(empty_t[t]) - int(unknown_t[t]), v),
                waiting_pct=_pct(int(waiting_t[t]), v),
                no_frames_pct=_pct(int(empty_t[t]), v),
                unverified_pct=_pct(int(unknown_t[t]), v),
                dominant_kind=kinds_here[0].kind if kinds_here else NO_FRAMES,
                kinds=kinds_here,
                hot_spots=tuple(
                    stat(int(t_frames[i]), int(t_self[i]), _lookup(total_k, total_v, t * F + int(t_frames[i])),
                         int(frame_kind[t_frames[i]]))
                    for i in _top(t_self, KEEP_THREAD_FRAMES)
                ),
            )
        )

    waiting_total = int(waiting_t.sum())
    empty_total = int(empty_t.sum())
    unknown_total = int(unknown_t.sum())
    seen_wait_pct = {p.row: _pct(int(seen_wait_t[p.row]), p.value) for p in per_thread}
    includes_idle, idle_basis, evidence = _idle(trace, per_thread, sample_based, states_known, seen_wait_pct)
    notes = _notes(trace, unit, from_intervals, includes_idle)
    source_lines = len(trace.meta.get("source_lines") or {})
    return CpuProfile(
        source_format=trace.source.format,
        producer=trace.source.producer,
        unit=unit,
        interval_ns=interval,
        total_value=total,
        total_ns=total * ns_per if ns_per else None,
        samples=int(s.count.sum()) if sample_based else None,
        includes_idle=includes_idle,
        includes_idle_basis=idle_basis,
        gil_only=sampling.gil_only if sampling is not None else None,
        waiting_basis=waiting_basis,
        running_pct=_pct(total - waiting_total - empty_total - unknown_total, total),
        waiting_pct=_pct(waiting_total, total),
        from_intervals=from_intervals,
        has_line_numbers=sampling.has_line_numbers if sampling is not None else bool((fr.line >= 0).any()),
        source_lines=source_lines,
        unverified_pct=_pct(int(value[unverified_row].sum()), total),
        threads=tuple(per_thread),
        hot_spots=hot_spots,
        top_total=top_total,
        kinds=_kind_shares(kind_t.sum(axis=0), total, ns_per),
        notes=notes,
        idle_evidence=evidence,
        blocked_evidence=tuple(
            (labels[t], _location(trace, f) if f >= 0 else "", why) for t, f, why in sk.blocked
        ),
        unverified_basis=sk.compute_basis,
        weight_unit=str(weight_unit) if weight_unit and unit == "units" else "",
    )


# --------------------------------------------------------------------------- pieces


def _frame_priorities(trace: Trace, cls: Classifier) -> tuple[np.ndarray, np.ndarray]:
    """Leaf and stack kind priority per frame; a leaf no rule matches gets its default kind
    (Python compute, a Python line without source, or code that is not Python)."""
    fr = trace.frames
    n = len(fr)
    leaf = np.zeros(n, dtype=np.int64)
    stack = np.full(n, -1, dtype=np.int64)
    src = usable_source(trace)
    strings = trace.strings
    for f in range(n):
        fn = strings[int(fr.function[f])]
        fi = strings[int(fr.file[f])] if fr.file[f] >= 0 else ""
        text = src.get(f, "")
        lp, sp = cls.frame(fn, fi, text)
        leaf[f] = lp if lp >= 0 else PRIORITY[default_kind(fi, text)]
        stack[f] = sp
    return leaf, stack


def usable_source(trace: Trace) -> dict[int, str]:
    """Leaf line text per frame row, where it tells what the line does.

    A ``def`` line tells nothing when it is the only line py-spy shows for its function
    (``py-spy --function`` reports every frame at its def line, hiding the line that waits);
    where the function also shows other lines, a sample at its def line is the call's start
    and the text is kept (it matches no rule: Python compute).
    """
    src: dict[int, str] = trace.meta.get("source_lines") or {}
    if not src:
        return {}
    defs = [f for f, text in src.items() if not source_known(text)]
    if not defs:
        return src
    fr = trace.frames
    key = fr.function.astype(np.int64) * (len(trace.strings) + 1) + fr.file.astype(np.int64) + 1
    lines_per_key: dict[int, set[int]] = {}
    for k, ln in zip(key.tolist(), fr.line.tolist()):
        lines_per_key.setdefault(k, set()).add(ln)
    out = dict(src)
    for f in defs:
        if len(lines_per_key.get(int(key[f]), ())) < 2:
            del out[f]
    return out


def _location(trace: Trace, f: int) -> str:
    fr = trace.frames
    file = trace.strings[int(fr.file[f])] if fr.file[f] >= 0 else ""
    line = int(fr.line[f])
    if not file:
        return trace.strings[int(fr.function[f])]
    return f"{file}:{line}" if line >= 0 else file


def _node_kinds(st: StackNodes, leaf_p: np.ndarray, stack_p: np.ndarray) -> np.ndarray:
    """Kind priority per trie node: the best of its leaf kind and its ancestors' stack kinds."""
    n = len(st)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    frame = st.frame.astype(np.int64)
    # the max over the whole path, by pointer jumping: log2(depth) passes, never one per level
    ctx = path_max(st.parent.astype(np.int64), stack_p[frame])
    return np.maximum(leaf_p[frame], ctx)


def _first_occurrence(st: StackNodes) -> np.ndarray:
    """True where no strict ancestor of the node has the same frame (recursion counted once)."""
    n = len(st)
    frame = st.frame.astype(np.int64)
    parent = st.parent.astype(np.int64)
    first = np.ones(n, dtype=bool)
    anc = parent.copy()
    active = np.flatnonzero(anc >= 0)
    # a level-by-level walk suits the usual shallow trie; past FRONTIER_ROUNDS levels the
    # depth-independent walk-order test takes over
    for _ in range(FRONTIER_ROUNDS):
        if not len(active):
            return first
        a = anc[active]
        first[active[frame[a] == frame[active]]] = False
        anc[active] = parent[a]
        active = active[(anc[active] >= 0) & first[active]]
    if len(active):
        return ~has_ancestor_with_same_key(parent, frame)
    return first


def _totals(
    st: StackNodes, thread: np.ndarray, node: np.ndarray, value: np.ndarray, n_frames: int
) -> tuple[np.ndarray, np.ndarray]:
    """Total value per (thread, frame) as sorted keys thread * n_frames + frame and sums.

    Each sample counts once per distinct frame on its stack: only first occurrences emit.
    """
    if len(node) == 0 or len(st) == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    # collapse rows to distinct (thread, leaf node) pairs before walking up
    base = len(st) + 1
    uniq, v = _group_sum(thread * base + node, value)
    th = uniq // base
    cur = uniq % base
    first = _first_occurrence(st)
    frame = st.frame.astype(np.int64)
    parent = st.parent.astype(np.int64)
    keys: list[np.ndarray] = []
    vals: list[np.ndarray] = []
    for _ in range(FRONTIER_ROUNDS):
        if not len(cur):
            break
        hit = first[cur]
        keys.append(th[hit] * n_frames + frame[cur[hit]])
        vals.append(v[hit])
        cur = parent[cur]
        keep = cur >= 0
        cur, th, v = cur[keep], th[keep], v[keep]
    if len(cur):
        # stacks deeper than the walk: each first-occurrence node gets the value of the
        # remaining nodes below it (its walk-order interval), one pass per thread
        enter, leave = euler_intervals(parent)
        firsts = np.flatnonzero(first)
        for t in np.unique(th).tolist():
            sel = th == t
            e = enter[cur[sel]]
            order = np.argsort(e, kind="stable")
            e = e[order]
            csum = np.r_[np.int64(0), np.cumsum(v[sel][order])]
            got = csum[np.searchsorted(e, leave[firsts])] - csum[np.searchsorted(e, enter[firsts])]
            nz = got != 0
            keys.append(t * n_frames + frame[firsts[nz]])
            vals.append(got[nz])
    return _group_sum(np.concatenate(keys), np.concatenate(vals))


#: key spaces up to this size are summed with a dense bincount (faster than sorting)
_DENSE_KEYS = 1 << 22


def _group_sum(keys: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sorted distinct keys (with a non-zero count) and the integer sum of ``values`` per key."""
    if len(keys) == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    top = int(keys.max()) + 1
    if int(keys.min()) >= 0 and top <= max(_DENSE_KEYS, 2 * len(keys)):
        present = np.bincount(keys, minlength=top) > 0
        sums = _bincount(keys, values, top)
        uniq = np.flatnonzero(present)
        return uniq.astype(np.int64), sums[uniq]
    uniq, inv = np.unique(keys, return_inverse=True)
    return uniq.astype(np.int64), _bincount(inv.reshape(-1), values, len(uniq))


def _lookup(keys: np.ndarray, values: np.ndarray, key: int) -> int:
    i = int(np.searchsorted(keys, key))
    return int(values[i]) if i < len(keys) and keys[i] == key else 0


def _dominant_kind(frame: np.ndarray, kind: np.ndarray, value: np.ndarray, n_frames: int, n_kinds: int) -> np.ndarray:
    """Per frame, the kind holding most of its self value (0 where the frame is never a leaf)."""
    out = np.zeros(n_frames, dtype=np.int64)
    k, v = _group_sum(frame * n_kinds + kind, value)
    if len(k) == 0:
        return out
    f = k // n_kinds
    order = np.lexsort((-v, f))
    firsts = order[np.r_[True, f[order][1:] != f[order][:-1]]]
    out[f[firsts]] = k[firsts] % n_kinds
    return out


def _bincount(keys: np.ndarray, values: np.ndarray, size: int) -> np.ndarray:
    """Integer sums per key; exact (float64 holds integers up to 2**53)."""
    if len(keys) == 0:
        return np.zeros(size, dtype=np.int64)
    values = np.asarray(values, dtype=np.int64)
    if int(values.sum()) < (1 << 53):
        return np.rint(np.bincount(keys, weights=values, minlength=size)).astype(np.int64)
    out = np.zeros(size, dtype=np.int64)
    np.add.at(out, keys, values)
    return out


def _top(values: np.ndarray, k: int) -> list[int]:
    nz = np.flatnonzero(values > 0)
    if len(nz) == 0:
        return []
    order = nz[np.lexsort((nz, -values[nz]))]
    return order[:k].tolist()


def _top_threads(keys: np.ndarray, values: np.ndarray, n_frames: int, frame: int, labels: list[str], k: int = 3) -> tuple[str, ...]:
    rows = np.flatnonzero(keys % n_frames == frame)
    order = rows[np.lexsort((keys[rows], -values[rows]))][:k]
    return tuple(labels[int(keys[r] // n_frames)] for r in order if values[r] > 0)


def _thread_names(trace: Trace, n: int) -> list[str]:
    th = trace.threads
    return [trace.strings[int(th.name[t])] if t < len(th) and th.name[t] >= 0 else "" for t in range(n)]


def _thread_label(name: str, pid: int, tid: int) -> str:
    ids = ", ".join(x for x in (f"pid {pid}" if pid >= 0 else "", f"tid {tid}" if tid >= 0 else "") if x)
    if name and ids:
        return f"{name} ({ids})"
    return name or ids or "all threads"


def _kind_code(idx: int) -> str:
    return KIND_CODES[idx] if 0 <= idx < len(KIND_CODES) else NO_FRAMES


def _kind_shares(values: np.ndarray, total: int, ns_per: int | None) -> tuple[KindShare, ...]:
    out = []
    for i in _top(values, len(values)):
        v = int(values[i])
        code = _kind_code(i)
        out.append(
            KindShare(
                kind=code,
                label=label(code) if code != NO_FRAMES else NO_FRAMES_LABEL,
                value=v,
                pct=_pct(v, total),
                ns=v * ns_per if ns_per else None,
            )
        )
    return tuple(out)


def _pct(part: int, whole: int) -> float:
    return 100.0 * part / whole if whole else 0.0


def _idle(
    trace: Trace, threads: list[ThreadProfile], sample_based: bool, states_known: bool,
    seen_wait_pct: dict[int, float],
) -> tuple[bool | None, str, tuple[str, int, float] | None]:
    sampling = trace.sampling
    if sampling is not None and sampling.includes_idle is not None:
        return sampling.includes_idle, "recorded", None
    if not sample_based:
        return None, ("unitless" if trace.meta.get("weight_unit") else "timed"), None
    if states_known:
        return None, "thread state", None
    # without --idle py-spy drops the samples of idle threads: a mostly-waiting thread sampled
    # about as often as the busiest one means they were kept. A few waiting samples prove
    # nothing (py-spy's idle test is not exact; cpu_lock's lock-waiter keeps 20 of 300).
    # Only waits read from frames or source count: an inferred "likely blocked" line is not
    # evidence of idle sampling (that inference already assumes it).
    busiest = max((t.samples or 0 for t in threads), default=0)
    for t in threads:
        if t.samples is None:
            continue
        pct = seen_wait_pct.get(t.row, 0.0)
        waiting = int(round(t.samples * pct / 100.0))
        if (
            waiting >= IDLE_EVIDENCE_SAMPLES
            and pct >= 100 * IDLE_EVIDENCE_SHARE
            and t.samples >= IDLE_EVIDENCE_PEER * busiest
        ):
            return True, "inferred", (t.label, waiting, pct)
    return None, "unknown", None


def _notes(trace: Trace, unit: str, from_intervals: bool, includes_idle: bool | None) -> tuple[str, ...]:
    out = []
    if unit == "samples" and (trace.sampling is None or not trace.sampling.interval_ns):
        out.append("no sampling interval in the file: values are sample counts")
    if from_intervals and unit == "units":
        out.append("values are self values of evented frames in the file's unit, not time")
    elif from_intervals:
        out.append("values are self times of timed frames (wall clock), not CPU samples")
    if includes_idle is False:
        out.append("recorded without idle samples: waiting time is mostly missing")
    return tuple(out)
