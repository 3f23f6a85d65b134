"""Which hardware spec each trace device is judged against.

Specs come from :mod:`traceclass.hardware` by the name the profiler reported, or from the
user's ``--device NAME`` override. A device that is not in the table (or whose name is
ambiguous) but whose export reports its memory bandwidth (Nsight Systems'
``TARGET_INFO_GPU.memoryBandwidth``, e.g. a Jetson Orin board with 8 SMs) gets a *partial*
spec: that bandwidth as its memory roof and no compute peaks, so copies and memory-bound
work are still judged while FLOP work stays unclassified; nothing is invented. Without a
reported bandwidth an unknown device yields no spec: the report says so and leaves roofline
labels out rather than guess.
"""

from __future__ import annotations

import dataclasses
import math
from types import MappingProxyType

import numpy as np

from traceclass import hardware, units
from traceclass.hardware.identify import identify
from traceclass.model import HOST_DEVICE, DeviceInfo, Trace

#: ``ResolvedDevice.how`` of a partial spec built from the export alone.
FROM_EXPORT = "not in the table; memory bandwidth from the export, no compute peaks"


@dataclasses.dataclass(frozen=True)
class ResolvedDevice:
    index: int  # trace device index; HOST_DEVICE (-1) for the host CPU
    reported_name: str
    spec: hardware.DeviceSpec | None
    how: str  # "detected", "--device override", FROM_EXPORT, "unknown", ...


def resolve_devices(trace: Trace, override: str | None = None, cpu_override: str | None = None) -> dict[int, ResolvedDevice]:
    """Spec per GPU device index used in the trace, plus the host CPU under :data:`HOST_DEVICE`
    (no GPU row carries it: :func:`traceclass.model.trace.known_gpu_devices`)."""
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
        if spec is None and not hardware.lookup_named(d.name):
            # the name does not say (ROCm's "AMD Radeon Graphics"): architecture, SM/CU count and
            # memory size from deviceProperties may; a name that does say, with figures that
            # contradict it, is not overruled
            found = identify(d.vendor.name.lower() if d.vendor.name in ("NVIDIA", "AMD") else "",
                             d.compute_capability, d.sm_count, d.memory_bytes)
            if found is not None:
                spec, how = found.spec, found.how
        if spec is not None and d.memory_bandwidth_bps:
            spec = hardware.with_measured_bandwidth(spec, d.memory_bandwidth_bps)
            how = "detected; memory bandwidth as the export reports it"
        elif spec is None:
            spec = bandwidth_only_spec(d)
            how = FROM_EXPORT if spec is not None else how
        out[d.index] = ResolvedDevice(d.index, d.name, spec, how)
    for u in used:
        if u not in out:
            out[u] = ResolvedDevice(u, "", forced, "--device override" if forced else "unknown")
    cpu = hardware.get(cpu_override, option="--cpu") if cpu_override else hardware.default_cpu()
    out[HOST_DEVICE] = ResolvedDevice(HOST_DEVICE, "host CPU", cpu, "--cpu override" if cpu_override else "assumed")
    return out


def bandwidth_only_spec(d: DeviceInfo) -> hardware.DeviceSpec | None:
    """A spec with only the memory bandwidth the trace reports for ``d`` (empty ``peaks``), or
    None when it reports none. :func:`hardware.peak_flops` then answers None for every
    precision, so the roofline gives FLOP work no label and judges copies by bandwidth."""
    bps = d.memory_bandwidth_bps
    if bps is None or not (bps > 0 and math.isfinite(bps)):
        return None
    shown = d.name.strip() or f"GPU {d.index}"
    name = f"{shown} (bandwidth from the export)"
    facts = [f"{units.byte_rate(bps)} memory bandwidth"]
    if d.sm_count:
        facts.append(f"{d.sm_count} SMs")
    if d.clock_hz:
        facts.append(units.frequency(d.clock_hz))
    if d.compute_capability:
        facts.append(f"compute capability {d.compute_capability}")
    note = (f"{shown!r} matches no entry of the hardware table; the export reports "
            f"{', '.join(facts)}. Only the memory roof is used: FLOP/s peaks are not guessed "
            "from SM count and clock, so FLOP-bound work stays unclassified (--device NAME "
            "judges it against a known spec).")
    return hardware.DeviceSpec(
        name=name,
        label=name,
        vendor=d.vendor.name.lower(),
        memory_bandwidth_bps=float(bps),
        peaks=MappingProxyType({}),
        sources=MappingProxyType({"memory_bandwidth": "reported by the profiler for this device"}),
        notes=(note,),
        kind="gpu",
        sm_count=d.sm_count,
        memory_gb=d.memory_bytes / 2**30 if d.memory_bytes else None,
    )


def modal_device(devices: np.ndarray) -> int:
    """The device most of these GPU rows ran on, and :data:`HOST_DEVICE` when there are none
    (an op without GPU work runs on the host). Rows whose export names no device have an index
    of their own (:func:`traceclass.model.trace.known_gpu_devices`), so they count like any other."""
    if len(devices) == 0:
        return HOST_DEVICE
    values, counts = np.unique(np.asarray(devices, dtype=np.int64), return_counts=True)
    return int(values[int(np.argmax(counts))])
