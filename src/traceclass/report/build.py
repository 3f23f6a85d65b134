"""Analysis results + findings -> :class:`~traceclass.report.model.Report` (plain data)."""

from __future__ import annotations

import dataclasses
import os
from typing import Sequence

import numpy as np

from traceclass import __version__
from traceclass import timeline as tl
from traceclass.analysis import Analysis
from traceclass.analysis.devices import modal_device
from traceclass.analysis.kernel_families import FAMILY_ORDER
from traceclass.analysis.roofline import COMPUTE, MEMORY, Point, classify
from traceclass.config import Config
from traceclass.model import AnnotationKind, GpuKind, Trace
from traceclass.report.model import (
    DeviceRow,
    HardwareRow,
    KernelFamilyRow,
    KernelRow,
    MemoryRow,
    OpRow,
    Opportunity,
    Report,
    SourceSummary,
    StageRow,
)
from traceclass.rule import Finding


def build_report(
    trace: Trace,
    analysis: Analysis,
    findings: Sequence[Finding] = (),
    config: Config | None = None,
    rule_errors: Sequence[str] = (),
) -> Report:
    steps = _steady_steps(analysis)
    group_steps, family_steps = _step_series(trace, analysis, steps)
    ops_rows = tuple(dataclasses.replace(r, step_ns=group_steps[k]) for k, r in enumerate(_op_rows(analysis)))
    t0 = _t0(trace)
    findings = tuple(sorted((_relative_evidence(f, t0) for f in findings),
                            key=lambda f: (-f.recoverable_ns, f.code, f.location)))
    return Report(
        traceclass_version=__version__,
        source=_source(trace),
        hardware=_hardware(analysis),
        devices=_devices(trace, analysis),
        stages=_stages(trace, analysis),
        ops=ops_rows,
        ops_total_ns=analysis.ops.total_ns,
        ops_time_basis="gpu" if len(trace.gpu) else "cpu",
        unmodeled_ops=dict(sorted(analysis.ops.unmodeled_names.items(), key=lambda kv: -kv[1])),
        kernels=_kernels(trace, analysis),
        findings=findings,
        opportunities=_opportunities(findings, ops_rows),
        cpu_profile=analysis.cpu,
        notes=_notes(trace, analysis),
        thresholds={
            "warmup_steps": analysis.config.warmup_steps,
            "latency_floor_us": analysis.config.latency_floor_us,
            "cpu_latency_floor_us": analysis.config.cpu_latency_floor_us,
            "config_sources": list(config.sources) if config else ["defaults"],
        },
        rule_errors=tuple(rule_errors),
        kernel_families=_kernel_families(trace, analysis, family_steps, len(steps)),
        memory=_memory(trace),
        step_series_steps=len(steps),
    )


def _relative_evidence(f: Finding, t0: int) -> Finding:
    """Evidence windows measured from the trace's first event, so runs line up."""
    import dataclasses

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


def _hardware(analysis: Analysis) -> tuple[HardwareRow, ...]:
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


def _devices(trace: Trace, analysis: Analysis) -> tuple[DeviceRow, ...]:
    t0 = _t0(trace)
    out = []
    for t in analysis.timelines:
        info = trace.device(t.device)
        host, src = _host_during(trace, t.longest_idle_start_ns, t.longest_idle_end_ns)
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


def _host_during(trace: Trace, g0: int | None, g1: int | None) -> tuple[str, str | None]:
    """The host activity that covers most of ``[g0, g1)``: the API call, else the deepest op
    covering at least half of it. Plain text and a source line."""
    if g0 is None or g1 is None or g1 <= g0:
        return "", None
    from traceclass.analysis.source_lines import source_for_points

    half = (g1 - g0) / 2
    for table, label in ((trace.api, "API call"), (trace.ops, "op")):
        if not len(table):
            continue
        ov = np.minimum(table.end_ns, g1) - np.maximum(table.start_ns, g0)
        cand = np.flatnonzero(ov >= half)
        if not len(cand):
            continue
        depth = table.depth[cand] if hasattr(table, "depth") else np.zeros(len(cand))
        r = int(cand[np.lexsort((-ov[cand], -depth))[0]])
        text = f"{label} {trace.strings[int(table.name[r])]}"
        if label == "API call" and table.op[r] >= 0:
            text += f" in {trace.strings[int(trace.ops.name[int(table.op[r])])]}"
        src = source_for_points(trace, table.pid[r:r + 1], table.tid[r:r + 1], table.start_ns[r:r + 1])[0]
        return text, src
    return "no recorded host activity", None


