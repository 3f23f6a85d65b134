"""Is a difference between two runs beyond noise? The statistic and the rule, in one place.

Inputs are repeated measurements of one quantity in each run: the wall time of every
steady-state step (or stage occurrence), the time an op group took in every step. Steps of one
run are not independent in a strict sense (caches warm, clocks drift), so the tests below are a
screen against run-to-run jitter, not a proof.

The rule (``RULE`` is its one-line statement, printed in every output):

1. **Test** (both runs have at least 2 samples): a two-sided **Mann-Whitney U** test (the
   Wilcoxon rank-sum test; distribution-free, robust to a single slow step), exact
   (permutation distribution of the rank sum, ties as mid-ranks) up to ``EXACT_MAX_N``
   samples in all, normal approximation with tie and continuity correction above. With very
   few samples no arrangement of ranks can reach ``p < ALPHA`` (3 against 3 steps: the
   smallest two-sided p is 0.1), so when ``2 / C(n1 + n2, n1) > ALPHA`` **Welch's t-test**
   is used instead (it assumes roughly normal noise, which is the price of deciding anything
   from 2-3 steps).
2. **Beyond noise** = ``p < ALPHA`` (95% confidence) **and** ``|delta| >= MIN_EFFECT_PCT`` of
   the baseline value (a significant 0.3% shift is real but not worth reporting).
3. **Fallback** (a run has a single sample, e.g. a trace of one step): the spread is unknown;
   the delta counts as a change only when ``|delta| >= SINGLE_SAMPLE_PCT`` of the baseline
   (an assumption about run-to-run noise on one machine, stated as such), and the result says
   "single sample: noise unknown" ("one value per run" for figures with no samples at all).

For shares in percent (GPU busy share), both size thresholds are percentage points.

Labels: times get ``faster`` / ``slower`` / ``within noise``; other quantities (shares,
bytes) ``higher`` / ``lower`` / ``within noise`` (whether higher is better depends on the metric).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Sequence

import numpy as np

from traceclass.report.enums import NoiseBasis

ALPHA = 0.05
CONFIDENCE_PCT = 95
MIN_EFFECT_PCT = 2.0
SINGLE_SAMPLE_PCT = 10.0
EXACT_MAX_N = 60

FASTER, SLOWER, WITHIN = "faster", "slower", "within noise"
SINGLE_RUN = "single run, noise unknown"
_UNKNOWN_REASON = {
    NoiseBasis.SINGLE_RUN: SINGLE_RUN,
    NoiseBasis.ONE_VALUE_PER_RUN: "one value per run: noise unknown",
    NoiseBasis.SINGLE_SAMPLE: "single sample: noise unknown",
}
HIGHER, LOWER = "higher", "lower"

MANN_WHITNEY = "Mann-Whitney U"
WELCH = "Welch t"
NO_TEST = "none"

RULE = (
    f"beyond noise = two-sided Mann-Whitney U test on the per-step (per-occurrence) samples, "
    f"p < {ALPHA:g} ({CONFIDENCE_PCT}% confidence; exact up to {EXACT_MAX_N} samples), and "
    f"|Δ| ≥ {MIN_EFFECT_PCT:g}% of the baseline; Welch's t-test when the samples are too few for "
    f"Mann-Whitney to reach p < {ALPHA:g}; with a single sample in a run the noise is unknown and "
    f"|Δ| ≥ {SINGLE_SAMPLE_PCT:g}% counts as a change (for shares: percentage points instead of %)"
)


@dataclasses.dataclass(frozen=True)
class NoiseCall:
    label: str  # faster / slower / within noise (or higher / lower / within noise)
    test: str  # MANN_WHITNEY, WELCH or NO_TEST
    p_value: float | None
    n_baseline: int
    n_candidate: int
    noise_known: bool  # False: a run had a single sample, the fallback rule decided
    reason: str  # short plain text: "p = 0.008", "p < 0.001", "single sample: noise unknown"
    basis: NoiseBasis = NoiseBasis.TESTED  # what decided the label (renderers branch on this, not on reason)

    @property
    def beyond_noise(self) -> bool:
        return self.label != WITHIN


def judge(
    baseline: Sequence[float],
    candidate: Sequence[float],
    baseline_value: float | None,
    candidate_value: float | None,
    time_like: bool = True,
    points: bool = False,
    single_run: bool = False,
) -> NoiseCall:
    """Label the change ``baseline_value -> candidate_value`` using the spread of the samples.

    ``baseline_value`` / ``candidate_value`` are the figures shown (a P50, a mean); the samples
    are what they summarise. ``None`` values (metric absent) are within noise by definition.
    ``single_run``: the figures summarise a whole run that has no repeated unit to sample (a
    sampled CPU profile): the fallback rule decides, and the reason says so (``SINGLE_RUN``).
    """
    if single_run:
        baseline, candidate = (), ()
    b = np.asarray([x for x in baseline if x is not None and math.isfinite(x)], dtype=np.float64)
    c = np.asarray([x for x in candidate if x is not None and math.isfinite(x)], dtype=np.float64)
    nb, nc = len(b), len(c)
    up, down = (SLOWER, FASTER) if time_like else (HIGHER, LOWER)
    if baseline_value is None or candidate_value is None:
        return NoiseCall(WITHIN, NO_TEST, None, nb, nc, False, "not measured in both runs", NoiseBasis.NOT_MEASURED)
    delta = float(candidate_value) - float(baseline_value)
    direction = up if delta > 0 else down
    if delta == 0:
        return NoiseCall(WITHIN, NO_TEST, None, nb, nc, nb >= 2 and nc >= 2, "no change", NoiseBasis.NO_CHANGE)
    if points:
        rel = abs(delta)
    else:
        rel = abs(delta) / abs(baseline_value) * 100.0 if baseline_value else math.inf
    if nb < 2 or nc < 2:
        label = direction if rel >= SINGLE_SAMPLE_PCT else WITHIN
        basis = NoiseBasis.SINGLE_RUN if single_run else \
            NoiseBasis.ONE_VALUE_PER_RUN if nb == 0 and nc == 0 else NoiseBasis.SINGLE_SAMPLE
        return NoiseCall(label, NO_TEST, None, nb, nc, False, _UNKNOWN_REASON[basis], basis)
    if _min_two_sided_p(nb, nc) <= ALPHA:
        test, p = MANN_WHITNEY, mann_whitney_p(b, c)
    else:
        test, p = WELCH, welch_p(b, c)
    if p >= ALPHA:
        return NoiseCall(WITHIN, test, p, nb, nc, True, p_text(p))
    if rel < MIN_EFFECT_PCT:
        return NoiseCall(WITHIN, test, p, nb, nc, True, f"{p_text(p)} but |Δ| < {MIN_EFFECT_PCT:g}%")
    return NoiseCall(direction, test, p, nb, nc, True, p_text(p))


def p_text(p: float) -> str:
    """``p = 0.008``, ``p = 0.41``; below 0.001 ``p < 0.001``."""
    if p < 0.001:
        return "p < 0.001"
    return f"p = {p:.3f}" if p < 0.1 else f"p = {p:.2f}"


def _min_two_sided_p(n1: int, n2: int) -> float:
    """Smallest two-sided exact Mann-Whitney p-value for these sample sizes (no ties)."""
    # int / int is exact and underflows to 0.0; 2.0 / C(n, k) overflows converting C past 1e308
    return min(1.0, 2 / math.comb(n1 + n2, n1))


# --------------------------------------------------------------------------- Mann-Whitney


def _doubled_midranks(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mid-ranks times two (integers), and the sizes of the tie blocks."""
    order = np.argsort(values, kind="mergesort")
    v = values[order]
    n = len(v)
    ranks2 = np.empty(n, dtype=np.int64)
    cut = np.r_[0, np.flatnonzero(np.diff(v) != 0) + 1, n]
    for lo, hi in zip(cut[:-1].tolist(), cut[1:].tolist()):
        ranks2[order[lo:hi]] = lo + hi + 1  # 2 x mean of the 1-based ranks lo+1 .. hi
    return ranks2, np.diff(cut)


