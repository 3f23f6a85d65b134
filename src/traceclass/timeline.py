"""Exact interval algebra on integer-nanosecond intervals ``[start, end)``.

An *interval set* is a pair of sorted, disjoint, non-touching int64 arrays ``(starts, ends)``
as returned by :func:`merge`. Every function is O(n log n) or better and vectorized.
"""

from __future__ import annotations

import numpy as np

from traceclass.model.table import BLOCK_ROWS

Intervals = tuple[np.ndarray, np.ndarray]

_BLOCK = BLOCK_ROWS  # intervals per block of the checks and reductions

_EMPTY = (np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64))


def empty() -> Intervals:
    return _EMPTY[0].copy(), _EMPTY[1].copy()


def merge(starts: np.ndarray, ends: np.ndarray, where: np.ndarray | None = None) -> Intervals:
    """Union of intervals as a sorted disjoint set; zero-length intervals vanish. ``where``:
    only the rows where it is True (on columns in start order, read a block at a time instead
    of copying the selected rows first).

    The intervals are swept in start order a block at a time, the running end carried from
    block to block, so past the sort order (none when the starts already ascend, as GPU rows
    do) every temporary is one block: the merge of millions of kernels holds a few MB more
    than its result. Intervals that end at or before their start join groups like any other
    but never extend one, so groups with nothing in them are dropped at the end instead of
    copying the input without them first."""
    starts = np.asarray(starts, dtype=np.int64)
    ends = np.asarray(ends, dtype=np.int64)
    ascending = _ascending(starts)
    if where is not None and not ascending:  # a selection out of order: copied, then sorted
        starts, ends, where = starts[where], ends[where], None
    order = None if ascending else np.argsort(starts, kind="stable")
    n = len(starts)
    if n == 0:
        return empty()
    out_s: list[np.ndarray] = []
    out_e: list[np.ndarray] = []
    open_s = open_e = None  # the group still open at the end of the blocks so far
    for lo in range(0, n, _BLOCK):
        rows = slice(lo, lo + _BLOCK) if order is None else order[lo:lo + _BLOCK]
        s = starts[rows]
        e = ends[rows]
        if where is not None:
            m = where[rows]
            s, e = s[m], e[m]
            if len(s) == 0:
                continue
        e = np.maximum.accumulate(e)
        if open_e is not None:
            np.maximum(e, open_e, out=e)
        # a new group starts where the start lies after every earlier end (touching intervals merge)
        new = np.empty(len(s), dtype=bool)
        new[0] = open_e is None or bool(s[0] > open_e)
        new[1:] = s[1:] > e[:-1]
        first = np.flatnonzero(new)
        if len(first) == 0:  # the whole block continues the open group
            open_e = e[-1]
            continue
        if open_s is not None:
            out_s.append(np.array([open_s]))
            out_e.append(np.array([e[first[0] - 1] if first[0] > 0 else open_e]))
        out_s.append(s[first[:-1]])
        out_e.append(e[first[1:] - 1])
        open_s, open_e = s[first[-1]], e[-1]
    if open_s is None:  # nothing selected
        return empty()
    out_s.append(np.array([open_s]))
    out_e.append(np.array([open_e]))
    gs = out_s[0] if len(out_s) == 1 else np.concatenate(out_s)
    ge = out_e[0] if len(out_e) == 1 else np.concatenate(out_e)
    keep = ge > gs
    if not keep.all():
        gs, ge = gs[keep], ge[keep]
    return gs.astype(np.int64, copy=False), ge.astype(np.int64, copy=False)


def _ascending(a: np.ndarray) -> bool:
    """Whether ``a`` never decreases (checked in blocks: no array-sized temporary)."""
    for lo in range(0, len(a) - 1, _BLOCK):
        hi = min(lo + _BLOCK, len(a) - 1)
        if not (a[lo + 1:hi + 1] >= a[lo:hi]).all():
            return False
    return True


def union(*sets: Intervals) -> Intervals:
    """Union of merged sets, as a merged set (one set is returned as it is)."""
    if not sets:
        return empty()
    full = [x for x in sets if len(x[0])]
    if len(full) <= 1:
        return full[0] if full else sets[0]
    return merge(np.concatenate([s[0] for s in full]), np.concatenate([s[1] for s in full]))


def total(iv: Intervals) -> int:
    """Total length of a merged interval set."""
    s, e = iv
    if len(s) <= _BLOCK:
        return int((e - s).sum())
    return sum(int((e[lo:lo + _BLOCK] - s[lo:lo + _BLOCK]).sum()) for lo in range(0, len(s), _BLOCK))


def total_within(iv: Intervals, lo: int, hi: int) -> int:
    """``total(clip(iv, lo, hi))`` without the clipped copy of the set."""
    s, e = iv
    i0 = int(np.searchsorted(e, lo, side="right"))  # first interval ending after lo
    i1 = int(np.searchsorted(s, hi, side="left"))  # past the last starting before hi
    if i1 <= i0:
        return 0
    return total((s[i0:i1], e[i0:i1])) - max(0, lo - int(s[i0])) - max(0, int(e[i1 - 1]) - hi)


