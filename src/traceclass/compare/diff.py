"""Two runs -> :class:`DiffReport`: per stage, op group, kernel family, GPU time, memory peak and
finding, each as baseline value, candidate value, delta, delta % and a noise label.

Values:

* stages and the step: P50 wall time over the steady-state occurrences (warm-up apart); the
  samples are the occurrences' wall times;
* op groups and kernel families: mean time per steady step (means add up, so contributions to
  the step change can be compared); the samples are the per-step times (``OpRow.step_ns``).
  A group absent from a run counts as 0 in each of its steps. Without per-step series (reports
  from older versions) the value is total ÷ steps in the trace and the noise is unknown;
* GPU per step: busy (union of GPU work launched from the step), idle (step wall − busy) and
  copy (memcpy + memset time) as means per step; per device, the busy/idle/copy shares of the
  device window (one value per run);
* memory: allocator peaks (one value per run); findings: recoverable time (one estimate);
* sampled CPU profiles (py-spy, ...): hot spots matched by (function, file, line), kinds
  (Python compute, lock wait, ...) and threads (by name; unnamed ones by role), each as self
  time and share of all sampled time. Values are time when both runs know their sampling
  interval, else sample counts, else shares only. A profile has no repeated steps: every figure
  is one value per run ("single run, noise unknown"), judged by the fallback rule.

Noise labels come from :mod:`traceclass.compare.noise`. The verdict is kept as data
(:class:`Verdict`); renderers turn it into text.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from traceclass.compare import noise
from traceclass.compare.delta import MATERIAL_PCT_OF_STEP, Delta, make_delta
from traceclass.compare.diff_cpu import CpuDiff, CpuRowDelta, cpu_diff
from traceclass.compare.match import (
    Callout,
    environment_differences,
    pair,
    pair_families,
    pair_ops,
    pair_stages,
)
from traceclass.compare.run import Run, gpu_names, mean
from traceclass.report.model import OpRow, StageRow
from traceclass.report.plain import plain

SCHEMA_VERSION = 1
COPY_FAMILIES = ("memcpy", "memset")


@dataclasses.dataclass(frozen=True)
class RunInfo:
    file: str
    format: str
    producer: str
    steps: int  # steady-state steps
    warmup_steps: int
    gpus: tuple[str, ...]
    recorded_at_epoch_ns: int | None
    # sampled CPU profile, when there is one
    cpu_unit: str = ""  # "ns", "samples", "units" or "" (no profile)
    cpu_total_ns: int | None = None
    cpu_samples: int | None = None
    cpu_interval_ns: int | None = None


@dataclasses.dataclass(frozen=True)
class StageDelta:
    name: str  # baseline's name (the step stage may be named differently in the candidate)
    candidate_name: str
    kind: str
    count_baseline: int
    count_candidate: int
    p50: Delta
    p99_baseline: float | None
    p99_candidate: float | None


@dataclasses.dataclass(frozen=True)
class OpDelta:
    name: str
    shapes: str
    dtype: str
    kind: str
    status: str  # "matched", "appeared", "vanished"
    per_step: Delta  # mean ns per steady step
    calls_baseline: int
    calls_candidate: int
    basis: str  # "per-step series" or "total / steps"
    kernels_baseline: tuple[str, ...]
    kernels_candidate: tuple[str, ...]


@dataclasses.dataclass(frozen=True)
class FamilyDelta:
    family: str
    status: str
    per_step: Delta
    basis: str


@dataclasses.dataclass(frozen=True)
class DeviceDelta:
    device: int
    name_baseline: str
    name_candidate: str
    busy_pct: Delta
    idle_pct: Delta
    copy_pct: Delta


@dataclasses.dataclass(frozen=True)
class GpuStepDelta:
    busy: Delta
    idle: Delta
    copy: Delta


@dataclasses.dataclass(frozen=True)
class MemoryDelta:
    device_type: str
    device: int
    peak_allocated: Delta
    peak_reserved: Delta | None


@dataclasses.dataclass(frozen=True)
class FindingDelta:
    fingerprint: str
    code: str
    name: str
    status: str  # "resolved", "new", "persisting"
    severity_baseline: str
    severity_candidate: str
    message: str  # the candidate's message, or the baseline's for resolved findings
    recoverable: Delta


@dataclasses.dataclass(frozen=True)
class Contributor:
    """An op group's share of the step-time change."""

    op: OpDelta
    share_pct: float | None  # of the change in mean step time


