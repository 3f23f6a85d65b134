"""Stragglers and compute imbalance across ranks.

* **Times last** k_r: timed collective instances (complete, not point-to-point) in which rank r
  started last. Under "nobody is special" each of the n_i ranks of instance i is last with
  probability 1/n_i; the **p-value** is the binomial tail P(X >= k_r), X ~ Binomial(N_r, p_r),
  N_r the instances rank r took part in and p_r the mean of 1/n_i over them (exact when all
  groups have one size). **Last-arrival ratio** (the straggler score) = k_r / (N_r p_r).
* **Blame** of rank r: sum over the instances it was last in of (latest start - second-latest
  start); **blame %** = blame per step / step P50, blame per step = blame / steps that hold timed
  collectives (at least 1), step P50 = median over ranks of each rank's steady-step P50 wall time.
* A rank is a **straggler** when p < ``ALPHA`` / ranks (Bonferroni: a 1,000-rank job is not
  expected to produce a false straggler) and blame % >= ``MIN_BLAME_PCT``.
* **Cause** of a straggler: its per-step median of compute, data-loading and other time
  (see :mod:`.summary`) minus the median of the other ranks' medians; the largest excess that
  covers at least half the blame per step names it: "compute longer than peers", "data
  loading", "host work" (time the rank neither computed nor communicated); else "unknown".
* **Compute imbalance**: modified z-score of each rank's median per-step compute,
  z = (x - median) / (1.4826 MAD) (Iglewicz and Hoaglin; when MAD = 0:
  (x - median) / (1.253314 mean absolute deviation)); a rank is imbalanced at z >= ``Z_IMBALANCE``.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Sequence

import numpy as np

from traceclass.cluster.collectives import InstanceStats
from traceclass.cluster.match import Matched

ALPHA = 0.01
MIN_BLAME_PCT = 5.0
Z_IMBALANCE = 3.5
#: share of the blame per step an excess must cover to name the cause
CAUSE_SHARE = 0.5


def binomial_tail(k: int, n: int, p: float) -> float:
    """P(X >= k) for X ~ Binomial(n, p), summed in log space."""
    if k <= 0:
        return 1.0
    if k > n or p <= 0:
        return 0.0
    if p >= 1:
        return 1.0
    j = np.arange(k, n + 1, dtype=np.float64)
    lg = np.vectorize(math.lgamma)
    logs = (math.lgamma(n + 1) - lg(j + 1) - lg(n - j + 1) + j * math.log(p) + (n - j) * math.log1p(-p))
    top = logs.max()
    return float(min(1.0, math.exp(top) * np.exp(logs - top).sum()))


def modified_z(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    if len(x) == 0:
        return x
    med = np.median(x)
    mad = np.median(np.abs(x - med))
    if mad > 0:
        return (x - med) / (1.4826 * mad)
    mean_ad = np.mean(np.abs(x - med))
    if mean_ad > 0:
        return (x - med) / (1.253314 * mean_ad)
    return np.zeros_like(x)


@dataclasses.dataclass(frozen=True)
class RankVerdict:
    times_last: np.ndarray  # int [R]
    instances: np.ndarray  # int [R]
    expected_last: np.ndarray  # float [R]
    p_value: np.ndarray  # float [R]
    score: np.ndarray  # last-arrival ratio
    blame_ns: np.ndarray  # int64 [R]
    blame_pct: np.ndarray  # float [R]
    straggler: np.ndarray  # bool [R]
    cause: list[str]
    excess_ns: list[dict[str, float]]  # per rank: compute/data/other excess per step over peers
    compute_ns: np.ndarray  # median per-step compute per rank
    z: np.ndarray  # modified z of compute
    imbalanced: np.ndarray  # bool
    step_p50_ns: float
    steps_with_collectives: int


def _median(v: Sequence[float]) -> float:
    return float(np.median(v)) if len(v) else 0.0


def judge(summaries: Sequence[dict[str, Any]], m: Matched, st: InstanceStats) -> RankVerdict:
    R = len(summaries)
    timed = st.use & ~m.p2p
    present = (m.rows >= 0) & timed[:, None]
    times_last = np.bincount(st.last[timed], minlength=R)[:R] if timed.any() else np.zeros(R, dtype=np.int64)
    inst = present.sum(axis=0)
    inv_n = np.where(st.participants > 0, 1.0 / np.maximum(st.participants, 1), 0.0)
    expected = (present * inv_n[:, None]).sum(axis=0)
    pvals = np.array([binomial_tail(int(times_last[r]), int(inst[r]), float(expected[r] / inst[r]) if inst[r] else 0.0)
                      for r in range(R)])
    with np.errstate(all="ignore"):
        score = np.where(expected > 0, times_last / np.maximum(expected, 1e-12), 0.0)
    blame = np.zeros(R, dtype=np.int64)
    if timed.any():
        np.add.at(blame, st.last[timed], st.blame_ns[timed])
    steps_seen: set[int] = set()
    for r, s in enumerate(summaries):
        rows = m.rows[timed, r]
        stp = np.asarray(s["collectives"]["step"], dtype=np.int64)
        steps_seen.update(stp[rows[rows >= 0]].tolist())
    n_steps = max(len(steps_seen), 1)
    step_p50 = _median([_median(s["steps"]["wall_ns"]) for s in summaries if len(s["steps"]["wall_ns"])])
    blame_pct = 100.0 * (blame / n_steps) / step_p50 if step_p50 > 0 else np.zeros(R)
    straggler = (pvals < ALPHA / max(R, 1)) & (blame_pct >= MIN_BLAME_PCT)
    med = {k: np.array([_median(s["steps"][k]) for s in summaries]) for k in ("compute_ns", "data_ns", "other_ns")}
    causes, excesses = [], []
    for r in range(R):
        others = [x for x in range(R) if x != r]
        ex = {k: float(med[k][r] - (np.median(med[k][others]) if others else med[k][r])) for k in med}
        excesses.append(ex)
        need = CAUSE_SHARE * blame[r] / n_steps
        label = {"compute_ns": "compute longer than peers", "data_ns": "data loading", "other_ns": "host work"}
        best = max(ex, key=lambda k: ex[k])
        causes.append(label[best] if straggler[r] and ex[best] >= need and ex[best] > 0 else
                      ("unknown" if straggler[r] else ""))
    z = modified_z(med["compute_ns"])
    return RankVerdict(times_last, inst, expected, pvals, score, blame, blame_pct, straggler, causes, excesses,
                       med["compute_ns"], z, z >= Z_IMBALANCE, step_p50, len(steps_seen))