def longest(iv: Intervals) -> int:
    """Index of the longest interval of a set (the first of equals), -1 when empty."""
    s, e = iv
    best, best_len = -1, -1
    for lo in range(0, len(s), _BLOCK):
        d = e[lo:lo + _BLOCK] - s[lo:lo + _BLOCK]
        k = int(np.argmax(d))
        if int(d[k]) > best_len:
            best, best_len = lo + k, int(d[k])
    return best


def union_length(starts: np.ndarray, ends: np.ndarray) -> int:
    return total(merge(starts, ends))


def clip(iv: Intervals, lo: int, hi: int) -> Intervals:
    """Intersection of a merged set with the window ``[lo, hi)``."""
    s, e = iv
    s2 = np.maximum(s, lo)
    e2 = np.minimum(e, hi)
    keep = e2 > s2
    return s2[keep], e2[keep]


def intersect(a: Intervals, b: Intervals) -> Intervals:
    """Intersection of two merged sets.

    Each interval of ``a`` is paired by binary search with the intervals of ``b`` that overlap
    it (at most ``len(a) + len(b)`` pairs in all); the pairs' overlaps, in order, are the
    intersection, already merged: no boundary sweep over both sets (a dozen arrays of all their
    points, hundreds of MB on a trace of GBs)."""
    if len(a[0]) == 0 or len(b[0]) == 0:
        return empty()
    a_s, a_e = np.asarray(a[0], np.int64), np.asarray(a[1], np.int64)
    b_s, b_e = np.asarray(b[0], np.int64), np.asarray(b[1], np.int64)
    lo = np.searchsorted(b_e, a_s, side="right")  # first b ending after the a interval starts
    cnt = np.searchsorted(b_s, a_e, side="left")  # ... up to the last b starting before it ends
    cnt -= lo
    np.maximum(cnt, 0, out=cnt)
    n = int(cnt.sum())
    if n == 0:
        return empty()
    ia = np.repeat(np.arange(len(a_s)), cnt)
    jb = np.arange(n, dtype=np.int64)
    first = np.cumsum(cnt)
    first -= cnt
    first -= lo
    jb -= np.repeat(first, cnt)  # lo of its a interval, plus its rank among that interval's pairs
    del first, lo, cnt
    starts = np.maximum(a_s[ia], b_s[jb])
    ends = np.minimum(a_e[ia], b_e[jb])
    del ia, jb
    keep = ends > starts
    if not keep.all():
        starts, ends = starts[keep], ends[keep]
    return starts, ends


def subtract(a: Intervals, b: Intervals) -> Intervals:
    """Parts of merged set ``a`` not covered by merged set ``b``: ``a`` intersected with the
    gaps of ``b`` (open-ended before its first and after its last interval)."""
    if len(a[0]) == 0 or len(b[0]) == 0:
        return a
    lim = np.iinfo(np.int64)
    gs = np.r_[np.int64(lim.min), np.asarray(b[1], np.int64)]
    ge = np.r_[np.asarray(b[0], np.int64), np.int64(lim.max)]
    keep = ge > gs
    if not keep.all():
        gs, ge = gs[keep], ge[keep]
    return intersect(a, (gs, ge))