@dataclasses.dataclass(frozen=True)
class Regression:
    what: str  # "stage", "op", "family", "gpu idle", "memory"
    name: str
    detail: str  # shapes for op groups, "" else
    delta: Delta


@dataclasses.dataclass(frozen=True)
class Verdict:
    step: StageDelta | None
    step_mean_change_ns: float | None
    contributors: tuple[Contributor, ...]  # in the direction of the step change, largest first
    regressions: tuple[Regression, ...]  # material, beyond noise, largest first
    findings: dict[str, int]  # status -> count
    #: runs ("baseline", "candidate") without step markers: their "step" is the profiler window,
    #: whose length says nothing about the work inside it (a fixed-length capture)
    no_step_markers: tuple[str, ...] = ()
    #: with no step markers, the work is judged by the stages and the GPU busy time instead:
    #: "slower", "faster", "mixed", "within noise", or "" when there is neither to judge
    work_label: str = ""
    work_stages: tuple[StageDelta, ...] = ()  # stages beyond noise, largest |delta| first
    work_stages_compared: int = 0
    work_gpu_busy: Delta | None = None  # GPU busy time in the window
    #: sampled CPU profiles in both runs: hot spots, kinds and threads beyond the single-run rule
    cpu_movers: tuple[CpuRowDelta, ...] = ()
    cpu_compared: bool = False


@dataclasses.dataclass(frozen=True)
class DiffReport:
    baseline: RunInfo
    candidate: RunInfo
    callouts: tuple[Callout, ...]
    method: str
    verdict: Verdict
    stages: tuple[StageDelta, ...]  # the step first
    stages_only_baseline: tuple[str, ...]
    stages_only_candidate: tuple[str, ...]
    ops: tuple[OpDelta, ...]  # matched, largest |delta| first
    ops_appeared: tuple[OpDelta, ...]
    ops_vanished: tuple[OpDelta, ...]
    families: tuple[FamilyDelta, ...]
    gpu_step: GpuStepDelta | None
    devices: tuple[DeviceDelta, ...]
    memory: tuple[MemoryDelta, ...]
    findings: tuple[FindingDelta, ...]
    notes: tuple[str, ...]
    schema_version: int = SCHEMA_VERSION
    cpu: CpuDiff | None = None


# --------------------------------------------------------------------------- build


