"""Which hardware spec each trace device is judged against.

Specs come from :mod:`traceclass.hardware` by the name the profiler reported, or from the
user's ``--device NAME`` override. An unknown or ambiguous name yields no spec: the report
says so and leaves roofline labels out rather than guess.
"""

from __future__ import annotations

import dataclasses

from traceclass import hardware
from traceclass.model import Trace


@dataclasses.dataclass(frozen=True)
class ResolvedDevice:
    index: int  # trace device index; -1 for the host CPU
    reported_name: str
    spec: hardware.DeviceSpec | None
    how: str  # "detected", "--device override", "measured bandwidth from the export", "unknown"


def resolve_devices(trace: Trace, override: str | None = None, cpu_override: str | None = None) -> dict[int, ResolvedDevice]:
    """Spec per GPU device index used in the trace, plus the host CPU under index -1."""
    out: dict[int, ResolvedDevice] = {}
    used = set(int(x) for x in set(trace.gpu.device.tolist())) if len(trace.gpu) else set()
    forced = hardware.get(override) if override else None
    for d in trace.devices:
        if used and d.index not in used:
            continue
        if forced is not None:
            out[d.index] = ResolvedDevice(d.index, d.name, forced, "--device override")
            continue
        spec = hardware.lookup(d.name, sm_count=d.sm_count, memory_bytes=d.memory_bytes) if d.name else None
        how = "detected" if spec is not None else "unknown"
        if spec is not None and d.memory_bandwidth_bps:
            spec = hardware.with_measured_bandwidth(spec, d.memory_bandwidth_bps)
            how = "detected; memory bandwidth as the export reports it"
        out[d.index] = ResolvedDevice(d.index, d.name, spec, how)
    for u in used:
        if u not in out:
            out[u] = ResolvedDevice(u, "", forced, "--device override" if forced else "unknown")
    cpu = hardware.get(cpu_override) if cpu_override else hardware.default_cpu()
    out[-1] = ResolvedDevice(-1, "host CPU", cpu, "--cpu override" if cpu_override else "assumed")
    return out
