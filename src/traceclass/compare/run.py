"""What a comparison needs from one run: a :class:`~traceclass.report.model.Report` and its
sampled CPU profile's comparable part.

A run reaches ``diff`` / ``check`` either as a trace (analysed into a Report) or as a saved
document: a JSON report of ``traceclass analyze --format json``, the ``run`` block of a baseline
file, or :meth:`Report.to_json`. :func:`report_from_dict` is the one place that turns a saved
document into a Report (older layouts included), so a diff of two traces and a diff of their
saved reports are the same diff. :class:`Run` reads the report's own rows (``StageRow``,
``OpRow``, ``KernelFamilyRow``, ``DeviceRow``, ``MemoryRow``, ``Finding``): no copy of their
schema here.

Reports written before per-step series existed (no ``step_ns``) still load: op groups and
kernel families then fall back to "total ÷ steps in the trace" with the noise unknown.

Sampled CPU profiles (py-spy, ...) contribute their ``cpu_profile`` block: hot spots, kinds and
threads, with the key names of the JSON report (``self_ns`` / ``self_samples``, ``time_ns`` /
``share_pct``), so a trace and its saved JSON report give the same :class:`CpuRun`.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Sequence

from traceclass.analysis.cpu_types import frame_location
from traceclass.analysis.stages import WHOLE_TRACE
from traceclass.errors import TraceFormatError
from traceclass.report.model import (DeviceRow, KernelFamilyRow, MemoryRow, OpRow, Report, StageRow)
from traceclass.report.plain import plain
from traceclass.rule import Finding

# the report keys a comparison reads: what a baseline file keeps of the report
_KEYS = ("schema_version", "traceclass_version", "source", "hardware", "devices", "stages", "ops",
         "ops_time_basis", "ops_cover", "kernels", "kernel_families", "memory", "step_series_steps", "findings",
         "thresholds", "cpu_profile")

# report fields a saved document may lack (baseline ``run`` blocks keep only _KEYS; older reports
# predate some); ``ops_cover`` absent means an older report whose op totals cover every step
_MISSING = {"hardware": [], "devices": [], "stages": [], "ops": [], "ops_total_ns": 0, "ops_time_basis": "",
            "unmodeled_ops": {}, "kernels": [], "findings": [], "opportunities": [], "notes": [],
            "thresholds": {}, "ops_cover": ""}


def op_key(o: OpRow) -> tuple[str, str, str, str]:
    """Matching key: op groups by name, shapes and dtype; kernel/graph groups by name."""
    if o.kind == "op":
        return ("op", o.name, o.shapes, o.dtype)
    return (o.kind, o.name, "", "")


@dataclasses.dataclass(frozen=True)
class CpuFrame:
    """A hot spot: one (function, file, line) with its self time."""

    function: str
    file: str
    line: int | None
    kind: str
    self_ns: int | None  # None when the sampling interval is unknown
    self_samples: int | None  # None for weighted or timed profiles without sample counts
    self_pct: float  # of all sampled time

    @property
    def key(self) -> tuple[str, str, int | None]:
        return (self.function, self.file, self.line)

    @property
    def location(self) -> str:
        return frame_location(self.file, self.line)


@dataclasses.dataclass(frozen=True)
class CpuShare:
    """A kind (Python compute, lock wait, ...) or a thread: its time, samples and share."""

    key: str  # kind code, or the thread's matching key
    label: str  # kind label, or the thread's name
    ns: int | None
    samples: int | None
    pct: float
    running_pct: float | None = None  # threads: share of their own time not waiting


@dataclasses.dataclass(frozen=True)
class CpuRun:
    """The comparable part of a sampled CPU profile."""

    unit: str  # "ns", "samples" or "units" (weights that are not time)
    interval_ns: int | None
    total_ns: int | None
    samples: int | None
    includes_idle: bool | None
    gil_only: bool | None
    source_lines: int  # leaf lines whose source text was read (--source-root)
    hot_spots: tuple[CpuFrame, ...]  # by self time, largest first; the report keeps the top ones
    kinds: tuple[CpuShare, ...]
    threads: tuple[CpuShare, ...]

    @property
    def hot_spots_complete(self) -> bool:
        """Whether every sampled line is listed (else a line missing here may just rank lower)."""
        listed = sum(h.self_pct for h in self.hot_spots) + sum(k.pct for k in self.kinds if k.key == "none")
        return listed >= 99.5

    @property
    def hot_spot_floor_pct(self) -> float:
        """Lines not listed take at most this share each."""
        return 0.0 if self.hot_spots_complete or not self.hot_spots else min(h.self_pct for h in self.hot_spots)


@dataclasses.dataclass(frozen=True)
class Run:
    """One run as a comparison reads it: the report, plus its CPU profile's comparable part."""

    report: Report
    cpu: CpuRun | None = None  # sampled CPU profile, when the trace holds samples

    @property
    def file(self) -> str:
        return self.report.source.file

    @property
    def format(self) -> str:
        return self.report.source.format

    @property
    def producer(self) -> str:
        return self.report.source.producer

    @property
    def format_version(self) -> str:
        return self.report.source.format_version

    @property
    def traceclass_version(self) -> str:
        return self.report.traceclass_version

    @property
    def meta(self) -> Mapping[str, Any]:
        return self.report.source.meta

    @property
    def start_epoch_ns(self) -> int | None:
        return self.report.source.start_epoch_ns

    @property
    def start_epoch_basis(self) -> str:
        return self.report.source.start_epoch_basis

    @property
    def hardware(self) -> tuple[tuple[int, str, str | None], ...]:
        """(device, reported name, spec used) per hardware row."""
        return tuple((h.device, h.reported_name, h.spec) for h in self.report.hardware)

    @property
    def devices(self) -> tuple[DeviceRow, ...]:
        return self.report.devices

    @property
    def stages(self) -> tuple[StageRow, ...]:
        return self.report.stages

    @property
    def ops(self) -> tuple[OpRow, ...]:
        return self.report.ops

    @property
    def ops_time_basis(self) -> str:
        return self.report.ops_time_basis

    @property
    def families(self) -> tuple[KernelFamilyRow, ...]:
        return self.report.kernel_families

    @property
    def memory(self) -> tuple[MemoryRow, ...]:
        return self.report.memory

    @property
    def findings(self) -> tuple[Finding, ...]:
        return self.report.findings

    @property
    def series_steps(self) -> int:
        """Steady steps behind OpRow.step_ns (0: no series in the input)."""
        return self.report.step_series_steps

    @property
    def ops_cover(self) -> str:
        """"steady steps" (current reports) or "" (older reports: every step)."""
        return self.report.ops_cover

    @property
    def warmup_steps(self) -> int | None:
        warm = self.report.thresholds.get("warmup_steps")
        return int(warm) if isinstance(warm, (int, float)) else None

    @property
    def has_gpu(self) -> bool:
        return bool(self.report.devices) or int(self.report.source.counts.get("gpu_activities", 0) or 0) > 0

    @property
    def step(self) -> StageRow | None:
        """The step stage (``ProfilerStep`` or the synthetic whole-trace step)."""
        steps = [s for s in self.stages if s.kind == "step"]
        return max(steps, key=lambda s: s.count) if steps else None

    @property
    def step_synthetic(self) -> bool:
        """True when the run has no step markers: its "step" is the profiler window."""
        st = self.step
        return st is not None and st.name == WHOLE_TRACE

    @property
    def steps_in_trace(self) -> int:
        st = self.step
        return (st.count + st.warmup_count) if st else 0

    @property
    def steps_of_ops(self) -> int:
        """Steps the op totals cover: steady ones in current reports, all in older ones."""
        st = self.step
        if st is None:
            return 0
        return st.count if self.ops_cover == "steady steps" else st.count + st.warmup_count