def build_diff(b: Run, c: Run) -> DiffReport:
    notes: list[str] = []
    stages, only_b, only_c = _stages(b, c)
    step = stages[0] if stages and stages[0].kind == "step" else None
    series = b.series_steps > 0 and c.series_steps > 0
    if not series and (b.ops or c.ops or b.families or c.families):
        why = "no steps" if (b.step is None or c.step is None) else "a report from an older traceclass"
        notes.append(f"a run has no per-step op series ({why}): op groups and kernel families are compared as "
                     "total ÷ steps in the trace, noise unknown")
    ops, appeared, vanished = _ops(b, c, series)
    families = _families(b, c, series)
    synthetic = [w for w, r in (("baseline", b), ("candidate", c)) if r.step_synthetic]
    if synthetic:
        who = "neither run has" if len(synthetic) == 2 else f"the {synthetic[0]} has"
        notes.append(f"{who} step markers (no ProfilerStep or NVTX step range): the step is the profiler "
                     "window, one value per run, whose length need not follow the work; the verdict judges "
                     "the stages and the GPU busy time instead")
    for run, which in ((b, "baseline"), (c, "candidate")):
        st = run.step
        if run.step_synthetic:
            pass
        elif st is not None and st.count < 2:
            notes.append(f"the {which} has {st.count} steady step(s): noise unknown for per-step figures; "
                         f"|Δ| ≥ {noise.SINGLE_SAMPLE_PCT:g}% counts as a change")
        if st is None and run.cpu is None:
            notes.append(f"the {which} has no steps or ranges: no step time to compare")
    cpu = cpu_diff(b.cpu, c.cpu) if (b.cpu is not None and c.cpu is not None) else None
    if (b.cpu is None) != (c.cpu is None):
        which = "baseline" if b.cpu is not None else "candidate"
        notes.append(f"only the {which} is a sampled CPU profile: its hot spots, kinds and threads have nothing "
                     "to compare with")
    findings = _findings(b, c)
    gpu_step = _gpu_step(b, c)
    verdict = _verdict(b, c, step, ops + appeared + vanished, stages, families, findings, gpu_step)
    if cpu is not None:
        verdict = dataclasses.replace(verdict, cpu_movers=cpu.movers, cpu_compared=True)
    callouts = environment_differences(b, c)
    workload = _workload_callout(ops, appeared, vanished)
    if workload is not None:
        callouts.append(workload)
    return DiffReport(
        baseline=_info(b),
        candidate=_info(c),
        callouts=tuple(callouts),
        method=noise.RULE,
        verdict=verdict,
        stages=tuple(stages),
        stages_only_baseline=tuple(only_b),
        stages_only_candidate=tuple(only_c),
        ops=tuple(ops),
        ops_appeared=tuple(appeared),
        ops_vanished=tuple(vanished),
        families=tuple(families),
        gpu_step=gpu_step,
        devices=tuple(_devices(b, c)),
        memory=tuple(_memory(b, c)),
        findings=tuple(findings),
        notes=tuple(notes),
        cpu=cpu,
    )


def _info(r: Run) -> RunInfo:
    st = r.step
    cpu = r.cpu
    return RunInfo(file=r.file, format=r.format, producer=r.producer, steps=st.count if st else 0,
                   warmup_steps=st.warmup_count if st else 0, gpus=gpu_names(r),
                   recorded_at_epoch_ns=r.start_epoch_ns,
                   cpu_unit=cpu.unit if cpu else "", cpu_total_ns=cpu.total_ns if cpu else None,
                   cpu_samples=cpu.samples if cpu else None, cpu_interval_ns=cpu.interval_ns if cpu else None)


def _stage_delta(sb: StageRow, sc: StageRow) -> StageDelta:
    return StageDelta(
        name=sb.name, candidate_name=sc.name, kind=sb.kind, count_baseline=sb.count, count_candidate=sc.count,
        p50=make_delta(sb.wall_ns, sc.wall_ns, sb.p50_ns, sc.p50_ns, "ns"),
        p99_baseline=sb.p99_ns, p99_candidate=sc.p99_ns,
    )


def _stages(b: Run, c: Run) -> tuple[list[StageDelta], list[str], list[str]]:
    p = pair_stages(b, c)
    rows = [_stage_delta(sb, sc) for sb, sc in p.both]
    rows.sort(key=lambda r: (r.kind != "step" or r.name != (b.step.name if b.step else ""),
                             -(abs(r.p50.delta or 0.0))))
    return rows, [s.name for s in p.only_baseline], [s.name for s in p.only_candidate]


def _per_step(o: OpRow | None, run: Run, series: bool) -> tuple[list[float], float]:
    """(samples, value) of an op group's time per step; an absent group is 0 in every step."""
    if series and o is None:
        return [0.0] * run.series_steps, 0.0
    if series and o is not None and len(o.step_ns) == run.series_steps:
        xs = [float(x) for x in o.step_ns]
        return xs, sum(xs) / len(xs)
    return [], ((o.total_ns if o is not None else 0) / max(run.steps_of_ops, 1))


def _op_delta(ob: OpRow | None, oc: OpRow | None, b: Run, c: Run, series: bool, status: str) -> OpDelta:
    xb, vb = _per_step(ob, b, series)
    xc, vc = _per_step(oc, c, series)
    ref = ob or oc
    assert ref is not None
    return OpDelta(
        name=ref.name, shapes=ref.shapes, dtype=ref.dtype, kind=ref.kind, status=status,
        per_step=make_delta(xb, xc, vb, vc, "ns"),
        calls_baseline=ob.count if ob else 0, calls_candidate=oc.count if oc else 0,
        basis="per-step series" if series else "total / steps",
        kernels_baseline=ob.top_kernels if ob else (), kernels_candidate=oc.top_kernels if oc else (),
    )


