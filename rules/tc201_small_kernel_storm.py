"""Small-kernel storm: many tiny kernels in a row, with the GPU idle more than busy between them.

What it finds
    Runs of consecutive kernels and memsets on one device (time order across streams) that each
    run shorter than ``max_kernel_us``, at least ``min_kernels_count`` long, launched in one step,
    with no idle stretch longer than ``max_gap_us`` between consecutive starts, in which the GPU
    is busy less than ``max_busy_pct`` of the run's window (busy = union of all work on the
    device, copies and long kernels on other streams included). Kernels replayed by a CUDA/HIP graph launch never count:
    graph replay removes launch gaps by design. Per storm: window, kernel count, busy share,
    launch-bound time (idle inside the window), the ops that launched the kernels (with counts)
    and the most frequent kernel-name sequences (n-grams of ``min_sequence_kernels_count`` to
    ``max_sequence_kernels_count`` kernels) as fusion candidates. Storms are grouped per device and
    user stage (innermost ``record_function``/NVTX range around the launches).

    CPU-only torch traces (no GPU activity): the same search over the top-level ops of each host
    thread, with ``max_host_op_us`` as the size limit and ``max_host_gap_us`` between ops: a
    *host-side op storm*, where per-op dispatch and the Python between ops are the whole cost
    (there is no busy-share condition: an op shorter than the dispatch cost is dispatch).

Why it matters
    Each eager kernel launch costs the host ~5-20 us (Python, dispatcher, ``cudaLaunchKernel``).
    When kernels run shorter than that, the GPU waits for the host after every kernel: the step
    is launch-bound, and a faster GPU would not make it faster (XProf: "86 % of step is kernel
    launch, ops too small"; peers.md). On the host the same pattern is pure interpreter and
    dispatcher overhead.

How to fix
    Capture the storm in a CUDA graph (``torch.cuda.graphs``, ``torch.compile(mode=
    "reduce-overhead")``), fuse the element-wise chain (``torch.compile``, a Triton kernel, fused
    or ``foreach`` optimizers), or give each kernel more work (larger batch, vectorise a Python
    loop over tensors into one op). The kernel sequences listed are the first fusion candidates.

Example
    Corpus h100_qwen1.5-0.5b_inference: each decode step starts by building the attention mask and
    the rotary tables in eager Python: 12 kernels of 1.5-4 us (``aten::arange``, ``eq``, ``all``,
    ``bmm``, ``cat``, ``cos``, ``sin``, ``mul``, ``copy_``) over 624 us with the GPU 4.7 % busy:
    571 us recoverable by precomputing the tables or compiling the preamble. On CPU,
    sample_traces/torch_cpu_tiny_ops_loop.json.gz (``acc = acc * 0.9 + v`` over 16-element
    tensors, 100 times per step) is a host-side op storm of ``aten::mul``/``aten::add`` pairs; one
    ``torch.stack`` and a weighted sum do the same work in three ops.

Thresholds
    Declared with their defaults, units and reasons in ``RULE.thresholds`` (``traceclass explain TC201``).

    Recoverable time (GPU storms): the idle inside the storm windows minus the floor per gap, and
    at most its launch-overhead part in the shared idle attribution
    (:mod:`traceclass.facts.idle_causes`): a sync or a host phase inside a window belongs to
    its own rule. That time is part of TC202's launch overhead; the verdict counts the two once.
    Severity: recoverable time against the analysed time, the wall time of the steady-state steps
    (the whole trace when it has no ``ProfilerStep``), on the shared scale. Storms in warm-up
    steps, or launched outside any step, are counted apart and recover nothing. Location: the user
    stage around the storms (else the ops that launched most of them), never the device index.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

import numpy as np

from traceclass import timeline as tl
from traceclass import units
from traceclass.analysis import labels
from traceclass.analysis import short_runs
from traceclass.facts import idle_causes as ic
from traceclass.analysis.locations import device_tag
from traceclass.facts import steps as fsteps
from traceclass.model import GpuKind
from traceclass.rule import Context, Evidence, Family, Finding, MAX_EVIDENCE, Need, RuleInfo, Threshold, plural

RULE = RuleInfo(code="TC201", name="small-kernel-storm", family=Family.LAUNCH,
                summary="runs of tiny kernels (or tiny host ops) with the device idle between them: launch-bound",
                needs=((Need.GPU, Need.OPS),),
                thresholds=(
                    Threshold('max_kernel_us', 10.0, 'us',
                              "TraceLens' short-kernel threshold (``short_kernels_summary``), about the host cost of "
                              'one eager launch.'),
                    Threshold('max_busy_pct', 50.0, '%',
                              'the GPU idles more than it works in the window; the utilisation limit of ``nsys analyze '
                              'gpu_time_util`` and of torch-tb-profiler\'s "GPU utilization" advice.'),
                    Threshold('min_kernels_count', 8, 'count',
                              "long enough for a fusion candidate of 3-4 kernels (HTA's ``min_pattern_len`` is 3) to "
                              'occur twice; short enough for the per-layer element-wise tails of eager decoders, 6-8 '
                              'short kernels between two GEMMs (corpus b200_eager: runs of 8 at 7-8 % busy, 36 per '
                              'step).'),
                    Threshold('max_gap_us', 1000.0, 'us',
                              'idle between consecutive kernels of a storm is per-launch host cost, up to ~0.4 ms per '
                              'launch under the profiler in the corpus (p99 gap 0.39 ms in b200_eager, 0.29 ms in '
                              'h100_qwen); a longer stretch is a host phase of its own (a sync, data loading), which '
                              'TC202 attributes, so it ends the run.'),
                    Threshold('kernel_gap_floor_us', 2.0, 'us',
                              'the GPU-side gap that remains between kernels that were already queued (graph replay, or '
                              'a host running ahead): median 0.8-1.6 us, p75 1.3-2.4 us on V100, A100, H100 and B200 in '
                              'the corpus. Recoverable time keeps this much of every gap.'),
                    Threshold('max_host_op_us', 10.0, 'us',
                              'CPU traces; PyTorch eager dispatch costs ~1-10 us per op (``cpu_latency_floor_us``), so '
                              'a shorter op is mostly dispatch.'),
                    Threshold('max_host_gap_us', 10.0, 'us',
                              'CPU traces; between the ops of a Python loop of tiny ops the host runs one or two '
                              'statements: gaps p99 4.8 us in the tiny-op sample, 9.9 us in corpus mixed_stack. A '
                              'longer gap is Python work of its own (the per-sample Python of '
                              'sample_traces/torch_cpu_dataloader: p75 0.39 ms), not per-op overhead, so it ends the '
                              'run.'),
                    Threshold('host_op_floor_us', 1.0, 'us',
                              'the cheapest eager op in the tiny-op sample (``aten::add`` of 16 floats) takes 1.35 us; '
                              'recoverable host time keeps 1 us per op of the storm.'),
                    Threshold('min_sequence_kernels_count', 3, 'count',
                              "n-gram lengths of the fusion candidates; 3 is HTA's ``min_pattern_len``, 8 covers a "
                              "layer's element-wise tail (norm, residual add, activation, casts) without listing whole "
                              'layers.'),
                    Threshold('max_sequence_kernels_count', 8, 'count',
                              "n-gram lengths of the fusion candidates; 3 is HTA's ``min_pattern_len``, 8 covers a "
                              "layer's element-wise tail (norm, residual add, activation, casts) without listing whole "
                              'layers.'),
                ))

FIX = ("Capture the storm in a CUDA graph (torch.compile(mode='reduce-overhead') or torch.cuda.graphs), fuse the "
       "listed kernel sequences (torch.compile, a Triton kernel, fused/foreach optimizers), or give each kernel more "
       "work (larger batch, one vectorised op instead of a Python loop).")
HOST_FIX = ("Replace the Python loop of tiny ops by one vectorised op on a larger tensor, or compile it "
            "(torch.compile); batch the work so each op handles more elements.")


def check(ctx: Context, th: Mapping[str, Any]) -> Iterable[Finding]:
    trace = ctx.trace
    st = ctx.facts.steps
    if (trace.gpu.kind != GpuKind.SYNC).any():
        storms = _gpu_storms(ctx, th, st)
    else:
        storms = _host_storms(ctx, th, st)
    groups: dict[tuple[int, str], list[dict[str, Any]]] = {}
    for s in storms:
        groups.setdefault((s["device"], s["stage"]), []).append(s)
    devices = sorted({d for d, _ in groups if d >= 0})
    for (dev, stage), group in groups.items():
        f = _finding(ctx, th, st, stage, device_tag(dev, devices) if dev >= 0 else "", group)
        if f is not None:
            yield f


def _gpu_storms(ctx: Context, th: Mapping[str, Any], st: fsteps.Steps) -> list[dict[str, Any]]:
    trace = ctx.trace
    gpu, api, ops = trace.gpu, trace.api, trace.ops
    step_of = ctx.facts.gpu_step
    floor = int(th["kernel_gap_floor_us"] * 1000)
    out = []
    for dev in ctx.facts.active_devices:
        gaps = ctx.facts.gaps(dev)
        runs = [r for r in short_runs.gpu_runs(trace, gaps, int(th["max_kernel_us"] * 1000), int(th["max_gap_us"] * 1000),
                                               int(th["min_kernels_count"]), step_of)
                if r.busy_ns * 100 < th["max_busy_pct"] * r.window_ns]
        # launch-overhead idle (shared attribution) inside each storm window, all runs at once
        lo_in = tl.overlap_each(np.array([r.start_ns for r in runs], np.int64),
                                np.array([r.end_ns for r in runs], np.int64),
                                ctx.idle.intervals(ic.LAUNCH_OVERHEAD, dev)).tolist() if runs else []
        for run, lo in zip(runs, lo_in):
            rows = run.rows
            a = gpu.api[rows]
            a = a[a >= 0]
            stage = _stage(ctx, api.pid[a], api.tid[a], api.start_ns[a])
            op_codes = ops.name[gpu.op[rows][gpu.op[rows] >= 0]] if len(ops) else np.zeros(0, np.int32)
            out.append(dict(
                stage=stage, device=dev, run=run,
                step=int(step_of[rows[0]]), items=gpu.name[rows],
                kernels=int((gpu.kind[rows] == GpuKind.KERNEL).sum()), memsets=int((gpu.kind[rows] == GpuKind.MEMSET).sum()),
                # the storm's idle, minus the floor, within its launch-overhead part of the shared
                # idle attribution (a sync or host phase inside the window belongs to its own rule)
                recoverable=min(int(np.maximum(run.gaps_ns - floor, 0).sum()), int(lo)),
                ops=labels.name_counts(trace, op_codes),
                points=(api.pid[a], api.tid[a], api.start_ns[a]),
            ))
    return out


def _host_storms(ctx: Context, th: Mapping[str, Any], st: fsteps.Steps) -> list[dict[str, Any]]:
    trace = ctx.trace
    ops = trace.ops
    floor = int(th["host_op_floor_us"] * 1000)
    out = []
    for run in short_runs.host_runs(trace, int(th["max_host_op_us"] * 1000), int(th["max_host_gap_us"] * 1000),
                            int(th["min_kernels_count"]), st):
        rows = run.rows
        stage = _stage(ctx, ops.pid[rows], ops.tid[rows], ops.start_ns[rows])
        out.append(dict(
            stage=stage, device=-1, run=run,
            step=int(st.at(ops.start_ns[rows[:1]])[0]), items=ops.name[rows], kernels=0, memsets=0,
            recoverable=max(run.window_ns - len(rows) * floor, 0),
            ops=labels.name_counts(trace, ops.name[rows]),
            points=(ops.pid[rows], ops.tid[rows], ops.start_ns[rows]),
        ))
    return out


def _stage(ctx: Context, pid: np.ndarray, tid: np.ndarray, t: np.ndarray) -> str:
    rows = labels.stage_rows(ctx.trace, pid, tid, t)
    named = labels.name_counts(ctx.trace, ctx.trace.annotations.name[rows[rows >= 0]])
    return labels.short_label(named[0][0]) if named else ""


def _finding(ctx: Context, th: Mapping[str, Any], st: fsteps.Steps, where: str, tag: str,
             group: list[dict[str, Any]]) -> Finding | None:
    trace = ctx.trace
    for s in group:
        s["steady"] = s["step"] >= 0 and not st.warmup[s["step"]]
    steady = [s for s in group if s["steady"]]
    if not steady:
        return None
    host = group[0]["device"] < 0
    lo, hi = int(th["min_sequence_kernels_count"]), int(th["max_sequence_kernels_count"])
    window = sum(s["run"].window_ns for s in steady)
    busy = sum(s["run"].busy_ns for s in steady)
    items = sum(len(s["run"].rows) for s in steady)
    recoverable = sum(s["recoverable"] for s in steady)
    n_steps = max(ctx.analysed.steps_count, 1)
    # storms back to back, a distinct separator between two, so no n-gram spans a boundary
    joined = np.concatenate([np.r_[s["items"], -2 - k] for k, s in enumerate(steady)])
    seq = short_runs.top_sequences(joined, lo, hi)
    seq_names = [([trace.strings[c] for c in gram], n) for gram, n in seq]
    ops: dict[str, int] = {}
    for s in steady:
        for name, c in s["ops"]:
            ops[name] = ops.get(name, 0) + c
    ops_sorted = sorted(ops.items(), key=lambda kv: (-kv[1], kv[0]))
    limit_us = th["max_host_op_us"] if host else th["max_kernel_us"]
    candidate = f"; top fusion candidate {' -> '.join(seq_names[0][0])} x{seq_names[0][1]}" if seq_names else ""
    # the site: the user stage around the launches, else the ops that launched most of the storm
    site = f"in {where}" if where else (
        "launched by " + ", ".join(n for n, _ in ops_sorted[:2]) if ops_sorted else
        "of " + ", ".join(n for n, _ in labels.name_counts(trace, joined[joined >= 0])[:2]))
    location = f"{'host ops' if host else 'GPU kernels'} {site}{tag}"
    if host:
        message = (f"host-side op storm: {plural(items, 'top-level op')} shorter than {units.duration(limit_us * 1000)} (threshold) back "
                   f"to back in {plural(len(steady), 'run')}{' in ' + where if where else ''}, {units.duration(window)}: ops take "
                   f"{units.share(busy, window)} of it, the host between them {units.share(window - busy, window)}; "
                   f"dispatch overhead, no GPU in this trace{candidate}")
    else:
        memsets = sum(s["memsets"] for s in steady)
        what = f"kernels ({memsets} of them memsets)" if memsets else "kernels"
        message = (f"{items:,} {what} shorter than {units.duration(limit_us * 1000)} (threshold) in {plural(len(steady), 'storm')} on GPU "
                   f"{group[0]['device']}{' in ' + where if where else ''}: GPU busy {units.share(busy, window)} of their "
                   f"{units.duration(window)} (threshold < {units.pct(th['max_busy_pct'], None)}), {units.duration(window - busy)} launch-bound"
                   f"{candidate}")
    floor_text = (f"{units.duration(th['host_op_floor_us'] * 1000)} per op (the cost of the cheapest eager op)" if host else
                  f"{units.duration(th['kernel_gap_floor_us'] * 1000)} per gap (the GPU-side gap between already-queued kernels)")
    estimate = (f"{'storm window time' if host else 'idle time inside the storm windows'} of steady-state steps, "
                f"minus {floor_text}; severity against the {units.duration(ctx.analysed_ns)} analysed ({ctx.time_word})"
                + ("" if host else ", within the launch-overhead idle of the shared attribution; gaps >= 30 µs "
                   "inside storms are also listed by TC202: the opportunities count launch overhead once"))
    warm = [s for s in group if not s["steady"]]
    evidence = []
    for s in sorted(group, key=lambda s: (not s["steady"], -s["run"].idle_ns))[:MAX_EVIDENCE]:
        # per-storm sequences and sources only for the storms shown: a long trace has thousands
        s["sequences"] = [([trace.strings[c] for c in gram], n)
                          for gram, n in short_runs.top_sequences(s["items"], lo, hi)]
        s["source"] = labels.common_source(trace, *s["points"])
        run = s["run"]
        label = "warm-up step" if s["step"] >= 0 and st.warmup[s["step"]] else ("outside steps" if s["step"] < 0 else "")
        evidence.append(Evidence(
            what=(f"{len(run.rows)} ops, {units.share(run.busy_ns, run.window_ns)} in ops, {units.duration(run.idle_ns)} between them"
                  if host else f"{len(run.rows)} kernels, GPU busy {units.share(run.busy_ns, run.window_ns)}, "
                  f"{units.duration(run.idle_ns)} idle") + (f" ({label})" if label else ""),
            start_ns=run.start_ns, end_ns=run.end_ns, duration_ns=run.window_ns, count=len(run.rows),
            ops=labels.counted(s["ops"]), kernels=tuple(s["sequences"][0][0]) if s["sequences"] else (),
            source=s["source"],
            values={"window_ns": run.window_ns, "busy_ns": run.busy_ns, "busy_pct": units.percent(run.busy_ns, run.window_ns, 1),
                    "idle_ns": run.idle_ns, "recoverable_ns": s["recoverable"], "kernels_count": s["kernels"],
                    "memsets_count": s["memsets"], "ops_count": len(run.rows) if host else None,
                    "step": st.names[s["step"]] if s["step"] >= 0 else None,
                    "kernel_sequences": [{"kernels": g, "count": n} for g, n in s["sequences"]],
                    "op_counts": dict(s["ops"][:20])},
        ))
    return Finding(
        title=(f"Batch or compile {items:,} tiny host ops {site}" if host else f"Fuse {items:,} tiny kernels {site}"),
        severity=ctx.severity(recoverable),
        message=message, recoverable_ns=int(recoverable), estimate=estimate, fix=HOST_FIX if host else FIX,
        location=location, evidence=tuple(evidence),
        values={"idle_cause": None if host else "launch-overhead", "storms_count": len(steady), "items_count": items,
                "kernels_count": sum(s["kernels"] for s in steady),
                "window_ns": window, "busy_ns": busy, "busy_pct": units.percent(busy, window, 1), "idle_ns": window - busy,
                "idle_per_step_ns": (window - busy) // n_steps, "steady_steps_count": ctx.analysed.steps_count,
                "warmup_storms_count": len(warm), "warmup_idle_ns": sum(s["run"].idle_ns for s in warm),
                "threshold_us": limit_us, "op_counts": dict(ops_sorted[:20]),
                "kernel_sequences": [{"kernels": g, "count": n} for g, n in seq_names]},
    )
