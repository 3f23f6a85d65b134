"""The :class:`Facts` object: one lazily computed, cached attribute per shared fact."""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from traceclass import timeline as tl
from traceclass.analysis.devices import ResolvedDevice, resolve_devices
from traceclass.analysis.gpu_timeline import DeviceTimeline, device_timelines
from traceclass.analysis.kernel_families import gpu_families, gpu_family_codes
from traceclass.analysis.ops import OpAnalysis, analyze_ops
from traceclass.analysis.roofline import Roof
from traceclass.analysis.stages import Occurrences, StageStats, stage_occurrences, stage_stats
from traceclass.config import AnalysisConfig
from traceclass.facts.analysed import AnalysedTime, analysed_time, gpu_in_analysed
from traceclass.facts.gaps import Gaps, active_devices, device_gaps
from traceclass.facts.host import HostView, host_view
from traceclass.facts.idle_causes import IdleCauses, idle_causes
from traceclass.facts.idle_host import host_during
from traceclass.facts.kernels import kernel_families, kernel_stats
from traceclass.facts.memory import memory_peaks
from traceclass.facts.rows import KernelFamilyStats, KernelStats, MemoryPeak
from traceclass.facts.roof import roof_for
from traceclass.facts.stage_roofline import StageWork, stage_work
from traceclass.facts.step_series import MAX_STEP_SERIES, StepSeries, step_series
from traceclass.facts.steps import Steps, gpu_steps, steps
from traceclass.facts.syncs import SyncEvents, sync_events
from traceclass.model import AnnotationKind, Trace, Vendor