def report_dict(report: Report) -> dict[str, Any]:
    """The comparison-relevant part of a Report as plain JSON data (a baseline's ``run`` block);
    :func:`report_from_dict` reads it back."""
    return {k: v for k, v in plain(report, evidence=False).items() if k in _KEYS}


def is_report_dict(d: Any) -> bool:
    return isinstance(d, dict) and "schema_version" in d and "traceclass_version" in d


def run_from_report(report: Report) -> Run:
    cpu = report.cpu_profile
    return Run(report, None if cpu is None else _cpu_from_dict(plain(cpu)))


def run_from_dict(d: Mapping[str, Any], path: str) -> Run:
    """Rebuild a :class:`Run` from a saved report; malformed input raises TraceFormatError."""
    try:
        report, cpu = report_from_dict(d, path)
        return Run(report, _cpu_from_dict(cpu) if isinstance(cpu, Mapping) else None)
    except (KeyError, TypeError, ValueError, AttributeError, OverflowError) as exc:
        what = f"missing {exc}" if isinstance(exc, KeyError) else str(exc)
        raise TraceFormatError(path, f"not a usable traceclass JSON report ({what})") from None


def report_from_dict(d: Mapping[str, Any], path: str) -> tuple[Report, Any]:
    """(the Report, its ``cpu_profile`` block as written) from any saved layout: ``--format json``
    (with ``verdict``), a baseline's ``run`` block (``_KEYS`` only), ``Report.to_json``, or an
    older report (no ``kernel_families``: rebuilt from its kernel table, which may be truncated)."""
    if not isinstance(d, Mapping) or not isinstance(d.get("source"), Mapping):
        raise TraceFormatError(path, "not a usable traceclass JSON report (missing 'source')")
    # the CPU block goes to _cpu_from_dict: baselines written before the report model had a typed
    # CPU section hold only the comparable part of it
    doc = {k: v for k, v in d.items() if k != "verdict"} | {"cpu_profile": None}
    for k, v in _MISSING.items():
        doc.setdefault(k, v)
    if "kernel_families" not in doc:
        agg: dict[str, list[int]] = {}
        for k in doc["kernels"]:
            a = agg.setdefault(str(k.get("family", "other")), [0, 0])
            a[0] += int(k.get("count", 0))
            a[1] += int(k.get("total_ns", 0))
        doc["kernel_families"] = [{"family": f, "count": c, "total_ns": t} for f, (c, t) in agg.items()]
    try:
        report = Report.from_json(doc)
    except TraceFormatError as exc:
        raise TraceFormatError(path, f"not a usable traceclass JSON report ({exc.problem})") from None
    if doc["ops"] and isinstance(doc["ops"][0], Mapping) and "stake_ns" not in doc["ops"][0]:
        report = _with_stakes(report)  # written before achievable stakes: derived from its op rows
    cpu = d.get("cpu_profile")
    if isinstance(cpu, Mapping):
        try:  # the whole typed section, where the document holds it (reports; baselines since 0d7afc6)
            report = dataclasses.replace(report, cpu_profile=Report.from_json(doc | {"cpu_profile": cpu}).cpu_profile)
        except TraceFormatError:
            pass  # an older baseline's comparable part only: the comparison reads it all the same
    return report, cpu


