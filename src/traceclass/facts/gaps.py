"""Idle gaps of each GPU, across streams.

* **busy** = union of kernels, memcpys and memsets (GPU-side sync records are not work);
  zero-length rows vanish, as in :mod:`traceclass.analysis.gpu_timeline`.
* **gap** = an idle stretch between two consecutive busy stretches of one device (the time
  before the first and after the last GPU work is not a gap). ``prev_row``/``next_row`` are the
  GPU rows that end at / start at its edges. A gap whose two edges were replayed by the same
  graph launch is *in a replay*: graph replay removes launch gaps by design, so such gaps are
  never blamed on the host.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from traceclass import timeline as tl
from traceclass.model import GpuKind, Trace
from traceclass.model.table import row_index_dtype

def active_devices(trace: Trace) -> list[int]:
    gpu = trace.gpu
    return sorted(np.unique(gpu.device[gpu.kind != GpuKind.SYNC]).tolist())


def device_rows(trace: Trace, device: int) -> np.ndarray:
    gpu = trace.gpu
    return np.flatnonzero((gpu.device == device) & (gpu.kind != GpuKind.SYNC))


@dataclasses.dataclass(frozen=True)
class Gaps:
    device: int
    busy: tl.Intervals
    start_ns: np.ndarray
    end_ns: np.ndarray
    prev_row: np.ndarray  # gpu row ending at the gap start
    next_row: np.ndarray  # gpu row starting at the gap end
    in_replay: np.ndarray  # both edges replayed by the same graph launch

    @property
    def length_ns(self) -> np.ndarray:
        return self.end_ns - self.start_ns


def device_gaps(trace: Trace, device: int) -> Gaps:
    gpu = trace.gpu
    rows = device_rows(trace, device)
    rows = rows[gpu.end_ns[rows] > gpu.start_ns[rows]]
    busy = tl.merge(gpu.start_ns[rows], gpu.end_ns[rows])
    g0, g1 = tl.gaps(busy)
    by_start = rows[np.argsort(gpu.start_ns[rows], kind="stable")]
    by_end = rows[np.argsort(gpu.end_ns[rows], kind="stable")]
    nxt = by_start[np.searchsorted(gpu.start_ns[by_start], g1, side="left")] if len(g1) else g1
    prv = by_end[np.searchsorted(gpu.end_ns[by_end], g0, side="left")] if len(g0) else g0
    replay = gpu.graph[prv] & gpu.graph[nxt] & (gpu.api[prv] == gpu.api[nxt]) & (gpu.api[nxt] >= 0)
    row = row_index_dtype(len(gpu))  # the gaps stay cached for every rule
    return Gaps(device, busy, g0, g1, prv.astype(row), nxt.astype(row), replay)


def dominant_device(trace: Trace) -> int:
    gpu = trace.gpu
    act = gpu.kind != GpuKind.SYNC
    if not act.any():
        return -1
    devs, inv = np.unique(gpu.device[act], return_inverse=True)
    dur = (gpu.end_ns - gpu.start_ns)[act].astype(np.float64)
    return int(devs[np.argmax(np.bincount(inv.reshape(-1), weights=dur))])


def take(col: np.ndarray, idx: np.ndarray, fill: int = 0) -> np.ndarray:
    """``col[idx]`` with ``fill`` where ``idx < 0`` (safe on empty columns)."""
    if len(col) == 0:
        return np.full(len(idx), fill, dtype=col.dtype)
    return np.where(idx >= 0, col[np.maximum(idx, 0)], fill)

