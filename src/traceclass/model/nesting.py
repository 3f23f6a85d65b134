"""Vectorized structure of interval tables: nesting per thread, containment queries, key joins.

No per-row Python objects: threads are looped over (there are few), rows never are, except
in the repair path for a thread whose intervals overlap without nesting.
"""

from __future__ import annotations

import numpy as np

from traceclass.model.table import BLOCK_ROWS


def group_ids(*keys: np.ndarray) -> tuple[np.ndarray, int]:
    """Dense group id per row for the combination of ``keys`` (ids ordered by key value)."""
    n = len(keys[0])
    if n == 0:
        return np.zeros(0, dtype=np.int64), 0
    order = np.lexsort(keys[::-1])
    change = np.zeros(n, dtype=bool)
    change[0] = True
    for k in keys:
        ks = k[order]
        change[1:] |= ks[1:] != ks[:-1]
    gid_sorted = np.cumsum(change) - 1
    out = np.empty(n, dtype=np.int64)
    out[order] = gid_sorted
    return out, int(gid_sorted[-1]) + 1


def lookup(table_keys: np.ndarray, query_keys: np.ndarray, missing: int = -1) -> np.ndarray:
    """Row index in ``table_keys`` of each query key (first occurrence), ``missing`` if absent."""
    table_keys = np.asarray(table_keys)
    query_keys = np.asarray(query_keys)
    if len(table_keys) == 0 or len(query_keys) == 0:
        return np.full(len(query_keys), missing, dtype=np.int64)
    # searched through the sort order (no sorted copy of the table), the answer built in the
    # positions' own array: the table's order and two query-sized arrays at most
    order = np.argsort(table_keys, kind="stable")
    pos = np.searchsorted(table_keys, query_keys, side="left", sorter=order)
    np.minimum(pos, len(table_keys) - 1, out=pos)
    np.take(order, pos, out=pos)
    del order
    pos = pos.astype(np.int64, copy=False)
    pos[table_keys[pos] != query_keys] = missing
    return pos


def lookup2(
    table_a: np.ndarray, table_b: np.ndarray, query_a: np.ndarray, query_b: np.ndarray
) -> np.ndarray:
    """Like :func:`lookup` for a two-column key (a, b)."""
    if len(table_a) == 0 or len(query_a) == 0:
        return np.full(len(query_a), -1, dtype=np.int64)
    # each column coded by the table's distinct values (few: threads, processes), so a pair is
    # one dense code, answered from a code -> first row array; O(queries log table) and about
    # three query-sized arrays, where grouping the queries with the table sorted them all and
    # held a dozen such arrays (GBs at 10 GB of trace)
    ua, ub = np.unique(table_a), np.unique(table_b)
    table_code = np.searchsorted(ua, table_a) * len(ub) + np.searchsorted(ub, table_b)
    codes, first_row = np.unique(table_code, return_index=True)
    n_codes = len(ua) * len(ub)
    code = np.searchsorted(ua, query_a)
    np.minimum(code, len(ua) - 1, out=code)
    known = ua[code] == query_a
    ib = np.searchsorted(ub, query_b)
    np.minimum(ib, len(ub) - 1, out=ib)
    known &= ub[ib] == query_b
    code *= len(ub)
    code += ib
    del ib
    if n_codes > 4 * len(table_a) + (1 << 20):  # a sparse pair space: search the codes instead
        code[~known] = -1
        return lookup(table_code, code)
    row = np.full(n_codes + 1, -1, dtype=np.int64)  # the last slot answers unknown pairs
    row[codes] = first_row
    code[~known] = n_codes
    return row[code]


