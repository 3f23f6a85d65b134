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


from traceclass.analysis.cpu_kinds import IDLE_EVIDENCE_SAMPLES, UNVERIFIED, SampleKinds, _thread_names, sample_kinds
from traceclass.analysis.cpu_kinds import usable_source as usable_source  # re-exported for cpu_sites
from traceclass.analysis.cpu_types import NO_FRAMES, NO_FRAMES_LABEL, CpuProfile, FrameStat, KindShare, ThreadProfile
from traceclass.analysis.cpu_types import _thread_label
from traceclass.analysis.frame_kinds import KIND_CODES, PRIORITY, WAITING, Classifier, label
from traceclass.keysums import bincount_int, group_sum
from traceclass.model import StackNodes, Trace
from traceclass.model.nesting import FRONTIER_ROUNDS, euler_intervals, has_ancestor_with_same_key

KEEP_FRAMES = 50
KEEP_THREAD_FRAMES = 5
IDLE_EVIDENCE_SHARE = 0.5
IDLE_EVIDENCE_PEER = 0.5
_WAIT_P = np.array([PRIORITY[k] for k in sorted(WAITING, key=PRIORITY.get)], dtype=np.int64)
#: waits read from frames or source text (not inferred): the evidence for idle sampling
_SEEN_WAIT_P = np.array([PRIORITY[k] for k in sorted(WAITING - {"blocked"}, key=PRIORITY.get)], dtype=np.int64)


def profile_samples(trace: Trace, classifier: Classifier | None = None, kinds: SampleKinds | None = None) -> CpuProfile:
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
    # the caller's kinds (Facts computes them once) only stand for the default classifier
    sk = kinds if kinds is not None and classifier is None else sample_kinds(trace, classifier)
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
    self_k, self_v = group_sum(thread[has_stack] * F + leaf_frame[has_stack], value[has_stack])
    self_f = bincount_int(self_k % F, self_v, n_frames)
    total_k, total_v = _totals(st, thread[has_stack], node[has_stack], value[has_stack], F)
    total_f = bincount_int(total_k % F, total_v, n_frames)
    frame_kind = _dominant_kind(leaf_frame[has_stack], row_kind[has_stack], value[has_stack], n_frames, n_kinds + 1)
    kind_t = bincount_int(thread * (n_kinds + 1) + row_kind, value, n_threads * (n_kinds + 1)).reshape(n_threads, n_kinds + 1)

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
    waiting_t = bincount_int(thread[waiting_row], value[waiting_row], n_threads)
    seen_wait_t = bincount_int(thread[seen_wait_row], value[seen_wait_row], n_threads)
    empty_t = bincount_int(thread[~has_stack], value[~has_stack], n_threads)
    unknown_t = bincount_int(thread[unknown_row], value[unknown_row], n_threads)
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


def _location(trace: Trace, f: int) -> str:
    fr = trace.frames
    file = trace.strings[int(fr.file[f])] if fr.file[f] >= 0 else ""
    line = int(fr.line[f])
    if not file:
        return trace.strings[int(fr.function[f])]
    return f"{file}:{line}" if line >= 0 else file


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
    uniq, v = group_sum(thread * base + node, value)
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
    return group_sum(np.concatenate(keys), np.concatenate(vals))


def _lookup(keys: np.ndarray, values: np.ndarray, key: int) -> int:
    i = int(np.searchsorted(keys, key))
    return int(values[i]) if i < len(keys) and keys[i] == key else 0


def _dominant_kind(frame: np.ndarray, kind: np.ndarray, value: np.ndarray, n_frames: int, n_kinds: int) -> np.ndarray:
    """Per frame, the kind holding most of its self value (0 where the frame is never a leaf)."""
    out = np.zeros(n_frames, dtype=np.int64)
    k, v = group_sum(frame * n_kinds + kind, value)
    if len(k) == 0:
        return out
    f = k // n_kinds
    order = np.lexsort((-v, f))
    firsts = order[np.r_[True, f[order][1:] != f[order][:-1]]]
    out[f[firsts]] = k[firsts] % n_kinds
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


# profile_samples is this module's; the rest are re-exported for cpu_sites and older imports
__all__ = ["CpuProfile", "profile_samples", "sample_kinds", "usable_source"]
