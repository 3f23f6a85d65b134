"""Facts + findings -> :class:`~traceclass.report.model.Report` (plain data): a mapping only; every
number is computed in :mod:`traceclass.facts`."""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Mapping, Sequence

import numpy as np

from traceclass import __version__, units
from traceclass.analysis.achievable import stakes
from traceclass.analysis.graph_replays import notes as graph_replay_notes
from traceclass.analysis.roofline import COMPUTE, MEMORY
from traceclass.config import Config
from traceclass.facts.idle_causes import CAUSES, HOST_PHASE_NS, LAUNCH_LATENCY_NS
from traceclass.facts.idle_host import host_during
from traceclass.facts import Facts
from traceclass.model import Captured, Trace
from traceclass.model.names import short_kernel_name
from traceclass.report.cpu import cpu_section
from traceclass.report.model import (
    DeviceRow,
    HardwareRow,
    IdleSummary,
    OpRow,
    Opportunity,
    Report,
    SourceSummary,
    StageRow,
)
from traceclass.rule import Finding


#: facts every report reads and no rule needs, costliest first: the engine computes them one at
#: a time before the report, handing the heap's free pages back between them
REPORT_FACTS = ("timelines", "step_series", "kernels", "longest_idle_host")


def build_report(
    trace: Trace,
    analysis: Facts,
    findings: Sequence[Finding] = (),
    config: Config | None = None,
    rule_errors: Sequence[str] = (),
    skipped: Sequence[str] = (),
) -> Report:
    """The report of ``findings`` over ``analysis``; ``skipped``: the engine's notes on rules that
    did not run because the trace lacks what they need."""
    series = analysis.step_series
    ops_rows = tuple(dataclasses.replace(r, step_ns=series.per_group[k]) for k, r in enumerate(_op_rows(analysis)))
    # the shared idle attribution the rules claimed from (a Facts property: computed once)
    idle = analysis.idle_causes if len(trace.gpu) else None
    t0 = _t0(trace)
    findings = tuple(sorted((_relative_evidence(f, t0) for f in findings),
                            key=lambda f: (-f.recoverable_ns, f.code, f.location)))
    return Report(
        traceclass_version=__version__,
        source=_source(trace),
        hardware=_hardware(analysis),
        devices=_devices(trace, analysis),
        stages=_stages(analysis),
        ops=ops_rows,
        ops_total_ns=analysis.ops.total_ns,
        ops_time_basis="gpu" if len(trace.gpu) else "cpu",
        unmodeled_ops=dict(sorted(analysis.ops.unmodeled_names.items(), key=lambda kv: -kv[1])),
        kernels=analysis.kernels,
        findings=findings,
        opportunities=_opportunities(findings, ops_rows, idle),
        cpu_profile=None if analysis.cpu is None else cpu_section(analysis.cpu),
        notes=_notes(trace, analysis) + tuple(skipped),
        thresholds={
            "warmup_steps": analysis.config.warmup_steps,
            "latency_floor_us": analysis.config.latency_floor_us,
            "cpu_latency_floor_us": analysis.config.cpu_latency_floor_us,
            "config_sources": list(config.sources) if config else ["defaults"],
        },
        rule_errors=tuple(rule_errors),
        kernel_families=analysis.kernel_families,
        memory=analysis.memory,
        step_series_steps=series.steps_count,
        idle=_idle_summary(analysis, idle),
    )


def _relative_evidence(f: Finding, t0: int) -> Finding:
    """Evidence windows measured from the trace's first event, so runs line up."""

    ev = tuple(
        dataclasses.replace(
            e,
            start_ns=None if e.start_ns is None else e.start_ns - t0,
            end_ns=None if e.end_ns is None else e.end_ns - t0,
        )
        for e in f.evidence
    )
    return dataclasses.replace(f, evidence=ev)


