"""Per host thread: what it was doing (ops, Python, runtime calls), waiting in sync events, and
loading data (DataLoader annotations, user ranges named like data)."""

from __future__ import annotations

import dataclasses
import re

import numpy as np

from traceclass import timeline as tl
from traceclass.analysis.data_loading import DEFAULT_PATTERN as DEFAULT_DATA_PATTERN
from traceclass.facts.syncs import SyncEvents
from traceclass.model import AnnotationKind, Trace
from traceclass.model.nesting import group_ids, lookup2

#: user ranges that hold input-pipeline work: "stage:data", "## load_batch ##", "wait_for_batch"
DATA_STAGE = re.compile(DEFAULT_DATA_PATTERN)  # the same words as TC204's data ranges


@dataclasses.dataclass(frozen=True)
class HostView:
    """Per host thread: merged intervals of activity (ops, Python, runtime calls), of sync
    waits, and of data-loading ranges (DataLoader annotations, user ranges named like data)."""

    pid: np.ndarray  # per thread index
    tid: np.ndarray
    busy: list[tl.Intervals]
    wait: list[tl.Intervals]
    data: list[tl.Intervals]

    def thread(self, pid: np.ndarray, tid: np.ndarray) -> np.ndarray:
        """Thread index of each (pid, tid), -1 for threads with no host activity."""
        return lookup2(self.pid, self.tid, np.asarray(pid, np.int64), np.asarray(tid, np.int64))


def host_view(trace: Trace, ev: SyncEvents) -> HostView:
    ops, py, api, ann = trace.ops, trace.python, trace.api, trace.annotations
    names = trace.strings
    data_ann = (ann.kind == AnnotationKind.DATALOADER) | (
        (ann.kind == AnnotationKind.USER) & names.mask(ann.name, lambda s: DATA_STAGE.search(s) is not None))
    parts = [
        (0, ops.pid, ops.tid, ops.start_ns, ops.end_ns),
        (0, py.pid, py.tid, py.start_ns, py.end_ns),
        (0, api.pid, api.tid, api.start_ns, api.end_ns),
        (1, ev.pid, ev.tid, ev.wait_ns, ev.end_ns),
        (2, ann.pid[data_ann], ann.tid[data_ann], ann.start_ns[data_ann], ann.end_ns[data_ann]),
    ]
    # every host row of the trace: joined straight into int64 (no second, converted copy), the
    # thread columns dropped as soon as the rows are grouped by thread
    cat = np.concatenate([np.full(len(p[1]), p[0], dtype=np.int8) for p in parts])
    pid = np.concatenate([p[1] for p in parts], dtype=np.int64)
    tid = np.concatenate([p[2] for p in parts], dtype=np.int64)
    th, _ = group_ids(pid, tid)
    order = np.lexsort((cat, th))
    cut = np.flatnonzero(np.diff(th[order])) + 1
    del th
    firsts = np.r_[0, cut].astype(np.int64) if len(order) else np.zeros(0, np.int64)
    pid, tid = pid[order[firsts]], tid[order[firsts]]
    s = np.concatenate([p[3] for p in parts], dtype=np.int64)
    e = np.concatenate([p[4] for p in parts], dtype=np.int64)
    del parts
    sets: list[list[tl.Intervals]] = [[], [], []]
    for lo, hi in zip(firsts.tolist(), np.r_[cut, len(order)].tolist()):
        rows = order[lo:hi]
        for c in range(3):
            m = rows[cat[rows] == c]
            sets[c].append(tl.merge(s[m], e[m]))
    return HostView(pid, tid, sets[0], sets[1], sets[2])