def mann_whitney_p(x: Sequence[float], y: Sequence[float]) -> float:
    """Two-sided p-value of the Mann-Whitney U (rank-sum) test of ``x`` against ``y``."""
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    n1, n2 = len(x), len(y)
    if n1 == 0 or n2 == 0:
        return 1.0
    n = n1 + n2
    ranks2, ties = _doubled_midranks(np.concatenate([x, y]))
    w2 = int(ranks2[:n1].sum())  # doubled rank sum of x
    mean2 = n1 * (n + 1)  # its expectation, doubled
    if n <= EXACT_MAX_N:
        return _exact_rank_sum_p(ranks2, n1, w2, mean2)
    u = w2 / 2.0 - n1 * (n1 + 1) / 2.0
    mu = n1 * n2 / 2.0
    tie_term = float(((ties.astype(np.float64) ** 3) - ties).sum()) / (n * (n - 1))
    var = n1 * n2 / 12.0 * ((n + 1) - tie_term)
    if var <= 0:
        return 1.0
    z = max(abs(u - mu) - 0.5, 0.0) / math.sqrt(var)
    return min(1.0, math.erfc(z / math.sqrt(2.0)))


@functools.lru_cache(maxsize=256)
def _rank_sum_distribution(ranks2: tuple[int, ...], n1: int) -> np.ndarray:
    """Number of ``n1``-subsets of ``ranks2`` per (doubled) rank sum, as float counts.

    Cached: tie patterns repeat (an op group absent from a run is 0 in each of its steps)."""
    total = sum(ranks2)
    dp = np.zeros((n1 + 1, total + 1), dtype=np.float64)  # dp[k, s]: subsets of size k summing to s
    dp[0, 0] = 1.0
    for r in ranks2:
        dp[1:, r:] = dp[1:, r:] + dp[:-1, : total + 1 - r]
    return dp[n1]