def nest(
    pid: np.ndarray, tid: np.ndarray, start: np.ndarray, end: np.ndarray
) -> tuple[np.ndarray, np.ndarray, int]:
    """Parent row and depth of each interval among the intervals of its own thread.

    Intervals are nested by containment; on equal starts the longer one is the parent.
    Returns ``(parent, depth, repaired)`` where ``repaired`` counts rows whose interval
    overlapped a sibling without nesting (they are treated as ending with their parent).
    """
    n = len(start)
    parent = np.full(n, -1, dtype=np.int32)
    depth = np.zeros(n, dtype=np.int16)
    if n == 0:
        return parent, depth, 0
    thread, n_threads = group_ids(pid, tid)
    # thread-major, start ascending, longer first on ties
    neg_dur = end - start
    np.negative(neg_dur, out=neg_dur)
    order = np.lexsort((neg_dur, start, thread))
    del neg_dur
    if n_threads > 1:
        bounds = np.flatnonzero(np.diff(thread[order])) + 1
        bounds_lo, bounds_hi = np.r_[0, bounds].tolist(), np.r_[bounds, n].tolist()
    else:
        bounds_lo, bounds_hi = [0], [n]
    del thread
    repaired = 0
    for lo, hi in zip(bounds_lo, bounds_hi):
        rows = order[lo:hi]
        s_t, e_t = start[rows], end[rows]
        p, d, ok = _nest_sorted(s_t, e_t)
        if not ok:
            p, d, fixed = _nest_repaired(s_t, e_t)
            repaired += fixed
        del s_t, e_t
        none = p < 0
        np.maximum(p, 0, out=p)
        up = rows[p]
        del p
        up[none] = -1
        del none
        parent[rows] = up
        depth[rows] = d
        del up, d
    return parent, depth, repaired


def _nest_sorted(s: np.ndarray, e: np.ndarray) -> tuple[np.ndarray, np.ndarray, bool]:
    """Nesting of one thread's intervals sorted by (start, -duration). Fast path."""
    m = len(s)
    # every temporary here is one array the size of the thread: at 10 GB of trace the main
    # thread holds tens of millions of ops, so each one is hundreds of MB
    ends_sorted = np.sort(e)
    closed = np.searchsorted(ends_sorted, s, side="right")
    del ends_sorted
    # intervals ending at or before s_i are closed when i opens, except zero-length ones that
    # start at s_i and come at or after i in the order (they sort last among equal starts)
    cum_zero = np.zeros(m + 1, dtype=np.int64)
    np.cumsum(e == s, out=cum_zero[1:])
    if cum_zero[-1]:
        group_end = np.searchsorted(s, s, side="right")
        closed -= cum_zero[group_end]
        del group_end
        closed += cum_zero[:m]
    del cum_zero
    d = np.arange(m, dtype=np.int64)
    d -= closed
    del closed
    if m and (d.min() < 0):
        return np.full(m, -1), np.zeros(m, dtype=np.int16), False
    parent = np.full(m, -1, dtype=np.int64)
    maxd = int(d.max()) if m else 0
    # rows grouped by depth once (stable: ascending within a level), so each level is a slice
    # and deep stacks cost O(m log m), not O(m x depth)
    by_depth = np.argsort(d, kind="stable")
    level_at = np.zeros(maxd + 2, dtype=np.int64)
    np.cumsum(np.bincount(d, minlength=maxd + 1), out=level_at[1:])
    for level in range(1, maxd + 1):
        child = by_depth[level_at[level]:level_at[level + 1]]
        cand = by_depth[level_at[level - 1]:level_at[level]]
        if len(cand) == 0:
            return parent, d.astype(np.int16), False
        k = np.searchsorted(cand, child, side="right") - 1
        if (k < 0).any():
            return parent, d.astype(np.int16), False
        parent[child] = cand[k]
    del by_depth
    # verify containment: the child starts inside its parent and does not outlive it (in
    # blocks, so the check holds a block's temporaries, not the thread's)
    ok = True
    for lo in range(0, m, _BLOCK):
        p = parent[lo:lo + _BLOCK]
        has = np.flatnonzero(p >= 0)
        pp = p[has]
        has += lo
        if not (np.all(s[pp] <= s[has]) and np.all(e[pp] >= e[has])):
            ok = False
            break
    return parent, d.astype(np.int16), ok


#: rows (checks, ancestor walks) or queries (containment) per block, where doing the whole
#: table at once would make a dozen table-sized temporaries; each block is independent
_BLOCK = BLOCK_ROWS


