"""The report as plain data: what every renderer receives.

Field names carry their units (``_ns``, ``_bytes``, ``_pct``, ``_per_s``); FLOPs are counts.
Times in ``*_start_ns`` fields are relative to the trace's first event, so reports of
different runs line up. Renderers never see the trace or the analyses.

Rows that are a fact as computed are the fact's own dataclass, under the report's row name:
``KernelRow`` (facts.rows.KernelStats), ``KernelFamilyRow`` (KernelFamilyStats), ``MemoryRow``
(MemoryPeak).
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Mapping

from traceclass.facts.rows import KernelFamilyStats as KernelFamilyRow
from traceclass.facts.rows import KernelStats as KernelRow
from traceclass.facts.rows import MemoryPeak as MemoryRow
from traceclass.model.enums import Captured
from traceclass.report.cpu import CpuSection
from traceclass.rule import Finding

SCHEMA_VERSION = 1


@dataclasses.dataclass(frozen=True)
class SourceSummary:
    file: str  # base name only: reports must not leak paths
    format: str
    producer: str
    format_version: str
    size_bytes: int
    duration_ns: int  # first event -> last event
    captured: tuple[Captured, ...]
    counts: dict[str, int]  # rows per table
    meta: dict[str, Any]  # versions and flags (never host or user names)
    start_epoch_ns: int | None = None  # wall-clock time of the first event (Unix epoch), None when unknown
    start_epoch_basis: str = ""  # where start_epoch_ns comes from ("baseTimeNanoseconds", ...)


@dataclasses.dataclass(frozen=True)
class HardwareRow:
    device: int  # trace device index; -1 = host CPU
    reported_name: str
    spec: str | None  # the spec used, None when unknown
    how: str
    memory_bandwidth_per_s: float | None  # bytes/s
    peaks_flops_per_s: dict[str, float]  # "matrix_bf16" -> FLOP/s
    sources: tuple[str, ...]
    notes: tuple[str, ...] = ()  # assumptions behind the figures (CPU entries state their clock)


@dataclasses.dataclass(frozen=True)
class DeviceRow:
    device: int
    name: str
    window_start_ns: int
    window_ns: int
    busy_ns: int
    idle_ns: int
    compute_ns: int
    copy_ns: int
    comm_ns: int
    exposed_copy_ns: int
    exposed_comm_ns: int
    busy_pct: float
    idle_pct: float
    compute_pct: float
    copy_pct: float
    comm_pct: float
    kernels: int
    memcpys: int
    memsets: int
    streams: int
    profiler_window_ns: int | None
    idle_in_profiler_window_ns: int | None
    comm_overlap_pct: float | None = None  # comm time overlapped by compute / comm time (HTA's definition)
    longest_idle_start_ns: int | None = None  # from the trace start
    longest_idle_ns: int | None = None
    longest_idle_host: str = ""  # what the host was doing meanwhile (API call or op), plain text
    longest_idle_source: str | None = None  # file:line of that host activity, when stacks exist
    launches: int = 0
    launch_delay_p50_ns: float | None = None
    launch_delay_p90_ns: float | None = None
    launch_delay_max_ns: int | None = None
    kernels_shorter_than_launch: int = 0


@dataclasses.dataclass(frozen=True)
class StageRow:
    name: str
    kind: str
    count: int
    warmup_count: int
    total_ns: int
    p50_ns: float
    p90_ns: float
    p99_ns: float
    mean_ns: float
    min_ns: int
    max_ns: int
    warmup_p50_ns: float | None
    gpu_busy_ns: int | None
    gpu_share_pct: float | None  # GPU busy / span (range start to the later of its end and its last GPU work)
    dominant_bound: str  # by time of the work inside the stage; "" when nothing classified
    bound_shares_pct: dict[str, float]
    flops: float | None  # modeled FLOPs inside the steady-state occurrences
    bytes: float | None
    intensity: float | None
    work_ns: int = 0  # GPU busy (GPU traces) or op time (CPU traces) of the steady occurrences
    roof: str = ""  # "bf16 matrix, h100-sxm": the roof of the group holding most FLOPs
    ridge: float | None = None
    achieved_flops_per_s: float | None = None  # modeled FLOPs over all work time (a lower bound)
    achieved_bytes_per_s: float | None = None
    attainable_flops_per_s: float | None = None
    pct_of_roof: float | None = None
    lower_bound_ns: float | None = None
    gap_ns: float | None = None
    roofline_bound: str = ""  # label of the stage's modeled work as a whole
    empty_count: int = 0  # steps with no work, left out of the statistics
    wall_ns: tuple[int, ...] = ()  # steady-state occurrence wall times in time order (for noise estimates)
    gpu_busy_each_ns: tuple[int, ...] = ()  # GPU busy per steady occurrence (GPU traces)


@dataclasses.dataclass(frozen=True)
class OpRow:
    name: str
    shapes: str
    dtype: str
    kind: str  # "op", "kernel" (no op recorded), "graph" (graph replay)
    count: int
    kernels: int
    total_ns: int
    share_pct: float
    host_ns: int
    device: int
    family: str
    flops: float | None  # per call
    bytes: float | None  # per call
    intensity: float | None  # FLOP/byte
    ridge: float | None  # FLOP/byte
    precision: str
    unit: str
    bound: str
    heuristic: bool
    achieved_flops_per_s: float | None
    achieved_bytes_per_s: float | None
    attainable_flops_per_s: float | None
    pct_of_roof: float | None
    lower_bound_ns: float | None  # per call
    gap_ns: float | None  # total over all calls: time above the lower bound
    note: str
    top_kernels: tuple[str, ...]
    causal: bool = False  # causal attention: FLOPs count the unmasked half only
    # time of this group inside each steady-state step, in time order (same basis as total_ns;
    # instances are counted in the step their owner op started in); () when not computed
    step_ns: tuple[int, ...] = ()
    # achievable stake (analysis.achievable): time above the achievable ceiling, total over calls;
    # None when the row has no roofline point. gap_ns stays as the datasheet gap.
    stake_ns: int | None = None
    stake_basis: str = ""  # "48% best sibling" / "80% documented (gemm)"
    stake_detail: str = ""  # the sibling, or the documented fraction's source


@dataclasses.dataclass(frozen=True)
class Opportunity:
    title: str  # plain text
    recoverable_ns: int
    source: str  # finding code, or "roofline" / "timeline"
    names: tuple[str, ...] = ()  # op/kernel names mentioned (rendered as code)
    overlaps: tuple[str, ...] = ()  # other findings counting the same time (not additive)
    where: str = ""  # "file.py:123" of the first evidence with a source line
    fingerprint: str = ""  # the finding's fingerprint ("" for roofline items)
    merged: tuple[str, ...] = ()  # other findings claiming the same idle cause, merged into this one
    idle_cause: str | None = None  # the shared idle attribution's cause this opportunity recovers


@dataclasses.dataclass(frozen=True)
class IdleSummary:
    """The analysed time and the shared idle attribution behind the verdict's headline."""

    analysed_ns: int  # wall time of the steady steps (the whole trace without steps)
    steps_count: int
    synthetic: bool  # no steps: the whole trace is the analysed time
    busy_ns: dict[int, int]  # per device: GPU busy inside the analysed time
    idle_by_cause_ns: dict[int, dict[str, int]]  # per device: idle of the analysed time by cause
    backlog_busy_ns: dict[int, int] = dataclasses.field(default_factory=dict)  # per device: busy_ns part that
    #                                  only work queued before the profiler window covers
    # per device: the part of its "unknown" idle in which the GPU had its next work queued and
    # did not start it (IdleCauses.queued) in stretches of LAUNCH_LATENCY_NS or more, the part in
    # shorter ones (start-up latency), and the longest such stretch: (ns, the work it waited
    # before, its stream, what the host was doing meanwhile (plain text), its source line)
    unknown_queued_ns: dict[int, int] = dataclasses.field(default_factory=dict)
    unknown_latency_ns: dict[int, int] = dataclasses.field(default_factory=dict)
    longest_queued: dict[int, tuple[int, str, int, str, str]] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class Report:
    traceclass_version: str
    source: SourceSummary
    hardware: tuple[HardwareRow, ...]
    devices: tuple[DeviceRow, ...]
    stages: tuple[StageRow, ...]
    ops: tuple[OpRow, ...]
    ops_total_ns: int  # denominator of OpRow.share_pct
    ops_time_basis: str  # "gpu" or "cpu"
    unmodeled_ops: dict[str, int]
    kernels: tuple[KernelRow, ...]
    findings: tuple[Finding, ...]
    opportunities: tuple[Opportunity, ...]
    cpu_profile: CpuSection | None  # the sampled-profile section (py-spy, speedscope ...), or None
    notes: tuple[str, ...]
    thresholds: dict[str, Any]  # analysis settings used (latency floors, warm-up)
    rule_errors: tuple[str, ...] = ()
    schema_version: int = SCHEMA_VERSION
    ops_cover: str = "steady steps"  # which steps the op groups' totals cover
    kernel_families: tuple[KernelFamilyRow, ...] = ()
    memory: tuple[MemoryRow, ...] = ()
    step_series_steps: int = 0  # steady steps behind OpRow.step_ns / KernelFamilyRow.step_ns
    idle: IdleSummary | None = None  # analysed time, GPU busy in it and its idle by cause

    def to_dict(self) -> dict[str, Any]:
        """Every field as plain JSON data (non-finite floats become None; findings carry their
        fingerprint). :meth:`from_json` reads it back."""
        from traceclass.report.plain import plain

        return plain(self)

    def to_json(self) -> str:
        """The report model as JSON text: ``Report.from_json(r.to_json()) == r``.

        This is the model itself; ``traceclass analyze --format json`` adds the verdict prose
        (render/json_report.py)."""
        return json.dumps(self.to_dict(), indent=1, ensure_ascii=False, allow_nan=False) + "\n"

    @classmethod
    def from_json(cls, data: str | bytes | Mapping[str, Any]) -> Report:
        """The report written by :meth:`to_json` (text, bytes or its parsed dict)."""
        import msgspec

        doc = json.loads(data) if isinstance(data, (str, bytes, bytearray)) else data
        try:
            return msgspec.convert(doc, cls, strict=False)
        except msgspec.ValidationError as exc:
            from traceclass.errors import TraceFormatError

            raise TraceFormatError("report JSON", f"not a traceclass report model ({exc})") from None
