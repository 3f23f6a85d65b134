"""Interval algebra against brute force on a ns grid."""

from __future__ import annotations

import numpy as np
import pytest

from traceclass import timeline as tl


def _mask(starts, ends, n=200):
    m = np.zeros(n, dtype=bool)
    for s, e in zip(starts, ends):
        m[s:e] = True
    return m


def _random(rng, k, n=200):
    s = rng.integers(0, n - 1, k)
    e = np.minimum(s + rng.integers(0, 30, k), n)
    return s.astype(np.int64), e.astype(np.int64)


@pytest.mark.parametrize("seed", range(40))
def test_merge_intersect_subtract_match_brute_force(seed):
    rng = np.random.default_rng(seed)
    a = _random(rng, rng.integers(0, 15))
    b = _random(rng, rng.integers(0, 15))
    ma, mb = _mask(*a), _mask(*b)
    A, B = tl.merge(*a), tl.merge(*b)
    assert tl.total(A) == ma.sum()
    assert (_mask(*A) == ma).all()
    assert np.all(A[0][1:] > A[1][:-1])  # disjoint and not touching
    for got, want in ((tl.intersect(A, B), ma & mb), (tl.subtract(A, B), ma & ~mb)):
        assert (_mask(*got) == want).all()
        assert got[0].dtype == got[1].dtype == np.int64
        assert np.all(got[1] > got[0]) and np.all(got[0][1:] > got[1][:-1])  # merged: disjoint, not touching
    q = _random(rng, 10)
    cov = tl.overlap_each(q[0], q[1], B)
    for s, e, c in zip(*q, cov):
        assert c == mb[s:e].sum()
    g = tl.gaps(A, 0, 200)
    assert (_mask(*g) == ~ma).all()


def test_intersect_subtract_at_the_ends_of_int64():
    lo, hi = np.iinfo(np.int64).min, np.iinfo(np.int64).max
    a = (np.array([lo, 0, hi - 10], dtype=np.int64), np.array([lo + 5, 10, hi], dtype=np.int64))
    b = (np.array([lo + 2, 5], dtype=np.int64), np.array([3, hi - 5], dtype=np.int64))
    i, d = tl.intersect(a, b), tl.subtract(a, b)
    assert i[0].tolist() == [lo + 2, 0, 5, hi - 10] and i[1].tolist() == [lo + 5, 3, 10, hi - 5]
    assert d[0].tolist() == [lo, 3, hi - 5] and d[1].tolist() == [lo + 2, 5, hi]


def test_exact_ns_no_rounding():
    s = np.array([1_712_195_495_519_689_047, 1_712_195_495_519_689_048], dtype=np.int64)
    e = s + np.array([1, 4])  # touching: [x, x+1) and [x+1, x+5)
    assert tl.union_length(s, e) == 5


def test_union_length_by_group_far_apart_groups():
    group = np.array([3, 3, 7, 7, 7, 1])
    s = np.array([0, 5, 10**18, 10**18 + 2, 10**18 + 100, 42], dtype=np.int64)
    e = np.array([10, 8, 10**18 + 5, 10**18 + 3, 10**18 + 101, 42])
    g, length = tl.union_length_by_group(group, s, e)
    assert g.tolist() == [1, 3, 7]
    assert length.tolist() == [0, 10, 6]


def test_clip_and_percentile():
    iv = tl.merge(np.array([0, 20]), np.array([10, 30]))
    c = tl.clip(iv, 5, 25)
    assert c[0].tolist() == [5, 20] and c[1].tolist() == [10, 25]
    assert tl.percentile(np.array([1, 2, 3, 4]), 50) == 2.5
    assert np.isnan(tl.percentile(np.array([]), 50))


def test_duration_text_never_prints_1000_of_a_unit():
    from traceclass.units import duration

    assert [duration(x) for x in (999.4, 999.6, 99_960, 999_600, 999_600_000)] == \
        ["999 ns", "1 µs", "100 µs", "1 ms", "1 s"]


@pytest.mark.parametrize("seed", range(10))
def test_coverage_asked_many_times_matches_brute_force(seed):
    rng = np.random.default_rng(seed)
    b = _random(rng, rng.integers(1, 15))
    mb = _mask(*b)
    cov = tl.Coverage(tl.merge(*b))
    for _ in range(5):  # one set, many questions (TC601 asks once per step and per window)
        q = _random(rng, 8)
        got = cov.overlap_each(*q)
        assert got.tolist() == [int(mb[s:e].sum()) for s, e in zip(*q)]
        assert got.tolist() == tl.overlap_each(q[0], q[1], tl.merge(*b)).tolist()
    assert tl.Coverage(tl.empty()).overlap_each(np.array([0]), np.array([5])).tolist() == [0]
