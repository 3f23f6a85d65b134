"""Low utilization: stretches of a step where the GPU is busy less than half the time.

What it finds
    Each steady-state step (``ProfilerStep`` wall range; without steps, the device's active window,
    first to last GPU work, as nsys does) is cut into ``chunks_per_step`` chunks of at least
    ``min_chunk_us``; chunks whose GPU time utilisation (union of kernels, copies and memsets
    across streams, so it never exceeds 100 %) stays below ``max_util_pct`` are merged with their
    low neighbours into windows. One summary finding per device lists the windows and explains
    their idle time with the conditions the launch/sync rules look for:

    * idle by cause, from the same gap attribution as TC202 (all gap lengths):
      ``launch-overhead`` -> TC202, ``host-sync`` -> TC203, ``data-loading`` -> TC202,
      ``unknown``; idle before the device's first or after its last GPU work is ``no-gpu-work``;
    * the launch-overhead idle between two kernels shorter than ``short_kernel_us``: the
      small-kernel storm pattern (TC201);
    * the host waits (TC203) that overlap the windows.

    The message names each rule with the idle it explains, largest first (TC202: launch-overhead
    and data-loading idle; TC203: host-sync idle; TC201: launch-overhead idle between two short
    kernels, which TC202 counts as well).

    Like ``nsys analyze gpu_time_util`` (30 chunks, < 50 %, consecutive low chunks merged), but per
    step and at microsecond scale: nsys cuts the whole capture into 30 chunks, which for a
    seconds-long capture hides every launch-scale pattern, and it adds concurrent kernels up
    (utilisation above 100 %).

Why it matters
    Low utilisation is the symptom most users see first (``nvidia-smi``, torch-tb-profiler's
    "GPU utilization" < 50 % advice). It says that time is lost, not why; this finding says where
    in the step it is lost and which rule explains it.

How to fix
    Follow the rule the message points to: TC201 (capture or fuse small kernels), TC202 (launch
    overhead, data loading), TC203 (remove host syncs). Bigger batches raise utilisation when the
    idle is per-launch overhead.

Example
    Corpus h100_qwen1.5-0.5b_inference: in its 47 ms decode step one 1.57 ms chunk is 17.6 % busy
    (the eager preamble that builds the mask and rotary tables); its 1.30 ms idle is 65 %
    launch-overhead (TC202) and 34 % host-sync (an ``aten::item`` in the mask code, TC203), with
    14 of its 23 kernels under 10 us.

Thresholds
    Declared with their defaults, units and reasons in ``RULE.thresholds`` (``traceclass explain TC601``).

    Recoverable time: none. Low utilisation is the symptom; its idle is claimed once, by the rule
    of its cause, from the shared idle attribution (:mod:`traceclass.facts.idle_causes`):
    TC202 launch overhead, TC203 host syncs, TC204 data loading, TC205 host work. The finding is
    ``info`` and lists that attribution and the host-side idle inside its windows
    (``explainable_ns``) so that nothing is claimed twice. Without steps the
    windows are cut from the device's active window (first to last GPU work, as nsys does) and the
    shares in the message are of that window. Location: where most of the low windows' idle ends
    (the user stage around the launch of the next work, else its op, else its kernel), never the
    device index.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Iterable, Mapping

import numpy as np

from traceclass import units
from traceclass import timeline as tl
from traceclass.analysis import labels
from traceclass.facts import idle_causes as ic
from traceclass.analysis.locations import device_tag, heaviest
from traceclass.facts import gaps as fgaps
from traceclass.facts import steps as fsteps
from traceclass.facts import syncs as fsyncs
from traceclass.model import GpuKind
from traceclass.rule import Context, Evidence, Family, Finding, MAX_EVIDENCE, Need, RuleInfo, Threshold, plural

RULE = RuleInfo(code="TC601", name="low-utilization", family=Family.UTILIZATION,
                summary="windows of a step where the GPU is busy < 50 %, explained by the launch/sync rules",
                needs=(Need.GPU,),
                thresholds=(
                    Threshold('max_util_pct', 50.0, '%',
                              '``nsys analyze gpu_time_util``\'s limit and torch-tb-profiler\'s "GPU utilization < 50 %" '
                              'recommendation.'),
                    Threshold('chunks_per_step', 30, 'count per step',
                              "``gpu_time_util``'s default chunk count, applied per step."),
                    Threshold('min_chunk_us', 100.0, 'us',
                              "a chunk must hold about ten launches (10 x TraceLens' 10 µs short-kernel limit) for its "
                              'utilisation to mean more than "inside a kernel or not"; short steps get fewer chunks.'),
                    Threshold('short_kernel_us', 10.0, 'us',
                              "TraceLens' short-kernel threshold, as TC201's ``max_kernel_us`` (keep the two equal when "
                              'overriding).'),
                ))

NO_WORK = "no-gpu-work"
#: the rule that claims each cause of the shared idle attribution
RULE_OF = {"launch-overhead": "TC202", "host-sync": "TC203", "data-loading": "TC204", "host-work": "TC205",
           "initialisation": "TC206", "outside-window": "TC207", "communication": "TC701"}


def check(ctx: Context, th: Mapping[str, Any]) -> Iterable[Finding]:
    trace = ctx.trace
    if not (trace.gpu.kind != GpuKind.SYNC).any():
        return
    st = ctx.facts.steps
    ev = ctx.facts.sync_events
    devices = ctx.facts.active_devices
    for dev in devices:
        gaps = ctx.facts.gaps(dev)
        if len(gaps.busy[0]) == 0:  # only zero-length rows (integer-us traces): no timeline
            continue
        windows = _windows(th, st, gaps, ctx.analysed.holds(st.start_ns) | st.synthetic)
        if not any(w["steady"] for w in windows):
            continue
        index = _WindowIndex(trace, dev, ev, ctx.idle)
        for w in windows:
            _explain(ctx, th, w, gaps, ev, index)
        yield _finding(ctx, th, st, dev, device_tag(dev, devices), windows, _basis_ns(ctx, st, gaps))


def _basis_ns(ctx: Context, st: fsteps.Steps, gaps: fgaps.Gaps) -> int:
    """What the windows are cut from: the steady steps, or without steps the device's active window
    (nsys' choice; the trace's own bounds would add idle nothing explains)."""
    if st.synthetic:
        return int(gaps.busy[1][-1] - gaps.busy[0][0])
    return ctx.analysed_ns


def _windows(th: Mapping[str, Any], st: fsteps.Steps, gaps: fgaps.Gaps, analysed: np.ndarray) -> list[dict[str, Any]]:
    """Low windows of every step; ``steady`` ones lie in steps of the analysed time (not warm-up,
    not an empty step the stage analysis left out)."""
    busy = gaps.busy
    coverage = tl.Coverage(busy)  # asked once per step: its prefix sums are built once
    out = []
    for k in range(len(st.names)):
        if st.synthetic:
            w0, w1 = int(busy[0][0]), int(busy[1][-1])
        else:
            w0, w1 = int(st.start_ns[k]), int(st.end_ns[k])
        if w1 <= w0:
            continue
        chunk = max(int(th["min_chunk_us"] * 1000), -(-(w1 - w0) // int(th["chunks_per_step"])))
        edges = np.r_[np.arange(w0, w1, chunk, dtype=np.int64), w1]
        lo, hi = edges[:-1], edges[1:]
        b = coverage.overlap_each(lo, hi)
        low = b * 100 < th["max_util_pct"] * (hi - lo)
        first = np.flatnonzero(low & np.r_[True, ~low[:-1]])
        last = np.flatnonzero(low & np.r_[~low[1:], True])
        cum = np.r_[0, np.cumsum(b)]
        for a, z in zip(first.tolist(), last.tolist()):
            out.append({"start": int(lo[a]), "end": int(hi[z]), "busy": int(cum[z + 1] - cum[a]), "step": k,
                        "steady": not bool(st.warmup[k]) and bool(analysed[k]), "chunk": chunk,
                        "chunks": z - a + 1})
    return out


class _WindowIndex:
    """A device's GPU rows by start time and its waits by wait time, so each window finds its
    own by binary search instead of scanning the whole trace (windows grow with the trace too)."""

    def __init__(self, trace: Any, device: int, ev: fsyncs.SyncEvents, seg: Any) -> None:
        rows = fgaps.device_rows(trace, device)
        order = np.argsort(trace.gpu.start_ns[rows], kind="stable")
        self.rows = rows[order]
        self.starts = trace.gpu.start_ns[self.rows]
        waits = np.flatnonzero(ev.device == device)
        order = np.argsort(ev.wait_ns[waits], kind="stable")
        self.waits = waits[order]
        self.wait_ns = ev.wait_ns[self.waits]
        self.end_ns = ev.end_ns[self.waits]
        self.longest = int((self.end_ns - self.wait_ns).max()) if len(self.waits) else 0
        segs = np.flatnonzero(seg.device == device)
        self.segs = segs[np.argsort(seg.start_ns[segs], kind="stable")]
        self.seg_start = seg.start_ns[self.segs]
        self.seg_end = seg.end_ns[self.segs]
        self.seg_longest = int((self.seg_end - self.seg_start).max()) if len(self.segs) else 0
        self.launch = tl.Coverage(seg.intervals(ic.LAUNCH_OVERHEAD, device))  # the same for every window

    def gpu_rows(self, s: int, e: int) -> np.ndarray:
        """Rows starting in [s, e), in start order."""
        return self.rows[np.searchsorted(self.starts, s, side="left"):np.searchsorted(self.starts, e, side="left")]

    def waits_in(self, s: int, e: int) -> np.ndarray:
        """Waits overlapping (s, e): wait_ns < e and end_ns > s, in row order."""
        lo = int(np.searchsorted(self.wait_ns, s - self.longest, side="left"))
        hi = int(np.searchsorted(self.wait_ns, e, side="left"))
        return np.sort(self.waits[lo:hi][self.end_ns[lo:hi] > s])

    def segments_in(self, s: int, e: int) -> np.ndarray:
        """Idle-cause segments overlapping (s, e): start < e and end > s."""
        lo = int(np.searchsorted(self.seg_start, s - self.seg_longest, side="left"))
        hi = int(np.searchsorted(self.seg_start, e, side="left"))
        return np.sort(self.segs[lo:hi][self.seg_end[lo:hi] > s])


def _explain(ctx: Context, th: Mapping[str, Any], w: dict[str, Any], gaps: fgaps.Gaps,
             ev: fsyncs.SyncEvents, index: _WindowIndex) -> None:
    trace = ctx.trace
    gpu = trace.gpu
    s, e = w["start"], w["end"]
    lo = int(np.searchsorted(gaps.end_ns, s, side="right"))
    hi = int(np.searchsorted(gaps.start_ns, e, side="left"))
    clipped = np.minimum(gaps.end_ns[lo:hi], e) - np.maximum(gaps.start_ns[lo:hi], s)
    clipped = np.maximum(clipped, 0)
    # idle by cause from the shared attribution (one cause per stretch), clipped to the window;
    # idle the attribution does not cover (warm-up steps) is counted as no-gpu-work
    seg = ctx.idle
    on = index.segments_in(s, e)
    part = np.minimum(seg.end_ns[on], e) - np.maximum(seg.start_ns[on], s)
    by_cause = np.bincount(seg.cause[on], weights=part.astype(np.float64),
                           minlength=len(ic.CAUSES)).astype(np.int64)
    idle = (e - s) - w["busy"]
    outside = idle - int(by_cause.sum())  # before the device's first / after its last GPU work
    limit = th["short_kernel_us"] * 1000

    def is_short(r: np.ndarray) -> np.ndarray:
        small = ((gpu.kind[r] == GpuKind.KERNEL) | (gpu.kind[r] == GpuKind.MEMSET)) & ~gpu.graph[r]
        return small & ((gpu.end_ns[r] - gpu.start_ns[r]) < limit)

    # the launch-overhead idle (shared attribution) of gaps between two short kernels
    both = is_short(gaps.prev_row[lo:hi]) & is_short(gaps.next_row[lo:hi])
    g0 = np.maximum(gaps.start_ns[lo:hi], s)[both]
    g1 = np.minimum(gaps.end_ns[lo:hi], e)[both]
    between_short = int(index.launch.overlap_each(g0, np.maximum(g1, g0)).sum())
    rows = index.gpu_rows(s, e)
    kern = rows[(gpu.kind[rows] == GpuKind.KERNEL) | (gpu.kind[rows] == GpuKind.MEMSET)]
    short = kern[is_short(kern)]
    waits = index.waits_in(s, e)
    w.update(idle=idle, sites=_sites(ctx, gaps.next_row[lo:hi], clipped), by_cause={**dict(zip(ic.CAUSES, by_cause.tolist())), NO_WORK: outside},
             between_short=between_short, kernels=len(kern), short=len(short),
             waits=Counter(ev.call_counts(waits)), wait_events=len(waits),
             top=tuple(n for n, _ in labels.name_counts(trace, gpu.name[kern])[:3]))


def _sites(ctx: Context, next_rows: np.ndarray, idle: np.ndarray) -> list[tuple[str, int]]:
    """(site, idle ns) of the gaps in a window: the user stage around the launch of the work that
    ends each gap, else its op, else its kernel."""
    trace = ctx.trace
    gpu, api, ops, ann = trace.gpu, trace.api, trace.ops, trace.annotations
    a = gpu.api[next_rows]
    ok = a >= 0
    stage = np.full(len(next_rows), -1, dtype=np.int64)
    if ok.any():
        stage[ok] = labels.stage_rows(trace, api.pid[a[ok]], api.tid[a[ok]], api.start_ns[a[ok]])
    out = []
    for k, r in enumerate(next_rows.tolist()):
        if stage[k] >= 0:
            label = "in " + labels.short_label(trace.strings[int(ann.name[stage[k]])])
        elif gpu.op[r] >= 0:
            label = "before " + trace.strings[int(ops.name[gpu.op[r]])]
        else:
            label = "before " + trace.strings[int(gpu.name[r])]
        out.append((label, int(idle[k])))
    return out


def _explained(idle_by_cause: dict[str, int], between_short: int) -> dict[str, int]:
    """Idle each launch/sync rule explains, largest first (the same time can serve two rules:
    launch-overhead idle between two short kernels is TC201's and TC202's)."""
    out = {code: idle_by_cause[c] for c, code in RULE_OF.items()}
    out["TC201"] = between_short
    return dict(sorted(((k, v) for k, v in out.items() if v > 0), key=lambda kv: -kv[1]))


def _finding(ctx: Context, th: Mapping[str, Any], st: fsteps.Steps, dev: int, tag: str, windows: list[dict[str, Any]],
             basis: int) -> Finding:
    steady = [w for w in windows if w["steady"]]
    warm = [w for w in windows if not w["steady"]]
    length = sum(w["end"] - w["start"] for w in steady)
    busy = sum(w["busy"] for w in steady)
    idle = length - busy
    by_cause = {c: sum(w["by_cause"][c] for w in steady) for c in (*ic.CAUSES, NO_WORK)}
    between_short = sum(w["between_short"] for w in steady)
    kernels = sum(w["kernels"] for w in steady)
    short = sum(w["short"] for w in steady)
    waits: Counter[str] = Counter()
    wait_events = sum(w["wait_events"] for w in steady)
    for w in steady:
        waits.update(w["waits"])
    explained = _explained(by_cause, between_short)
    parts = ", ".join(f"{c} {units.share(ns, idle)}" for c, ns in sorted(by_cause.items(), key=lambda kv: -kv[1]) if ns > 0)
    where = "the GPU's active window (no steps)" if st.synthetic else plural(ctx.analysed.steps_count, "steady step")
    pairs = [p for w in steady for p in w["sites"]]
    site = heaviest([p[0] for p in pairs], [p[1] for p in pairs]) or "without GPU work"
    message = (f"GPU {dev} busy less than {units.pct(th['max_util_pct'], None)} (threshold) in {plural(len(steady), 'window')} "
               f"of {where}, most idle {site}: "
               f"{units.duration(length)}, {units.share(length, basis)} of the {'active window' if st.synthetic else 'analysed time'}, "
               f"{units.share(busy, length)} busy "
               f"inside; its {units.duration(idle)} idle: {parts or 'none'}; {short} of {kernels} kernels there shorter than "
               f"{units.duration(th['short_kernel_us'] * 1000)}, {units.share(between_short, idle)} of the idle is launch overhead between two of them"
               + (f"; {plural(wait_events, 'host wait')}" if wait_events else "")
               + (" -> see " + ", ".join(f"{k} ({units.duration(v)})" for k, v in explained.items()) if explained else ""))
    evidence = []
    for w in sorted(windows, key=lambda w: (not w["steady"], -w["idle"]))[:MAX_EVIDENCE]:
        n = w["end"] - w["start"]
        causes = ", ".join(f"{c} {units.share(ns, w['idle'])}" for c, ns in
                           sorted(w["by_cause"].items(), key=lambda kv: -kv[1]) if ns > 0)
        evidence.append(Evidence(
            what=(f"{units.duration(n)} at {units.share(w['busy'], n)} busy ({plural(w['chunks'], 'chunk')} of {units.duration(w['chunk'])}), "
                  f"idle by cause: {causes or 'none'}; {w['short']}/{w['kernels']} kernels < "
                  f"{units.duration(th['short_kernel_us'] * 1000)}" + (f"; waits: {', '.join(w['waits'])}" if w["waits"] else "")
                  + ("" if w["steady"] else " (warm-up step)")),
            start_ns=w["start"], end_ns=w["end"], duration_ns=n, count=w["kernels"], kernels=w["top"],
            values={"busy_ns": w["busy"], "util_pct": units.percent(w["busy"], n, 1), "idle_ns": w["idle"],
                    "idle_by_cause_ns": w["by_cause"], "kernels_count": w["kernels"],
                    "short_kernels_count": w["short"], "host_waits_count": w["wait_events"],
                    "host_wait_call_counts": dict(w["waits"]), "chunk_ns": w["chunk"],
                    "idle_between_short_kernels_ns": w["between_short"], "step": st.names[w["step"]],
                    "explained_by_ns": _explained(w["by_cause"], w["between_short"])},
        ))
    # a symptom, not a cause: the idle is claimed by the rules of its causes (issue 10: one
    # cause, one finding); what those rules would recover is shown, not claimed again here
    explainable = sum(by_cause[c] for c in ("launch-overhead", "data-loading", "host-sync", "host-work",
                                            "communication"))
    shared = ctx.idle.by_cause(dev)
    message += "; the idle of the analysed time by cause: " + ", ".join(
        f"{c} {units.duration(v)}" for c, v in sorted(shared.items(), key=lambda kv: -kv[1]) if v > 0)
    return Finding(
        title=f"GPU {dev} under-used {site}: see the rules of its idle causes",
        severity="info",
        message=message,
        recoverable_ns=0,
        estimate=("none claimed: low utilisation is the symptom; its idle is claimed once, by the rule of its cause "
                  "(TC202 launch overhead, TC203 host syncs, TC204 data loading, TC205 host work), from the shared "
                  f"idle attribution; {units.duration(explainable)} of the windows' idle has a host-side cause"),
        fix=("Follow the rules named in the message, largest first: " + ", ".join(explained) if explained else
             "Inspect the windows in a timeline viewer: no launch, sync or data-loading pattern explains them."),
        location=f"low utilization {site}{tag}", evidence=tuple(evidence),
        values={"explainable_ns": explainable, "idle_by_shared_cause_ns": shared, "windows_count": len(steady), "low_ns": length, "low_pct": units.percent(length, basis, 1),
                "busy_pct_inside": units.percent(busy, length, 1), "idle_ns": idle, "idle_by_cause_ns": by_cause,
                "kernels_count": kernels, "short_kernels_count": short, "idle_between_short_kernels_ns": between_short,
                "host_waits_count": wait_events, "host_wait_call_counts": dict(waits),
                "explained_by_ns": explained, "basis_ns": basis, "analysed_ns": ctx.analysed_ns,
                "warmup_windows_count": len(warm),
                "warmup_idle_ns": sum(w["idle"] for w in warm), "threshold_pct": th["max_util_pct"]},
    )
