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
from traceclass.model.table import BLOCK_ROWS

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
    o, f, a = covering_rows(trace)
    parts = [
        (0, ops.pid[o], ops.tid[o], ops.start_ns[o], ops.end_ns[o]),
        (0, py.pid[f], py.tid[f], py.start_ns[f], py.end_ns[f]),
        (0, api.pid[a], api.tid[a], api.start_ns[a], api.end_ns[a]),
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


_BLOCK = BLOCK_ROWS  # rows per block of the containment checks


def covering_rows(trace: Trace) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rows of ops, Python frames and runtime calls whose intervals are not inside another row
    of the same kind on the same thread: an op inside its parent op, a frame inside its caller,
    a call inside the op that made it (same thread). Per thread, the union of these rows'
    intervals is the union of all rows' (each dropped row lies inside a kept one, or inside a
    dropped one inside a kept one), from a small part of them: at 10 GB of trace, merging
    every op and call held several arrays of tens of millions of rows."""
    ops, py = trace.ops, trace.python
    return (_outside_parent(ops.start_ns, ops.end_ns, ops.parent),
            _outside_parent(py.start_ns, py.end_ns, py.parent),
            _outside_op(trace))


def _outside_parent(start: np.ndarray, end: np.ndarray, parent: np.ndarray) -> np.ndarray:
    """Rows with no parent or not inside it (a repaired overlap can outlast its parent)."""
    keep = []
    for lo in range(0, len(start), _BLOCK):
        hi = min(lo + _BLOCK, len(start))
        p = parent[lo:hi]
        up = np.maximum(p, 0)
        out = (p < 0) | (start[lo:hi] < start[up]) | (end[lo:hi] > end[up])
        keep.append(np.flatnonzero(out) + lo)
    return np.concatenate(keep) if keep else np.zeros(0, dtype=np.int64)


def _outside_op(trace: Trace) -> np.ndarray:
    """Runtime calls not inside the op that made them, on the same thread."""
    ops, api = trace.ops, trace.api
    if len(ops) == 0:
        return np.arange(len(api))
    keep = []
    for lo in range(0, len(api), _BLOCK):
        hi = min(lo + _BLOCK, len(api))
        o = api.op[lo:hi]
        up = np.maximum(o, 0)
        inside = ((o >= 0) & (ops.start_ns[up] <= api.start_ns[lo:hi]) & (api.end_ns[lo:hi] <= ops.end_ns[up])
                  & (ops.pid[up] == api.pid[lo:hi]) & (ops.tid[up] == api.tid[lo:hi]))
        keep.append(np.flatnonzero(~inside) + lo)
    return np.concatenate(keep) if keep else np.zeros(0, dtype=np.int64)


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