def _t0(trace: Trace) -> int:
    b = trace.time_bounds()
    return b[0] if b else 0


def _stages(trace: Trace, analysis: Analysis) -> tuple[StageRow, ...]:
    occ = analysis.occurrences
    opa = analysis.ops
    groups = opa.groups
    group_bound = np.array([g.point.bound for g in groups] + [""], dtype=object)
    group_flops = np.array([g.flops if g.flops is not None else np.nan for g in groups] + [np.nan])
    group_bytes = np.array([g.bytes if g.bytes is not None else np.nan for g in groups] + [np.nan])
    gpu = trace.gpu
    has_gpu = len(gpu) > 0
    index = {n: j for j, n in enumerate(occ.names)}
    rows = []
    for st in analysis.stages:
        j = index[st.name]
        m = occ.stage == j
        steady_m = m & occ.steady()
        steady = steady_m if steady_m.any() else (m & occ.warmup if (m & occ.warmup).any() else m)
        which = np.flatnonzero(steady)
        which = which[np.argsort(occ.start_ns[which], kind="stable")]
        shares: dict[str, float] = {}
        g = np.zeros(0, np.int64)
        work_ns = 0
        flops = nbytes = None
        if has_gpu:
            sel = _union_rows([occ.gpu_rows[i] for i in which], len(gpu))
            sel = sel[opa.gpu_group[sel] >= 0] if len(sel) else sel
            if len(sel):
                dur = (gpu.end_ns[sel] - gpu.start_ns[sel]).astype(np.float64)
                shares = _group_shares(opa.gpu_group[sel], dur, group_bound)
                owners = _union_rows([opa.gpu_owner[sel]], len(trace.ops))
                g = opa.op_group[owners]
                g = g[g >= 0]
                flops, nbytes = _sum_or_none(group_flops[g]), _sum_or_none(group_bytes[g])
            busy = occ.gpu_busy_ns[which]
            work_ns = int(busy[busy >= 0].sum())
        else:
            sel = _union_rows([occ.op_rows[i] for i in which], len(trace.ops))
            if len(sel) and len(opa.op_group):
                sel = sel[opa.op_group[sel] >= 0]
                if len(sel):
                    shares = _group_shares(opa.op_group[sel], opa.owner_time_ns[sel].astype(np.float64),
                                           group_bound)
                    g = opa.op_group[sel]
                    flops, nbytes = _sum_or_none(group_flops[g]), _sum_or_none(group_bytes[g])
                    work_ns = int(opa.owner_time_ns[sel].sum())
        dominant = max(shares, key=lambda k: shares[k]) if shares else ""
        point, roof_label = _stage_point(analysis, g, flops, nbytes, work_ns)
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
                dominant_bound=dominant,
                bound_shares_pct=shares,
                flops=flops,
                bytes=nbytes,
                intensity=(flops / nbytes) if (flops is not None and nbytes) else None,
                work_ns=work_ns,
                roof=roof_label,
                ridge=point.ridge if point else None,
                achieved_flops_per_s=point.achieved_flops_per_s if point else None,
                achieved_bytes_per_s=point.achieved_bytes_per_s if point else None,
                attainable_flops_per_s=point.attainable_flops_per_s if point else None,
                pct_of_roof=point.pct_of_roof if point else None,
                lower_bound_ns=point.lower_bound_ns if point else None,
                gap_ns=point.gap_ns if point else None,
                roofline_bound=point.bound if point else "",
                wall_ns=tuple(int(x) for x in (occ.end_ns[which] - occ.start_ns[which])[:_MAX_SAMPLES].tolist()),
                gpu_busy_each_ns=tuple(int(x) for x in occ.gpu_busy_ns[which][:_MAX_SAMPLES].tolist())
                if has_gpu else (),
            )
        )
    return tuple(rows)


_MAX_SAMPLES = 10_000  # per stage in the JSON report: enough for percentiles and noise tests


_MAX_STEP_SERIES = 1_000  # steady steps kept in the per-step series of op groups and kernel families


def _steady_steps(analysis: Analysis) -> np.ndarray:
    """Occurrence indices of the steady-state steps, in time order (warm-up apart)."""
    occ = analysis.occurrences
    js = [j for j, k in enumerate(occ.kinds) if k == int(AnnotationKind.STEP)]
    if not js:
        return np.zeros(0, np.int64)
    m = np.isin(occ.stage, np.array(js, dtype=np.int64))
    steady = m & occ.steady() if (m & occ.steady()).any() else m
    which = np.flatnonzero(steady)
    return which[np.argsort(occ.start_ns[which], kind="stable")][:_MAX_STEP_SERIES]


