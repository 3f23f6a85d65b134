"""The noise statistic against independent computations: brute-force permutation enumeration
for the exact Mann-Whitney p-value, mpmath for Student's t, textbook values for the rule."""

from __future__ import annotations

import itertools
import math

import mpmath
import numpy as np
import pytest

from traceclass.compare import noise


def _brute_mw_p(x, y):
    """Enumerate every split of the pooled sample: P(|W - E W| >= |w - E W|) with mid-ranks."""
    pooled = np.concatenate([x, y])
    n1, n = len(x), len(pooled)
    order = np.argsort(pooled, kind="mergesort")
    ranks = np.empty(n)
    sv = pooled[order]
    i = 0
    while i < n:
        j = i
        while j + 1 < n and sv[j + 1] == sv[i]:
            j += 1
        ranks[order[i:j + 1]] = (i + j) / 2 + 1
        i = j + 1
    mean = n1 * (n + 1) / 2
    obs = abs(ranks[:n1].sum() - mean)
    hits = total = 0
    for comb in itertools.combinations(range(n), n1):
        total += 1
        hits += abs(ranks[list(comb)].sum() - mean) >= obs - 1e-9
    return hits / total


@pytest.mark.parametrize("seed", range(12))
def test_exact_mann_whitney_equals_enumeration(seed):
    rng = np.random.default_rng(seed)
    n1, n2 = int(rng.integers(2, 7)), int(rng.integers(2, 7))
    x = rng.normal(10, 1, n1).round(1)  # rounding makes ties likely
    y = rng.normal(10.5, 1, n2).round(1)
    assert noise.mann_whitney_p(x, y) == pytest.approx(_brute_mw_p(x, y), abs=1e-12)


def test_mann_whitney_textbook_values():
    # fully separated 5 vs 5: two of the C(10,5)=252 splits are as extreme -> 2/252
    assert noise.mann_whitney_p([1, 2, 3, 4, 5], [6, 7, 8, 9, 10]) == pytest.approx(2 / 252)
    # identical samples: nothing is more central than the observed split
    assert noise.mann_whitney_p([3, 3, 3], [3, 3, 3]) == 1.0
    assert noise.mann_whitney_p([1, 2, 3], [1, 2, 3]) == 1.0


@pytest.mark.parametrize("seed", range(10))
def test_normal_approximation_close_to_exact_for_large_samples(seed):
    rng = np.random.default_rng(seed)
    x, y = rng.normal(0, 1, 40), rng.normal(0.35, 1, 40)  # 80 > EXACT_MAX_N: approximation
    p_approx = noise.mann_whitney_p(x, y)
    ranks2, _ = noise._doubled_midranks(np.concatenate([x, y]))
    p_exact = noise._exact_rank_sum_p(ranks2, 40, int(ranks2[:40].sum()), 40 * 81)  # forced exact
    assert p_approx == pytest.approx(p_exact, abs=0.003)


@pytest.mark.parametrize("t, df", [(0.5, 1.0), (2.0, 3.0), (-3.1, 2.4), (1.96, 1000.0), (12.0, 4.7), (0.0, 5.0)])
def test_student_t_against_mpmath(t, df):
    x = df / (df + t * t)
    expected = float(mpmath.betainc(df / 2, 0.5, 0, x, regularized=True))
    assert noise.student_t_two_sided_p(t, df) == pytest.approx(expected, rel=1e-9, abs=1e-14)


def test_welch_against_hand_computation():
    x, y = [10.0, 11.0, 12.0], [14.0, 15.5, 13.5]
    m1, m2 = np.mean(x), np.mean(y)
    v1, v2 = np.var(x, ddof=1) / 3, np.var(y, ddof=1) / 3
    t = (m2 - m1) / math.sqrt(v1 + v2)
    df = (v1 + v2) ** 2 / (v1 ** 2 / 2 + v2 ** 2 / 2)
    expected = float(mpmath.betainc(df / 2, 0.5, 0, df / (df + t * t), regularized=True))
    assert noise.welch_p(x, y) == pytest.approx(expected, rel=1e-9)


def test_rule_labels():
    base = [9.42, 9.52, 9.60, 9.69, 10.08]
    cand = [5.43, 4.99, 4.90, 4.81, 4.76]
    c = noise.judge(base, cand, 9.60, 4.90)
    assert (c.label, c.test, c.noise_known) == (noise.FASTER, noise.MANN_WHITNEY, True)
    assert c.p_value == pytest.approx(2 / 252)
    assert noise.judge(cand, base, 4.90, 9.60).label == noise.SLOWER
    # the same samples: within noise
    assert noise.judge(base, base, 9.60, 9.60).label == noise.WITHIN
    # overlapping samples: within noise
    assert noise.judge(base, [9.5, 9.7, 9.45, 10.1, 9.58], 9.60, 9.58).label == noise.WITHIN
    # significant but tiny: within noise by the practical threshold
    tiny = noise.judge([100, 100.1, 100.2, 100.3, 100.4], [101, 101.1, 101.2, 101.3, 101.4], 100.2, 101.2)
    assert tiny.label == noise.WITHIN and tiny.p_value < noise.ALPHA
    # quantities that are not times use higher/lower
    assert noise.judge(base, cand, 9.60, 4.90, time_like=False).label == noise.LOWER


def test_few_samples_use_welch_and_single_samples_the_fallback():
    c = noise.judge([10.0, 10.1, 9.9], [13.0, 13.1, 12.9], 10.0, 13.0)  # 3 v 3: MW cannot reach 0.05
    assert c.test == noise.WELCH and c.label == noise.SLOWER
    one = noise.judge([10.0], [10.5], 10.0, 10.5)
    assert (one.label, one.noise_known, one.test) == (noise.WITHIN, False, noise.NO_TEST)
    assert "noise unknown" in one.reason
    big = noise.judge([10.0], [13.0], 10.0, 13.0)
    assert big.label == noise.SLOWER and not big.noise_known


def test_min_two_sided_p_decides_the_test():
    assert noise._min_two_sided_p(3, 3) == pytest.approx(0.1)
    assert noise._min_two_sided_p(4, 4) == pytest.approx(2 / 70)
    assert noise._min_two_sided_p(3, 5) < noise.ALPHA < noise._min_two_sided_p(3, 4)


def test_shares_are_judged_in_points():
    # one value per run: busy 91.9% -> 99.0% and idle 8.1% -> 1.0% are the same 7.1-point move
    busy = noise.judge([], [], 91.9, 99.0, time_like=False, points=True)
    idle = noise.judge([], [], 8.1, 1.0, time_like=False, points=True)
    assert busy.label == idle.label == noise.WITHIN  # under the 10-point single-sample threshold
    assert busy.reason == "one value per run: noise unknown"
    assert noise.judge([], [], 60.0, 75.0, time_like=False, points=True).label == noise.HIGHER
    # relative judgement of the same idle share would call an 88% drop
    assert noise.judge([], [], 8.1, 1.0, time_like=False).label == noise.LOWER


def test_p_value_text_reads_as_one_relation():
    assert noise.p_text(0.0079) == "p = 0.008"
    assert noise.p_text(0.41) == "p = 0.41"
    assert noise.p_text(1e-6) == "p < 0.001"  # not "p = < 0.001"
    far = noise.judge([10.0 + 0.01 * k for k in range(20)], [20.0 + 0.01 * k for k in range(20)], 10.1, 20.1)
    assert far.reason == "p < 0.001"

