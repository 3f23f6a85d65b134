"""The analysed time: the one stretch of wall time every rule's severity is measured against.

This is the only definition of the steady-state steps: rule numerators (``Context.analysed``,
``Steps.warmup``), the severity denominator (``Context.analysed_ns``) and the report's per-step
series all read :attr:`traceclass.facts.Facts.analysed`.

Definitions (integer ns):

* **analysed windows** = the ``[start, end)`` ranges of the steady-state steps (``ProfilerStep#N``
  after the first ``warmup_steps``, without the steps the stage analysis sets apart as empty
  unless nothing else is left), merged; in a trace without steps, the synthetic whole-trace step
  of :mod:`traceclass.analysis.stages` (the profiler window, else first to last event).
* **analysed_ns** = their total wall time. ``Context.severity`` (:mod:`traceclass.rule`) rates
  every finding by its recoverable time against this number, whatever the rule, so that a 35 us
  copy and a 200 us idle window of the same trace are rated on one scale.
* A GPU row lies **in the analysed time** when its launch call started inside an analysed window
  (without a recorded launch call: when the row itself started inside one); in a trace without
  steps every row does. This is the steady-state filter of :mod:`traceclass.analysis.ops` (which
  drops warm-up work) made strict: work launched before the first or after the last steady step
  is left out too, so a rule's numerator and the denominator cover the same time.
"""

from __future__ import annotations

import dataclasses
import numpy as np

from traceclass import timeline as tl
from traceclass.analysis.stages import Occurrences
from traceclass.model import AnnotationKind, GpuKind, Trace


@dataclasses.dataclass(frozen=True)
class AnalysedTime:
    """Steady-state step windows, merged and sorted."""

    start_ns: np.ndarray
    end_ns: np.ndarray
    steps_count: int  # steady steps (1 for the synthetic whole-trace step)
    synthetic: bool  # no steps in the trace: the whole trace is the one step
    step_start_ns: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0, np.int64))  # each step,
    step_end_ns: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0, np.int64))  # by start
    occurrence: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0, np.int64))  # each step's
    #                                                           index into the stage occurrences, by start

    @property
    def total_ns(self) -> int:
        return int((self.end_ns - self.start_ns).sum())

    @property
    def intervals(self) -> tl.Intervals:
        return self.start_ns, self.end_ns

    def holds(self, t: np.ndarray) -> np.ndarray:
        """Mask: each time lies inside an analysed window."""
        t = np.asarray(t, dtype=np.int64)
        if len(self.start_ns) == 0:
            return np.zeros(len(t), dtype=bool)
        k = np.searchsorted(self.start_ns, t, side="right") - 1
        return (k >= 0) & (t < self.end_ns[np.maximum(k, 0)])

    def clip(self, iv: tl.Intervals) -> tl.Intervals:
        """The part of an interval set that lies in the analysed windows."""
        return tl.intersect(iv, self.intervals)


def analysed_time(occ: Occurrences) -> AnalysedTime:
    """Analysed windows from the stage occurrences (steps and their warm-up flags)."""
    if len(occ.stage) == 0:
        z = np.zeros(0, dtype=np.int64)
        return AnalysedTime(z, z.copy(), 0, bool(occ.synthetic))
    kinds = np.asarray(occ.kinds, dtype=np.int64)
    # occurrences that count: not warm-up (and, where the stage analysis sets them apart, not an
    # empty step the profiler closed without running it)
    steady = occ.steady()
    is_step = kinds[occ.stage] == AnnotationKind.STEP
    step = is_step & steady
    if not step.any():  # every step empty or warm-up: the steps that are not warm-up, else all
        step = is_step & ~occ.warmup if (is_step & ~occ.warmup).any() else is_step
    s, e = tl.merge(occ.start_ns[step], occ.end_ns[step])
    which = np.flatnonzero(step)
    which = which[np.argsort(occ.start_ns[which], kind="stable")]
    return AnalysedTime(s, e, int(step.sum()), bool(occ.synthetic),
                        occ.start_ns[which].astype(np.int64), occ.end_ns[which].astype(np.int64),
                        which.astype(np.int64))


def gpu_in_analysed(trace: Trace, at: AnalysedTime) -> np.ndarray:
    """Mask over ``trace.gpu``: rows in the analysed time (see the module docstring); GPU-side
    sync records are never in it."""
    from traceclass.analysis.backlog import backlog_mask

    gpu = trace.gpu
    # work queued before the profiler window belongs to no analysed step (TC207 reports it)
    active = (gpu.kind != GpuKind.SYNC) & ~backlog_mask(trace)
    if at.synthetic:
        return active
    when = gpu.start_ns.copy()
    has = gpu.api >= 0
    if has.any():
        when[has] = trace.api.start_ns[gpu.api[has]]
    return active & at.holds(when)
