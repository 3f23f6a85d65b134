"""Nesting, containment queries and key joins of the model."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

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


_SMALL = st.integers(-3, 5)


@settings(max_examples=400, deadline=None)
@given(st.lists(st.tuples(_SMALL, _SMALL), max_size=20), st.lists(st.tuples(_SMALL, _SMALL), max_size=30))
def test_lookup2_is_the_first_matching_row(table, query):
    first: dict[tuple[int, int], int] = {}
    for i, k in enumerate(table):
        first.setdefault(k, i)
    ta, tb = (np.array([k[j] for k in table], np.int64) for j in (0, 1))
    qa, qb = (np.array([k[j] for k in query], np.int64) for j in (0, 1))
    assert lookup2(ta, tb, qa, qb).tolist() == [first.get(k, -1) for k in query]


def test_lookup2_many_distinct_values_searches_the_codes():
    # 3,000 distinct values per column: 9 M possible pairs, more than a code -> row array should hold
    rng = np.random.default_rng(7)
    ta, tb = rng.permutation(3_000) * 1_000_003, rng.permutation(3_000) - 1_500
    pick = rng.integers(0, 3_000, 500)
    qa, qb = ta[pick].copy(), tb[pick].copy()
    qb[::7] += 1  # some pairs the table lacks (or another row's)
    first = {}
    for i, k in enumerate(zip(ta.tolist(), tb.tolist())):
        first.setdefault(k, i)
    assert lookup2(ta, tb, qa, qb).tolist() == [first.get(k, -1) for k in zip(qa.tolist(), qb.tolist())]


def test_lookup2_extreme_ids():
    ta, tb = np.array([2**62, -(2**62), 5]), np.array([1, 2**40, -7])
    got = lookup2(ta, tb, np.array([5, 2**62, 2**62, -(2**62)]), np.array([-7, 1, 2, 2**40]))
    assert got.tolist() == [2, 0, -1, 1]


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


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(-5, 5), max_size=30), st.lists(st.integers(-7, 7), max_size=30))
def test_lookup_first_row_of_each_key_against_a_dict(table, queries):
    first: dict[int, int] = {}
    for i, k in enumerate(table):
        first.setdefault(k, i)
    got = lookup(np.array(table, dtype=np.int64), np.array(queries, dtype=np.int64), missing=-9)
    assert got.dtype == np.int64 and got.tolist() == [first.get(q, -9) for q in queries]