@functools.lru_cache(maxsize=256)
def _untied_distribution(n1: int, n: int) -> np.ndarray:
    """The distribution without ties depends only on the sample sizes: computed once per pair."""
    return _rank_sum_distribution(tuple(range(2, 2 * n + 1, 2)), n1)


def _exact_rank_sum_p(ranks2: np.ndarray, n1: int, w2: int, mean2: int) -> float:
    """P(|W - E W| >= |w - E W|) over all C(n, n1) equally likely splits."""
    n = len(ranks2)
    tied = len(np.unique(ranks2)) < n
    dist = _rank_sum_distribution(tuple(sorted(ranks2.tolist())), n1) if tied else _untied_distribution(n1, n)
    sums = np.arange(len(dist))
    extreme = np.abs(sums - mean2) >= abs(w2 - mean2)
    return float(min(1.0, dist[extreme].sum() / dist.sum()))


# --------------------------------------------------------------------------- Welch


def welch_p(x: Sequence[float], y: Sequence[float]) -> float:
    """Two-sided p-value of Welch's unequal-variance t-test (needs 2+ samples on each side)."""
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    n1, n2 = len(x), len(y)
    if n1 < 2 or n2 < 2:
        return 1.0
    m1, m2 = float(x.mean()), float(y.mean())
    v1, v2 = float(x.var(ddof=1)) / n1, float(y.var(ddof=1)) / n2
    se2 = v1 + v2
    if se2 <= 0:
        return 1.0 if m1 == m2 else 0.0
    t = (m2 - m1) / math.sqrt(se2)
    df = se2 * se2 / ((v1 * v1 / (n1 - 1) if v1 else 0.0) + (v2 * v2 / (n2 - 1) if v2 else 0.0))
    return student_t_two_sided_p(t, df)


def student_t_two_sided_p(t: float, df: float) -> float:
    """P(|T| >= |t|) for Student's t with ``df`` degrees of freedom."""
    if not math.isfinite(t):
        return 0.0
    x = df / (df + t * t)
    return min(1.0, max(0.0, regularized_beta(x, df / 2.0, 0.5)))


def regularized_beta(x: float, a: float, b: float) -> float:
    """I_x(a, b), the regularized incomplete beta function (continued fraction, Lentz)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    ln_front = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    front = math.exp(ln_front)
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _beta_cf(x, a, b) / a
    return 1.0 - front * _beta_cf(1.0 - x, b, a) / b


def _beta_cf(x: float, a: float, b: float) -> float:
    tiny, eps = 1e-300, 1e-15
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 500):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < eps:
            break
    return h


class Change:
    """``delta`` and ``delta_pct`` of a row with ``baseline`` and ``candidate`` values (a mixin
    for the diff's and the gate's rows; shares give their delta in percentage points)."""

    baseline: float | None
    candidate: float | None

    @property
    def delta(self) -> float | None:
        if self.baseline is None or self.candidate is None:
            return None
        return self.candidate - self.baseline

    @property
    def delta_pct(self) -> float | None:
        d = self.delta
        return None if d is None or not self.baseline else 100.0 * d / abs(self.baseline)
