"""Nesting, containment queries and key joins of the model."""

from __future__ import annotations

import numpy as np

from traceclass.model.nesting import ancestors_until, group_ids, innermost_containing, lookup, lookup2, nest


def test_nest_parents_depths_and_zero_length():
    s = np.array([0, 1, 2, 5, 5, 5, 20, 21])
    e = np.array([10, 4, 3, 9, 5, 7, 30, 22])
    z = np.zeros(8, dtype=np.int64)
    parent, depth, repaired = nest(z, z, s, e)
    assert parent.tolist() == [-1, 0, 1, 0, 5, 3, -1, 6]
    assert depth.tolist() == [0, 1, 2, 1, 3, 2, 0, 1]
    assert repaired == 0


def test_nest_threads_are_independent_and_overlap_is_repaired():
    pid = np.array([1, 1, 1, 2])
    tid = np.array([1, 1, 1, 1])
    s = np.array([0, 5, 12, 1])
    e = np.array([10, 15, 14, 3])
    parent, depth, repaired = nest(pid, tid, s, e)
    assert parent.tolist() == [-1, 0, -1, -1]  # [5,15) clipped to its parent; [12,14) is top level
    assert repaired == 1


def test_innermost_containing_picks_deepest_on_same_thread():
    pid = np.array([1, 1, 1, 1])
    tid = np.array([1, 1, 1, 2])
    s = np.array([0, 2, 4, 0])
    e = np.array([10, 8, 6, 10])
    _, depth, _ = nest(pid, tid, s, e)
    q = innermost_containing(pid, tid, s, e, depth, np.array([1, 1, 1, 1, 1]), np.array([1, 1, 1, 2, 3]),
                             np.array([5, 3, 9, 5, 5]))
    assert q.tolist() == [2, 1, 0, 3, -1]


def test_lookup_and_group_ids():
    assert lookup(np.array([5, 3, 9]), np.array([9, 4, 3])).tolist() == [2, -1, 1]
    assert lookup2(np.array([1, 1, 2]), np.array([7, 8, 7]), np.array([2, 1]), np.array([7, 8])).tolist() == [2, 1]
    g, n = group_ids(np.array([3, 1, 3]), np.array([0, 0, 1]))
    assert n == 3 and g.tolist() == [1, 0, 2]


def test_ancestors_until():
    parent = np.array([-1, 0, 1, 2])
    accept = np.array([True, False, True, False])
    assert ancestors_until(parent, np.array([3, 1, 0]), accept).tolist() == [2, 0, 0]


def test_containment_index_reused_matches_brute_force():
    """One ContainmentIndex answers many queries as a fresh innermost_containing would."""
    import numpy as np

    from traceclass.model.nesting import ContainmentIndex

    rng = np.random.default_rng(7)
    # nested intervals on 3 threads: [s, s+100), children inside
    rows = []
    for th in range(3):
        for k in range(20):
            s = k * 1000
            rows.append((1, th, s, s + 900, 0))
            rows.append((1, th, s + 100, s + 500, 1))
    pid, tid, start, end, depth = (np.array(c, dtype=np.int64) for c in zip(*rows))
    index = ContainmentIndex(pid, tid, start, end, depth)
    for _ in range(5):
        q_tid = rng.integers(0, 4, 50)  # thread 3 has no intervals
        q_t = rng.integers(0, 21000, 50)
        got = index.query(np.ones(50, dtype=np.int64), q_tid, q_t)
        for g, qt, t in zip(got.tolist(), q_tid.tolist(), q_t.tolist()):
            inside = [i for i in range(len(rows)) if tid[i] == qt and start[i] <= t <= end[i]]
            want = max(inside, key=lambda i: depth[i]) if inside else -1
            assert g == want
    empty = np.zeros(0, dtype=np.int64)
    assert ContainmentIndex(empty, empty, empty, empty, empty).query(
        np.array([1]), np.array([1]), np.array([5])).tolist() == [-1]