class Coverage:
    """A merged interval set with its prefix sums, so that the covered length of many
    intervals, asked in many calls (one per window, per step), costs O(log n) each instead of
    one pass over the set per call."""

    __slots__ = ("starts", "ends", "cum")

    def __init__(self, cover: Intervals) -> None:
        self.starts, self.ends = cover
        self.cum = np.r_[0, np.cumsum(self.ends - self.starts)]  # covered length before interval k

    def overlap_each(self, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
        """For each interval ``[starts[i], ends[i])``, the length the set covers."""
        starts = np.asarray(starts, dtype=np.int64)
        ends = np.asarray(ends, dtype=np.int64)
        if len(starts) == 0 or len(self.starts) == 0:
            return np.zeros(len(starts), dtype=np.int64)
        if len(starts) <= _BLOCK:
            return self._covered_before(ends) - self._covered_before(starts)
        out = np.empty(len(starts), dtype=np.int64)  # in blocks: each lookup holds a few temporaries
        for lo in range(0, len(starts), _BLOCK):
            hi = lo + _BLOCK
            out[lo:hi] = self._covered_before(ends[lo:hi]) - self._covered_before(starts[lo:hi])
        return out

    def _covered_before(self, t: np.ndarray) -> np.ndarray:
        # covered length in (-inf, t)
        cs, ce = self.starts, self.ends
        k = np.searchsorted(cs, t, side="right")  # cover intervals starting at or before t
        last = np.maximum(k - 1, 0)
        partial = np.where(k > 0, np.clip(ce[last] - t, 0, None), 0)
        return self.cum[k] - partial


def overlap_each(starts: np.ndarray, ends: np.ndarray, cover: Intervals) -> np.ndarray:
    """For each interval ``[starts[i], ends[i])``, the length covered by merged set ``cover``
    (one call; a caller asking about the same set again and again keeps a :class:`Coverage`)."""
    if len(starts) == 0 or len(cover[0]) == 0:
        return np.zeros(len(starts), dtype=np.int64)
    return Coverage(cover).overlap_each(starts, ends)


def gaps(iv: Intervals, lo: int | None = None, hi: int | None = None) -> Intervals:
    """Uncovered stretches of a merged set inside ``[lo, hi)`` (defaults: the set's span)."""
    s, e = iv
    if len(s) == 0:
        if lo is None or hi is None or hi <= lo:
            return empty()
        return np.array([lo], dtype=np.int64), np.array([hi], dtype=np.int64)
    lo = int(s[0]) if lo is None else lo
    hi = int(e[-1]) if hi is None else hi
    gs = np.r_[lo, e]
    ge = np.r_[s, hi]
    gs = np.maximum(gs, lo)
    ge = np.minimum(ge, hi)
    keep = ge > gs
    return gs[keep], ge[keep]


def percentile(values: np.ndarray, q: float) -> float:
    """Percentile with linear interpolation (numpy's default, same as pandas and HTA)."""
    if len(values) == 0:
        return float("nan")
    return float(np.percentile(np.asarray(values, dtype=np.float64), q))


def union_length_by_group(group: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Union length of the intervals of each group, for all groups at once.

    Returns ``(groups, lengths)`` with ``groups`` sorted ascending. Each group's intervals are
    shifted onto a private stretch of a common axis (rebased at the group's first start and
    laid end to end), so one global :func:`merge` never joins intervals of different groups
    and nothing overflows int64 however far apart the groups lie in time.
    """
    group = np.asarray(group)
    if len(group) <= _BLOCK:
        return _union_length_by_group(group, starts, ends)
    # groups never share a union: whole groups at a time, ~a block of rows each, so the shifted
    # copies and the merge below hold a block's rows instead of every row
    order = np.argsort(group, kind="stable")
    g = group[order]
    out_g, out_len = [], []
    lo = 0
    while lo < len(g):
        hi = min(lo + _BLOCK, len(g))
        if hi < len(g):
            cut = int(np.searchsorted(g, g[hi], side="left"))  # back to the start of the group at hi
            hi = cut if cut > lo else int(np.searchsorted(g, g[hi], side="right"))  # or past a huge group
        rows = order[lo:hi]
        ug, lengths = _union_length_by_group(g[lo:hi], np.asarray(starts)[rows], np.asarray(ends)[rows])
        out_g.append(ug)
        out_len.append(lengths)
        lo = hi
    return np.concatenate(out_g), np.concatenate(out_len)


def _union_length_by_group(group: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    group = np.asarray(group, dtype=np.int64)
    starts = np.asarray(starts, dtype=np.int64)
    ends = np.maximum(np.asarray(ends, dtype=np.int64), starts)
    if len(group) == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    ug, inv = np.unique(group, return_inverse=True)
    inv = inv.reshape(-1)
    gmin = np.full(len(ug), np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(gmin, inv, starts)
    gmax = np.full(len(ug), np.iinfo(np.int64).min, dtype=np.int64)
    np.maximum.at(gmax, inv, ends)
    span = gmax.astype(np.float64) - gmin.astype(np.float64) + 1
    if float(span.sum()) >= 2.0**62:
        # groups far apart or times near the int64 ends (damaged input): laid end to end they
        # would overflow; merge on the times' ranks instead (same order, same blocks)
        return ug, _union_length_by_group_ranked(inv, len(ug), starts, ends)
    span = gmax - gmin + 1
    offset = np.r_[0, np.cumsum(span)[:-1]]
    shift = offset[inv] - gmin[inv]
    ms, me = merge(starts + shift, ends + shift)
    owner = np.searchsorted(offset, ms, side="right") - 1
    lengths = np.bincount(owner, weights=(me - ms).astype(np.float64), minlength=len(ug))
    # float64 bincount is exact below 2**53 ns (104 days) per group
    return ug, np.rint(lengths).astype(np.int64)


def _union_length_by_group_ranked(inv: np.ndarray, n_groups: int, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    values, ranks = np.unique(np.concatenate([starts, ends]), return_inverse=True)
    ranks = ranks.reshape(-1).astype(np.int64)
    n = len(starts)
    width = np.int64(len(values) + 1)
    rs, re_ = ranks[:n] + inv * width, ranks[n:] + inv * width
    ms, me = merge(rs, re_)
    owner = ms // width
    # back to ns, in Python ints where a length could pass int64 (a hostile -2**63 .. 2**63 span)
    lengths = [0] * n_groups
    for o, a, b in zip(owner.tolist(), (ms % width).tolist(), (me % width).tolist()):
        lengths[o] += int(values[b]) - int(values[a])
    return np.array([min(x, (1 << 63) - 1) for x in lengths], dtype=np.int64)