def _nest_repaired(s: np.ndarray, e: np.ndarray, rounds: int = 16) -> tuple[np.ndarray, np.ndarray, int]:
    """Nesting when some intervals outlive their parent (µs rounding, clock skew).

    A child that starts inside its parent but ends after it is clipped to the parent's end
    and the nesting recomputed, a few vectorized rounds; the stack walk is the last resort.
    """
    e_eff = e.copy()
    clipped = np.zeros(len(s), dtype=bool)
    for _ in range(rounds):
        p, d, ok = _nest_sorted(s, e_eff)
        if ok:
            return p, d, int(clipped.sum())
        has = p >= 0
        pp = np.where(has, p, 0)
        over = has & (s >= s[pp]) & (s < e_eff[pp]) & (e_eff > e_eff[pp])
        if not over.any():
            break
        e_eff[over] = e_eff[pp[over]]
        clipped |= over
    return _nest_sorted_slow(s, e)


def _nest_sorted_slow(s: np.ndarray, e: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """Stack-based nesting for a thread with overlapping intervals; clips children to parents."""
    m = len(s)
    parent = np.full(m, -1, dtype=np.int64)
    depth = np.zeros(m, dtype=np.int16)
    stack: list[int] = []
    eff_end: list[int] = []
    fixed = 0
    s_l = s.tolist()
    e_l = e.tolist()
    for i in range(m):
        while stack and eff_end[-1] <= s_l[i]:
            stack.pop()
            eff_end.pop()
        end_i = e_l[i]
        if stack:
            parent[i] = stack[-1]
            if end_i > eff_end[-1]:
                end_i = eff_end[-1]
                fixed += 1
        depth[i] = len(stack)
        stack.append(i)
        eff_end.append(end_i)
    return parent, depth, fixed


def innermost_containing(
    iv_pid: np.ndarray,
    iv_tid: np.ndarray,
    iv_start: np.ndarray,
    iv_end: np.ndarray,
    iv_depth: np.ndarray,
    q_pid: np.ndarray,
    q_tid: np.ndarray,
    q_time: np.ndarray,
) -> np.ndarray:
    """For each query point, the deepest interval of the same thread with start <= t <= end.

    Returns row indices into the interval table, -1 where no interval contains the point.
    """
    if len(q_time) == 0 or len(iv_start) == 0:
        return np.full(len(q_time), -1, dtype=np.int64)
    return ContainmentIndex(iv_pid, iv_tid, iv_start, iv_end, iv_depth).query(q_pid, q_tid, q_time)


class ContainmentIndex:
    """:func:`innermost_containing` split into a build (sorting the intervals, O(n log n),
    once) and queries (O(q log n) plus a loop over (thread, depth) groups), for callers that
    ask many small questions of one table."""

    def __init__(self, iv_pid: np.ndarray, iv_tid: np.ndarray, iv_start: np.ndarray, iv_end: np.ndarray,
                 iv_depth: np.ndarray) -> None:
        self.n = len(iv_start)
        self.start = np.asarray(iv_start)
        self.end = np.asarray(iv_end)
        # threads as sorted unique (pid, tid) pairs; queries find theirs by binary search
        th, n_th = group_ids(np.asarray(iv_pid, dtype=np.int64), np.asarray(iv_tid, dtype=np.int64))
        first = np.zeros(n_th, dtype=np.int64)
        first[th[::-1]] = np.arange(self.n - 1, -1, -1)
        self.th_pid = np.asarray(iv_pid, dtype=np.int64)[first]
        self.th_tid = np.asarray(iv_tid, dtype=np.int64)[first]
        del first
        depth = np.asarray(iv_depth)
        # intervals of one thread at one depth are disjoint: one sorted run per (thread, depth)
        order = np.lexsort((self.start, depth, th))
        th_s = th[order]
        del th
        change = np.diff(th_s) != 0
        d_s = depth[order]
        change |= np.diff(d_s) != 0
        cut = np.flatnonzero(change) + 1
        del change
        lo_hi = list(zip(np.r_[0, cut].tolist(), np.r_[cut, self.n].tolist())) if self.n else []
        self.groups = [(int(th_s[lo]), int(d_s[lo]), order[lo:hi], self.start[order[lo:hi]]) for lo, hi in lo_hi]

    def threads_of(self, q_pid: np.ndarray, q_tid: np.ndarray) -> np.ndarray:
        """Thread number of each query's (pid, tid) in this index, -1 when it has no intervals."""
        # the (pid, tid) pairs are unique and sorted: the first row of a pair is its number
        return lookup2(self.th_pid, self.th_tid, np.asarray(q_pid, dtype=np.int64), np.asarray(q_tid, dtype=np.int64))

    def query(self, q_pid: np.ndarray, q_tid: np.ndarray, q_time: np.ndarray) -> np.ndarray:
        nq = len(q_time)
        out = np.full(nq, -1, dtype=np.int64)
        if nq == 0 or self.n == 0:
            return out
        # in blocks of queries: the per-query temporaries are a block's (the index is shared)
        for lo in range(0, nq, _BLOCK):
            hi = min(lo + _BLOCK, nq)
            out[lo:hi] = self._query(np.asarray(q_pid[lo:hi]), np.asarray(q_tid[lo:hi]), np.asarray(q_time[lo:hi]))
        return out

    def _query(self, q_pid: np.ndarray, q_tid: np.ndarray, q_time: np.ndarray) -> np.ndarray:
        nq = len(q_time)
        out = np.full(nq, -1, dtype=np.int64)
        q_th = self.threads_of(q_pid, q_tid)
        best_depth = np.full(nq, -1, dtype=np.int64)
        q_order = np.argsort(q_th, kind="stable")
        q_th_sorted = q_th[q_order]
        del q_th
        for th, dep, rows, starts in self.groups:
            a = np.searchsorted(q_th_sorted, th, side="left")
            b = np.searchsorted(q_th_sorted, th, side="right")
            if a == b:
                continue
            qs = q_order[a:b]
            t = q_time[qs]
            k = np.searchsorted(starts, t, side="right") - 1
            valid = k >= 0
            cand = rows[np.maximum(k, 0)]
            valid &= self.end[cand] >= t
            better = valid & (dep > best_depth[qs])
            out[qs[better]] = cand[better]
            best_depth[qs[better]] = dep
        return out


def ancestors_until(parent: np.ndarray, start_rows: np.ndarray, accept: np.ndarray) -> np.ndarray:
    """For each row, the nearest row on its parent chain (itself included) where ``accept`` holds.

    ``accept`` is a boolean per row of the table. Returns -1 where no ancestor is accepted.
    A frontier walk for :data:`FRONTIER_ROUNDS` levels, then pointer jumping: linear-log
    in the depth, never one pass per level of a deep chain. Start rows are walked in blocks
    (a whole table of them would be a dozen table-sized temporaries); the pointer jumping, when
    some chain needs it, is done once for all blocks.
    """
    start_rows = np.asarray(start_rows)
    out = np.full(len(start_rows), -1, dtype=np.int64)
    jumped: list[np.ndarray] = []  # the pointer-jumping answer for every row, once computed
    for lo in range(0, len(start_rows), _BLOCK):
        out[lo:lo + _BLOCK] = _ancestors_block(parent, start_rows[lo:lo + _BLOCK], accept, jumped)
    return out


def _ancestors_block(parent: np.ndarray, start_rows: np.ndarray, accept: np.ndarray,
                     jumped: list[np.ndarray]) -> np.ndarray:
    cur = np.asarray(start_rows, dtype=np.int64).copy()
    out = np.full(len(cur), -1, dtype=np.int64)
    active = cur >= 0
    for _ in range(FRONTIER_ROUNDS):
        if not active.any():
            return out
        rows = cur[active]
        hit = accept[rows]
        idx = np.flatnonzero(active)
        out[idx[hit]] = rows[hit]
        active[idx[hit]] = False
        nxt = parent[rows[~hit]]
        cur[idx[~hit]] = nxt
        active[idx[~hit]] = nxt >= 0
    if active.any():  # deeper than the frontier rounds: finish by pointer jumping
        if not jumped:
            jumped.append(_jump_to_accepted(parent, np.asarray(accept, dtype=bool)))
        idx = np.flatnonzero(active)
        out[idx] = jumped[0][cur[idx]]
    return out


#: Rounds of the frontier walk in :func:`ancestors_until` before it switches to pointer
#: jumping over the whole table: typical trees are shallower, and a 100,000-deep chain then
#: costs log2(depth) passes instead of one numpy pass per level.
FRONTIER_ROUNDS = 64


def _jump_to_accepted(parent: np.ndarray, accept: np.ndarray) -> np.ndarray:
    """Nearest row on each row's parent chain (itself included) where ``accept`` holds, for
    every row, by pointer jumping: O(n log depth) work in O(log depth) passes."""
    n = len(parent)
    res = np.where(accept, np.arange(n, dtype=np.int64), -1)
    anc = np.asarray(parent, dtype=np.int64).copy()
    todo = np.flatnonzero(~accept & (anc >= 0))
    while len(todo):
        a = anc[todo]
        done = accept[a] | (res[a] >= 0) | (anc[a] < 0)
        # an ancestor that is settled hands over its answer; the others are jumped over
        res[todo[done]] = res[a[done]]
        rest = todo[~done]
        anc[rest] = anc[a[~done]]
        todo = rest
    return res


def path_max(parent: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Per row, the maximum of ``values`` over the row and all its ancestors (pointer
    jumping: O(n log depth), whatever the depth)."""
    best = np.asarray(values).copy()
    anc = np.asarray(parent, dtype=np.int64).copy()
    live = np.flatnonzero(anc >= 0)
    while len(live):
        a = anc[live]
        best[live] = np.maximum(best[live], best[a])
        anc[live] = anc[a]
        live = live[anc[live] >= 0]
    return best


def euler_intervals(parent: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(enter, leave) positions of each node in a depth-first walk of the forest: ``u`` is an
    ancestor of ``v`` (or ``v`` itself) exactly when ``enter[u] <= enter[v] < leave[u]``.

    The walk is laid out as a successor list over down/up edges and ranked by pointer
    jumping, so it costs O(n log n) in O(log n) vectorized passes, independent of depth.
    """
    n = len(parent)
    if n == 0:
        z = np.zeros(0, dtype=np.int64)
        return z, z
    parent = np.asarray(parent, dtype=np.int64)
    p = np.where(parent < 0, n, parent)  # roots hang under a virtual node n
    order = np.argsort(p, kind="stable")
    sp = p[order]
    same = sp[1:] == sp[:-1]
    next_sib = np.full(n, -1, dtype=np.int64)
    next_sib[order[:-1][same]] = order[1:][same]
    starts = np.r_[True, ~same]
    first_child = np.full(n + 1, -1, dtype=np.int64)
    first_child[sp[starts]] = order[starts]
    end = 2 * n
    ids = np.arange(n, dtype=np.int64)
    succ = np.empty(end + 1, dtype=np.int64)
    fc = first_child[:n]
    succ[:n] = np.where(fc >= 0, fc, n + ids)  # down(v) -> down(first child) or up(v)
    succ[n:end] = np.where(next_sib >= 0, next_sib, np.where(parent >= 0, n + parent, end))
    succ[end] = end
    dist = (succ != end).astype(np.int64)
    s = succ
    while True:
        live = s != end
        if not live.any():
            break
        dist = dist + np.where(live, dist[s], 0)
        s = s[s]
    pos = end - dist  # steps from the start of the walk
    return pos[:n], pos[n:end]


def has_ancestor_with_same_key(parent: np.ndarray, key: np.ndarray) -> np.ndarray:
    """True where a strict ancestor of the row has the row's ``key`` (e.g. a recursive frame)."""
    n = len(parent)
    if n == 0:
        return np.zeros(0, dtype=bool)
    enter, leave = euler_intervals(parent)
    key = np.asarray(key, dtype=np.int64)
    key = key - key.min()
    span = np.int64(2 * n + 1)
    order = np.lexsort((enter, key))
    k, e, lv = key[order], enter[order], leave[order]
    # within one key, in walk order, an earlier interval either contains this node or ended
    # before it (intervals of a tree nest or are disjoint): a running max of the leave
    # positions tells containment; the key offset keeps keys apart
    run = np.maximum.accumulate(k * span + lv)
    prev = np.r_[np.int64(-1), run[:-1]]
    out = np.zeros(n, dtype=bool)
    out[order] = prev > k * span + e
    return out
