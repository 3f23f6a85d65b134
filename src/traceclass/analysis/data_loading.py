"""Data loading on the training thread: the ranges TC204 measures.

* **data range** = a DataLoader annotation (``AnnotationKind.DATALOADER``: torch.profiler's
  ``enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__``) or a user range
  (``record_function``/NVTX) whose name matches the data pattern (``stage:data``,
  ``## load_batch ##``, ``preprocess``, ``copy_batch_to_gpu``);
* **critical threads** = the threads that carry the ``ProfilerStep`` ranges: what they spend in
  data ranges the step waits for. Without steps: the thread with the most top-level op time (the
  training loop) and every thread with a DataLoader range (the consumer side of a DataLoader is
  always the loop that waits for it). A range on another thread (a prefetch thread) overlaps the
  step instead of delaying it and is left out;
* **data time** = the union of the data ranges on the critical threads (nested ranges such as
  ``stage:data`` around the DataLoader's ``__next__`` count once), clipped to the analysed windows
  (:mod:`traceclass.facts.analysed`).

A *site* is a range name; the outermost data ranges (inside no other data range of their
thread) name a finding. DataLoader ranges of every iterator class get one site name, ``DataLoader``, so the site stays
the same when ``num_workers`` switches the iterator from ``_SingleProcessDataLoaderIter`` to
``_MultiProcessingDataLoaderIter``.
"""

from __future__ import annotations

import dataclasses
import re

import numpy as np

from traceclass import timeline as tl
from traceclass.model import AnnotationKind, Trace
from traceclass.model.nesting import group_ids

#: user ranges that hold input-pipeline work: TC204's default ``data_stage_regex`` and TC202's
#: data-loading cause (``facts.host.DATA_STAGE``). A word must start
#: the name or follow a non-letter: ``stage:dataload``, ``## load_batch ##``, ``preprocess`` match,
#: ``DistributedDataParallel.forward`` and ``offload`` do not.
DEFAULT_PATTERN = r"(?i)(^|[^a-z])(data|load|batch|prefetch|collate|input|preprocess)"
DATALOADER = "DataLoader"


@dataclasses.dataclass(frozen=True)
class DataRanges:
    rows: np.ndarray  # annotation rows counted (on the critical threads)
    site: np.ndarray  # site name per row ("DataLoader" or the user range's name), object
    outermost: np.ndarray  # per row: no enclosing range of its thread is a data range
    threads: list[tuple[int, int]]  # the critical threads
    union: tl.Intervals  # union of the rows' ranges (all critical threads)


def critical_threads(trace: Trace) -> list[tuple[int, int]]:
    ann, ops = trace.annotations, trace.ops
    steps = ann.kind == AnnotationKind.STEP
    if steps.any():
        return _pairs(ann.pid[steps], ann.tid[steps])
    out = set(_pairs(ann.pid[ann.kind == AnnotationKind.DATALOADER], ann.tid[ann.kind == AnnotationKind.DATALOADER]))
    top = ops.parent < 0
    if top.any():
        gid, n = group_ids(ops.pid[top], ops.tid[top])
        busy = np.bincount(gid, weights=(ops.end_ns[top] - ops.start_ns[top]).astype(np.float64), minlength=n)
        k = int(np.argmax(busy))
        first = int(np.flatnonzero(gid == k)[0])
        out.add((int(ops.pid[top][first]), int(ops.tid[top][first])))
    return sorted(out)


def data_ranges(trace: Trace, pattern: str) -> DataRanges:
    """The data ranges of the critical threads (see the module docstring)."""
    ann = trace.annotations
    rx = re.compile(pattern)
    named = trace.strings.mask(ann.name, lambda s: rx.search(s) is not None)
    is_data = (ann.kind == AnnotationKind.DATALOADER) | ((ann.kind == AnnotationKind.USER) & named)
    threads = critical_threads(trace)
    on = np.zeros(len(ann), dtype=bool)
    for pid, tid in threads:
        on |= (ann.pid == pid) & (ann.tid == tid)
    rows = np.flatnonzero(is_data & on & (ann.end_ns > ann.start_ns))
    nested = np.zeros(len(rows), dtype=bool)
    cur = ann.parent[rows].astype(np.int64)
    while (cur >= 0).any():
        up = cur >= 0
        nested[up] |= is_data[cur[up]]
        cur[up] = ann.parent[cur[up]]
    site = np.array([DATALOADER if ann.kind[r] == AnnotationKind.DATALOADER else _short(trace.strings[int(ann.name[r])])
                     for r in rows.tolist()], dtype=object)
    return DataRanges(rows, site, ~nested, threads, tl.merge(ann.start_ns[rows], ann.end_ns[rows]))


def _short(name: str, limit: int = 60) -> str:
    """A range name fit for a location (NVTX payloads can be long)."""
    name = " ".join(name.split())
    return name if len(name) <= limit else name[: limit - 1] + "…"


def _pairs(pid: np.ndarray, tid: np.ndarray) -> list[tuple[int, int]]:
    if len(pid) == 0:
        return []
    return sorted(set(zip(pid.tolist(), tid.tolist())))