def _ops(b: Run, c: Run, series: bool) -> tuple[list[OpDelta], list[OpDelta], list[OpDelta]]:
    p = pair_ops(b, c)
    matched = [_op_delta(ob, oc, b, c, series, "matched") for ob, oc in p.both]
    matched.sort(key=lambda d: -abs(d.per_step.delta or 0.0))
    appeared = [_op_delta(None, oc, b, c, series, "appeared") for oc in p.only_candidate]
    appeared.sort(key=lambda d: -(d.per_step.candidate or 0.0))
    vanished = [_op_delta(ob, None, b, c, series, "vanished") for ob in p.only_baseline]
    vanished.sort(key=lambda d: -(d.per_step.baseline or 0.0))
    return matched, appeared, vanished


#: below this share of op time in matched groups (either run), the runs did different work
WORKLOAD_MATCH_PCT = 50.0


def _workload_callout(ops: list[OpDelta], appeared: list[OpDelta], vanished: list[OpDelta]) -> Callout | None:
    """A callout when most op time of a run has no counterpart in the other run."""
    tb = sum(o.per_step.baseline or 0.0 for o in ops + vanished)
    tc = sum(o.per_step.candidate or 0.0 for o in ops + appeared)
    mb = sum(o.per_step.baseline or 0.0 for o in ops)
    mc = sum(o.per_step.candidate or 0.0 for o in ops)
    if tb <= 0 or tc <= 0:
        return None
    cov_b, cov_c = 100.0 * mb / tb, 100.0 * mc / tc
    if min(cov_b, cov_c) >= WORKLOAD_MATCH_PCT:
        return None
    return Callout(
        "workload", "op groups in common",
        f"{len(ops)} of {len(ops) + len(vanished)} groups, {cov_b:.0f}% of op time",
        f"{len(ops)} of {len(ops) + len(appeared)} groups, {cov_c:.0f}% of op time",
        "the runs did different work (another model, shapes or batch size): most op time has no counterpart")


def _families(b: Run, c: Run, series: bool) -> list[FamilyDelta]:
    p = pair_families(b, c)
    out = []

    def samples(f, run):  # type: ignore[no-untyped-def]
        if series:
            xs = [float(x) for x in f.step_ns] if f is not None and len(f.step_ns) == run.series_steps \
                else [0.0] * run.series_steps
            return xs, mean(xs)  # type: ignore[arg-type]
        return [], (f.total_ns / max(run.steps_in_trace, 1) if f is not None else 0.0)

    items = [(fb, fc, "matched") for fb, fc in p.both] + [(fb, None, "vanished") for fb in p.only_baseline] + \
            [(None, fc, "appeared") for fc in p.only_candidate]
    for fb, fc, status in items:
        xb, vb = samples(fb, b)
        xc, vc = samples(fc, c)
        out.append(FamilyDelta(family=(fb or fc).family, status=status, per_step=make_delta(xb, xc, vb, vc, "ns"),
                               basis="per-step series" if series else "total / steps"))
    out.sort(key=lambda f: -abs(f.per_step.delta or 0.0))
    return out


