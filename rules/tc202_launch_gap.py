"""Launch gap: the GPU idles between consecutive work while the host launches, waits or loads data.

What it finds
    Idle gaps of at least ``min_gap_us`` between consecutive GPU work on one device, merged across
    streams (a gap on one stream that another stream's work covers is no gap), each attributed to
    what the thread that launched the work ending the gap did in the *host window*: from the
    moment the GPU went idle to the start of that launch call. In this order:

    * ``data-loading``: a DataLoader range or a user range named like data (``stage:data``,
      ``## load_batch ##``, ``wait_for_batch``) covers at least ``min_host_share_pct`` of the
      host window;
    * ``host-sync``: the GPU went idle while the thread was blocked in a sync (a synchronize call,
      ``aten::item``/``_local_scalar_dense``, a blocking or pageable copy): the wait drained the
      GPU queue and the host could not run ahead (the gaps TC203 charges to its sync sites); or the
      launch call of the next work blocks by itself (``cudaMemcpy`` from pageable memory) and takes
      most of the gap;
    * ``launch-overhead``: the thread ran ops, Python or runtime calls for at least
      ``min_host_share_pct`` of the host window, or the launch call itself takes most of the gap:
      the host is too slow to feed the GPU;
    * ``unknown``: no launch was recorded for the next work (queued before the profiler started, a
      page migration), most of the gap lies after the launch call returned (the GPU had the work
      and waited on something else: a cross-stream event, another process), or the thread shows no
      recorded activity (nsys without NVTX: only CUDA calls are visible).

    The part of the gap after the launch call returned, the launch call itself and the host window
    are compared first; the largest decides between GPU-side wait, launch call and host window.

    One finding per device and cause, with totals per step (a gap belongs to the step in which the
    work that ends it was launched, on any thread); the first ``warmup_steps`` steps are reported
    apart. Gaps between kernels replayed by one graph launch are skipped (graph replay
    removes launch gaps by design).

    How it differs from the peers: HTA's idle-time breakdown works per stream, rounds to whole
    microseconds, and only says *host_wait* (the launch came after the previous kernel ended),
    *kernel_wait* (gap < ``consecutive_kernel_delay`` = 30 us) or *other*; it does not say what
    the host was doing. ``nsys analyze gpu_gaps`` reports gaps of 500 ms and more per process and
    device: useless for launch gaps of tens of microseconds, and it attributes nothing. Here gaps
    are exact to the ns across streams, HTA's 30 us is the reporting limit, and each gap carries
    the host activity that explains it.

Why it matters
    Every gap is GPU time the step pays for and nothing uses. Which fix helps depends on the
    cause: a faster GPU helps none of them.

How to fix
    launch-overhead: CUDA graphs / ``torch.compile(mode="reduce-overhead")``, fewer and larger
    ops, move Python work out of the step. host-sync: see TC203 (remove ``.item()``/``.cpu()``/
    ``print(tensor)`` from the step, ``non_blocking=True`` copies into pinned memory, sync once per
    step). data-loading: more DataLoader workers, ``pin_memory=True``, prefetching, move
    decode/augmentation off the training thread.

Example
    Corpus cuda_event_sync.json.gz: ``if t.gt(0).any():`` reads one byte back (``aten::is_nonzero``
    -> ``aten::item``: a pageable DtoH copy and ``cudaStreamSynchronize``). The GPU goes idle when
    the copy ends, while the host waits, and stays idle 100 us until the next kernel: ``host-sync``.
    The 48 us before ``aten::sum``'s kernel, with the host running ops 75 % of the time before the
    launch, is ``launch-overhead``.

Thresholds
    Declared with their defaults, units and reasons in ``RULE.thresholds`` (``traceclass explain TC202``).

    Severity: recoverable time (steady-state gap time minus the 2 us GPU-side gap that remains
    between already-queued kernels) against the analysed time, the wall time of the steady-state
    steps (the whole trace when it has no ``ProfilerStep``), on the shared scale. ``unknown`` gaps
    are reported with their time but claim nothing (``info``): without a cause there is no fix to
    credit. Location: the cause and where most of the gap time ends (the user stage around the
    launch of the work after the gaps, else its op, else its kernel), never the device index.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

import numpy as np

from traceclass.analysis import gap_causes
from traceclass.analysis import labels
from traceclass.analysis.locations import device_tag, heaviest
from traceclass.analysis.source_lines import source_for_points
from traceclass.facts import gaps as fgaps
from traceclass.facts import host as fhost
from traceclass.facts import steps as fsteps
from traceclass.rule import Context, Evidence, Family, Finding, MAX_EVIDENCE, Need, RuleInfo, Threshold, plural

RULE = RuleInfo(code="TC202", name="launch-gap", family=Family.LAUNCH,
                summary="GPU idle gaps between work, attributed to launch overhead, host syncs or data loading",
                needs=(Need.GPU,), gpu_idle=True,
                thresholds=(
                    Threshold('min_gap_us', 30.0, 'us',
                              "HTA's ``consecutive_kernel_delay``; shorter gaps are the normal cost of back-to-back "
                              "launches (TC201 covers runs of them). nsys' ``gpu_gaps`` default of 500 ms would miss "
                              'every gap this rule is about.'),
                    Threshold('min_host_share_pct', 50.0, '%',
                              'data loading or host activity must fill at least half of the host window to be named its '
                              'cause (the majority of the time); a sync needs no share, because once it drained the '
                              'queue everything the host does after it is exposed.'),
                ))

FIXES = {
    "launch-overhead": "Let the host run ahead: CUDA graphs / torch.compile(mode='reduce-overhead'), fewer and larger "
                       "ops, Python work moved out of the step.",
    "host-sync": "Remove the sync from the step (see TC203): no .item()/.cpu()/print(tensor) per iteration, "
                 "non_blocking copies into pinned memory, one sync per step at most.",
    "data-loading": "Feed the GPU from background workers: more DataLoader num_workers, pin_memory=True, "
                    "prefetch_factor, decode/augment outside the training thread.",
    "unknown": "Inspect the gaps in a timeline viewer: the launching thread shows no activity that explains them "
               "(work queued before the profiler started, a cross-stream wait, or untraced host code).",
}


def check(ctx: Context, th: Mapping[str, Any]) -> Iterable[Finding]:
    trace = ctx.trace
    if len(trace.gpu) == 0:
        return
    st = ctx.facts.steps
    step_of_row = ctx.facts.gpu_step
    host = ctx.facts.host_view
    min_gap = int(th["min_gap_us"] * 1000)
    devices = ctx.facts.active_devices
    for dev in devices:
        gaps = ctx.facts.gaps(dev)
        causes = gap_causes.gap_causes(trace, gaps, host, th["min_host_share_pct"])
        keep = np.flatnonzero((gaps.length_ns >= min_gap) & ~gaps.in_replay)
        if len(keep) == 0:
            continue
        step = step_of_row[gaps.next_row[keep]]
        step = np.where(step >= 0, step, st.at(gaps.start_ns[keep]))
        for c, cause in enumerate(gap_causes.CAUSES):
            sel = keep[causes.cause[keep] == c]
            if len(sel):
                f = _finding(ctx, th, st, dev, device_tag(dev, devices), cause, gaps, causes, sel,
                             step[causes.cause[keep] == c], host)
                if f is not None:
                    yield f


def _finding(ctx: Context, th: Mapping[str, Any], st: fsteps.Steps, dev: int, tag: str, cause: str, gaps: fgaps.Gaps,
             causes: gap_causes.GapCauses, sel: np.ndarray, step: np.ndarray, host: fhost.HostView) -> Finding | None:
    length = gaps.length_ns[sel]
    steady = (step >= 0) & ~st.warmup[np.maximum(step, 0)] if len(st.warmup) else np.zeros(len(sel), bool)
    if not steady.any():
        return None
    warm = (step >= 0) & ~steady
    total = int(length[steady].sum())
    # an unknown cause has no fix to credit: the idle is reported, not claimed
    recoverable = 0 if cause == "unknown" else int(np.maximum(length[steady] - gap_causes.QUEUED_GAP_FLOOR_NS, 0).sum())
    n_steps = max(ctx.analysed.steps_count, 1)
    per_step = []
    for k in np.unique(step[step >= 0]).tolist():
        m = step == k
        per_step.append({"step": st.names[k], "warmup": bool(st.warmup[k]), "gaps_count": int(m.sum()),
                         "gap_ns": int(length[m].sum())})
    per = "in the trace (no steps)" if st.synthetic else f"{labels.us(total / n_steps)} per step"
    analysed = ctx.analysed_ns
    site = _site(ctx, gaps, sel[steady])
    message = (f"GPU {dev} idle {labels.us(total)} in {plural(int(steady.sum()), 'gap')} >= {th['min_gap_us']:g} us "
               f"(threshold), cause {cause}: {per}, {labels.pct(total, analysed)} % of steady step time; most of it "
               f"{site}" + _hint(ctx, cause, sel, causes))
    return Finding(
        message=message, recoverable_ns=recoverable,
        severity="info" if cause == "unknown" else ctx.severity(recoverable),
        estimate=("none claimed: no host-side cause was found for these gaps" if cause == "unknown" else
                  f"steady-state gap time minus {gap_causes.QUEUED_GAP_FLOOR_NS / 1000:g} us per gap (the GPU-side gap "
                  f"between already-queued kernels); severity against the {labels.us(analysed)} analysed (steady step "
                  f"time); gaps inside TC201 storms and gaps caused by TC203 syncs are the same time, do not add "
                  f"them up"),
        fix=FIXES[cause], location=f"{cause} gaps {site}{tag}",
        evidence=_evidence(ctx, st, gaps, causes, sel, step, steady, host, cause),
        values={"cause": cause, "gaps_count": int(steady.sum()), "gap_ns": total,
                "gap_per_step_ns": total // n_steps, "gap_pct_of_step": labels.pct(total, analysed),
                "median_gap_ns": int(np.median(length[steady])), "max_gap_ns": int(length[steady].max()),
                "steady_steps_count": ctx.analysed.steps_count, "warmup_gaps_count": int(warm.sum()),
                "warmup_gap_ns": int(length[warm].sum()), "outside_steps_gap_ns": int(length[step < 0].sum()),
                "threshold_us": th["min_gap_us"], "per_step": per_step[:50]},
    )


def _site(ctx: Context, gaps: fgaps.Gaps, sel: np.ndarray) -> str:
    """Where the work that ends most of the gap time was launched: the user stage around its launch
    call, else its op, else its kernel (weighted by gap length)."""
    trace = ctx.trace
    gpu, api, ops, ann = trace.gpu, trace.api, trace.ops, trace.annotations
    nxt = gaps.next_row[sel]
    length = gaps.length_ns[sel]
    a = gpu.api[nxt]
    ok = a >= 0
    if ok.any():
        rows = labels.stage_rows(trace, api.pid[a[ok]], api.tid[a[ok]], api.start_ns[a[ok]])
        stage = heaviest([labels.short_label(trace.strings[int(ann.name[r])]) if r >= 0 else "" for r in rows.tolist()],
                         length[ok])
        if stage:
            return f"in {stage}"
    op = gpu.op[nxt]
    best = heaviest([trace.strings[int(ops.name[o])] if o >= 0 else "" for o in op.tolist()], length)
    if best:
        return f"before {best}"
    return f"before {heaviest([trace.strings[int(c)] for c in gpu.name[nxt].tolist()], length) or 'GPU work'}"


def _hint(ctx: Context, cause: str, sel: np.ndarray, causes: gap_causes.GapCauses) -> str:
    if cause == "unknown":
        queued = int((causes.launched[sel] & (causes.queue_ns[sel] >= causes.host_window_ns[sel])).sum())
        return f" ({queued} of them mostly after the launch call returned: GPU-side waits)" if queued else ""
    if cause == "launch-overhead":
        h = causes.host_window_ns[sel]
        return (f"; host busy {labels.pct(causes.busy_ns[sel].sum(), h.sum())} % of the time before the next launch"
                if h.sum() else "")
    return ""


def _evidence(ctx: Context, st: fsteps.Steps, gaps: fgaps.Gaps, causes: gap_causes.GapCauses, sel: np.ndarray, step: np.ndarray,
              steady: np.ndarray, host: fhost.HostView, cause: str) -> tuple[Evidence, ...]:
    trace = ctx.trace
    gpu, api, ops = trace.gpu, trace.api, trace.ops
    length = gaps.length_ns[sel]
    pick = np.lexsort((-length, ~steady))[:MAX_EVIDENCE]
    rows = sel[pick]
    nxt = gaps.next_row[rows]
    a = gpu.api[nxt]
    ok = a >= 0
    src: list[str | None] = [None] * len(rows)
    if ok.any() and len(trace.python):
        found = source_for_points(trace, api.pid[a[ok]], api.tid[a[ok]], api.start_ns[a[ok]])
        for i, s in zip(np.flatnonzero(ok).tolist(), found):
            src[i] = s
    out = []
    for i, g in enumerate(rows.tolist()):
        k = int(step[pick[i]])
        op = int(gpu.op[nxt[i]])
        out.append(Evidence(
            what=f"{labels.us(gaps.length_ns[g])} idle before {trace.strings[gpu.name[nxt[i]]]}: "
                 f"{_detail(ctx, cause, g, causes, host, int(a[i]))}"
                 + ("" if steady[pick[i]] else (" (warm-up step)" if k >= 0 else " (outside steps)")),
            start_ns=int(gaps.start_ns[g]), end_ns=int(gaps.end_ns[g]), duration_ns=int(gaps.length_ns[g]),
            ops=(trace.strings[ops.name[op]],) if op >= 0 else (),
            kernels=(trace.strings[gpu.name[gaps.prev_row[g]]], trace.strings[gpu.name[nxt[i]]]),
            source=src[i],
            values={"cause": cause, "host_window_ns": int(causes.host_window_ns[g]),
                    "host_busy_ns": int(causes.busy_ns[g]), "host_wait_ns": int(causes.wait_ns[g]),
                    "data_loading_ns": int(causes.data_ns[g]), "launch_call_ns": int(causes.call_ns[g]),
                    "after_launch_ns": int(causes.queue_ns[g]),
                    "step": st.names[k] if k >= 0 else None},
        ))
    return tuple(out)


def _detail(ctx: Context, cause: str, g: int, causes: gap_causes.GapCauses, host: fhost.HostView, a: int) -> str:
    h, call, queue = (int(causes.host_window_ns[g]), int(causes.call_ns[g]), int(causes.queue_ns[g]))
    if a < 0:
        return "no launch call recorded for it (queued before the profiler started, or a page migration)"
    api = ctx.trace.strings[ctx.trace.api.name[a]]
    if queue >= h and queue >= call and queue > 0:
        return f"{labels.us(queue)} of it after {api} returned: the GPU waited on something else (stream/event dependency)"
    if call >= h and call > 0:
        return f"{labels.us(call)} of it inside the {api} call itself"
    if cause == "data-loading":
        return f"data loading {labels.pct(causes.data_ns[g], h)} % of the {labels.us(h)} before the launch"
    if cause == "host-sync":
        return (f"the GPU went idle while the host was blocked in a sync ({labels.us(causes.wait_ns[g])} of the "
                f"{labels.us(h)} before the launch; host busy {labels.pct(causes.busy_ns[g], h)} % of it)")
    if cause == "launch-overhead":
        return f"host busy in ops/Python/runtime {labels.pct(causes.busy_ns[g], h)} % of the {labels.us(h)} before the launch"
    return f"no recorded host activity in {labels.pct(h - causes.busy_ns[g], h)} % of the {labels.us(h)} before the launch"
