"""Allocator peaks from the memory events (torch ``profile_memory=True``), per device.

* A memory event carries the allocator's running totals after the event: ``total_allocated``
  (bytes in live tensors) and ``total_reserved`` (bytes the caching allocator holds from the
  device, allocated or cached). The **peak** of a device is the largest value seen.
* ``device_type`` is PyTorch's ``c10::DeviceType``: 0 CPU, 1 CUDA, 6 HIP (ROCm builds record
  either 1 or 6); any type but 0 is an accelerator here.
* **capacity** of an accelerator = ``memory_bytes`` (Kineto's ``totalGlobalMem``) of the trace's
  device with the event's index; when no device has that index and the trace describes exactly
  one accelerator with a memory size, that one (ROCm numbers devices differently in the memory
  events than in the kernel rows, as the Kineto reader notes for ``deviceProperties``).
* **allocator calls** = ``cudaMalloc``/``cudaFree`` (``hip*``, ``cu*``; not the pinned-host
  ``*Host`` forms) API calls: in steady
  state the caching allocator serves every request from its cache, so calls inside steps mean it
  had to free cached blocks and allocate again, the time memory pressure costs.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from traceclass.model import ApiKind, Trace

CPU = 0
DEVICE_TYPE_LABEL = {0: "CPU", 1: "CUDA", 6: "HIP", 12: "XPU", 13: "MPS"}


@dataclasses.dataclass(frozen=True)
class MemoryPeak:
    device_type: int
    device: int  # index as the memory events give it
    events: int
    peak_allocated_bytes: int
    peak_allocated_ns: int  # time of the peak
    peak_reserved_bytes: int | None  # None when the events carry no reserved total
    peak_reserved_ns: int | None
    capacity_bytes: int | None  # the device's memory size, when the trace gives it
    capacity_device: int | None  # the trace device it was taken from

    @property
    def accelerator(self) -> bool:
        return self.device_type != CPU

    @property
    def peak_bytes(self) -> int:
        """The larger of the two peaks: what the process held from the device at its fullest."""
        return max(self.peak_allocated_bytes, self.peak_reserved_bytes or 0)


def memory_peaks(trace: Trace) -> list[MemoryPeak]:
    mem = trace.memory
    if len(mem) == 0:
        return []
    out = []
    key = np.stack([mem.device_type.astype(np.int64), mem.device.astype(np.int64)], 1)
    for dt, dev in np.unique(key, axis=0).tolist():
        m = np.flatnonzero((mem.device_type == dt) & (mem.device == dev))
        alloc, res = mem.total_allocated[m], mem.total_reserved[m]
        if alloc.max() < 0:
            continue
        a = int(np.argmax(alloc))
        r = int(np.argmax(res))
        has_res = res[r] > 0
        cap, cap_dev = capacity(trace, dt, dev)
        out.append(MemoryPeak(int(dt), int(dev), len(m), int(alloc[a]), int(mem.ts_ns[m[a]]),
                              int(res[r]) if has_res else None, int(mem.ts_ns[m[r]]) if has_res else None, cap, cap_dev))
    return out


def capacity(trace: Trace, device_type: int, device: int) -> tuple[int | None, int | None]:
    """(memory size, trace device index) of the memory events' device (see the module docstring)."""
    if device_type == CPU:
        return None, None
    d = trace.device(device)
    if d is not None and d.memory_bytes:
        return int(d.memory_bytes), d.index
    sized = [x for x in trace.devices if x.memory_bytes and x.index >= 0]
    if len(sized) == 1:
        return int(sized[0].memory_bytes), sized[0].index  # type: ignore[arg-type]
    return None, None


def allocator_calls(trace: Trace) -> np.ndarray:
    """Rows of ``trace.api`` that are device-memory allocations or frees (pinned host memory,
    ``cudaMallocHost``/``cudaFreeHost``, is not device memory and is left out)."""
    api = trace.api
    rows = np.flatnonzero((api.kind == ApiKind.MALLOC) | (api.kind == ApiKind.FREE))
    return rows[~trace.strings.mask(api.name[rows], lambda s: "Host" in s)]