def _gpu_step(b: Run, c: Run) -> GpuStepDelta | None:
    sb, sc = b.step, c.step
    if not (b.has_gpu and c.has_gpu and sb and sc and sb.gpu_busy_each_ns and sc.gpu_busy_each_ns):
        return None

    def parts(run: Run, st: StageRow) -> tuple[list[float], list[float], list[float]]:
        busy = [float(x) for x in st.gpu_busy_each_ns]
        idle = [max(float(w) - x, 0.0) for w, x in zip(st.wall_ns, busy)]
        copy: list[float] = []
        if run.series_steps:
            fams = [f for f in run.families if f.family in COPY_FAMILIES and len(f.step_ns) == run.series_steps]
            copy = [float(sum(f.step_ns[k] for f in fams)) for k in range(run.series_steps)]
        return busy, idle, copy

    bb, ib, cb = parts(b, sb)
    bc, ic, cc = parts(c, sc)
    copy_b = mean(cb) if cb else sum(f.total_ns for f in b.families if f.family in COPY_FAMILIES) / max(b.steps_in_trace, 1)  # type: ignore[arg-type]
    copy_c = mean(cc) if cc else sum(f.total_ns for f in c.families if f.family in COPY_FAMILIES) / max(c.steps_in_trace, 1)  # type: ignore[arg-type]
    return GpuStepDelta(
        busy=make_delta(bb, bc, mean(bb), mean(bc), "ns"),  # type: ignore[arg-type]
        idle=make_delta(ib, ic, mean(ib), mean(ic), "ns"),  # type: ignore[arg-type]
        copy=make_delta(cb, cc, copy_b, copy_c, "ns"),
    )


def _devices(b: Run, c: Run) -> list[DeviceDelta]:
    p = pair(b.devices, c.devices, lambda d: d.device)
    out = []
    for db, dc in p.both:
        out.append(DeviceDelta(
            device=db.device, name_baseline=db.name, name_candidate=dc.name,
            busy_pct=make_delta((), (), db.busy_pct, dc.busy_pct, "pct"),
            idle_pct=make_delta((), (), db.idle_pct, dc.idle_pct, "pct"),
            copy_pct=make_delta((), (), db.copy_pct, dc.copy_pct, "pct"),
        ))
    return out


def _memory(b: Run, c: Run) -> list[MemoryDelta]:
    p = pair(b.memory, c.memory, lambda m: (m.device_type, m.device))
    out = []
    for mb, mc in p.both:
        res = None
        if mb.peak_reserved_bytes is not None and mc.peak_reserved_bytes is not None:
            res = make_delta((), (), mb.peak_reserved_bytes, mc.peak_reserved_bytes, "bytes")
        out.append(MemoryDelta(mb.device_type, mb.device,
                               make_delta((), (), mb.peak_allocated_bytes, mc.peak_allocated_bytes, "bytes"), res))
    return out


def _findings(b: Run, c: Run) -> list[FindingDelta]:
    p = pair(b.findings, c.findings, lambda f: f.fingerprint)
    out = []
    for fb, fc, status in ([(fb, fc, "persisting") for fb, fc in p.both]
                           + [(fb, None, "resolved") for fb in p.only_baseline]
                           + [(None, fc, "new") for fc in p.only_candidate]):
        ref = fc or fb
        assert ref is not None
        out.append(FindingDelta(
            fingerprint=ref.fingerprint, code=ref.code, name=ref.name, status=status,
            severity_baseline=fb.severity if fb else "", severity_candidate=fc.severity if fc else "",
            message=ref.message,
            recoverable=make_delta((), (), fb.recoverable_ns if fb else 0, fc.recoverable_ns if fc else 0, "ns"),
        ))
    order = {"new": 0, "persisting": 1, "resolved": 2}
    out.sort(key=lambda f: (order[f.status], -abs(f.recoverable.delta or 0)))
    return out


def _work(stages: list[StageDelta], gpu: GpuStepDelta | None) -> tuple[str, list[StageDelta], int]:
    """Direction of the work inside the window of runs without step markers: from the stages
    (each judged on its own occurrences) and the GPU busy time."""
    compared = [s for s in stages if s.kind != "step"]
    moved = [s for s in compared if s.p50.label in (noise.FASTER, noise.SLOWER)]
    moved.sort(key=lambda s: -abs(s.p50.delta or 0.0))
    labels = {s.p50.label for s in moved}
    if gpu is not None and gpu.busy.label in (noise.FASTER, noise.SLOWER):
        labels.add(gpu.busy.label)
    if not compared and gpu is None:
        return "", moved, 0
    if not labels:
        return noise.WITHIN, moved, len(compared)
    return (labels.pop() if len(labels) == 1 else "mixed"), moved, len(compared)


