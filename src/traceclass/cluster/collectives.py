"""Per matched collective instance: transfer, wait, skew, bandwidth (integer ns, decimal GB/s).

Definitions (instance i, participating ranks r, times clock-corrected by :mod:`.clocks`):

Only **timed** instances count: complete (see :mod:`.match`) and in a steady step.

* **duration**_{i,r} = end - start of the rank's collective (kernel span; CPU backends: the
  backend's range);
* **transfer**_i = min_r duration_{i,r}: the rank that arrived last waited least, so its
  duration is the closest the trace gets to the time the data movement itself took;
* **wait**_{i,r} (clock-free) = duration_{i,r} - transfer_i; **wait**_{i,r} (clock-based) =
  latest start_i - start_{i,r}; the two agree when clocks are aligned and the collective starts
  moving data once everyone is in;
* **start skew** = latest - earliest start; **end skew** = latest - earliest end;
* **last arriver** = rank with the latest start; its **blame** = latest start - second-latest start
  (the time everyone else waited for it alone);
* **algbw** = bytes / transfer, in GB/s (1e9 bytes/s; bytes per ns are GB/s); bytes: output for
  all-gather, input otherwise; **busbw** = algbw x factor, nccl-tests' definitions: 2(n-1)/n for
  all-reduce; (n-1)/n for reduce-scatter, all-gather and all-to-all(v); 1 for broadcast, reduce
  and point-to-point, n = ranks in the instance;
* all-to-allv: **size imbalance** = max / mean of the ranks' bytes, and its algbw uses the
  largest rank's bytes (the slowest rank's share sets the pace).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Sequence

import numpy as np

from traceclass.cluster.clocks import Times
from traceclass.cluster.match import Matched


def bus_factor(name: str, n: int) -> float:
    if n <= 0:
        return float("nan")
    if name == "all_reduce":
        return 2.0 * (n - 1) / n
    if name in ("reduce_scatter", "all_gather", "all_to_all", "all_to_allv"):
        return (n - 1) / n
    return 1.0


@dataclasses.dataclass(frozen=True)
class InstanceStats:
    """Per instance (rows of ``Matched``); NaN/-1 where the instance is partial."""

    use: np.ndarray  # bool: complete, timed
    participants: np.ndarray  # int
    transfer_ns: np.ndarray  # int64
    start_skew_ns: np.ndarray
    end_skew_ns: np.ndarray
    last: np.ndarray  # rank position of the last arriver, -1
    blame_ns: np.ndarray  # int64
    bytes: np.ndarray  # int64, -1 unknown
    imbalance: np.ndarray  # float: max/mean bytes (all-to-allv), NaN otherwise
    algbw_gbps: np.ndarray  # float
    busbw_gbps: np.ndarray
    wait_clock_ns: np.ndarray  # int64 [I, R], 0 where absent
    wait_free_ns: np.ndarray  # int64 [I, R]
    dtype: list[str]
    start_ns: np.ndarray  # earliest corrected start per instance


def steady_instances(summaries: Sequence[dict[str, Any]], m: Matched) -> np.ndarray:
    """Instances in a steady step (warm-up and pre-step collectives, such as the rendezvous, left
    out), judged on the first rank that has the instance; every instance when its traces have no
    steps."""
    I, R = m.rows.shape
    out = np.zeros(I, dtype=bool)
    decided = np.zeros(I, dtype=bool)
    for r, s in enumerate(summaries):
        rows = m.rows[:, r]
        todo = (rows >= 0) & ~decided
        if not todo.any():
            continue
        if s.get("steps_synthetic"):
            out[todo] = True
        else:
            stp = np.asarray(s["collectives"]["step"], dtype=np.int64)[rows[todo]]
            out[todo] = np.isin(stp, np.asarray(s["steps"]["step"], dtype=np.int64))
        decided |= todo
    return out


def instance_stats(summaries: Sequence[dict[str, Any]], m: Matched, t: Times) -> InstanceStats:
    I, R = m.rows.shape
    present = t.present
    use = m.complete & steady_instances(summaries, m)
    big = np.iinfo(np.int64).max
    dur = np.where(present, t.end - t.start, big)
    transfer = np.where(use, dur.min(axis=1) if R else 0, -1)
    s_max = np.where(present, t.start, np.iinfo(np.int64).min).max(axis=1) if R else np.zeros(I, np.int64)
    s_min = np.where(present, t.start, big).min(axis=1) if R else np.zeros(I, np.int64)
    e_max = np.where(present, t.end, np.iinfo(np.int64).min).max(axis=1) if R else np.zeros(I, np.int64)
    e_min = np.where(present, t.end, big).min(axis=1) if R else np.zeros(I, np.int64)
    masked_start = np.where(present, t.start, np.iinfo(np.int64).min)
    last = np.argmax(masked_start, axis=1) if R else np.zeros(I, np.int64)
    srt = np.sort(masked_start, axis=1)
    second = srt[:, -2] if R >= 2 else s_max
    blame = np.where(use, s_max - second, 0)
    wait_clock = np.where(present & use[:, None], s_max[:, None] - t.start, 0)
    wait_free = np.where(present & use[:, None], dur - transfer[:, None], 0)
    participants = present.sum(axis=1)
    nbytes = np.full(I, -1, dtype=np.int64)
    imbalance = np.full(I, np.nan)
    dtype = [""] * I
    for r, s in enumerate(summaries):
        has = m.rows[:, r] >= 0
        if not has.any():
            continue
        b = np.asarray(s["collectives"]["bytes"], dtype=np.int64)
        fill = has & (nbytes < 0)
        nbytes[fill] = b[m.rows[fill, r]]
        dts = s["collectives"]["dtype"]
        for i in np.flatnonzero(has).tolist():
            if not dtype[i]:
                dtype[i] = dts[int(m.rows[i, r])]
    for i in [k for k, nm in enumerate(m.name) if nm == "all_to_allv"]:
        vals = np.array([summaries[r]["collectives"]["bytes"][int(m.rows[i, r])] for r in np.flatnonzero(present[i])],
                        dtype=np.float64)
        vals = vals[vals >= 0]
        if len(vals) and vals.mean() > 0:
            imbalance[i] = vals.max() / vals.mean()
            nbytes[i] = int(vals.max())
    with np.errstate(all="ignore"):
        alg = np.where(use & (nbytes >= 0) & (transfer > 0), nbytes / np.maximum(transfer, 1), np.nan)
    factor = np.array([bus_factor(nm, int(n)) for nm, n in zip(m.name, participants)], dtype=np.float64)
    return InstanceStats(use, participants, transfer, np.where(use, s_max - s_min, -1),
                         np.where(use, e_max - e_min, -1), np.where(use, last, -1), blame, nbytes, imbalance,
                         alg, alg * factor, wait_clock, wait_free, dtype, np.where(participants > 0, s_min, 0))


def collective_table(m: Matched, st: InstanceStats, ranks: Sequence[int]) -> list[dict[str, Any]]:
    """One row per (name, group, bytes, dtype) over the timed instances."""
    groups: dict[tuple, list[int]] = {}
    for i in np.flatnonzero(st.use).tolist():
        groups.setdefault((m.name[i], m.group[i], int(st.bytes[i]), st.dtype[i]), []).append(i)
    out = []
    for (name, group, nbytes, dtype), idx in groups.items():
        ix = np.asarray(idx)
        lasts = st.last[ix]
        vals, cnt = np.unique(lasts[lasts >= 0], return_counts=True)
        top = int(vals[np.argmax(cnt)]) if len(vals) else -1
        alg, bus = st.algbw_gbps[ix], st.busbw_gbps[ix]
        out.append({
            "name": name, "group": group, "bytes": nbytes, "dtype": dtype, "count": len(idx),
            "ranks": int(np.median(st.participants[ix])),
            "transfer_p50_ns": float(np.percentile(st.transfer_ns[ix], 50)),
            "algbw_p50_gbps": _nanpct(alg, 50), "busbw_p50_gbps": _nanpct(bus, 50),
            "start_skew_p50_ns": float(np.percentile(st.start_skew_ns[ix], 50)),
            "start_skew_p95_ns": float(np.percentile(st.start_skew_ns[ix], 95)),
            "most_last_rank": ranks[top] if top >= 0 else None,
            "most_last_count": int(cnt.max()) if len(cnt) else 0,
            "size_imbalance_p50": _nanpct(st.imbalance[ix], 50),
            "total_transfer_ns": int(st.transfer_ns[ix].sum()),
        })
    out.sort(key=lambda r: -r["total_transfer_ns"])
    return out


def _nanpct(v: np.ndarray, q: float) -> float | None:
    v = v[~np.isnan(v)]
    return float(np.percentile(v, q)) if len(v) else None
