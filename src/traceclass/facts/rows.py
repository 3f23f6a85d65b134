"""Facts that are report rows as computed: their one schema (the report model uses these types as
``KernelRow``, ``KernelFamilyRow`` and ``MemoryRow``). Plain dataclasses, no numpy, so the
report model imports them without the analyses."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class KernelStats:
    """GPU activity per kernel name (the report's ``KernelRow``)."""

    name: str
    family: str
    device: int
    count: int
    total_ns: int
    mean_ns: float
    p50_ns: float
    max_ns: int
    share_pct: float  # of the summed busy time of every device
    bound: str  # from the op that launched it when that op launched only this kernel
    ops: tuple[str, ...]  # launching op names (most time first)
    full_name: str = ""  # demangled name when the display name is shortened
    # roofline per kernel, where the kernel is the only GPU work of its op (1:1 linked)
    flops: float | None = None  # per call
    bytes: float | None = None
    intensity: float | None = None
    achieved_flops_per_s: float | None = None
    achieved_bytes_per_s: float | None = None
    pct_of_roof: float | None = None


@dataclasses.dataclass(frozen=True)
class KernelFamilyStats:
    """GPU activity per kernel family, all kernels (not only the top rows of ``kernels``): the
    report's ``KernelFamilyRow``."""

    family: str
    count: int
    total_ns: int  # summed durations over the whole trace
    step_ns: tuple[int, ...] = ()  # summed durations launched from each analysed step, time order


@dataclasses.dataclass(frozen=True)
class MemoryPeak:
    """Allocator peaks from profiler memory events (torch ``profile_memory``): the report's
    ``MemoryRow``."""

    device_type: str  # "cpu" or "gpu"
    device: int  # -1 host
    events: int
    peak_allocated_bytes: int
    peak_reserved_bytes: int | None  # None when the allocator reports no reserve (CPU)
