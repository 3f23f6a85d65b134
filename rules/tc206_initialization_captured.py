"""Initialisation captured: the profiled window holds one-time setup, not the steady state.

What it finds
    Runtime/driver calls in the analysed time that set up the process rather than run it, each at
    least 1 ms long (``INIT_CALL_NS`` of :mod:`traceclass.facts.idle_causes`): CUDA/HIP context
    creation (the first call of a process, e.g. a 30 s ``cudaDeviceGetStreamPriorityRange``),
    ``cudaFree``/``cudaMalloc``/``cudaHostAlloc`` growth, module and library loading
    (``cuModuleLoad*``, ``cuLibraryLoad*``), ``cudnnCreate``/``cublasCreate``, and the first launch call of a kernel when it takes
    milliseconds (lazy module loading: the first ``cudnn_convolution`` of a fresh process; a later
    long launch call is a full launch queue, not setup), and a first CUDA allocation
    (``aten::empty``) of >= 1 ms before any GPU work, which creates the CUDA context. It reports their time, the ops they ran in, and the
    GPU idle the shared idle attribution gives to ``initialisation``, which TC202 and TC601 then
    no longer see as launch overhead.

Why it matters
    Setup runs once; a trace that captures it describes start-up, not the loop you want to speed
    up. Its "launch gaps" are not recoverable with CUDA graphs, and its share of the window skews
    every other number. Nothing here is claimed as recoverable: the fix is to profile again.

How to fix
    Profile the steady state: ``torch.profiler.profile(schedule=torch.profiler.schedule(wait=1,
    warmup=1, active=3), on_trace_ready=...)`` and call ``prof.step()`` per iteration, so context
    creation, allocator growth, cuDNN/cuBLAS autotuning and module loading happen in the skipped
    ``wait``/``warmup`` steps; or run one untimed iteration before starting the profiler.

Example
    A first iteration in a range ``warmup|forward``: ``cudaDeviceGetStreamPriorityRange`` 30 s
    (context creation), ``cudaFree`` 6 s, the first ``cudnn_convolution``'s launch calls seconds
    long: 12.9 s of GPU idle attributed to initialisation, none to launch overhead.

Thresholds
    Declared with their defaults, units and reasons in ``RULE.thresholds`` (``traceclass explain TC206``).

    Severity: ``info`` (no recoverable time: trace hygiene). The verdict names it when it holds at
    least 10 % of the analysed time. Location: the fixed text "initialisation in the profiled
    window", so reruns match.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

import numpy as np

from traceclass import units
from traceclass.facts import idle_causes as ic
from traceclass.analysis.labels import name_counts
from traceclass.rule import Context, Evidence, Family, Finding, Need, RuleInfo, Threshold, plural

RULE = RuleInfo(code="TC206", name="initialization-captured", family=Family.UTILIZATION,
                summary="the profiled window holds one-time setup (context creation, allocations, module loading)",
                needs=(Need.GPU,),
                thresholds=(
                    Threshold('min_total_ms', 1.0, 'ms',
                              'report when initialisation calls take at least 1 ms in the analysed time (one call at '
                              "the attribution's 1 ms limit)."),
                ))

EVIDENCE_ROWS = 20


def init_calls(ctx: Context) -> np.ndarray:
    """Rows of ``trace.api`` in the analysed time that are initialisation (module docstring)."""
    api = ctx.trace.api
    if len(api) == 0:
        return np.zeros(0, np.int64)
    rows = np.flatnonzero(ic.init_api_mask(ctx.trace))
    return rows if ctx.analysed.synthetic else rows[ctx.analysed.holds(api.start_ns[rows])]


def check(ctx: Context, th: Mapping[str, Any]) -> Iterable[Finding]:
    rows = init_calls(ctx)
    trace = ctx.trace
    api, ops = trace.api, trace.ops
    # a first CUDA allocation before any GPU work (context creation inside aten::empty)
    alloc = np.flatnonzero(ic.init_op_mask(trace))
    alloc = alloc[ctx.analysed.holds(ops.start_ns[alloc])] if not ctx.analysed.synthetic else alloc
    dur = api.end_ns[rows] - api.start_ns[rows]
    alloc_dur = ops.end_ns[alloc] - ops.start_ns[alloc]
    total = int(dur.sum()) + int(alloc_dur.sum())
    if total <= 0 or total < th["min_total_ms"] * 1e6:
        return
    idle = ctx.idle.total(ic.INITIALISATION) if len(trace.gpu) else 0
    calls = name_counts(trace, np.r_[api.name[rows], ops.name[alloc]])
    inside_op = api.op[rows]
    op_names = name_counts(trace, ops.name[inside_op[inside_op >= 0]]) if len(ops) else []
    share = units.percent(total, ctx.analysed_ns, 1)
    top = ", ".join(f"{n} x{c}" for n, c in calls[:4])
    message = (f"the profiled window holds initialisation: {plural(len(rows) + len(alloc), 'setup call')} of >= "
               f"{units.duration(ic.INIT_CALL_NS)} took {units.duration(total)} ({units.pct(share)} of {ctx.time_word}; threshold "
               f"{units.duration(th['min_total_ms'] * 1e6)}): {top}; GPU idle attributed to initialisation {units.duration(idle)}, not launch "
               f"overhead; profile with torch.profiler.schedule(wait=1, warmup=1, active=N) to skip it")
    order = np.argsort(-dur, kind="stable")[:EVIDENCE_ROWS]
    evidence = tuple(Evidence(
        what=f"{trace.strings[int(ops.name[r])]} {units.duration(ops.end_ns[r] - ops.start_ns[r])} before any GPU work (the first "
             f"CUDA allocation creates the context)",
        start_ns=int(ops.start_ns[r]), end_ns=int(ops.end_ns[r]), duration_ns=int(ops.end_ns[r] - ops.start_ns[r]),
        values={"op": trace.strings[int(ops.name[r])]}) for r in alloc.tolist()) + tuple(Evidence(
        what=f"{trace.strings[int(api.name[r])]} {units.duration(dur[k])}"
             + (f" in {trace.strings[int(trace.ops.name[api.op[r]])]}" if api.op[r] >= 0 else ""),
        start_ns=int(api.start_ns[r]), end_ns=int(api.end_ns[r]), duration_ns=int(dur[k]),
        values={"call": trace.strings[int(api.name[r])]}) for k, r in zip(order.tolist(), rows[order].tolist()))
    yield Finding(
        title="Profile without the initialisation: torch.profiler.schedule(wait=1, warmup=1, active=N)",
        severity="info", message=message, recoverable_ns=0,
        estimate="none claimed: one-time setup is not the program's steady-state time; profile again without it",
        fix=("Skip setup in the profile: torch.profiler.schedule(wait=1, warmup=1, active=N) with prof.step() per "
             "iteration, or one untimed iteration before profiling."),
        location="initialisation in the profiled window", evidence=evidence,
        values={"calls_count": int(len(rows) + len(alloc)), "init_ns": total, "share_pct": share, "idle_cause": None,
                "init_idle_ns": idle, "calls": dict(calls[:10]), "ops": dict(op_names[:10]),
                "threshold_ms": th["min_total_ms"], "hygiene": True,
                "summary": f"the window captured initialisation, {units.duration(total)} of setup calls ({units.pct(share)}), not "
                           f"launch overhead; profile with schedule(wait=1, warmup=1)"},
    )
