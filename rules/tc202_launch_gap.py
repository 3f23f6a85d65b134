"""Launch gap: the GPU idles between consecutive work while the host dispatches the next launch.

What it finds
    Idle gaps of at least ``min_gap_us`` between consecutive GPU work on one device, merged across
    streams (a gap on one stream that another stream's work covers is no gap), whose idle is
    mostly *launch overhead* in the shared idle attribution (:mod:`traceclass.facts.idle_causes`,
    one cause per stretch of idle, computed once for every rule): the thread that launches the work
    ending the gap was on the dispatch path (ops, Python, runtime calls, or unrecorded time
    between them) for a host window shorter than 1 ms, or inside the launch call itself. The rule
    claims only that launch-overhead part of its gaps; the other parts are named with the rule
    that claims them (host-sync -> TC203, data-loading -> TC204, host-work -> TC205,
    initialisation -> TC206, outside-window -> TC207, communication -> TC701), so no time is
    claimed twice. Two more findings claim nothing: gaps whose idle is mostly ``unknown`` (no
    launch recorded, or most of the gap after the launch call returned: the GPU had the work and
    waited on a cross-stream event or another process) and ``profiler-overhead`` (suspected:
    trivial ops far apart while launches take microseconds, Python frames recorded with
    ``with_stack`` filling the gap).

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
    the copy ends, while the host waits, and stays idle 100 us until the next kernel: 40 us of it
    (the time the host was blocked) are host-sync idle, claimed by TC203 and named here; the rest,
    the host dispatching the next op, is launch overhead. With the 48 us before ``aten::sum``'s
    kernel, three gaps of 178 us in all are mostly launch overhead: 127 us claimed.

Thresholds
    Declared with their defaults, units and reasons in ``RULE.thresholds`` (``traceclass explain TC202``).
    The share that names a host window's cause (half of it) and the 1 ms that separates a host
    phase from launch overhead belong to the shared attribution (``MAJORITY``, ``HOST_PHASE_NS``
    in :mod:`traceclass.facts.idle_causes`), so that every rule agrees.

    Severity: recoverable time (the launch-overhead part of the steady-state gaps minus the 2 us
    GPU-side gap that remains between already-queued kernels) against the analysed time, the wall
    time of the steady-state steps (the whole trace when it has no ``ProfilerStep``), on the shared
    scale. ``unknown`` and ``profiler-overhead`` gaps are reported with their time but claim nothing
    (``info``). Location: the cause and where most of the gap time ends (the user stage around the
    launch of the work after the gaps, else its op, else its kernel), never the device index.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Iterable, Mapping

import numpy as np

from traceclass import units
from traceclass.analysis import gap_causes
from traceclass.analysis import labels
from traceclass.facts import idle_causes as ic
from traceclass.analysis.locations import device_tag, heaviest
from traceclass.analysis.source_lines import source_for_points
from traceclass.facts import gaps as fgaps
from traceclass.facts import host as fhost
from traceclass.facts import steps as fsteps
from traceclass.keysums import group_sum
from traceclass.rule import Context, Evidence, Family, Finding, MAX_EVIDENCE, Need, RuleInfo, Threshold, plural

RULE = RuleInfo(code="TC202", name="launch-gap", family=Family.LAUNCH,
                summary="GPU idle gaps between work caused by launch/dispatch overhead (other causes named, claimed by their rules)",
                needs=(Need.GPU,),
                thresholds=(
                    Threshold('min_gap_us', 30.0, 'us',
                              "HTA's ``consecutive_kernel_delay``; shorter gaps are the normal cost of back-to-back "
                              "launches (TC201 covers runs of them). nsys' ``gpu_gaps`` default of 500 ms would miss "
                              'every gap this rule is about.'),
                ))

FIXES = {
    "profiler-overhead": "Profile again without with_stack (and with fewer record_function ranges): if the gaps "
                         "shrink, they were the profiler's cost, not the program's.",
    "launch-overhead": "Let the host run ahead: CUDA graphs / torch.compile(mode='reduce-overhead'), fewer and larger "
                       "ops, Python work moved out of the step.",
    "host-sync": "Remove the sync from the step (see TC203): no .item()/.cpu()/print(tensor) per iteration, "
                 "non_blocking copies into pinned memory, one sync per step at most.",
    "data-loading": "Feed the GPU from background workers: more DataLoader num_workers, pin_memory=True, "
                    "prefetch_factor, decode/augment outside the step's thread.",
    "unknown": "Inspect the gaps in a timeline viewer: the launching thread shows no activity that explains them "
               "(work queued before the profiler started, a cross-stream wait, or untraced host code).",
}


#: causes TC202 reports as its own findings; the others are claimed by the rules named here
OWN = ("launch-overhead", "profiler-overhead", "unknown")
ELSEWHERE = {"host-sync": "TC203", "data-loading": "TC204", "host-work": "TC205", "initialisation": "TC206",
             "outside-window": "TC207", "communication": "TC701"}


def gap_cause_ns(ctx: Context, gaps: fgaps.Gaps) -> np.ndarray:
    """Idle per gap and cause (``len(gaps) x len(CAUSES)``), from the shared attribution.
    ``gaps`` may be any subset of the device's gaps: a stretch of idle lies inside one gap."""
    seg = ctx.idle
    on = np.flatnonzero(seg.device == gaps.device)
    n, m = len(gaps.start_ns), len(ic.CAUSES)
    if len(on) == 0 or n == 0:
        return np.zeros((n, m), np.int64)
    k = np.searchsorted(gaps.start_ns, seg.start_ns[on], side="right") - 1
    ok = (k >= 0) & (seg.end_ns[on] <= gaps.end_ns[np.maximum(k, 0)])
    flat = k[ok] * m + seg.cause[on][ok]
    return np.bincount(flat, weights=seg.length_ns[on][ok].astype(np.float64),
                       minlength=n * m).astype(np.int64).reshape(n, m)


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
        keep = np.flatnonzero((gaps.length_ns >= min_gap) & ~gaps.in_replay)
        if len(keep) == 0:
            continue
        if len(keep) < len(gaps.start_ns):
            # only the gaps this rule can report are attributed: on a trace of GBs the gaps
            # below the threshold are millions, and each gets a row of a dozen columns here
            gaps = dataclasses.replace(gaps, start_ns=gaps.start_ns[keep], end_ns=gaps.end_ns[keep],
                                       prev_row=gaps.prev_row[keep], next_row=gaps.next_row[keep],
                                       in_replay=gaps.in_replay[keep])
            keep = np.arange(len(keep))
        causes = gap_causes.gap_causes(trace, gaps, host, 100.0 * ic.MAJORITY)
        per = gap_cause_ns(ctx, gaps)
        # the cause of a gap: the cause with the most of its idle in the analysed time; gaps
        # outside the analysed time keep the host-window classification (warm-up evidence)
        inside = per[keep].sum(axis=1)
        old = np.array([ic.CAUSES.index(gap_causes.CAUSES[c]) for c in causes.cause[keep].tolist()], np.int64)
        dominant = np.where(2 * inside > gaps.length_ns[keep], np.argmax(per[keep], axis=1), old)
        step = step_of_row[gaps.next_row[keep]]
        step = np.where(step >= 0, step, st.at(gaps.start_ns[keep]))
        others = {c: int(per[keep, ic.CAUSES.index(c)].sum()) for c in ELSEWHERE}
        for cause in OWN:
            m = dominant == ic.CAUSES.index(cause)
            sel = keep[m]
            if len(sel):
                claim = per[sel, ic.LAUNCH_OVERHEAD]
                f = _finding(ctx, th, st, dev, device_tag(dev, devices), cause, gaps, causes, sel, step[m], host,
                             claim, others)
                if f is not None:
                    yield f