def _with_stakes(report: Report) -> Report:
    from traceclass.analysis.achievable import stakes_of_rows

    ops = tuple(o if st is None else dataclasses.replace(o, stake_ns=st.stake_ns, stake_basis=st.basis,
                                                         stake_detail=st.detail)
                for o, st in zip(report.ops, stakes_of_rows(report.ops)))
    return dataclasses.replace(report, ops=ops)


def _opt_int(x: Any) -> int | None:
    return None if x is None else int(x)


def _opt_bool(x: Any) -> bool | None:
    return None if x is None else bool(x)


def _samples_of(ns: int | None, samples: Any, interval: int | None) -> int | None:
    """Sample count as written, else from the time at a known interval."""
    if samples is not None:
        return int(samples)
    if ns is not None and interval:
        return int(round(ns / interval))
    return None


def thread_key(name: str, pid: int | None, tid: int | None) -> str:
    """Threads pair by name (their ids change from run to run); unnamed ones by role."""
    if name:
        return name
    return "(unnamed main thread)" if (pid is not None and pid == tid) else "(unnamed thread)"


def _cpu_from_dict(c: Mapping[str, Any]) -> CpuRun:
    interval = _opt_int(c.get("interval_ns"))
    hot = []
    for h in c.get("hot_spots") or ():
        ns = _opt_int(h.get("self_ns"))
        line = h.get("line")
        hot.append(CpuFrame(function=str(h["function"]), file=str(h.get("file") or ""),
                            line=None if line is None else int(line), kind=str(h.get("kind", "")),
                            self_ns=ns, self_samples=_samples_of(ns, h.get("self_samples"), interval),
                            self_pct=float(h.get("self_pct") or 0.0)))
    kinds = []
    for k in c.get("kinds") or ():
        ns = _opt_int(k.get("time_ns"))
        kinds.append(CpuShare(key=str(k["kind"]), label=str(k.get("label") or k["kind"]), ns=ns,
                              samples=_samples_of(ns, k.get("samples"), interval),
                              pct=float(k.get("share_pct") or 0.0)))
    threads: list[CpuShare] = []
    seen: dict[str, int] = {}
    for t in c.get("threads") or ():  # largest first: same-named threads pair in that order
        ns = _opt_int(t.get("time_ns"))
        pid, tid = _opt_int(t.get("pid")), _opt_int(t.get("tid"))
        name = str(t.get("name") or "")
        key = thread_key(name, pid, tid)
        seen[key] = seen.get(key, 0) + 1
        if seen[key] > 1:
            key = f"{key} #{seen[key]}"
        running = t.get("running_pct")
        threads.append(CpuShare(key=key, label=key, ns=ns, samples=_samples_of(ns, t.get("samples"), interval),
                                pct=float(t.get("share_pct") or 0.0),
                                running_pct=None if running is None else float(running)))
    return CpuRun(
        unit=str(c.get("unit", "")),
        interval_ns=interval,
        total_ns=_opt_int(c.get("total_ns")),
        samples=_opt_int(c.get("samples")),
        includes_idle=_opt_bool(c.get("includes_idle")),
        gil_only=_opt_bool(c.get("gil_only")),
        source_lines=int(c.get("source_lines_read") or 0),
        hot_spots=tuple(hot),
        kinds=tuple(kinds),
        threads=tuple(threads),
    )


def gpu_names(run: Run) -> tuple[str, ...]:
    """Reported GPU names (host CPU rows excluded), sorted."""
    return tuple(sorted({name for dev, name, _spec in run.hardware if dev >= 0 and name}))


def mean(xs: Sequence[int]) -> float:
    return float(sum(xs)) / len(xs) if xs else 0.0
