"""Names, source lines and counts for the locations, messages and evidence of the GPU-idle rules."""

from __future__ import annotations

from collections import Counter
from typing import Iterable

import numpy as np

from traceclass.analysis.per_trace import per_trace
from traceclass.analysis.source_lines import source_for_points
from traceclass.model import AnnotationKind, Trace
from traceclass.model.names import cut
from traceclass.model.nesting import ContainmentIndex

_STAGE_KINDS = np.array([int(k) for k in (AnnotationKind.USER, AnnotationKind.DATALOADER, AnnotationKind.OPTIMIZER,
                                          AnnotationKind.COMPILED, AnnotationKind.COMMUNICATION)], dtype=np.int8)


def stage_rows(trace: Trace, pid: np.ndarray, tid: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Innermost user stage (``record_function``/NVTX range, DataLoader, optimizer...) around
    each point, as an annotation row, -1 where none (ProfilerStep is not a stage)."""
    sel, index = per_trace(trace, "stage_index", lambda: _stage_index(trace))
    if len(sel) == 0 or len(t) == 0:
        return np.full(len(t), -1, dtype=np.int64)
    hit = index.query(pid, tid, t)
    return np.where(hit >= 0, sel[np.maximum(hit, 0)], -1)


def _stage_index(trace: Trace) -> tuple[np.ndarray, ContainmentIndex]:
    """Stage annotation rows and their containment index, built once per trace (rules ask
    per storm and per window)."""
    ann = trace.annotations
    sel = np.flatnonzero(np.isin(ann.kind, _STAGE_KINDS))
    return sel, ContainmentIndex(ann.pid[sel], ann.tid[sel], ann.start_ns[sel], ann.end_ns[sel], ann.depth[sel])


def short_label(name: str, limit: int = 60) -> str:
    """A range name fit for a location: NVTX payloads (pyprof writes op arguments) get cut."""
    name = " ".join(name.split())
    return cut(name, limit)


def common_source(trace: Trace, pid: np.ndarray, tid: np.ndarray, t: np.ndarray, limit: int = 200) -> str | None:
    """Most frequent user-code ``file:line`` among the points (sampled evenly), None without stacks."""
    if len(trace.python) == 0 or len(t) == 0:
        return None
    pick = np.unique(np.linspace(0, len(t) - 1, min(limit, len(t))).astype(np.int64))
    found = [s for s in source_for_points(trace, pid[pick], tid[pick], t[pick]) if s]
    return Counter(found).most_common(1)[0][0] if found else None


def name_counts(trace: Trace, codes: np.ndarray) -> list[tuple[str, int]]:
    """(name, count) for a code column, most frequent first; unknown (-1) codes dropped."""
    codes = np.asarray(codes)
    codes = codes[codes >= 0]
    if len(codes) == 0:
        return []
    u, c = np.unique(codes, return_counts=True)
    order = np.lexsort((u, -c))
    return [(trace.strings[int(u[k])], int(c[k])) for k in order]


def counted(pairs: Iterable[tuple[str, int]], limit: int = 8) -> tuple[str, ...]:
    return tuple(f"{n} x{c}" for n, c in list(pairs)[:limit])


def op_chain(trace: Trace, op: int, levels: int = 3) -> str:
    """``outer > ... > op`` names of an op and up to ``levels - 1`` ancestors."""
    names: list[str] = []
    cur = op
    while cur >= 0 and len(names) < levels:
        names.append(trace.strings[trace.ops.name[cur]])
        cur = int(trace.ops.parent[cur])
    return " > ".join(reversed(names))



