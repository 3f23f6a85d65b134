"""Steps in time order, each flagged in or out of the analysed time, and the step of each GPU row.

A GPU row's **step** is the step that was open when its launch call started, on any thread
(the stage projection of :mod:`traceclass.analysis.stages`, by time); rows queued before the
profiler window have none. A step is *warm-up* when it is not in the analysed time
(:mod:`traceclass.facts.analysed`, the one definition); empty steps (no op, no GPU work: the
profiler closing a step it never ran) are left out.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from traceclass.analysis.stages import Occurrences
from traceclass.model import AnnotationKind, Trace
from traceclass.model.nesting import lookup2

@dataclasses.dataclass(frozen=True)
class Steps:
    """Step occurrences in time order (``(whole trace)`` when the trace has no steps)."""

    names: tuple[str, ...]
    start_ns: np.ndarray
    end_ns: np.ndarray
    warmup: np.ndarray
    occurrence: np.ndarray  # index into facts.occurrences
    synthetic: bool

    @property
    def steady(self) -> np.ndarray:
        return np.flatnonzero(~self.warmup)

    def at(self, t: np.ndarray) -> np.ndarray:
        """Index of the step whose [start, end) holds each time, -1 where none."""
        t = np.asarray(t, dtype=np.int64)
        if len(self.start_ns) == 0:
            return np.full(len(t), -1, dtype=np.int64)
        k = np.searchsorted(self.start_ns, t, side="right") - 1
        ok = (k >= 0) & (t < self.end_ns[np.maximum(k, 0)])
        return np.where(ok, k, -1)



def steps(trace: Trace, occ: Occurrences, analysed_occurrences: np.ndarray) -> Steps:
    """Non-empty steps by start; ``warmup`` marks those outside the analysed steps
    (``analysed_occurrences``: :attr:`AnalysedTime.occurrence`)."""
    kinds = np.asarray(occ.kinds, dtype=np.int64)
    rows = np.flatnonzero(kinds[occ.stage] == AnnotationKind.STEP) if len(occ.stage) else np.zeros(0, np.int64)
    rows = rows[~occ.empty[rows]]  # steps without any work are profiler artifacts
    rows = rows[np.argsort(occ.start_ns[rows], kind="stable")]
    names = [occ.names[occ.stage[r]] for r in rows.tolist()]
    if not occ.synthetic and len(rows):
        ann = trace.annotations
        is_step = np.flatnonzero(ann.kind == AnnotationKind.STEP)
        hit = lookup2(ann.start_ns[is_step], ann.tid[is_step], occ.start_ns[rows], occ.tid[rows])
        names = [trace.strings[ann.name[is_step[h]]] if h >= 0 else n for h, n in zip(hit.tolist(), names)]
    warm = ~np.isin(rows, analysed_occurrences)
    return Steps(tuple(names), occ.start_ns[rows], occ.end_ns[rows], warm, rows, occ.synthetic)


def gpu_steps(trace: Trace, st: Steps) -> np.ndarray:
    """Step index per ``trace.gpu`` row: the step open when its launch call started (on any
    thread), -1 for none; without steps every row belongs to the whole trace, including work
    queued before the profiler started."""
    gpu = trace.gpu
    out = np.full(len(gpu), -1, dtype=np.int64)
    has = gpu.api >= 0
    out[has] = st.at(trace.api.start_ns[gpu.api[has]])
    if st.synthetic and len(st.names):
        out[~has] = 0
    return out