def _step_series(trace: Trace, analysis: Analysis, steps: np.ndarray) -> tuple[list[tuple[int, ...]], dict[str, np.ndarray]]:
    """Per op group and per kernel family: time inside each steady step.

    Work belongs to the step whose wall-clock window holds its start on the host, on any
    thread (backward ops on the autograd thread count in their step): owner ops by their
    start; GPU rows by the start of their launching API call, or by their own start when no
    launch was recorded. Op-owned groups add the attributed time of their owner instances
    (as in ``total_ns``); kernel and graph groups the union of their GPU rows; kernel
    families the summed kernel durations. Work in warm-up steps or outside steps is left out.
    """
    occ, opa = analysis.occurrences, analysis.ops
    n_groups, n_steps = len(opa.groups), len(steps)
    per_group = np.zeros((n_groups, n_steps), dtype=np.int64)
    families: dict[str, np.ndarray] = {}
    if n_steps == 0:
        return [() for _ in range(n_groups)], families
    w0, w1 = occ.start_ns[steps], occ.end_ns[steps]
    order = np.argsort(w0, kind="stable")
    w0, w1 = w0[order], w1[order]
    slot = order  # window position -> series position (steps are already in time order)

    def step_of(t: np.ndarray) -> np.ndarray:
        k = np.searchsorted(w0, t, side="right") - 1
        ok = (k >= 0) & (t < w1[np.maximum(k, 0)])
        return np.where(ok, slot[np.maximum(k, 0)], -1)

    ops = trace.ops
    if len(ops) and len(opa.op_group):
        owners = np.flatnonzero(opa.op_group >= 0)
        k = step_of(ops.start_ns[owners])
        m = k >= 0
        np.add.at(per_group, (opa.op_group[owners[m]], k[m]), opa.owner_time_ns[owners[m]])
    gpu = trace.gpu
    if len(gpu):
        rows = np.flatnonzero(gpu.kind != GpuKind.SYNC)
        api = gpu.api[rows]
        launch_t = np.where(api >= 0, trace.api.start_ns[np.maximum(api, 0)] if len(trace.api) else 0,
                            gpu.start_ns[rows])
        k = step_of(launch_t)
        rows, k = rows[k >= 0], k[k >= 0]
        op_owned = np.array([g.kind == "op" for g in opa.groups] + [True], dtype=bool)
        gg = opa.gpu_group[rows]
        bare = ~op_owned[gg]  # gpu_group -1 indexes the trailing True
        if bare.any():
            key = gg[bare] * n_steps + k[bare]
            sel = rows[bare]
            uk, lengths = tl.union_length_by_group(key, gpu.start_ns[sel], gpu.end_ns[sel])
            uk = np.asarray(uk, np.int64)
            np.add.at(per_group, (uk // n_steps, uk % n_steps), np.asarray(lengths, np.int64))
        dur = (gpu.end_ns[rows] - gpu.start_ns[rows]).astype(np.float64)
        code = analysis.gpu_family_code[rows].astype(np.int64)
        n_f = len(FAMILY_ORDER)
        table = np.bincount(code * n_steps + k, weights=dur, minlength=n_f * n_steps).reshape(n_f, n_steps)
        for c in np.unique(code).tolist():
            families[FAMILY_ORDER[c]] = np.rint(table[c]).astype(np.int64)
    return [tuple(int(x) for x in per_group[j].tolist()) for j in range(n_groups)], families


def _kernel_families(trace: Trace, analysis: Analysis, steps: dict[str, np.ndarray],
                     n_steps: int) -> tuple[KernelFamilyRow, ...]:
    gpu = trace.gpu
    if len(gpu) == 0:
        return ()
    active = np.flatnonzero(gpu.kind != GpuKind.SYNC)
    code = analysis.gpu_family_code[active].astype(np.int64)
    dur = (gpu.end_ns[active] - gpu.start_ns[active]).astype(np.float64)
    counts = np.bincount(code, minlength=len(FAMILY_ORDER))
    totals = np.bincount(code, weights=dur, minlength=len(FAMILY_ORDER))
    out = []
    for c in np.flatnonzero(counts).tolist():
        f = FAMILY_ORDER[c]
        s = steps.get(f)
        each = s.tolist() if s is not None else [0] * n_steps
        out.append(KernelFamilyRow(family=f, count=int(counts[c]), total_ns=int(round(totals[c])),
                                   step_ns=tuple(int(x) for x in each)))
    out.sort(key=lambda r: -r.total_ns)
    return tuple(out)


def _memory(trace: Trace) -> tuple[MemoryRow, ...]:
    mem = trace.memory
    if len(mem) == 0:
        return ()
    out = []
    key = np.stack([mem.device_type.astype(np.int64), mem.device.astype(np.int64)], 1)
    for dt, dev in np.unique(key, axis=0).tolist():
        m = (mem.device_type == dt) & (mem.device == dev)
        alloc = mem.total_allocated[m]
        res = mem.total_reserved[m]
        if not len(alloc) or alloc.max() < 0:
            continue
        peak_res = int(res.max()) if len(res) and res.max() > 0 else None
        out.append(MemoryRow(device_type="cpu" if dt == 0 else "gpu", device=int(dev), events=int(m.sum()),
                             peak_allocated_bytes=int(alloc.max()), peak_reserved_bytes=peak_res))
    return tuple(out)


def _stage_point(analysis: Analysis, g: np.ndarray, flops: float | None, nbytes: float | None,
                 work_ns: int) -> tuple[Point | None, str]:
    """Roofline point of a stage's modeled work over all of its measured work time.

    The roof is that of the op group holding most of the stage's FLOPs (its device, precision
    and unit); unmodeled work still counts in the time, so achieved FLOP/s is a lower bound.
    """
    groups = analysis.ops.groups
    if not flops or not nbytes or work_ns <= 0 or not len(g):
        return None, ""
    fl = np.array([groups[k].flops or 0.0 for k in g.tolist()])
    top = groups[int(g[int(np.argmax(fl))])]
    roof = analysis.roof(top.device, top.precision, top.unit)
    if roof is None:
        return None, ""
    return classify(flops, nbytes, float(work_ns), roof, 0.0), f"{top.precision} {top.unit}, {roof.device}"


def _sum_or_none(values: np.ndarray) -> float | None:
    v = values[~np.isnan(values)]
    return float(v.sum()) if len(v) else None


def _union_rows(parts: list[np.ndarray], n: int) -> np.ndarray:
    """Sorted distinct rows of several index arrays (a mask: no sort of the concatenation)."""
    mask = np.zeros(n, dtype=bool)
    for p in parts:
        if len(p):
            mask[p[p >= 0]] = True
    return np.flatnonzero(mask)


def _group_shares(group: np.ndarray, weights: np.ndarray, group_bound: np.ndarray) -> dict[str, float]:
    """Percent of ``weights`` per roofline label, summed per group first."""
    per_group = np.bincount(group, weights=weights, minlength=len(group_bound) - 1)
    g = np.flatnonzero(per_group)
    return _shares(group_bound[g], per_group[g])


def _shares(labels: np.ndarray, weights: np.ndarray) -> dict[str, float]:
    total = float(weights.sum())
    if total <= 0:
        return {}
    out: dict[str, float] = {}
    for lab in np.unique(labels).tolist():
        if lab:
            out[str(lab)] = 100.0 * float(weights[labels == lab].sum()) / total
    return dict(sorted(out.items(), key=lambda kv: -kv[1]))


def _op_rows(analysis: Analysis) -> tuple[OpRow, ...]:
    total = analysis.ops.total_ns
    out = []
    for g in analysis.ops.groups:
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
            )
        )
    return tuple(out)


