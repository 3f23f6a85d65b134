"""Device specs: the data in ``specs.toml`` as frozen :class:`DeviceSpec` objects.

Peaks are keyed ``"<unit>_<precision>"`` (``matrix_bf16``, ``vector_fp32``) like TraceLens'
compute specs, with precisions named as :func:`traceclass.model.dtypes.canonical_dtype` names
them, so a cost-model precision and a spec key meet without translation.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import re
from importlib import resources
from types import MappingProxyType
from typing import Any, Mapping

from traceclass import units
try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

from traceclass.errors import ConfigError

UNITS = ("matrix", "vector")
PRECISIONS = ("fp64", "fp32", "tf32", "fp16", "bf16", "fp8", "fp4", "int8")
PEAK_KEYS = frozenset(f"{u}_{p}" for u in UNITS for p in PRECISIONS)


@dataclasses.dataclass(frozen=True)
class DeviceSpec:
    """Peak throughput and memory bandwidth of one device as a profiler sees it.

    ``name`` is the canonical short name (``h100-sxm``) accepted by ``--device``; ``label`` the
    product name for reports. ``peaks`` maps ``"<unit>_<precision>"`` to dense FLOP/s (int8:
    OP/s). ``sources`` maps each peak key, and ``"memory_bandwidth"``, to the document it comes
    from, with the derivation when the figure is not printed as such. ``cores`` and
    ``clock_hz`` are set for CPU specs only (the peaks are for that many cores).
    """

    name: str
    label: str
    vendor: str
    memory_bandwidth_bps: float
    peaks: Mapping[str, float] = dataclasses.field(hash=False)
    sources: Mapping[str, str] = dataclasses.field(hash=False)
    notes: tuple[str, ...] = ()
    kind: str = "gpu"
    aliases: tuple[str, ...] = ()
    match: tuple[str, ...] = ()
    sm_count: int | None = None
    memory_gb: float | None = None
    cores: int | None = None
    clock_hz: float | None = None
    #: host <-> device link bandwidth per direction (PCIe), bytes/s; None when not recorded.
    #: ``sources["host_link"]`` cites it. Copies HtoD/DtoH are judged against it.
    host_link_bps: float | None = None
    #: architecture as profilers report it (compute capability "8.0"; ROCm "gfx94"); None unknown
    arch: str | None = None


@dataclasses.dataclass(frozen=True)
class _CpuBase:
    """Per-core description of a CPU entry, kept to rescale it."""

    label: str
    vendor: str
    notes: tuple[str, ...]
    aliases: tuple[str, ...]
    flops_per_cycle: Mapping[str, float]
    sources: Mapping[str, str]
    clock_hz: float
    memory_channels: int
    memory_channel_bps: float


@dataclasses.dataclass(frozen=True)
class SpecTable:
    """Everything ``specs.toml`` holds, validated."""

    specs: Mapping[str, DeviceSpec]
    ambiguous: Mapping[str, str]  # normalized reported name -> why it is not resolved
    cpu_bases: Mapping[str, _CpuBase]


def load_specs() -> dict[str, DeviceSpec]:
    """All device specs by canonical name (a fresh dict over cached specs)."""
    return dict(_table().specs)


@functools.lru_cache(maxsize=1)
def _table() -> SpecTable:
    text = resources.files("traceclass.hardware").joinpath("specs.toml").read_text(encoding="utf-8")
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"hardware/specs.toml: {e}") from None
    return _parse(raw)


def _parse(raw: Mapping[str, Any]) -> SpecTable:
    sources = raw.get("sources", {})
    ambiguous = {normalize_name(k): str(v) for k, v in raw.get("ambiguous", {}).items()}
    specs: dict[str, DeviceSpec] = {}
    cpu_bases: dict[str, _CpuBase] = {}
    for name, d in raw.get("devices", {}).items():
        where = f"hardware/specs.toml [devices.{name}]"
        if d.get("kind", "gpu") == "cpu":
            base = _cpu_base(d, sources, where)
            cpu_bases[name] = base
            specs[name] = _cpu_spec(name, base, cores=1, clock_hz=None, bandwidth=None)
            continue
        peaks: dict[str, float] = {}
        cites: dict[str, str] = {}
        for key, fig in d.get("peaks", {}).items():
            if key not in PEAK_KEYS:
                raise ConfigError(f"{where}: unknown peak key {key!r}")
            peaks[key], cites[key] = _figure(fig, sources, f"{where} {key}")
        bw, cites["memory_bandwidth"] = _figure(d.get("memory_bandwidth"), sources, f"{where} memory_bandwidth")
        link = None
        if "host_link" in d:
            link, cites["host_link"] = _figure(d["host_link"], sources, f"{where} host_link")
        specs[name] = DeviceSpec(
            name=name,
            label=str(d.get("label", name)),
            vendor=str(d.get("vendor", "")),
            memory_bandwidth_bps=bw,
            peaks=MappingProxyType(peaks),
            sources=MappingProxyType(cites),
            notes=tuple(d.get("notes", ())),
            kind="gpu",
            aliases=tuple(d.get("aliases", ())),
            match=tuple(_checked_patterns(d.get("match", ()), where)),
            sm_count=d.get("sm_count"),
            memory_gb=d.get("memory_gb"),
            host_link_bps=link,
            arch=str(d["arch"]) if "arch" in d else None,
        )
    return SpecTable(MappingProxyType(specs), MappingProxyType(ambiguous), MappingProxyType(cpu_bases))


def _figure(fig: Any, sources: Mapping[str, str], where: str) -> tuple[float, str]:
    if not isinstance(fig, dict) or "value" not in fig or "source" not in fig:
        raise ConfigError(f"{where}: expected {{ value = ..., source = ... }}")
    value = float(fig["value"])
    if not (value > 0 and math.isfinite(value)):
        raise ConfigError(f"{where}: figure must be a positive number, got {fig['value']!r}")
    cite = sources.get(fig["source"])
    if not cite:
        raise ConfigError(f"{where}: unknown source {fig['source']!r}")
    derived = fig.get("derived")
    return value, f"{cite} ({derived})" if derived else cite


def _checked_patterns(patterns: Any, where: str) -> list[str]:
    out = []
    for p in patterns:
        try:
            re.compile(p)
        except re.error as e:
            raise ConfigError(f"{where}: bad match pattern {p!r}: {e}") from None
        out.append(p)
    return out


def _cpu_base(d: Mapping[str, Any], sources: Mapping[str, str], where: str) -> _CpuBase:
    per_cycle: dict[str, float] = {}
    cites: dict[str, str] = {}
    for key, fig in d.get("flops_per_cycle", {}).items():
        if key not in PEAK_KEYS:
            raise ConfigError(f"{where}: unknown peak key {key!r}")
        per_cycle[key], cites[key] = _figure(fig, sources, f"{where} {key}")
    chan_bps, cites["memory_bandwidth"] = _figure(d.get("memory_channel_bps"), sources, f"{where} memory_channel_bps")
    clock = float(d.get("clock_hz", 0))
    channels = int(d.get("memory_channels", 0))
    if clock <= 0 or channels <= 0:
        raise ConfigError(f"{where}: clock_hz and memory_channels must be positive")
    return _CpuBase(
        label=str(d.get("label", "")).replace("(per core)", "").strip(),
        vendor=str(d.get("vendor", "cpu")),
        notes=tuple(d.get("notes", ())),
        aliases=tuple(d.get("aliases", ())),
        flops_per_cycle=MappingProxyType(per_cycle),
        sources=MappingProxyType(cites),
        clock_hz=clock,
        memory_channels=channels,
        memory_channel_bps=chan_bps,
    )


def _cpu_spec(name: str, base: _CpuBase, cores: int, clock_hz: float | None,
              bandwidth: float | None) -> DeviceSpec:
    clock = clock_hz or base.clock_hz
    peaks = {k: v * clock * cores for k, v in base.flops_per_cycle.items()}
    cites = dict(base.sources)
    for k in peaks:
        cites[k] = f"{cites[k]} (x {units.frequency(clock)} x {cores} core{'s' if cores != 1 else ''})"
    if bandwidth is None:
        bandwidth = base.memory_channels * base.memory_channel_bps
        cites["memory_bandwidth"] = f"{cites['memory_bandwidth']} (x {base.memory_channels} channels, any core count)"
    else:
        cites["memory_bandwidth"] = "given by the caller"
    return DeviceSpec(
        name=name if cores == 1 else f"{name}:{cores}",
        label=f"{base.label}, {cores} core{'s' if cores != 1 else ''} @ {units.frequency(clock)}",
        vendor=base.vendor,
        memory_bandwidth_bps=float(bandwidth),
        peaks=MappingProxyType(peaks),
        sources=MappingProxyType(cites),
        notes=base.notes,
        kind="cpu",
        aliases=base.aliases if cores == 1 else (),
        match=(),
        cores=cores,
        clock_hz=clock,
    )


def cpu_spec(name: str = "cpu-generic-avx2", cores: int = 1, clock_hz: float | None = None,
             memory_bandwidth_bps: float | None = None) -> DeviceSpec:
    """A CPU entry scaled to ``cores`` cores (and optionally another clock or a measured bandwidth).

    FLOP rates scale linearly with cores x clock. Memory bandwidth does not: it stays the
    entry's channels x per-channel rate unless ``memory_bandwidth_bps`` is given.
    """
    table = _table()
    base = table.cpu_bases.get(name)
    if base is None:
        raise ConfigError(f"{name!r} is not a CPU entry; CPU entries: {', '.join(sorted(table.cpu_bases))}")
    if cores < 1:
        raise ConfigError(f"core count must be at least 1, got {cores}")
    return _cpu_spec(name, base, cores, clock_hz, memory_bandwidth_bps)


def default_cpu(cores: int = 1) -> DeviceSpec:
    """The generic AVX2 CPU entry for ``cores`` cores (1 unless told: traces do not say)."""
    return cpu_spec("cpu-generic-avx2", cores)


def peak_flops(spec: DeviceSpec, precision: str, unit: str) -> float | None:
    """Peak FLOP/s of ``spec`` for ``precision`` on ``unit`` ("matrix" or "vector"), or None.

    Fallback order, and nothing beyond it:

    1. the exact key ``<unit>_<precision>``;
    2. ``matrix`` fp64/fp32 -> ``vector`` of the same precision: a GEMM in those precisions runs
       on the vector units when the device has no matrix path for them (NVIDIA SGEMM without
       TF32, pre-Ampere DGEMM, CPUs);
    3. ``vector`` fp16/bf16/fp8 -> ``vector_fp32``: ATen's pointwise and reduction kernels
       compute half-precision data in fp32 ("opmath"), so the fp32 rate bounds them.

    TF32 is never substituted for fp32: an fp32 matmul uses TF32 only when the program allows
    it (``torch.backends.cuda.matmul.allow_tf32``), so callers ask for ``tf32`` explicitly.
    A missing matrix fp16/bf16/fp8/int8 figure is None, not a guess.
    """
    if unit not in UNITS:
        raise ValueError(f"unit must be 'matrix' or 'vector', got {unit!r}")
    peaks = spec.peaks
    v = peaks.get(f"{unit}_{precision}")
    if v is not None:
        return v
    if unit == "matrix" and precision in ("fp64", "fp32"):
        return peaks.get(f"vector_{precision}")
    if unit == "vector" and precision in ("fp16", "bf16", "fp8"):
        return peaks.get("vector_fp32")
    return None


def ridge_point(spec: DeviceSpec, precision: str, unit: str) -> float | None:
    """FLOP per byte at which ``spec`` turns from memory- to compute-bound; None without a peak."""
    peak = peak_flops(spec, precision, unit)
    if peak is None or spec.memory_bandwidth_bps <= 0:
        return None
    return peak / spec.memory_bandwidth_bps


def with_measured_bandwidth(spec: DeviceSpec, bps: float) -> DeviceSpec:
    """``spec`` with the memory bandwidth the profiler reported, recorded in notes and sources."""
    if not (bps > 0 and math.isfinite(bps)):
        return spec
    sources = dict(spec.sources)
    sources["memory_bandwidth"] = "reported by the profiler for this device"
    note = (f"Memory bandwidth {units.byte_rate(bps)} as reported by the profiler "
            f"(datasheet: {units.byte_rate(spec.memory_bandwidth_bps)}).")
    return dataclasses.replace(spec, memory_bandwidth_bps=float(bps), sources=MappingProxyType(sources),
                               notes=spec.notes + (note,))


def normalize_name(name: str) -> str:
    """Reported device name as matched: lower case, ``_`` as space, single spaces, trimmed."""
    return re.sub(r"[\s_]+", " ", name.strip().lower())