def _source(trace: Trace) -> SourceSummary:
    bounds = trace.time_bounds()
    counts = {
        "ops": len(trace.ops),
        "annotations": len(trace.annotations),
        "python_frames": len(trace.python),
        "api_calls": len(trace.api),
        "gpu_activities": len(trace.gpu),
        "memory_events": len(trace.memory),
        "samples": int(trace.samples.count.sum()) if len(trace.samples) else 0,
    }
    epoch, basis = _start_epoch(trace, bounds)
    return SourceSummary(
        start_epoch_ns=epoch,
        start_epoch_basis=basis,
        file=os.path.basename(trace.source.path),
        format=trace.source.format,
        producer=trace.source.producer,
        format_version=trace.source.format_version,
        size_bytes=trace.source.size_bytes,
        duration_ns=(bounds[1] - bounds[0]) if bounds else 0,
        captured=tuple(sorted(trace.captured)),
        counts={k: v for k, v in counts.items() if v},
        # scalar facts only (versions, flags): tables such as the program's source lines that a
        # reader keeps for the analyses never reach a report
        meta={k: v for k, v in trace.meta.items()
              if isinstance(v, (str, int, float, bool)) and k != "source_lines"},
    )


def _start_epoch(trace: Trace, bounds: tuple[int, int] | None) -> tuple[int | None, str]:
    """Wall-clock time of the first event, when the trace carries a clock origin."""
    base = trace.meta.get("baseTimeNanoseconds")  # Kineto: epoch ns = event ns + base
    if isinstance(base, int) and not isinstance(base, bool) and base > 0 and bounds:
        return base + bounds[0], "baseTimeNanoseconds + first event"
    utc = trace.meta.get("nsys.utc_epoch_ns")  # Nsight Systems: session start
    if isinstance(utc, int) and not isinstance(utc, bool) and utc > 0:
        return utc, "nsys session start (TARGET_INFO_SESSION_START_TIME)"
    return None, ""


def _hardware(analysis: Facts) -> tuple[HardwareRow, ...]:
    rows = []
    for idx, rd in sorted(analysis.devices.items()):
        spec = rd.spec
        peaks: dict[str, float] = {}
        sources: tuple[str, ...] = ()
        if spec is not None:
            peaks = {k: float(v) for k, v in spec.peaks.items()}
            sources = tuple(f"{k}: {v}" for k, v in spec.sources.items())
        rows.append(
            HardwareRow(
                device=idx,
                reported_name=rd.reported_name,
                spec=spec.name if spec else None,
                how=rd.how,
                memory_bandwidth_per_s=spec.memory_bandwidth_bps if spec else None,
                peaks_flops_per_s=peaks,
                sources=sources,
                notes=tuple(getattr(spec, "notes", ()) or ()) if spec is not None else (),
            )
        )
    return tuple(rows)


def _devices(trace: Trace, analysis: Facts) -> tuple[DeviceRow, ...]:
    t0 = _t0(trace)
    out = []
    for t in analysis.timelines:
        info = trace.device(t.device)
        host, src = analysis.longest_idle_host[t.device]
        out.append(
            DeviceRow(
                device=t.device,
                name=info.name if info else "",
                window_start_ns=t.window_start_ns - t0,
                window_ns=t.window_ns,
                busy_ns=t.busy_ns,
                idle_ns=t.idle_ns,
                compute_ns=t.compute_ns,
                copy_ns=t.copy_ns,
                comm_ns=t.comm_ns,
                exposed_copy_ns=t.exposed_copy_ns,
                exposed_comm_ns=t.exposed_comm_ns,
                busy_pct=t.share(t.busy_ns),
                idle_pct=t.share(t.idle_ns),
                compute_pct=t.share(t.compute_ns),
                copy_pct=t.share(t.copy_ns),
                comm_pct=t.share(t.comm_ns),
                kernels=t.kernels,
                memcpys=t.memcpys,
                memsets=t.memsets,
                streams=t.streams,
                profiler_window_ns=t.profiler_window_ns,
                idle_in_profiler_window_ns=t.idle_in_profiler_window_ns,
                comm_overlap_pct=t.comm_overlap_pct,
                longest_idle_start_ns=None if t.longest_idle_start_ns is None else t.longest_idle_start_ns - t0,
                longest_idle_ns=None if t.longest_idle_start_ns is None or t.longest_idle_end_ns is None
                else t.longest_idle_end_ns - t.longest_idle_start_ns,
                longest_idle_host=host,
                longest_idle_source=src,
                launches=t.launches,
                launch_delay_p50_ns=t.launch_delay_p50_ns,
                launch_delay_p90_ns=t.launch_delay_p90_ns,
                launch_delay_max_ns=t.launch_delay_max_ns,
                kernels_shorter_than_launch=t.kernels_shorter_than_launch,
            )
        )
    return tuple(out)


def _t0(trace: Trace) -> int:
    b = trace.time_bounds()
    return b[0] if b else 0


