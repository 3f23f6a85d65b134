"""CPU IP/backtrace samples of an nsys export -> ``Frames``, ``StackNodes``, ``Samples``.

``COMPOSITE_EVENTS`` holds one row per sample (time, thread, thread state) and
``SAMPLING_CALLCHAINS`` its frames, ``stackDepth`` 0 being the leaf. The stack trie is built
level by level from the root, vectorized per level.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from traceclass.ingest.nsys_schema import NsysDb
from traceclass.model import Frames, Samples, SamplingInfo, StackNodes, StringTable
from traceclass.model.nesting import group_ids, lookup

EVENTS = "COMPOSITE_EVENTS"
CALLCHAINS = "SAMPLING_CALLCHAINS"
#: ENUM_SAMPLING_THREAD_STATE: 1 Running; 0 Unknown; everything else is some kind of waiting
_RUNNING, _UNKNOWN = 1, 0


@dataclasses.dataclass
class SampleResult:
    frames: Frames
    stacks: StackNodes
    samples: Samples
    sample_gtid: np.ndarray  # globalTid per sample, for the Threads table
    info: SamplingInfo


def read_samples(db: NsysDb, strings: StringTable) -> SampleResult | None:
    if not db.has(EVENTS, "id", "start", "globalTid"):
        return None
    ev = db.ints(
        EVENTS,
        {
            "id": "id",
            "start": "start",
            "gtid": "globalTid",
            "state": "threadState" if db.has(EVENTS, "threadState") else "NULL",
        },
    )
    ns = len(ev["id"])
    order = np.argsort(ev["start"], kind="stable")
    ev = {k: v[order] for k, v in ev.items()}
    node = np.full(ns, -1, dtype=np.int32)
    frames = Frames.empty()
    stacks = StackNodes.empty()
    if ns and db.has(CALLCHAINS, "id", "symbol", "stackDepth"):
        cc = db.ints(
            CALLCHAINS,
            {
                "id": "id",
                "symbol": "symbol",
                "module": "module" if db.has(CALLCHAINS, "module") else "NULL",
                "depth": "stackDepth",
            },
        )
        frames, stacks, node = _build_trie(db, strings, ev["id"], cc)
    state = np.where(ev["state"] == _RUNNING, 0, np.where(ev["state"] <= _UNKNOWN, -1, 1))
    samples = Samples.build(ns, node=node, ts_ns=ev["start"], state=state, count=np.ones(ns))
    info = SamplingInfo(interval_ns=None, includes_idle=None, has_line_numbers=False, timed=True)
    return SampleResult(frames, stacks, samples, ev["gtid"], info)


def _build_trie(
    db: NsysDb, strings: StringTable, sample_ids: np.ndarray, cc: dict[str, np.ndarray]
) -> tuple[Frames, StackNodes, np.ndarray]:
    sample_row = lookup(sample_ids, cc["id"])
    keep = sample_row >= 0
    cc = {k: v[keep] for k, v in cc.items()}
    sample_row = sample_row[keep]
    leaf = np.full(len(sample_ids), -1, dtype=np.int32)
    if len(sample_row) == 0:
        return Frames.empty(), StackNodes.empty(), leaf
    sym, mod = db.intern_ids(strings, cc["symbol"], cc["module"])
    frame_of, n_frames = group_ids(sym.astype(np.int64), mod.astype(np.int64))
    first = np.zeros(n_frames, dtype=np.int64)
    first[frame_of[::-1]] = np.arange(len(frame_of))[::-1]
    frames = Frames.build(n_frames, function=sym[first], file=mod[first])

    # per sample, frames root first: stackDepth descending; level = position from the root
    order = np.lexsort((-cc["depth"], sample_row))
    srow, frm = sample_row[order], frame_of[order]
    starts = np.r_[0, np.flatnonzero(np.diff(srow)) + 1]
    group_start = np.repeat(starts, np.diff(np.r_[starts, len(srow)]))
    level = np.arange(len(srow)) - group_start

    cur = np.full(len(sample_ids), -1, dtype=np.int64)  # node reached so far, per sample
    parents: list[np.ndarray] = []
    frames_of_nodes: list[np.ndarray] = []
    depths: list[np.ndarray] = []
    base = 0
    by_level = np.argsort(level, kind="stable")
    lv_sorted = level[by_level]
    bounds = np.r_[0, np.flatnonzero(np.diff(lv_sorted)) + 1, len(lv_sorted)]
    for a, b in zip(bounds[:-1], bounds[1:], strict=True):
        rows = by_level[a:b]
        s = srow[rows]
        parent = cur[s]
        gid, n_new = group_ids(parent, frm[rows].astype(np.int64))
        first_row = np.zeros(n_new, dtype=np.int64)
        first_row[gid[::-1]] = np.arange(len(gid))[::-1]
        parents.append(parent[first_row])
        frames_of_nodes.append(frm[rows][first_row])
        depths.append(np.full(n_new, int(lv_sorted[a]), dtype=np.int64))
        cur[s] = base + gid
        base += n_new
    stacks = StackNodes.build(
        base,
        frame=np.concatenate(frames_of_nodes),
        parent=np.concatenate(parents),
        depth=np.minimum(np.concatenate(depths), np.iinfo(np.int16).max),
    )
    leaf[:] = cur
    return frames, stacks, leaf
