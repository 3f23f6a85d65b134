"""What a comparison needs from one run, read from a Report or from its JSON form.

A run reaches ``diff`` / ``check`` either as a trace (analysed into a
:class:`~traceclass.report.model.Report`) or as a JSON report written earlier by
``traceclass analyze --format json`` (or the ``run`` block of a baseline file). Both paths go
through the same plain-dict form (:func:`report_dict`), so a diff of two traces and a diff of
their saved reports are the same diff.

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
from traceclass.report.plain import plain
from traceclass.report.model import Report
from traceclass.rule import Finding

# the report keys a comparison reads (the rest of the report is not needed)
_KEYS = ("schema_version", "traceclass_version", "source", "hardware", "devices", "stages", "ops",
         "ops_time_basis", "ops_cover", "kernels", "kernel_families", "memory", "step_series_steps", "findings",
         "thresholds")


@dataclasses.dataclass(frozen=True)
class Stage:
    name: str
    kind: str
    count: int
    warmup_count: int
    p50_ns: float | None
    p99_ns: float | None
    wall_ns: tuple[int, ...]
    gpu_busy_each_ns: tuple[int, ...]
    gpu_share_pct: float | None


@dataclasses.dataclass(frozen=True)
class OpGroup:
    name: str
    shapes: str
    dtype: str
    kind: str  # "op", "kernel", "graph"
    count: int
    total_ns: int
    step_ns: tuple[int, ...]
    top_kernels: tuple[str, ...]

    @property
    def key(self) -> tuple[str, str, str, str]:
        """Matching key: op groups by name, shapes and dtype; kernel/graph groups by name."""
        if self.kind == "op":
            return ("op", self.name, self.shapes, self.dtype)
        return (self.kind, self.name, "", "")


@dataclasses.dataclass(frozen=True)
class Family:
    family: str
    count: int
    total_ns: int
    step_ns: tuple[int, ...]


@dataclasses.dataclass(frozen=True)
class Device:
    device: int
    name: str
    busy_pct: float | None
    idle_pct: float | None
    copy_pct: float | None
    busy_ns: int
    idle_ns: int
    copy_ns: int
    window_ns: int


@dataclasses.dataclass(frozen=True)
class Memory:
    device_type: str
    device: int
    peak_allocated_bytes: int
    peak_reserved_bytes: int | None


@dataclasses.dataclass(frozen=True)
class FindingRef:
    fingerprint: str
    code: str
    name: str
    severity: str
    message: str
    location: str
    recoverable_ns: int


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
    file: str
    format: str
    producer: str
    format_version: str
    traceclass_version: str
    meta: Mapping[str, Any]
    start_epoch_ns: int | None
    start_epoch_basis: str
    hardware: tuple[tuple[int, str, str | None], ...]  # (device, reported name, spec used)
    devices: tuple[Device, ...]
    stages: tuple[Stage, ...]
    ops: tuple[OpGroup, ...]
    ops_time_basis: str
    families: tuple[Family, ...]
    memory: tuple[Memory, ...]
    findings: tuple[FindingRef, ...]
    series_steps: int  # steady steps behind OpGroup.step_ns (0: no series in the input)
    ops_cover: str  # "steady steps" (current reports) or "" (older reports: every step)
    warmup_steps: int | None
    has_gpu: bool
    cpu: CpuRun | None = None  # sampled CPU profile, when the trace holds samples

    @property
    def step(self) -> Stage | None:
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
    """The comparison-relevant part of a Report as plain JSON-compatible data."""
    d = {k: _plain(getattr(report, k)) for k in _KEYS if hasattr(report, k)}
    cpu = getattr(report, "cpu_profile", None)
    if cpu is not None:
        d["cpu_profile"] = cpu_profile_dict(cpu)
    return d


def cpu_profile_dict(cpu: Any) -> dict[str, Any]:
    """The comparable part of a CpuProfile, with the JSON report's key names."""

    def frame(f: Any) -> dict[str, Any]:
        d = {"function": f.function, "file": f.file, "line": f.line, "kind": f.kind, "self_ns": f.self_ns,
             "self_pct": f.self_pct}
        if cpu.unit == "samples":
            d["self_samples"] = f.self_value
        return d

    def kind(k: Any) -> dict[str, Any]:
        d = {"kind": k.kind, "label": k.label, "time_ns": k.ns, "share_pct": k.pct}
        if cpu.unit == "samples":
            d["samples"] = k.value
        return d

    return _plain({
        "unit": cpu.unit,
        "interval_ns": cpu.interval_ns,
        "total_ns": cpu.total_ns,
        "samples": cpu.samples,
        "includes_idle": cpu.includes_idle,
        "gil_only": cpu.gil_only,
        "source_lines_read": cpu.source_lines,
        "kinds": [kind(k) for k in cpu.kinds],
        "threads": [{"pid": t.pid if t.pid >= 0 else None, "tid": t.tid if t.tid >= 0 else None, "name": t.name,
                     "samples": t.samples, "time_ns": t.ns, "share_pct": t.share_pct,
                     "running_pct": t.running_pct} for t in cpu.threads],
        "hot_spots": [frame(f) for f in cpu.hot_spots],
    })


def _plain(obj: Any) -> Any:
    return plain(obj, evidence=False)


def is_report_dict(d: Any) -> bool:
    return isinstance(d, dict) and "schema_version" in d and "traceclass_version" in d


def run_from_report(report: Report) -> Run:
    return run_from_dict(report_dict(report), "<report>")


