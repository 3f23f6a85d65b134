"""GPU work queued before the profiler window: the previous, unprofiled iteration's backlog.

A GPU row is **backlog** when the trace records launch calls, the row has none (it was queued
before the profiler started) and it starts before the first row of its device whose launch call
is in the trace: a stream runs its queue in order, so everything before the first recorded
launch's work was queued earlier. Such rows are not part of the analysed step (their launch,
and the host work that caused them, lie outside the trace): they are left out of the steady-step
statistics and reported by TC207. Unlinked rows later in the trace (a page migration, a row the
profiler failed to correlate) are not backlog.
"""

from __future__ import annotations

import numpy as np

from traceclass.model import ApiKind, GpuKind, Trace


def backlog_mask(trace: Trace) -> np.ndarray:
    """Mask over ``trace.gpu``: rows queued before the profiler window (module docstring)."""
    gpu, api = trace.gpu, trace.api
    out = np.zeros(len(gpu), dtype=bool)
    launches = np.isin(api.kind, np.array([ApiKind.LAUNCH, ApiKind.GRAPH_LAUNCH], np.int8))
    if len(gpu) == 0 or not launches.any():
        return out
    active = gpu.kind != GpuKind.SYNC
    linked = active & (gpu.api >= 0)
    for dev in np.unique(gpu.device[active]).tolist():
        on = gpu.device == dev
        first = gpu.start_ns[on & linked].min() if (on & linked).any() else np.iinfo(np.int64).max
        out |= on & active & (gpu.api < 0) & (gpu.start_ns < first)
    return out
