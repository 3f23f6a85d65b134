"""Pure analyses over a :class:`~traceclass.model.Trace`, computed once and shared.

:func:`analyze` returns an :class:`Analysis` bundle that the rules and the report read; no
analysis prints, plots or reads files.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from traceclass.analysis.devices import ResolvedDevice, resolve_devices
from traceclass.analysis.gpu_timeline import DeviceTimeline, device_timelines
from traceclass.analysis.kernel_families import gpu_families, gpu_family_codes
from traceclass.analysis.ops import OpAnalysis, analyze_ops
from traceclass.analysis.roofline import Roof
from traceclass.analysis.stages import Occurrences, StageStats, stage_occurrences, stage_stats
from traceclass.config import AnalysisConfig
from traceclass.model import AnnotationKind, Trace, Vendor


@dataclasses.dataclass(frozen=True)
class Analysis:
    config: AnalysisConfig
    devices: dict[int, ResolvedDevice]  # trace device index (-1 host CPU) -> spec
    timelines: list[DeviceTimeline]
    occurrences: Occurrences
    stages: list[StageStats]
    ops: OpAnalysis
    gpu_family: np.ndarray  # family name per trace.gpu row (object array)
    gpu_family_code: np.ndarray  # the same as int8 indices into kernel_families.FAMILY_ORDER
    cpu: Any = None  # CPU-sample profile (py-spy), when the trace has samples

    def roof(self, device: int, precision: str, unit: str) -> Roof | None:
        return _roof(self.devices, device, precision, unit)


def _roof(devices: dict[int, ResolvedDevice], device: int, precision: str, unit: str) -> Roof | None:
    from traceclass import hardware

    rd = devices.get(device)
    if rd is None or rd.spec is None:
        return None
    spec = rd.spec
    if unit == "link":  # host <-> device copies: the PCIe / C2C link is the roof
        if not spec.host_link_bps:
            return None
        return Roof(device=spec.name, precision="", unit="link", peak_flops=None,
                    bandwidth_bps=spec.host_link_bps)
    return Roof(
        device=spec.name,
        precision=precision,
        unit=unit,
        peak_flops=hardware.peak_flops(spec, precision, unit) if precision else None,
        bandwidth_bps=spec.memory_bandwidth_bps,
    )


def analyze(trace: Trace, config: AnalysisConfig | None = None) -> Analysis:
    cfg = config or AnalysisConfig()
    devices = resolve_devices(trace, cfg.device, cfg.cpu_device)
    fam_codes = gpu_family_codes(trace)
    fam = gpu_families(trace, fam_codes)
    timelines = device_timelines(trace, fam)
    occ = stage_occurrences(trace, cfg.warmup_steps)
    stats = stage_stats(occ, has_gpu=len(trace.gpu) > 0)

    def roof_for(device: int, precision: str, unit: str) -> Roof | None:
        return _roof(devices, device, precision, unit)

    step_kind = int(AnnotationKind.STEP)
    warm_steps = np.flatnonzero(occ.warmup & (np.array(occ.kinds, dtype=np.int64)[occ.stage] == step_kind))
    windows = np.stack([occ.start_ns[warm_steps], occ.end_ns[warm_steps]], 1) if len(warm_steps) else None
    # host ops of a GPU program whose kernels were not captured are not CPU work: no CPU roof
    gpu_program = any(d.vendor in (Vendor.NVIDIA, Vendor.AMD) for d in trace.devices)
    ops = analyze_ops(
        trace, roof_for,
        cfg.latency_floor_us * 1000.0, cfg.cpu_latency_floor_us * 1000.0,
        cfg.latency_call_us * 1000.0, cfg.cpu_latency_call_us * 1000.0,
        warmup_windows=windows, cpu_roof=not gpu_program, family_codes=fam_codes,
    )
    cpu = None
    if len(trace.samples):
        try:
            from traceclass.analysis.cpu_profile import profile_samples
        except ImportError:  # the sampled-profile analysis is optional until it lands
            profile_samples = None
        if profile_samples is not None:
            cpu = profile_samples(trace)
    return Analysis(
        config=cfg,
        devices=devices,
        timelines=timelines,
        occurrences=occ,
        stages=stats,
        ops=ops,
        gpu_family=fam,
        gpu_family_code=fam_codes,
        cpu=cpu,
    )