class Facts:
    """Shared facts over one trace and analysis configuration, each computed on first use.

    The attribute names of the former ``Analysis`` bundle (``config, devices, timelines,
    occurrences, stages, ops, gpu_family, gpu_family_code, cpu, roof()``) are kept.
    """

    def __init__(self, trace: Trace, config: AnalysisConfig | None = None) -> None:
        self.trace = trace
        self.config = config or AnalysisConfig()

    def __repr__(self) -> str:
        done = sorted(k for k in self.__dict__ if k not in ("trace", "config"))
        return f"Facts({self.trace.source.path!r}, computed={done})"

    # ----------------------------------------------------------------- devices

    @functools.cached_property
    def devices(self) -> dict[int, ResolvedDevice]:
        """Trace device index (-1 host CPU) -> resolved hardware spec."""
        return resolve_devices(self.trace, self.config.device, self.config.cpu_device)

    def roof(self, device: int, precision: str, unit: str) -> Roof | None:
        return roof_for(self.devices, device, precision, unit)

    @functools.cached_property
    def gpu_family_code(self) -> np.ndarray:
        """Kernel family per ``trace.gpu`` row as int8 indices into ``kernel_families.FAMILY_ORDER``."""
        return gpu_family_codes(self.trace)

    @functools.cached_property
    def gpu_family(self) -> np.ndarray:
        """Kernel family name per ``trace.gpu`` row (object array)."""
        return gpu_families(self.trace, self.gpu_family_code)

    @functools.cached_property
    def timelines(self) -> list[DeviceTimeline]:
        def cached(dev: int) -> tuple[tl.Intervals, tl.Intervals]:
            g = self.gaps(dev)
            return g.busy, (g.start_ns, g.end_ns)

        return device_timelines(self.trace, self.gpu_family_code, cached)

    @functools.cached_property
    def longest_idle_host(self) -> dict[int, tuple[str, str | None]]:
        """Device -> the host activity covering most of its longest idle stretch, and its source line."""
        return {t.device: host_during(self.trace, t.longest_idle_start_ns, t.longest_idle_end_ns)
                for t in self.timelines}

    @functools.cached_property
    def active_devices(self) -> list[int]:
        """Devices with GPU work (sync records apart), ascending."""
        return active_devices(self.trace)

    @functools.cached_property
    def _gaps(self) -> dict[int, Gaps]:
        return {}

    def gaps(self, device: int) -> Gaps:
        """Idle gaps of one device (computed once per device)."""
        got = self._gaps.get(device)
        if got is None:
            got = self._gaps[device] = device_gaps(self.trace, device)
        return got

    # ----------------------------------------------------------------- steps and stages

    @functools.cached_property
    def occurrences(self) -> Occurrences:
        return stage_occurrences(self.trace, self.config.warmup_steps)

    @functools.cached_property
    def stages(self) -> list[StageStats]:
        return stage_stats(self.occurrences, has_gpu=len(self.trace.gpu) > 0)

    @functools.cached_property
    def analysed(self) -> AnalysedTime:
        """The steady-state step windows (the whole trace without steps): the one analysed time."""
        return analysed_time(self.occurrences)

    @functools.cached_property
    def gpu_analysed(self) -> np.ndarray:
        """Mask over ``trace.gpu``: work launched inside the analysed windows."""
        return gpu_in_analysed(self.trace, self.analysed)

    @functools.cached_property
    def steps(self) -> Steps:
        """Non-empty steps by start, ``warmup`` = outside the analysed time."""
        return steps(self.trace, self.occurrences, self.analysed.occurrence)

    @functools.cached_property
    def gpu_step(self) -> np.ndarray:
        """Index into :attr:`steps` per ``trace.gpu`` row (by launch), -1 for none."""
        return gpu_steps(self.trace, self.steps)

    @functools.cached_property
    def warmup_windows(self) -> np.ndarray | None:
        """``[start, end)`` rows of the warm-up steps (None without any): work starting in them
        is left out of the op groups."""
        occ = self.occurrences
        step_kind = int(AnnotationKind.STEP)
        warm = np.flatnonzero(occ.warmup & (np.array(occ.kinds, dtype=np.int64)[occ.stage] == step_kind))
        return np.stack([occ.start_ns[warm], occ.end_ns[warm]], 1) if len(warm) else None

    # ----------------------------------------------------------------- host

    @functools.cached_property
    def sync_events(self) -> SyncEvents:
        return sync_events(self.trace)

    @functools.cached_property
    def host_view(self) -> HostView:
        return host_view(self.trace, self.sync_events)

    @functools.cached_property
    def idle_causes(self) -> IdleCauses:
        """Every GPU-idle stretch of the analysed time with exactly one cause (host sync, host work,
        data loading, launch overhead, communication, initialisation, outside the window, suspected
        profiler overhead, unknown): the one attribution the idle-time rules and the verdict use."""
        return idle_causes(self.trace, self.analysed, self.sync_events, self.host_view, self.gaps)

    # ----------------------------------------------------------------- ops and roofline

    @functools.cached_property
    def ops(self) -> OpAnalysis:
        cfg, trace = self.config, self.trace
        # host ops of a GPU program whose kernels were not captured are not CPU work: no CPU roof
        gpu_program = any(d.vendor in (Vendor.NVIDIA, Vendor.AMD) for d in trace.devices)
        return analyze_ops(
            trace, self.roof,
            cfg.latency_floor_us * 1000.0, cfg.cpu_latency_floor_us * 1000.0,
            cfg.latency_call_us * 1000.0, cfg.cpu_latency_call_us * 1000.0,
            warmup_windows=self.warmup_windows, cpu_roof=not gpu_program, family_codes=self.gpu_family_code,
        )

    @functools.cached_property
    def stage_work(self) -> dict[str, StageWork]:
        """Stage name -> the work inside its occurrences, on the roofline."""
        return stage_work(self.trace, self.occurrences, self.stages, self.ops, self.roof)

    @functools.cached_property
    def step_series(self) -> StepSeries:
        """Per op group and kernel family: time in each analysed step (the first
        ``MAX_STEP_SERIES``, time order)."""
        return step_series(self.trace, self.occurrences, self.ops, self.gpu_family_code,
                           self.analysed.occurrence[:MAX_STEP_SERIES])

    # ----------------------------------------------------------------- kernels and memory

    @functools.cached_property
    def kernels(self) -> tuple[KernelStats, ...]:
        """Per kernel name (the 200 with most time), most time first."""
        return kernel_stats(self.trace, self.ops, self.timelines, self.gpu_family_code)

    @functools.cached_property
    def kernel_families(self) -> tuple[KernelFamilyStats, ...]:
        series = self.step_series
        return kernel_families(self.trace, self.gpu_family_code, series.per_family, series.steps_count)

    @functools.cached_property
    def memory(self) -> tuple[MemoryPeak, ...]:
        return memory_peaks(self.trace)

    # ----------------------------------------------------------------- CPU samples

    @functools.cached_property
    def cpu(self) -> Any:
        """CPU-sample profile (py-spy, nsys samples), None when the trace has no samples."""
        if not len(self.trace.samples):
            return None
        from traceclass.analysis.cpu_profile import profile_samples

        return profile_samples(self.trace, kinds=self.sample_kinds)

    @functools.cached_property
    def sample_kinds(self) -> Any:
        """Kind of each sample row (on-CPU, blocked, idle ...): shared by the profile and the
        per-row view, so the frame classification runs once per trace."""
        from traceclass.analysis.cpu_kinds import sample_kinds

        return sample_kinds(self.trace)

    @functools.cached_property
    def cpu_sites(self) -> Any:
        """Per-sample-row view of the CPU profile shared by the CPU-sample rules (TC501-TC506),
        None without samples or when their values are not time."""
        from traceclass.analysis.cpu_sites import cpu_sites

        return cpu_sites(self.trace, self.cpu, kinds=self.sample_kinds if len(self.trace.samples) else None)


def analyze(trace: Trace, config: AnalysisConfig | None = None) -> Facts:
    """The facts of a trace; each is computed when first read."""
    return Facts(trace, config)
