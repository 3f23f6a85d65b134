"""Host sync: the host waits for the GPU inside the step, and the GPU then waits for the host.

What it finds
    Every distinct synchronisation site inside steps, with how often it runs per step, how long the
    host waited, and the GPU idle time it caused. Sources:

    * CUDA/HIP calls that block the host: ``cudaDeviceSynchronize``/``cudaStreamSynchronize``/
      ``cudaEventSynchronize`` (and their ``cu*``/``hip*`` forms), blocking ``cudaMemcpy``/
      ``cudaMemset``, async copies from or to pageable memory (the driver runs them synchronously),
      and any call that a GPU-side sync record (Kineto ``cuda_sync``, nsys ``SYNCHRONIZATION``)
      marks as a wait; ``cudaEventQuery`` polling and ``cudaStreamWaitEvent`` do not block;
    * ``aten::item``/``aten::_local_scalar_dense`` (``.item()``, ``bool(tensor)``, ``if t:``): one
      event each, holding the copy and the sync inside it; ``.item()`` of a CPU tensor has no
      blocking call inside and is no sync;
    * the blocking calls inside one other op (``aten::nonzero``, ``.cpu()`` -> ``aten::copy_``)
      form one event of that op.

    Site = the op (or, without ops as in plain nsys exports, the call) + the user source line when
    the trace has Python stacks, else the enclosing op chain. Caused GPU idle of one wait, on its
    device: the idle gap that starts while the host waits (the GPU drained its queue during the
    wait) and ends after the wait returned (the GPU then waited for the host to issue new work),
    counted until the launch call of the work that ends the gap returned (time after that is a
    GPU-side wait); a gap is charged to one wait only. TC202 names the host-sync part of its gaps
    and claims none of it. Gaps that start before the wait were not caused by it (the shared
    attribution gives them their own cause). A wait at the end of the trace, after the last
    GPU work, causes no measurable idle: nothing in the trace shows when the host would have
    issued new work. The idle from the GPU going idle during it to the end of the analysed time
    is still host-sync in the shared attribution (the host was blocked), so the message states
    it separately, as idle at the trace's end, and claims none of it. When the thread launches at most
    ``max_launches_per_sync_ratio`` kernels per wait, the message names the sync-per-launch
    pattern: the host never queues work ahead of the GPU.

Why it matters
    A sync empties the GPU queue. Everything the host does after it (Python, the next launches) is
    then exposed as GPU idle time, and the GPU cannot overlap the host's work with its own. One
    ``.item()`` per step in a loop of short kernels can cost more than the kernels themselves.

How to fix
    Keep values on the GPU: no ``.item()``, ``.cpu()``, ``print(tensor)`` or ``if tensor:`` per
    iteration (accumulate on the GPU and read once every N steps); copy with
    ``non_blocking=True`` into pinned memory and wait on an event only where the value is needed;
    replace ``cudaDeviceSynchronize`` by stream/event dependencies (``cudaStreamWaitEvent``); sync
    once per step at most.

Example
    ``if t.gt(0).any():`` once per step (corpus cuda_event_sync.json.gz): ``aten::item`` runs a
    1-byte pageable DtoH copy and a ``cudaStreamSynchronize``; the GPU goes idle when the copy ends
    (during the wait) and stays idle until the host has run the Python that launches the next
    kernel: 99 us until that launch call returned, 3.1 % of the step; the host was blocked 40 us,
    so 40 us are recoverable. Site ``aten::item in
    aten::is_nonzero`` (the trace has no Python stacks; with them, the user's file:line).

Thresholds
    Declared with their defaults, units and reasons in ``RULE.thresholds`` (``traceclass explain TC203``).

    Recoverable time, per wait: the smaller of its caused idle (minus the 2 us GPU-side gap that
    remains between already-queued kernels) and its host-sync part in the shared idle attribution
    (:mod:`traceclass.facts.idle_causes`), which is at most the time the host was blocked:
    without the wait the host runs ahead by no more than that, so serial host work after it (the
    host preprocessing the next input) stays exposed and is attributed to its own cause (TC205,
    TC202). TC303 reports waited-for copies of the same waits and points here.
    Severity: that time of the steady-state steps against the analysed time, the wall time of the
    steady-state steps (the whole trace when it has no ``ProfilerStep``), on the shared scale;
    ``info`` when the site caused no measurable idle. Location: the site (op or call and source
    line or op chain), never a device index.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

import numpy as np

from traceclass import units
from traceclass.analysis import gap_causes
from traceclass.analysis import labels
from traceclass.facts import idle_causes as ic
from traceclass.analysis.source_lines import source_for_points
from traceclass.facts import steps as fsteps
from traceclass.facts import syncs as fsyncs
from traceclass.keysums import group_sum
from traceclass.model import ApiKind, GpuKind
from traceclass.model.nesting import lookup2
from traceclass.rule import Context, Evidence, Family, Finding, MAX_EVIDENCE, Need, RuleInfo, Threshold, plural

RULE = RuleInfo(code="TC203", name="host-sync", family=Family.SYNC,
                summary="host waits for the GPU inside steps (.item(), synchronize, blocking copies) and the GPU idles after",
                needs=(Need.GPU,),
                thresholds=(
                    Threshold('max_launches_per_sync_ratio', 2.0, 'ratio',
                              'with two or fewer kernel launches per wait the GPU queue never holds more than two '
                              "kernels, so every launch's host latency is exposed; the message then names the "
                              'sync-per-launch pattern (corpus lockfuehrer_beast__report1_b: 2,254 launches, 2,256 '
                              'stream syncs).'),
                ))

FIX = ("Keep values on the GPU: no .item()/.cpu()/print(tensor)/if tensor: per iteration (read once every N steps); "
       "non_blocking=True copies into pinned memory with an event where the value is needed; stream/event "
       "dependencies instead of device-wide synchronize; at most one sync per step.")


def check(ctx: Context, th: Mapping[str, Any]) -> Iterable[Finding]:
    trace = ctx.trace
    if not (trace.gpu.kind != GpuKind.SYNC).any():
        return
    ev = ctx.facts.sync_events
    if len(ev) == 0:
        return
    st = ctx.facts.steps
    step = st.at(ev.start_ns)
    idle = np.zeros(len(ev), np.int64)
    i0 = np.full(len(ev), -1, np.int64)
    i1 = np.full(len(ev), -1, np.int64)
    for dev in ctx.facts.active_devices:
        d_idle, d0, d1 = fsyncs.caused_idle(trace, ev, ctx.facts.gaps(dev))
        hit = d_idle > 0
        idle[hit], i0[hit], i1[hit] = d_idle[hit], d0[hit], d1[hit]
    # what removing each wait can recover: its host-sync share of the shared idle attribution
    # (the idle it caused, bounded by the time the host was blocked)
    seg = ctx.idle
    hs = (seg.cause == ic.HOST_SYNC) & (seg.event >= 0)
    claim = np.bincount(seg.event[hs], weights=seg.length_ns[hs].astype(np.float64),
                        minlength=len(ev)).astype(np.int64)[:len(ev)]
    # host-sync idle of waits whose idle runs to a window edge with no next work: the
    # attribution's, not claimable (the trace ends before the host issues new work)
    edge = hs & (seg.next_row < 0)
    at_edge = np.bincount(seg.event[edge], weights=seg.length_ns[edge].astype(np.float64),
                          minlength=len(ev)).astype(np.int64)[:len(ev)]
    at_edge[idle > 0] = 0
    inside = np.flatnonzero(step >= 0)
    labels, site = np.unique(_sites(ctx, ev)[inside], return_inverse=True)
    order = np.argsort(site, kind="stable")
    cuts = np.searchsorted(site[order], np.arange(len(labels) + 1))
    for k, label in enumerate(labels.tolist()):
        sel = inside[order[cuts[k]:cuts[k + 1]]]
        f = _finding(ctx, th, st, ev, label, sel, step[sel], idle, i0, i1, claim, at_edge)
        if f is not None:
            yield f


def _sites(ctx: Context, ev: fsyncs.SyncEvents) -> np.ndarray:
    """Site label per event: op or call name, then the source line or the enclosing op chain."""
    trace = ctx.trace
    src = source_for_points(trace, ev.pid, ev.tid, ev.wait_ns) if len(trace.python) else [None] * len(ev)
    chains: dict[int, str] = {}
    out = []
    for k in range(len(ev)):
        op, a = int(ev.op[k]), int(ev.api[k])
        if op >= 0:
            label = trace.strings[trace.ops.name[op]]
            parent = int(trace.ops.parent[op])
            where = src[k] and f"at {src[k]}"
            if not where and parent >= 0:
                if parent not in chains:
                    chains[parent] = labels.op_chain(trace, parent, 2)
                where = f"in {chains[parent]}"
        else:
            label = trace.strings[trace.api.name[a]] if a >= 0 else ev.calls(k)[0]
            where = src[k] and f"at {src[k]}"
        out.append(f"{label} {where}" if where else label)
    return np.array(out, dtype=object)


def _finding(ctx: Context, th: Mapping[str, Any], st: fsteps.Steps, ev: fsyncs.SyncEvents, site: str, sel: np.ndarray,
             step: np.ndarray, idle: np.ndarray, i0: np.ndarray, i1: np.ndarray, claim: np.ndarray,
             at_edge: np.ndarray) -> Finding | None:
    steady = ~st.warmup[step]
    if not steady.any():
        return None
    s_sel = sel[steady]
    n_steps = max(ctx.analysed.steps_count, 1)
    count = int(steady.sum())
    wait = int((ev.end_ns[s_sel] - ev.wait_ns[s_sel]).sum())
    caused = int(idle[s_sel].sum())
    recoverable = int(np.minimum(claim[s_sel], np.maximum(idle[s_sel] - gap_causes.QUEUED_GAP_FLOOR_NS, 0)).sum())
    tail = int(at_edge[s_sel].sum())
    apis = ev.call_counts(s_sel)
    launches = _launches(ctx, st, ev, s_sel)
    ratio = launches / count
    pattern = ratio <= th["max_launches_per_sync_ratio"]
    devices = sorted(set(ev.device[s_sel].tolist()))
    per_step = count / n_steps
    analysed = ctx.analysed_ns
    how_often = "in the trace (no steps)" if st.synthetic else \
        f"in {plural(n_steps, 'steady step')} ({per_step:.4g} per step)"
    message = (f"{site}: {plural(count, 'host wait')} {how_often} blocked the host {units.duration(wait)} and left "
               f"{'GPU' if len(devices) == 1 else 'GPUs'} {', '.join(str(d) for d in devices)} idle {units.duration(caused)} "
               f"after {'it' if count == 1 else 'them'} ({units.share(caused, analysed)} of {ctx.time_word}); removing "
               f"{'it' if count == 1 else 'them'} recovers at most the blocked time: {units.duration(recoverable)}; calls: "
               f"{', '.join(f'{a} x{c}' for a, c in list(apis.items())[:3])}")
    if tail:
        message += (f"; besides, {units.duration(tail)} of idle from the GPU draining during "
                    f"{'a wait' if count == 1 else 'the waits'} to the end of {ctx.steps_word} with no next work in "
                    f"the trace: host-sync in the idle breakdown, but not claimed, since the trace does not show "
                    f"when the host would have issued new work")
    if pattern:
        message += (f"; {ratio:.2f} kernel launches per wait (threshold <= {th['max_launches_per_sync_ratio']:g}): "
                    f"sync-per-launch, the host never runs ahead of the GPU")
    warm = sel[~steady]
    ks, idle_ns = group_sum(step, idle[sel])  # per step at once: steps grow with the trace
    _, counts = group_sum(step, np.ones(len(step), np.int64))
    per = [{"step": st.names[k], "warmup": bool(st.warmup[k]), "syncs_count": c, "gpu_idle_ns": g}
           for k, c, g in zip(ks.tolist(), counts.tolist(), idle_ns.tolist())]
    return Finding(
        title=f"Remove the host sync at {site}",
        severity=ctx.severity(recoverable),
        message=message, recoverable_ns=recoverable,
        estimate=(f"per wait, the smaller of the GPU idle it caused (from the moment the GPU went idle during the "
                  f"wait until the host issued new work, minus {units.duration(gap_causes.QUEUED_GAP_FLOOR_NS)}, the GPU-side gap "
                  f"between already-queued kernels) and the time the host was blocked in it: without the wait the "
                  f"host runs ahead by at most that much, so serial host work after it stays exposed (that idle is "
                  f"attributed to its own cause: TC205 host work, TC202 launch overhead); this is the host-sync "
                  f"part of the shared idle attribution, claimed by no other rule (TC303 points here); severity "
                  f"against the {units.duration(analysed)} analysed"),
        fix=FIX, location=site, evidence=_evidence(ctx, st, ev, sel, step, steady, idle, i0, i1),
        values={"syncs_count": count, "syncs_per_step": round(per_step, 3),
                "steady_steps_count": ctx.analysed.steps_count,
                "host_wait_ns": wait, "gpu_idle_ns": caused, "idle_cause": "host-sync", "gpu_idle_per_step_ns": caused // n_steps,
                "host_sync_idle_at_trace_end_ns": tail,
                "gpu_idle_pct_of_step": units.percent(caused, analysed, 1), "api_counts": apis,
                "launches_count": launches, "launches_per_sync_ratio": round(ratio, 3), "sync_per_launch": pattern,
                "warmup_syncs_count": len(warm), "warmup_gpu_idle_ns": int(idle[warm].sum()),
                "devices": devices, "per_step": per[:50]},
    )


def _launches(ctx: Context, st: fsteps.Steps, ev: fsyncs.SyncEvents, sel: np.ndarray) -> int:
    """Kernel and graph launches in steady steps on the threads of these waits."""
    api = ctx.trace.api
    launch = np.flatnonzero(np.isin(api.kind, np.array([ApiKind.LAUNCH, ApiKind.GRAPH_LAUNCH], dtype=np.int8)))
    pairs = np.unique(np.stack([ev.pid[sel], ev.tid[sel]], 1), axis=0)
    launch = launch[lookup2(pairs[:, 0], pairs[:, 1], api.pid[launch], api.tid[launch]) >= 0]
    k = st.at(api.start_ns[launch])
    return int(((k >= 0) & ~st.warmup[np.maximum(k, 0)]).sum()) if len(st.warmup) else 0


def _evidence(ctx: Context, st: fsteps.Steps, ev: fsyncs.SyncEvents, sel: np.ndarray, step: np.ndarray,
              steady: np.ndarray, idle: np.ndarray, i0: np.ndarray, i1: np.ndarray) -> tuple[Evidence, ...]:
    trace = ctx.trace
    pick = np.lexsort((-idle[sel], ~steady))[:MAX_EVIDENCE]
    rows = sel[pick]
    src = source_for_points(trace, ev.pid[rows], ev.tid[rows], ev.wait_ns[rows]) if len(trace.python) \
        else [None] * len(rows)
    out = []
    for j, k in enumerate(rows.tolist()):
        s = int(step[pick[j]])
        wait = int(ev.end_ns[k] - ev.wait_ns[k])
        op = int(ev.op[k])
        out.append(Evidence(
            what=(f"{' + '.join(ev.calls(k)) or trace.strings[trace.ops.name[op]]} waited {units.duration(wait)}, "
                  f"GPU idle {units.duration(idle[k])} after it" + ("" if steady[pick[j]] else " (warm-up step)")),
            start_ns=int(ev.start_ns[k]), end_ns=int(ev.end_ns[k]), duration_ns=int(ev.end_ns[k] - ev.start_ns[k]),
            ops=(labels.op_chain(trace, op, 3),) if op >= 0 else (), source=src[j],
            values={"host_wait_ns": wait, "gpu_idle_ns": int(idle[k]),
                    "gpu_idle_start_ns": int(i0[k]) if i0[k] >= 0 else None,
                    "gpu_idle_end_ns": int(i1[k]) if i1[k] >= 0 else None,
                    "apis": list(ev.calls(k)), "device": int(ev.device[k]), "step": st.names[s]},
        ))
    return tuple(out)
