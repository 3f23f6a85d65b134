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
    # the threads: every (pid, tid) with a host row, numbered in (pid, tid) order
    pairs = [_thread_pairs(np.asarray(p[1], np.int64), np.asarray(p[2], np.int64)) for p in parts]
    tp = np.concatenate([q[0] for q in pairs]).astype(np.int64)
    tt = np.concatenate([q[1] for q in pairs]).astype(np.int64)
    del pairs
    g, n_threads = group_ids(tp, tt)
    first = np.zeros(n_threads, dtype=np.int64)
    first[g[::-1]] = np.arange(len(g) - 1, -1, -1)
    pid, tid = tp[first], tt[first]
    sets = [merged_per_thread(pid, tid, [p[1:] for p in parts if p[0] == c]) for c in range(3)]
    del parts
    return HostView(pid, tid, sets[0], sets[1], sets[2])


def _thread_pairs(pid: np.ndarray, tid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct (pid, tid) pairs of a table (unordered)."""
    if len(pid) == 0:
        return pid[:0], tid[:0]
    up, ut = np.unique(pid), np.unique(tid)  # few: processes, threads
    code = np.searchsorted(up, pid) * len(ut)
    code += np.searchsorted(ut, tid)
    code = np.unique(code)
    return up[code // len(ut)], ut[code % len(ut)]


def merged_per_thread(pid: np.ndarray, tid: np.ndarray,
                      parts: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]) -> list[tl.Intervals]:
    """Merged intervals per thread ``(pid[k], tid[k])`` (unique pairs, sorted) of the
    ``(pid, tid, start, end)`` rows of ``parts``; rows of other threads are ignored.

    Each part is mapped to threads and merged per thread on its own, then the per-part unions
    are merged (union is associative: the same sets as merging all rows at once); joining the
    parts first held several columns of all of them at once."""
    n_threads = len(pid)
    pieces: list[list[tl.Intervals]] = [[] for _ in range(n_threads)]
    for p, t, s, e in parts:
        if len(p) == 0 or n_threads == 0:
            continue
        th = lookup2(pid, tid, np.asarray(p, np.int64), np.asarray(t, np.int64))
        order = np.argsort(th, kind="stable")
        cuts = np.searchsorted(th[order], np.arange(n_threads + 1))
        del th
        for k in range(n_threads):
            if cuts[k + 1] > cuts[k]:
                rows = order[cuts[k]:cuts[k + 1]]
                pieces[k].append(tl.merge(s[rows], e[rows]))
        del order
    return [tl.union(*ps) for ps in pieces]