def _verdict(b: Run, c: Run, step: StageDelta | None, ops: list[OpDelta], stages: list[StageDelta],
             families: list[FamilyDelta], findings: list[FindingDelta], gpu: GpuStepDelta | None = None) -> Verdict:
    change: float | None = None
    contributors: list[Contributor] = []
    material = 0.0
    if step is not None and b.step and c.step:
        wb, wc = b.step.wall_ns, c.step.wall_ns
        change = (mean(wc) - mean(wb)) if (wb and wc) else step.p50.delta
        material = MATERIAL_PCT_OF_STEP / 100.0 * (step.p50.baseline or 0.0)
    if change and step is not None and step.p50.label in (noise.FASTER, noise.SLOWER):
        sign = -1.0 if step.p50.label == noise.FASTER else 1.0
        moving = [o for o in ops if (o.per_step.delta or 0.0) * sign > 0 and o.per_step.call.beyond_noise]
        moving.sort(key=lambda o: -abs(o.per_step.delta or 0.0))
        for o in moving[:3]:
            share = 100.0 * (o.per_step.delta or 0.0) / change if change else None
            if contributors and share is not None and share < 5.0:
                break
            contributors.append(Contributor(o, share))
    regressions: list[Regression] = []
    for s in stages:
        if s.kind != "step" and s.p50.label == noise.SLOWER and abs(s.p50.delta or 0) >= material:
            regressions.append(Regression("stage", s.name, "", s.p50))
    for o in ops:
        if o.per_step.label == noise.SLOWER and abs(o.per_step.delta or 0) >= material:
            regressions.append(Regression("op", o.name, o.shapes, o.per_step))
    for f in families:
        if f.per_step.label == noise.SLOWER and abs(f.per_step.delta or 0) >= material:
            regressions.append(Regression("kernel family", f.family, "", f.per_step))
    no_markers = tuple(w for w, r in (("baseline", b), ("candidate", c)) if r.step_synthetic)
    work_label, work_stages, compared = "", [], 0
    if no_markers:
        work_label, work_stages, compared = _work(stages, gpu)
        if gpu is not None and gpu.busy.label == noise.SLOWER and abs(gpu.busy.delta or 0) >= material:
            regressions.append(Regression("GPU busy", "", "", gpu.busy))
    regressions.sort(key=lambda r: -abs(r.delta.delta or 0.0))
    counts = {"resolved": 0, "new": 0, "persisting": 0}
    for f in findings:
        counts[f.status] += 1
    return Verdict(step=step, step_mean_change_ns=change, contributors=tuple(contributors),
                   regressions=tuple(regressions), findings=counts, no_step_markers=no_markers,
                   work_label=work_label, work_stages=tuple(work_stages), work_stages_compared=compared,
                   work_gpu_busy=gpu.busy if (no_markers and gpu is not None) else None)


# --------------------------------------------------------------------------- JSON form


def _plain(obj: Any) -> Any:
    def delta(o: Any) -> Any:
        if isinstance(o, Delta):
            return {
                "baseline": _number(o.baseline),
                "candidate": _number(o.candidate),
                "delta": _number(o.delta),
                "delta_pct": _number(o.delta_pct),
                "unit": o.unit,
                "label": o.call.label,
                "noise": plain(o.call),
            }
        if isinstance(o, float):
            return _number(o)
        return NotImplemented

    return plain(obj, hook=delta)


def _number(x: Any) -> Any:
    """Integral floats as ints (ns counts read back from JSON), non-finite as None."""
    if isinstance(x, float):
        if not math.isfinite(x):
            return None
        return int(x) if x.is_integer() and abs(x) < 2**53 else x
    return x


def to_dict(diff: DiffReport) -> dict[str, Any]:
    """Plain JSON-ready data: what the markdown and JSON renderers receive.

    Every delta is ``{baseline, candidate, delta, delta_pct, unit, label, noise}``; ``unit`` is
    ``ns``, ``bytes`` or ``pct`` (shares; their delta is in percentage points).
    """
    d = _plain(diff)
    d["kind"] = "traceclass-diff"
    first = ["kind", "schema_version", "baseline", "candidate", "callouts", "method", "verdict"]
    return {k: d[k] for k in first} | {k: v for k, v in d.items() if k not in first}