# the lead line of the opportunity: what to change, per cause
_VERB = {"launch-overhead": "Cut launch overhead (fuse, CUDA graphs)",
         "profiler-overhead": "Profile again without with_stack", "unknown": "Find what the host does"}


def _finding(ctx: Context, th: Mapping[str, Any], st: fsteps.Steps, dev: int, tag: str, cause: str, gaps: fgaps.Gaps,
             causes: gap_causes.GapCauses, sel: np.ndarray, step: np.ndarray, host: fhost.HostView, claim: np.ndarray,
             others: dict[str, int]) -> Finding | None:
    length = gaps.length_ns[sel]
    steady = (step >= 0) & ~st.warmup[np.maximum(step, 0)] if len(st.warmup) else np.zeros(len(sel), bool)
    if not steady.any():
        return None
    warm = (step >= 0) & ~steady
    total = int(length[steady].sum())
    # only launch overhead is claimed here: an unknown cause has no fix to credit, suspected
    # profiler overhead is not the program's time; of a gap, only its launch-overhead part
    # (the shared attribution) counts, minus the GPU-side gap that remains between queued kernels
    recoverable = int(np.maximum(claim[steady] - gap_causes.QUEUED_GAP_FLOOR_NS, 0).sum()) if cause == "launch-overhead" else 0
    n_steps = max(ctx.analysed.steps_count, 1)
    stepped = step >= 0
    ks, gap_ns = group_sum(step[stepped], length[stepped])  # per step at once: steps grow with the trace
    _, counts = group_sum(step[stepped], np.ones(int(stepped.sum()), np.int64))
    per_step = [{"step": st.names[k], "warmup": bool(st.warmup[k]), "gaps_count": c, "gap_ns": g}
                for k, c, g in zip(ks.tolist(), counts.tolist(), gap_ns.tolist())]
    per = "in the trace (no steps)" if st.synthetic else f"{units.duration(total / n_steps)} per step"
    analysed = ctx.analysed_ns
    site = _site(ctx, gaps, sel[steady])
    elsewhere = "; ".join(f"{c} {units.duration(ns)} -> {ELSEWHERE[c]}" for c, ns in others.items() if ns > 0)
    message = (f"GPU {dev} idle {units.duration(total)} in {plural(int(steady.sum()), 'gap')} >= {units.duration(th['min_gap_us'] * 1000)} "
               f"(threshold), cause {cause}{' (suspected)' if cause == 'profiler-overhead' else ''}: {per}, "
               f"{units.share(total, analysed)} of {ctx.time_word}; most of it {site}" + _hint(ctx, cause, sel, causes)
               + (f"; other idle in such gaps is claimed elsewhere: {elsewhere}"
                  if elsewhere and cause == "launch-overhead" else ""))
    return Finding(
        title=f"{_VERB[cause]} {site}",
        message=message, recoverable_ns=recoverable,
        severity=ctx.severity(recoverable),
        estimate=("none claimed: no host-side cause was found for these gaps" if cause == "unknown" else
                  "none claimed: the gaps look like the profiler's own cost (Python frames recorded with "
                  "with_stack fill them while ops and launch calls are short); profile without with_stack to "
                  "measure them" if cause == "profiler-overhead" else
                  f"the launch-overhead part of the steady-state gaps in the shared idle attribution, minus "
                  f"{units.duration(gap_causes.QUEUED_GAP_FLOOR_NS)} per gap (the GPU-side gap between already-queued kernels); "
                  f"the host-sync, data-loading and host-work parts are claimed by TC203, TC204 and TC205, not here; "
                  f"TC201 storms are part of this time; severity against the {units.duration(analysed)} analysed"),
        fix=FIXES[cause], location=f"{cause} gaps {site}{tag}",
        evidence=_evidence(ctx, st, gaps, causes, sel, step, steady, host, cause),
        values={"cause": cause, "idle_cause": cause, "claimed_ns": recoverable, "gaps_count": int(steady.sum()), "gap_ns": total,
                "gap_per_step_ns": total // n_steps, "gap_pct_of_step": units.percent(total, analysed, 1),
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
        return (f"; host busy {units.share(causes.busy_ns[sel].sum(), h.sum())} of the time before the next launch"
                if h.sum() else "")
    if cause == "profiler-overhead":
        # the evidence of the suspicion: launch calls take microseconds, the windows far more
        th = causes.thread[sel]
        med = ctx.idle.launch_median_ns[th[th >= 0]] if (th >= 0).any() else np.zeros(0, np.int64)
        h = causes.host_window_ns[sel]
        return (f"; launch calls take a median {units.duration(int(np.median(med)))} on the launching thread while the "
                f"{plural(len(sel), 'window')} before the launches average {units.duration(int(h.mean()))}, filled by Python "
                f"frames (with_stack) with trivial ops between them" if len(med) and len(h) else "")
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
            what=f"{units.duration(gaps.length_ns[g])} idle before {trace.strings[gpu.name[nxt[i]]]}: "
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
        return f"{units.duration(queue)} of it after {api} returned: the GPU waited on something else (stream/event dependency)"
    if call >= h and call > 0:
        return f"{units.duration(call)} of it inside the {api} call itself"
    if cause == "data-loading":
        return f"data loading {units.share(causes.data_ns[g], h)} of the {units.duration(h)} before the launch"
    if cause == "host-sync":
        return (f"the GPU went idle while the host was blocked in a sync ({units.duration(causes.wait_ns[g])} of the "
                f"{units.duration(h)} before the launch; host busy {units.share(causes.busy_ns[g], h)} of it)")
    if cause == "launch-overhead":
        return f"host busy in ops/Python/runtime {units.share(causes.busy_ns[g], h)} of the {units.duration(h)} before the launch"
    return f"no recorded host activity in {units.share(h - causes.busy_ns[g], h)} of the {units.duration(h)} before the launch"
