"""Per-rank clock offsets from collective ends.

A collective ends on all its ranks at nearly the same moment (the last rank's data completes
everyone's), so the ends line the ranks' clocks up:

    delta_r = median over complete matched instances i that include r of (end_{i,r} - median_r' end_{i,r'})

in integer ns (a median of an even count is the mean of the middle two, rounded). Times are each
rank's epoch ns (``baseTimeNanoseconds`` + trace ns) when every rank has the anchor, else the
traces' own ns. Corrected time = time - delta_r. Point-to-point instances are left out (two ranks
say little about a job's clock).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Sequence

import numpy as np

from traceclass.cluster.match import Matched


@dataclasses.dataclass(frozen=True)
class Times:
    """Start/end per matched instance and rank position, epoch (or trace) ns, corrected by the
    offsets; ``present`` marks where the rank has the instance."""

    start: np.ndarray  # int64 [I, R]
    end: np.ndarray  # int64 [I, R]
    present: np.ndarray  # bool [I, R]
    offset_ns: np.ndarray  # int64 [R]: delta_r, already subtracted
    offset_samples: np.ndarray  # int64 [R]: instances behind each delta_r
    anchored: bool  # epoch ns from baseTimeNanoseconds on every rank


def instance_times(summaries: Sequence[dict[str, Any]], m: Matched) -> tuple[np.ndarray, np.ndarray, np.ndarray, bool]:
    """Raw (uncorrected) start/end matrices and the presence mask."""
    I, R = m.rows.shape
    start = np.zeros((I, R), dtype=np.int64)
    end = np.zeros((I, R), dtype=np.int64)
    present = m.rows >= 0
    anchored = all(s.get("base_time_ns") is not None for s in summaries)
    for r, s in enumerate(summaries):
        rows = m.rows[:, r]
        has = rows >= 0
        if not has.any():
            continue
        base = int(s["base_time_ns"]) if anchored else 0
        st = np.asarray(s["collectives"]["start_ns"], dtype=np.int64)
        en = np.asarray(s["collectives"]["end_ns"], dtype=np.int64)
        start[has, r] = st[rows[has]] + base
        end[has, r] = en[rows[has]] + base
    return start, end, present, anchored


def masked_median(values: np.ndarray, present: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(median relative to ``first``, ``first``) per row over the present entries: values are
    shifted by the row's first present value before going to float, so epoch ns keep their last
    digit; rows without any: NaN."""
    if values.size == 0:
        return np.zeros(values.shape[0]), np.zeros(values.shape[0], dtype=np.int64)
    first = np.where(present.any(axis=1), values[np.arange(len(values)), np.argmax(present, axis=1)], 0)
    rel = np.where(present, values - first[:, None], 0).astype(np.float64)
    rel[~present] = np.nan
    with np.errstate(all="ignore"):
        med = np.nanmedian(rel, axis=1) if rel.shape[1] else np.full(len(rel), np.nan)
    return med, first


def align(summaries: Sequence[dict[str, Any]], m: Matched) -> Times:
    start, end, present, anchored = instance_times(summaries, m)
    I, R = start.shape
    use = m.complete & ~m.p2p
    offsets = np.zeros(R, dtype=np.int64)
    samples = np.zeros(R, dtype=np.int64)
    if use.any():
        e, p = end[use], present[use]
        med_rel, first = masked_median(e, p)
        dev = np.where(p, (e - first[:, None]).astype(np.float64) - med_rel[:, None], np.nan)
        for r in range(R):
            col = dev[:, r]
            col = col[~np.isnan(col)]
            samples[r] = len(col)
            if len(col):
                offsets[r] = int(np.rint(np.median(col)))
    start = start - offsets[None, :]
    end = end - offsets[None, :]
    return Times(start, end, present, offsets, samples, anchored)
