"""The normalized trace: what every reader produces and every analysis consumes."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from traceclass.model.comms import Comms
from traceclass.model.enums import Captured, Vendor
from traceclass.model.strings import InputsTable, StringTable
from traceclass.model.tables import (
    Annotations,
    ApiCalls,
    Frames,
    GpuActivity,
    MemoryEvents,
    Ops,
    PythonFrames,
    Samples,
    StackNodes,
    Threads,
)


#: Device index of the host CPU wherever GPU and host share an index space (resolved hardware,
#: op groups, report hardware rows). A GPU row never carries it: see :func:`known_gpu_devices`.
HOST_DEVICE = -1


@dataclasses.dataclass(frozen=True)
class DeviceInfo:
    """One accelerator (or the host CPU) as the trace describes it."""

    index: int
    name: str
    vendor: Vendor = Vendor.UNKNOWN
    memory_bytes: int | None = None
    sm_count: int | None = None  # SMs (NVIDIA) or CUs (AMD)
    compute_capability: str | None = None  # "9.0" NVIDIA; "gfx 9.4" AMD
    memory_bandwidth_bps: float | None = None  # measured/reported by the profiler, bytes/s
    clock_hz: float | None = None


def known_gpu_devices(devices: tuple[DeviceInfo, ...], gpu: GpuActivity
                      ) -> tuple[tuple[DeviceInfo, ...], GpuActivity, str]:
    """GPU rows whose export names no device (a Kineto kernel without ``device`` arg and with no
    or a negative pid, an nsys row without ``deviceId``) read as a negative index, -1 mostly,
    which is :data:`HOST_DEVICE`: left so, they would be judged against the host CPU, and
    analyses that take a negative device for the host would call their ops host work.

    They go to the one GPU the export describes (by name) that no other row ran on, when there
    is exactly one (the Kineto reader's own rule for a single described device); else to the
    lowest index nothing uses, where a device the reader filed under a negative index moves with
    them. Returns (devices, gpu, note for the report)."""
    unknown = gpu.device < 0
    used = set(np.unique(gpu.device[~unknown]).tolist())
    idle = [d.index for d in devices if d.index >= 0 and d.name and d.index not in used]
    if len(idle) == 1:
        index, why = idle[0], "the one GPU the export describes that no other row ran on"
        moved = tuple(d for d in devices if d.index >= 0)
    else:
        taken = used | {d.index for d in devices if d.index >= 0}
        index, why = next(k for k in range(len(taken) + 1) if k not in taken), "an index of their own"
        lost = sorted((d for d in devices if d.index < 0), key=lambda d: not d.name)  # a named one first
        moved = tuple(d for d in devices if d.index >= 0) + tuple(dataclasses.replace(d, index=index) for d in lost[:1])
        if lost and lost[0].name:  # the reader matched the one described device to these rows
            why = "the one GPU the export describes that no other row ran on"
    rows = dataclasses.replace(gpu, device=np.where(unknown, index, gpu.device))
    n = int(unknown.sum())
    note = (f"{n:,} GPU row{'s' if n != 1 else ''} name{'' if n != 1 else 's'} no device "
            f"(no device id in the export): analysed as GPU {index}, {why}")
    return moved, rows, note


@dataclasses.dataclass(frozen=True)
class SourceInfo:
    """Where the trace came from. ``path`` is the path the user gave."""

    path: str
    format: str  # "kineto", "nsys-sqlite", "pyspy-speedscope", "speedscope", "collapsed", "chrome-trace"
    producer: str = ""  # "torch.profiler", "Nsight Systems 2024.5.4", "py-spy@0.4.3"
    format_version: str = ""
    size_bytes: int = 0


@dataclasses.dataclass(frozen=True)
class SamplingInfo:
    """How a sampled CPU profile was taken, as far as the file tells."""

    interval_ns: int | None = None
    includes_idle: bool | None = None  # py-spy --idle (None: cannot tell)
    gil_only: bool | None = None  # py-spy --gil
    has_line_numbers: bool = True
    timed: bool = False  # samples carry timestamps


@dataclasses.dataclass(frozen=True)
class Trace:
    """A profiling session in columnar form.

    Tables may be empty: a CPU-only torch trace has no ``gpu`` rows, an nsys export without
    NVTX has no ``annotations``, a py-spy profile has only ``samples``. ``captured`` names the
    kinds of data the source recorded (an empty table that was captured means "none happened";
    one that was not captured means "unknown"), and ``notes`` carries reader remarks for the
    report (missing tables, tolerated damage).
    """

    source: SourceInfo
    strings: StringTable
    inputs: InputsTable
    devices: tuple[DeviceInfo, ...] = ()
    threads: Threads = dataclasses.field(default_factory=Threads.empty)
    ops: Ops = dataclasses.field(default_factory=Ops.empty)
    annotations: Annotations = dataclasses.field(default_factory=Annotations.empty)
    python: PythonFrames = dataclasses.field(default_factory=PythonFrames.empty)
    api: ApiCalls = dataclasses.field(default_factory=ApiCalls.empty)
    gpu: GpuActivity = dataclasses.field(default_factory=GpuActivity.empty)
    memory: MemoryEvents = dataclasses.field(default_factory=MemoryEvents.empty)
    frames: Frames = dataclasses.field(default_factory=Frames.empty)
    stacks: StackNodes = dataclasses.field(default_factory=StackNodes.empty)
    samples: Samples = dataclasses.field(default_factory=Samples.empty)
    comms: Comms = dataclasses.field(default_factory=Comms.empty)  # collective args (Kineto)
    sampling: SamplingInfo | None = None
    window: tuple[int, int] | None = None  # profiler window [start, end) in ns, when recorded
    captured: frozenset[Captured] = frozenset()  # readers may pass the plain strings
    meta: dict[str, Any] = dataclasses.field(default_factory=dict)
    notes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        # an unknown kind is a reader bug: Captured() raises on it
        object.__setattr__(self, "captured", frozenset(Captured(c) for c in self.captured))
        if len(self.gpu) and (self.gpu.device < 0).any():
            devices, gpu, note = known_gpu_devices(self.devices, self.gpu)
            object.__setattr__(self, "devices", devices)
            object.__setattr__(self, "gpu", gpu)
            object.__setattr__(self, "notes", self.notes + (note,))

    def replace(self, **changes: Any) -> "Trace":
        return dataclasses.replace(self, **changes)

    @property
    def has_gpu(self) -> bool:
        return len(self.gpu) > 0

    def time_bounds(self) -> tuple[int, int] | None:
        """Earliest start and latest end over all timed rows, or the recorded window."""
        lo, hi = [], []
        for t in (self.ops, self.annotations, self.api, self.gpu, self.python):
            if len(t):
                lo.append(int(t.start_ns.min()))
                hi.append(int(t.end_ns.max()))
        if not lo:
            return self.window
        return min(lo), max(hi)

    def device(self, index: int) -> DeviceInfo | None:
        for d in self.devices:
            if d.index == index:
                return d
        return None

    def names(self, codes: np.ndarray) -> np.ndarray:
        """Decode a name column to an object array of strings."""
        return self.strings.decode(codes)
