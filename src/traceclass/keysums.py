"""Exact integer sums per key (durations, sample weights): one place for the grouping that
rules and analyses do per step, per thread or per frame, without a Python loop per key."""

from __future__ import annotations

import numpy as np

#: key spaces up to this size are summed with a dense bincount (faster than sorting)
_DENSE_KEYS = 1 << 22


def group_sum(keys: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sorted distinct keys (with a non-zero count) and the integer sum of ``values`` per key."""
    if len(keys) == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    top = int(keys.max()) + 1
    if int(keys.min()) >= 0 and top <= max(_DENSE_KEYS, 2 * len(keys)):
        present = np.bincount(keys, minlength=top) > 0
        sums = bincount_int(keys, values, top)
        uniq = np.flatnonzero(present)
        return uniq.astype(np.int64), sums[uniq]
    uniq, inv = np.unique(keys, return_inverse=True)
    return uniq.astype(np.int64), bincount_int(inv.reshape(-1), values, len(uniq))


def bincount_int(keys: np.ndarray, values: np.ndarray, size: int) -> np.ndarray:
    """Integer sums per key; exact (float64 holds integers up to 2**53)."""
    if len(keys) == 0:
        return np.zeros(size, dtype=np.int64)
    values = np.asarray(values, dtype=np.int64)
    if int(values.sum()) < (1 << 53):
        return np.rint(np.bincount(keys, weights=values, minlength=size)).astype(np.int64)
    out = np.zeros(size, dtype=np.int64)
    np.add.at(out, keys, values)
    return out