def _stages(analysis: Facts) -> tuple[StageRow, ...]:
    work = analysis.stage_work
    rows = []
    for st in analysis.stages:
        w = work[st.name]
        point = w.point
        rows.append(
            StageRow(
                name=st.name,
                kind=st.kind,
                count=st.count,
                warmup_count=st.warmup_count,
                total_ns=st.total_ns,
                p50_ns=st.p50_ns,
                p90_ns=st.p90_ns,
                p99_ns=st.p99_ns,
                mean_ns=st.mean_ns,
                min_ns=st.min_ns,
                max_ns=st.max_ns,
                warmup_p50_ns=st.warmup_p50_ns,
                empty_count=st.empty_count,
                gpu_busy_ns=st.gpu_busy_ns,
                gpu_share_pct=st.gpu_share_pct,
                dominant_bound=w.dominant_bound,
                bound_shares_pct=w.bound_shares_pct,
                flops=w.flops,
                bytes=w.bytes,
                intensity=w.intensity,
                work_ns=w.work_ns,
                roof=w.roof,
                ridge=point.ridge if point else None,
                achieved_flops_per_s=point.achieved_flops_per_s if point else None,
                achieved_bytes_per_s=point.achieved_bytes_per_s if point else None,
                attainable_flops_per_s=point.attainable_flops_per_s if point else None,
                pct_of_roof=point.pct_of_roof if point else None,
                lower_bound_ns=point.lower_bound_ns if point else None,
                gap_ns=point.gap_ns if point else None,
                roofline_bound=point.bound if point else "",
                wall_ns=w.wall_ns,
                gpu_busy_each_ns=w.gpu_busy_each_ns,
            )
        )
    return tuple(rows)


def _op_rows(analysis: Facts) -> tuple[OpRow, ...]:
    total = analysis.ops.total_ns
    out = []
    for g, st in zip(analysis.ops.groups, stakes(analysis.ops.groups)):
        p = g.point
        out.append(
            OpRow(
                name=g.name,
                shapes=g.shapes,
                dtype=g.dtype,
                kind=g.kind,
                count=g.count,
                kernels=g.kernels,
                total_ns=g.total_ns,
                share_pct=100.0 * g.total_ns / total if total else 0.0,
                host_ns=g.host_ns,
                device=g.device,
                family=g.family,
                flops=g.flops,
                bytes=g.bytes,
                intensity=p.intensity if p.intensity not in (None, float("inf")) else None,
                ridge=p.ridge,
                precision=g.precision,
                unit=g.unit,
                bound=p.bound,
                heuristic=p.heuristic,
                achieved_flops_per_s=p.achieved_flops_per_s,
                achieved_bytes_per_s=p.achieved_bytes_per_s,
                attainable_flops_per_s=p.attainable_flops_per_s,
                pct_of_roof=p.pct_of_roof,
                lower_bound_ns=p.lower_bound_ns,
                gap_ns=(p.gap_ns * g.count) if p.gap_ns is not None else None,
                note=g.note,
                top_kernels=g.top_kernels,
                causal="causal" in g.note,
                stake_ns=st.stake_ns if st else None,
                stake_basis=st.basis if st else "",
                stake_detail=st.detail if st else "",
            )
        )
    return tuple(out)


_PATTERN_RULES = ("TC102",)  # pattern findings whose evidence ops are claimed as a whole


CAUSE_INDEX = {c: k for k, c in enumerate(CAUSES)}


def _idle_summary(analysis: Facts, idle: Any) -> IdleSummary | None:
    if idle is None:
        return None
    at = analysis.analysed
    trace = analysis.trace
    queued = idle.queued(trace)
    waited = queued & (idle.length_ns >= LAUNCH_LATENCY_NS)
    queued_ns: dict[int, int] = {}
    latency_ns: dict[int, int] = {}
    longest: dict[int, tuple[int, str, int, str, str]] = {}
    for d in idle.devices:
        on_dev = idle.mask(None, d)
        short = int(idle.length_ns[queued & ~waited & on_dev].sum())
        if short:
            latency_ns[d] = short
        on = np.flatnonzero(waited & on_dev)
        if len(on) == 0:
            continue
        queued_ns[d] = int(idle.length_ns[on].sum())
        k = int(on[np.argmax(idle.length_ns[on])])
        row = int(idle.next_row[k])
        host, src = host_during(trace, int(idle.start_ns[k]), int(idle.end_ns[k]))
        longest[d] = (int(idle.length_ns[k]), short_kernel_name(trace.strings[trace.gpu.name[row]]),
                      int(trace.gpu.stream[row]), host, src or "")
    return IdleSummary(analysed_ns=at.total_ns, steps_count=at.steps_count, synthetic=at.synthetic,
                       busy_ns=dict(idle.busy_ns), idle_by_cause_ns={d: idle.by_cause(d) for d in idle.devices},
                       backlog_busy_ns=dict(idle.backlog_busy_ns), unknown_queued_ns=queued_ns,
                       unknown_latency_ns=latency_ns, longest_queued=longest)


