"""Allocator peaks per device from profiler memory events."""

from __future__ import annotations

import numpy as np

from traceclass.facts.rows import MemoryPeak
from traceclass.model import Trace


def memory_peaks(trace: Trace) -> tuple[MemoryPeak, ...]:
    """Allocator peaks per device from profiler memory events (torch ``profile_memory``)."""
    mem = trace.memory
    if len(mem) == 0:
        return ()
    out = []
    key = np.stack([mem.device_type.astype(np.int64), mem.device.astype(np.int64)], 1)
    for dt, dev in np.unique(key, axis=0).tolist():
        m = (mem.device_type == dt) & (mem.device == dev)
        alloc = mem.total_allocated[m]
        res = mem.total_reserved[m]
        if not len(alloc) or alloc.max() < 0:
            continue
        peak_res = int(res.max()) if len(res) and res.max() > 0 else None
        out.append(MemoryPeak(device_type="cpu" if dt == 0 else "gpu", device=int(dev), events=int(m.sum()),
                             peak_allocated_bytes=int(alloc.max()), peak_reserved_bytes=peak_res))
    return tuple(out)