def run_from_dict(d: Mapping[str, Any], path: str) -> Run:
    """Rebuild a :class:`Run` from a JSON report; malformed input raises TraceFormatError."""
    try:
        return _run_from_dict(d)
    except (KeyError, TypeError, ValueError, AttributeError, OverflowError) as exc:
        what = f"missing {exc}" if isinstance(exc, KeyError) else str(exc)
        raise TraceFormatError(path, f"not a usable traceclass JSON report ({what})") from None


def _ints(xs: Any) -> tuple[int, ...]:
    return tuple(int(x) for x in (xs or ()) if x is not None)


def _opt_float(x: Any) -> float | None:
    return None if x is None else float(x)


def _run_from_dict(d: Mapping[str, Any]) -> Run:
    src = d["source"]
    stages = tuple(
        Stage(
            name=str(s["name"]),
            kind=str(s.get("kind", "user")),
            count=int(s.get("count", 0)),
            warmup_count=int(s.get("warmup_count", 0) or 0),
            p50_ns=_opt_float(s.get("p50_ns")),
            p99_ns=_opt_float(s.get("p99_ns")),
            wall_ns=_ints(s.get("wall_ns")),
            gpu_busy_each_ns=_ints(s.get("gpu_busy_each_ns")),
            gpu_share_pct=_opt_float(s.get("gpu_share_pct")),
        )
        for s in d.get("stages", ())
    )
    ops = tuple(
        OpGroup(
            name=str(o["name"]),
            shapes=str(o.get("shapes", "")),
            dtype=str(o.get("dtype", "")),
            kind=str(o.get("kind", "op")),
            count=int(o.get("count", 0)),
            total_ns=int(o.get("total_ns", 0)),
            step_ns=_ints(o.get("step_ns")),
            top_kernels=tuple(str(k) for k in (o.get("top_kernels") or ())),
        )
        for o in d.get("ops", ())
    )
    fam_rows = d.get("kernel_families")
    if fam_rows is None:  # older report: rebuild from the (possibly truncated) kernel table
        agg: dict[str, list[int]] = {}
        for k in d.get("kernels", ()):
            a = agg.setdefault(str(k.get("family", "other")), [0, 0])
            a[0] += int(k.get("count", 0))
            a[1] += int(k.get("total_ns", 0))
        fam_rows = [{"family": f, "count": c, "total_ns": t} for f, (c, t) in agg.items()]
    families = tuple(
        Family(family=str(f["family"]), count=int(f.get("count", 0)), total_ns=int(f.get("total_ns", 0)),
               step_ns=_ints(f.get("step_ns")))
        for f in fam_rows
    )
    devices = tuple(
        Device(
            device=int(x["device"]),
            name=str(x.get("name", "")),
            busy_pct=_opt_float(x.get("busy_pct")),
            idle_pct=_opt_float(x.get("idle_pct")),
            copy_pct=_opt_float(x.get("copy_pct")),
            busy_ns=int(x.get("busy_ns", 0)),
            idle_ns=int(x.get("idle_ns", 0)),
            copy_ns=int(x.get("copy_ns", 0)),
            window_ns=int(x.get("window_ns", 0)),
        )
        for x in d.get("devices", ())
    )
    memory = tuple(
        Memory(device_type=str(m["device_type"]), device=int(m.get("device", -1)),
               peak_allocated_bytes=int(m["peak_allocated_bytes"]),
               peak_reserved_bytes=None if m.get("peak_reserved_bytes") is None else int(m["peak_reserved_bytes"]))
        for m in d.get("memory", ()) or ()
    )
    findings = []
    for f in d.get("findings", ()) or ():
        fp = f.get("fingerprint")
        if not fp:  # recompute as the report does
            fp = Finding(code=str(f["code"]), name="", severity="", message="", recoverable_ns=0, estimate="",
                         fix="", location=str(f.get("location", ""))).fingerprint
        findings.append(FindingRef(fingerprint=str(fp), code=str(f.get("code", "")), name=str(f.get("name", "")),
                                   severity=str(f.get("severity", "")), message=str(f.get("message", "")),
                                   location=str(f.get("location", "")),
                                   recoverable_ns=int(f.get("recoverable_ns", 0) or 0)))
    hardware = tuple((int(h["device"]), str(h.get("reported_name", "")), h.get("spec"))
                     for h in d.get("hardware", ()) or ())
    cpu = d.get("cpu_profile")
    th = d.get("thresholds") or {}
    warm = th.get("warmup_steps") if isinstance(th, Mapping) else None
    epoch = src.get("start_epoch_ns")
    counts = src.get("counts") or {}
    return Run(
        file=str(src.get("file", "")),
        format=str(src.get("format", "")),
        producer=str(src.get("producer", "")),
        format_version=str(src.get("format_version", "")),
        traceclass_version=str(d.get("traceclass_version", "")),
        meta=dict(src.get("meta") or {}),
        start_epoch_ns=int(epoch) if isinstance(epoch, (int, float)) else None,
        start_epoch_basis=str(src.get("start_epoch_basis", "")),
        hardware=hardware,
        devices=devices,
        stages=stages,
        ops=ops,
        ops_time_basis=str(d.get("ops_time_basis", "")),
        families=families,
        memory=memory,
        findings=tuple(findings),
        series_steps=int(d.get("step_series_steps", 0) or 0),
        ops_cover=str(d.get("ops_cover") or ""),
        warmup_steps=int(warm) if isinstance(warm, (int, float)) else None,
        has_gpu=bool(devices) or int(counts.get("gpu_activities", 0) or 0) > 0,
        cpu=_cpu_from_dict(cpu) if isinstance(cpu, Mapping) else None,
    )


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