#: busy-time findings that measure the same GPU time: copies (exposed, pageable staging,
#: waited-for, layout copies) and matmul/conv kernels (tensor-core eligibility); the roofline
#: rows of copy or matmul/conv ops join the same group. Each group counts once.
_BUSY_GROUP = {"TC301": "copies", "TC302": "copies", "TC303": "copies", "TC401": "copies", "TC101": "matmuls"}
_COPY_OP = ("copy", "contiguous", "clone", "memcpy", "memset", "to_copy", "reshape", "transpose", "permute")
_MATMUL_OP = ("mm", "matmul", "linear", "conv", "einsum", "gemm", "addmm", "bmm")


def _roofline_group(name: str, layout_copies: bool = False) -> str:
    low = name.lower()
    if any(w in low for w in _COPY_OP):
        return "copies"
    if layout_copies and "conv" in low:  # a convolution's time holds the layout kernels TC401 counts
        return "copies"
    tail = low.split("::")[-1]
    if any(tail == w or tail.startswith(w) or tail.endswith(w) for w in _MATMUL_OP) or "conv" in tail:
        return "matmuls"
    return "op:" + name


def _opportunities(findings: Sequence[Finding], ops: Sequence[OpRow], idle: Any = None) -> tuple[Opportunity, ...]:
    """Largest recoverable times, additive (no stretch of time counted twice): each idle cause of
    the shared attribution counts once (rules that claim the same cause, TC201 storms inside
    TC202's launch overhead, are merged and capped at that cause's idle); busy-time findings and
    roofline gaps that measure the same kernels (copies; matmuls/convolutions) count once, the
    largest standing for the group; roofline gaps of other ops are disjoint op groups."""
    real = [f for f in findings if f.recoverable_ns > 0 and f.severity != "info"]
    by_cause: dict[str, list[Finding]] = {}
    items: list[tuple[str, Opportunity]] = []  # (overlap group, opportunity)
    for f in real:
        cause = f.values.get("idle_cause") if isinstance(f.values, Mapping) else None
        if cause:
            by_cause.setdefault(cause, []).append(f)
        else:
            group = _BUSY_GROUP.get(f.code, f"{f.code}|{f.location}")
            items.append((group, _opportunity(f)))
    out = []
    for cause, group in by_cause.items():
        group.sort(key=lambda f: -f.recoverable_ns)
        total = sum(f.recoverable_ns for f in group)
        if idle is not None:
            total = min(total, idle.total(CAUSE_INDEX[cause]))
        top = group[0]
        merged = tuple(sorted({f.code for f in group} - {top.code}))
        out.append(dataclasses.replace(_opportunity(top), recoverable_ns=total, merged=merged, idle_cause=cause))
    # ops a pattern finding already claims (TC102: the whole unfused attention) do not come back
    # as roofline items; roofline items count the achievable stake, not the datasheet gap
    claimed = {n for f in real if f.code in _PATTERN_RULES for e in f.evidence for n in e.ops}
    gaps = [o for o in ops if o.bound in (COMPUTE, MEMORY) and not o.heuristic and o.stake_ns and o.stake_ns > 0
            and o.name not in claimed]
    gaps.sort(key=lambda o: -(o.stake_ns or 0))
    for o in gaps[:3]:
        # the achievable ceiling (main's stake) in a lead line that fits: "memory" for memory-bandwidth
        short_roof = "compute" if o.bound == COMPUTE else "memory"
        pct = units.pct(o.pct_of_roof, 0) if o.pct_of_roof is not None else "?"
        group = _roofline_group(o.name, any(f.code == "TC401" for f in real))
        # "45% best sibling" -> "from 37% to 45% of its compute roof (best sibling)": the numbers first
        target, _, why = (o.stake_basis or "?").partition(" ")
        if why.endswith(")") and " (" in why:  # "documented (gemm)" -> "documented for gemm"
            why = why[:-1].replace(" (", " for ", 1)
        items.append((group, Opportunity(title=f"Bring {o.name} from {pct} to {target} of its {short_roof} roof"
                                               + (f" ({why})" if why else ""),
                                         recoverable_ns=int(o.stake_ns or 0), source="roofline", names=(o.name,))))
    groups: dict[str, list[Opportunity]] = {}
    for g, opp in items:
        groups.setdefault(g, []).append(opp)
    for g, members in groups.items():
        if g.startswith("op:"):  # distinct op groups of one name (other shapes) are disjoint
            out.extend(members)
            continue
        members.sort(key=lambda o: -o.recoverable_ns)
        top = members[0]
        others = tuple(dict.fromkeys(m.source for m in members[1:]))
        out.append(dataclasses.replace(top, overlaps=others) if others else top)
    out.sort(key=lambda o: -o.recoverable_ns)
    return tuple(out[:5])