def _kernels(trace: Trace, analysis: Analysis, limit: int = 200) -> tuple[KernelRow, ...]:
    gpu = trace.gpu
    if len(gpu) == 0:
        return ()
    active = np.flatnonzero(gpu.kind != GpuKind.SYNC)
    if len(active) == 0:
        return ()
    dur = gpu.end_ns[active] - gpu.start_ns[active]
    names = gpu.name[active]
    order = np.lexsort((dur, names))
    names_s, dur_s, rows_s = names[order], dur[order], active[order]
    cut = np.r_[0, np.flatnonzero(np.diff(names_s)) + 1, len(names_s)]
    busy = sum(t.busy_ns for t in analysis.timelines) or 1
    fam = analysis.gpu_family
    groups = analysis.ops.groups
    out = []
    for lo, hi in zip(cut[:-1], cut[1:]):
        d = dur_s[lo:hi]
        rows = rows_s[lo:hi]
        n = hi - lo
        med = float(d[n // 2]) if n % 2 else float(d[n // 2 - 1] + d[n // 2]) / 2.0
        gg = analysis.ops.gpu_group[rows]
        bound = ""
        point = None
        ugg = np.unique(gg[gg >= 0])
        if len(ugg) == 1:
            g = groups[int(ugg[0])]
            if g.kind == "op" and g.kernels == g.count:
                bound = g.point.bound
                point = g.point if g.flops is not None else None
        fn = gpu.full_name[rows]
        fn = fn[fn >= 0]
        op_names: list[str] = []
        if len(ugg):
            w = np.bincount(np.searchsorted(ugg, gg[gg >= 0]), weights=d[gg >= 0].astype(np.float64))
            for k in np.argsort(-w)[:3]:
                g = groups[int(ugg[k])]
                if g.kind == "op" and g.name not in op_names:
                    op_names.append(g.name)
        out.append(
            KernelRow(
                name=trace.strings[int(names_s[lo])],
                family=str(fam[rows[0]]),
                device=modal_device(gpu.device[rows]),
                count=int(n),
                total_ns=int(d.sum()),
                mean_ns=float(d.mean()),
                p50_ns=med,
                max_ns=int(d.max()),
                share_pct=100.0 * float(d.sum()) / busy,
                bound=bound,
                ops=tuple(op_names),
                full_name=trace.strings[int(fn[0])] if len(fn) else "",
                flops=point.flops if point else None,
                bytes=point.bytes if point else None,
                intensity=point.intensity if point and point.intensity not in (None, float("inf")) else None,
                achieved_flops_per_s=point.achieved_flops_per_s if point else None,
                achieved_bytes_per_s=point.achieved_bytes_per_s if point else None,
                pct_of_roof=point.pct_of_roof if point else None,
            )
        )
    out.sort(key=lambda k: -k.total_ns)
    return tuple(out[:limit])


#: rules that measure the same GPU idle time from different angles (launch overhead, syncs,
#: storms, low-utilisation windows): only the largest enters the opportunities list
_IDLE_FAMILY = ("TC201", "TC202", "TC203", "TC303", "TC601")


def _opportunities(findings: Sequence[Finding], ops: Sequence[OpRow]) -> tuple[Opportunity, ...]:
    """Largest recoverable times, overlaps removed: idle-time rules count once, and roofline
    gaps (time above an op's lower bound) come in as their own items."""
    real = [f for f in findings if f.recoverable_ns > 0 and f.severity != "info"]
    idle = [f for f in real if f.code in _IDLE_FAMILY]
    out = [Opportunity(title=f.message, recoverable_ns=f.recoverable_ns, source=f.code)
           for f in real if f.code not in _IDLE_FAMILY]
    if idle:
        top = max(idle, key=lambda f: f.recoverable_ns)
        others = sorted({f.code for f in idle} - {top.code})
        out.append(Opportunity(title=top.message, recoverable_ns=top.recoverable_ns, source=top.code,
                               overlaps=tuple(others)))
    gaps = [o for o in ops if o.bound in (COMPUTE, MEMORY) and not o.heuristic and o.gap_ns and o.gap_ns > 0]
    gaps.sort(key=lambda o: -(o.gap_ns or 0))
    for o in gaps[:3]:
        roof = "compute" if o.bound == COMPUTE else "memory-bandwidth"
        pct = f"{o.pct_of_roof:.0f}%" if o.pct_of_roof is not None else "?"
        out.append(
            Opportunity(
                title=f"{o.name} runs at {pct} of its {roof} roof",
                recoverable_ns=int(o.gap_ns or 0),
                source="roofline",
                names=(o.name,),
            )
        )
    out.sort(key=lambda o: -o.recoverable_ns)
    return tuple(out[:5])


def _notes(trace: Trace, analysis: Analysis) -> tuple[str, ...]:
    notes = list(trace.notes)
    for idx, rd in sorted(analysis.devices.items()):
        if idx < 0:
            continue
        if rd.spec is None:
            label = f" ({rd.reported_name})" if rd.reported_name else ""
            notes.append(
                f"device {idx}{label} is not in the hardware table or its name is ambiguous: "
                "roofline labels for its work are omitted (pass --device NAME; traceclass devices "
                "lists the known names)"
            )
    if len(trace.gpu) == 0 and "gpu" in trace.captured and not len(trace.samples):
        notes.append("the trace holds no GPU activity: GPU timeline and GPU rules are skipped")
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
    if len(trace.ops) and "shapes" not in trace.captured:
        notes.append(
            "ops were recorded without shapes (record_shapes=False): FLOPs and bytes cannot be "
            "computed, so ops are unclassified"
        )
    return tuple(notes)


def relative(trace: Trace, t_ns: int | None) -> int | None:
    return None if t_ns is None else t_ns - _t0(trace)
