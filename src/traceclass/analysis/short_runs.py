"""Runs of short items (kernels, memsets, top-level ops) and their most frequent name n-grams: TC201.

Columnar: loops run over threads, n-gram lengths or a bounded number of candidates, never over
the rows of a table.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from traceclass import timeline as tl
from traceclass.facts.gaps import Gaps, device_rows
from traceclass.facts.steps import Steps
from traceclass.model import GpuKind, Trace
from traceclass.model.nesting import group_ids

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