def _opportunity(f: Finding) -> Opportunity:
    """A finding as an opportunity: its short title (the message when the rule gives none), the
    first source line of its evidence and the names to show as code."""
    where = next((e.source for e in f.evidence if e.source), "")
    names = tuple(dict.fromkeys(n for e in f.evidence[:3] for n in (*e.ops, *e.kernels)))
    return Opportunity(title=f.title or f.message, recoverable_ns=f.recoverable_ns, source=f.code, names=names,
                       where=where or "", fingerprint=f.fingerprint)


def _notes(trace: Trace, analysis: Facts) -> tuple[str, ...]:
    notes = list(trace.notes)
    for idx, rd in sorted(analysis.devices.items()):
        if idx < 0:
            continue
        if rd.spec is None and rd.how not in ("unknown", "--device override"):
            label = f" ({rd.reported_name})" if rd.reported_name else ""
            notes.append(f"device {idx}{label}: {rd.how}")
        elif rd.spec is not None and rd.how.startswith(("identified", "deviceProperties")):
            notes.append(f"device {idx} ({rd.reported_name or 'no name'}): {rd.how}")
        elif rd.spec is None:
            label = f" ({rd.reported_name})" if rd.reported_name else ""
            notes.append(
                f"device {idx}{label} is not in the hardware table or its name is ambiguous: "
                "roofline labels for its work are omitted (pass --device NAME; traceclass devices "
                "lists the known names)"
            )
    notes += graph_replay_notes(trace, analysis.gpu_family_code, units.duration)
    if len(trace.gpu) == 0 and Captured.GPU in trace.captured and not len(trace.samples):
        notes.append("the trace holds no GPU activity: GPU timeline and GPU rules are skipped")
    if len(trace.gpu) and len(trace.api) and not len(trace.ops) and not len(trace.python):
        # the idle attribution tells host work from launch overhead by the host's recorded
        # activity; with runtime calls alone most of what the host did is not there
        notes.append(f"CPU ops and Python functions not recorded (runtime calls only): what the host did "
                     f"between launches is not visible, so GPU idle that the runtime calls do not explain "
                     f"is counted as launch overhead when the host's stretch before the launch is under "
                     f"{units.duration(HOST_PHASE_NS)} and as unknown when longer")
    occ = analysis.occurrences
    if occ.synthetic:
        notes.append("no ProfilerStep ranges: the whole trace is treated as one step")
    if occ.warmup_ignored:
        notes.append(f"the trace has too few steps to set {analysis.config.warmup_steps} apart as warm-up: "
                     "all steps are analysed")
    if occ.empty.any():
        notes.append(f"{int(occ.empty.sum())} step(s) contain no op and no GPU work (the profiler closed a "
                     "step it did not run, typically the last): left out of the step statistics")
    if analysis.ops.excluded_warmup:
        notes.append("op, kernel-group and roofline tables cover the steady-state steps only "
                     "(work that started in warm-up steps is left out)")
    if len(trace.ops) and Captured.SHAPES not in trace.captured:
        notes.append(
            "ops were recorded without shapes (record_shapes=False): FLOPs and bytes cannot be "
            "computed, so ops are unclassified"
        )
    return tuple(notes)
