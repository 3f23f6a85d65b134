"""Work outside the window: the GPU still runs work queued before the profiler started.

What it finds
    GPU rows queued before the profiler window (:mod:`traceclass.analysis.backlog`: no launch call
    in a trace that records launch calls, and running before the first row of their device whose
    launch is recorded): the previous, unprofiled iteration's backlog. Per device: how many rows,
    their GPU time, how far they reach into the analysed time, and the idle the shared attribution
    gives to ``outside-window``. These rows are left out of the steady-step statistics (op groups,
    bound mix, analysed GPU rows); the GPU's active window then starts before the first step. When
    the backlog is deep, the report's launch delays (launch call -> kernel start) are large: that
    means a deep queue (the host runs far ahead of the GPU, good), not a slow launch.

Why it matters
    The step's numbers would otherwise mix two iterations: kernels named by mangled names with no
    op, a GPU window longer than the step, a bound mix that counts work of the unprofiled
    iteration. Nothing is recoverable here: it is trace hygiene.

How to fix
    Start the profiler at an iteration boundary after a ``torch.cuda.synchronize()`` (or use
    ``torch.profiler.schedule(wait=1, warmup=1, active=N)``, whose warm-up step absorbs the
    backlog), so each profiled step holds its own work only.

Example
    A step that starts while the GPU still runs the previous iteration: 463 of 1,516 kernels (13 ms)
    have no launch in the trace and run in the first 13 ms of the step; the GPU window (47 ms) is
    longer than the step (43 ms).

Thresholds
    Declared with their defaults, units and reasons in ``RULE.thresholds`` (``traceclass explain TC207``).

    Severity: ``info`` (trace hygiene, no recoverable time). Location: the fixed text "work queued
    before the profiler window" and the device tag.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

import numpy as np

from traceclass import timeline as tl
from traceclass import units
from traceclass.facts import idle_causes as ic
from traceclass.analysis.backlog import backlog_mask
from traceclass.analysis.labels import name_counts
from traceclass.analysis.locations import device_tag
from traceclass.model import GpuKind
from traceclass.rule import Context, Evidence, Family, Finding, Need, RuleInfo, Threshold, plural

RULE = RuleInfo(code="TC207", name="work-outside-window", family=Family.UTILIZATION,
                summary="GPU work queued before the profiler window (previous iteration's backlog), kept out of the step",
                needs=(Need.GPU,),
                thresholds=(
                    Threshold('min_rows_count', 1, 'count',
                              'any backlog row is reported (the statistics leave it out either way).'),
                ))


def check(ctx: Context, th: Mapping[str, Any]) -> Iterable[Finding]:
    trace = ctx.trace
    gpu = trace.gpu
    back = backlog_mask(trace)
    if not back.any():
        return
    devices = sorted(np.unique(gpu.device[back]).tolist())
    for dev in devices:
        rows = np.flatnonzero(back & (gpu.device == dev))
        if len(rows) < th["min_rows_count"]:
            continue
        busy = tl.merge(gpu.start_ns[rows], gpu.end_ns[rows])
        total = tl.total(busy)
        in_window = tl.total(ctx.analysed.clip(busy))
        end = int(gpu.end_ns[rows].max())
        first = int(ctx.analysed.start_ns[0]) if len(ctx.analysed.start_ns) else int(gpu.start_ns[rows].min())
        idle = ctx.idle.total(ic.OUTSIDE_WINDOW, dev) if dev in ctx.idle.busy_ns else 0
        names = name_counts(trace, gpu.name[rows])
        n_dev = int(((gpu.device == dev) & (gpu.kind != GpuKind.SYNC)).sum())
        # the part of the analysed time only this work kept busy: what the verdict sets apart
        # from the step's busy time ("plus ... on work queued before the profiler window")
        alone = ctx.idle.backlog_busy_ns.get(dev, 0) if dev in ctx.idle.busy_ns else 0
        overlap = (f" ({units.duration(alone)} of that with no other work running, the part the verdict sets apart "
                   f"from the step's busy time)" if alone != in_window else "")
        message = (f"GPU {dev} runs {plural(len(rows), 'row')} ({units.duration(total)}) queued before the profiler window "
                   f"(no launch call in the trace; {len(rows)} of {n_dev} rows on the device), {units.duration(in_window)} of it "
                   f"inside the analysed time{overlap}, until {units.duration(max(end - first, 0))} after its start: the previous "
                   f"iteration's backlog, left out of the step's op, kernel and bound statistics; launch delays "
                   f"of the first recorded launches measure that queue's depth, not launch cost")
        yield Finding(
            title="Start profiling at an iteration boundary, after torch.cuda.synchronize()",
            severity="info", message=message, recoverable_ns=0,
            estimate="none claimed: work of an unprofiled iteration; trace hygiene",
            fix=("Start profiling at an iteration boundary after torch.cuda.synchronize(), or use "
                 "torch.profiler.schedule(wait=1, warmup=1, active=N) so a warm-up step absorbs the backlog."),
            location=f"work queued before the profiler window{device_tag(dev, devices)}",
            evidence=(Evidence(what=f"{plural(len(rows), 'row')} queued before the window", start_ns=int(busy[0][0]),
                               end_ns=end, duration_ns=total, count=int(len(rows)),
                               kernels=tuple(n for n, _ in names[:5])),),
            values={"rows_count": int(len(rows)), "device_rows_count": n_dev, "gpu_ns": total,
                    "in_analysed_ns": in_window, "in_analysed_alone_ns": alone, "outside_window_idle_ns": idle,
                    "reaches_into_step_ns": max(end - first, 0), "hygiene": True,
                    "summary": f"GPU {dev} runs {units.duration(total)} of work queued before the profiler window "
                               f"({plural(len(rows), 'row')}; {units.duration(in_window)} of it inside the analysed "
                               f"time), left out of the step's statistics",
                    "top_kernels": dict(names[:10]), "threshold_count": th["min_rows_count"]},
        )
