"""TC303 sync-copy: copies the host waits for, through a blocking API or a wait right after.

What it finds
    (a) Copies issued through a synchronous API (``cudaMemcpy``, ``cuMemcpyHtoD``, ``hipMemcpy``,
    ``hipMemcpyWithStream``...), the case of nsys ``analyze``'s ``cuda_memcpy_sync`` rule; like it,
    CUDA device-to-device copies (the CUDA runtime does not block the host for them) and small
    host-to-device copies (see ``max_small_htod_bytes``) are left out. HIP documents all its
    synchronous copies as blocking, so no HIP call is left out. (b) Async copies waited on at
    once: a ``*MemcpyAsync`` whose next call on the same thread (event records skipped) is a
    stream, device or event synchronization starting within ``max_wait_gap_us`` of its end:
    ``.item()``, ``.cpu()``, ``.tolist()``, ``print(tensor)`` in PyTorch. One finding per device and
    kind, with the host time blocked, the GPU idle gap that followed, bytes and launch sites.

Why it matters
    The host stops until the GPU has drained its queue and finished the copy; meanwhile it queues
    no work, so when it resumes the GPU sits idle until new kernels arrive. Every such copy is a
    pipeline flush: on a GPU-bound step it costs the idle gap after the copy, on a host-bound
    step the blocked host time.

How to fix
    Keep values on the GPU (accumulate losses and metrics as tensors; log every N steps), use
    ``non_blocking=True`` copies into pinned memory and synchronize once, late; replace
    ``cudaMemcpy`` by ``cudaMemcpyAsync`` on a stream plus an event.

Example
    ``loss.item()`` every step: ``aten::_local_scalar_dense`` issues ``cudaMemcpyAsync`` DtoH and
    ``cudaStreamSynchronize`` 1 us later; the host waits for all queued kernels, then the GPU idles
    for the launch latency of the next step's first kernels.

Thresholds
    Declared with their defaults, units and reasons in ``RULE.thresholds`` (``traceclass explain TC303``).
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

import numpy as np

from traceclass import units
from traceclass.analysis import copies
from traceclass.analysis.locations import device_tag
from traceclass.analysis.sites import duration_text, size_text
from traceclass.model import MemKind
from traceclass.model.nesting import lookup
from traceclass.rule import Context, Evidence, Family, Finding, MAX_EVIDENCE, Need, RuleInfo, Threshold, plural

RULE = RuleInfo(code="TC303", name="sync-copy", family=Family.COPY,
                summary="copies the host waits for: synchronous copy APIs and async copies synchronized at once",
                needs=(Need.GPU,),
                thresholds=(
                    Threshold('max_wait_gap_us', 50, 'us',
                              "a sync within 50 µs of the copy's API call belongs to it. In the corpus the copy -> sync "
                              'gap inside one ATen op (``_local_scalar_dense``, ``copy_``) is 0-6 us; 50 us leaves room '
                              'for a slow host and profiler overhead, while any other CUDA call in between breaks the '
                              'pair anyway. Severity: the recoverable time against the analysed time, the shared scale '
                              '(a single microsecond-scale ``.item()`` copy rates ``low``, however short the trace).'),
                    Threshold('max_small_htod_bytes', 65536, 'bytes',
                              'synchronous HtoD copies of at most 64 KiB from pageable (or unknown) host memory are '
                              'left out, as nsys does: CUDA returns once such a copy is staged, without waiting for the '
                              'device.'),
                    Threshold('min_copies_count', 1, 'count',
                              'report any, like nsys.'),
                ))

SYNC_API, WAITED = 0, 1
_MODE = ("synchronous-API copies", "async copies synchronized at once")


def check(ctx: Context, th: Mapping[str, Any]) -> Iterable[Finding]:
    trace = ctx.trace
    api, gpu = trace.api, trace.gpu
    if len(api) == 0 or len(gpu) == 0:  # no GPU activity recorded: nothing to attribute the copies to
        return
    calls, waited, blocked, gaps = copies.blocking_copy_calls(trace, th["max_wait_gap_us"] * 1000)
    inside = ctx.analysed.synthetic | ctx.analysed.holds(api.start_ns[calls])
    calls, waited, blocked, gaps = calls[inside], waited[inside], blocked[inside], gaps[inside]
    mode = np.where(waited, WAITED, SYNC_API)
    if len(calls) == 0:
        return
    mem = copies.memcpy_rows(trace)
    g = lookup(gpu.api[mem], calls) if len(mem) else np.full(len(calls), -1)
    row = np.where(g >= 0, mem[np.maximum(g, 0)], -1) if len(mem) else g
    has = row >= 0
    cls = np.full(len(calls), copies.OTHER, dtype=np.int8)
    nbytes = np.full(len(calls), -1, dtype=np.int64)
    host = np.full(len(calls), int(MemKind.UNKNOWN), dtype=np.int8)
    cls[has], nbytes[has], host[has] = (copies.direction_class(trace, row[has]), gpu.bytes[row[has]],
                                        copies.host_mem(trace, row[has]))
    is_cuda = trace.strings.mask(api.name[calls], lambda s: s.startswith("cu"))
    keep = mode == WAITED
    keep |= ~((cls == copies.DTOD) & is_cuda)
    keep &= ~((mode == SYNC_API) & (cls == copies.HTOD) & (nbytes >= 0) & (nbytes <= th["max_small_htod_bytes"])
              & (host != MemKind.PINNED))
    calls, mode, blocked, gaps, row, cls, nbytes = (calls[keep], mode[keep], blocked[keep], gaps[keep], row[keep],
                                                   cls[keep], nbytes[keep])
    bubble = copies.idle_after(trace, row)
    dev = np.full(len(row), -1, dtype=np.int64)
    dev[row >= 0] = gpu.device[row[row >= 0]]
    devices = np.unique(dev).tolist()
    for d in devices:
        for m in (SYNC_API, WAITED):
            sel = (dev == d) & (mode == m)
            if sel.sum() >= th["min_copies_count"] and sel.any():
                yield _finding(ctx, d, device_tag(d, [x for x in devices if x >= 0]), m, calls[sel], row[sel],
                               blocked[sel], bubble[sel], nbytes[sel], cls[sel], gaps[sel], th)


def _finding(ctx: Context, dev: int, tag: str, m: int, calls, row, blocked, bubble, nbytes, cls,  # type: ignore[no-untyped-def]
             gaps, th: Mapping[str, Any]) -> Finding:
    trace = ctx.trace
    cost = np.minimum(blocked, bubble)
    # the idle after a waited-for copy is host-sync idle, claimed once by TC203 (which holds
    # the same waits): shown here, not claimed again (issue 10: one cause, one finding)
    recoverable = 0
    known = nbytes >= 0
    total = int(nbytes[known].sum()) if known.any() else None
    dirs = ", ".join(f"{int((cls == c).sum())} {copies.CLASS_LABEL[c]}" for c in range(4) if (cls == c).any())
    where = f"GPU {dev}" if dev >= 0 else "GPU unknown"
    one = len(calls) == 1
    what = (f"{plural(len(calls), 'copy', 'copies')} through a synchronous API" if m == SYNC_API else
            f"{plural(len(calls), 'async copy', 'async copies')} {'' if one else 'each '}followed by a synchronize "
            f"call ({'gap' if one else 'largest gap'} {duration_text(int(gaps.max()))}, threshold "
            f"{units.duration(th['max_wait_gap_us'] * 1000)})")
    evidence = _evidence(trace, calls, row, blocked, cost, nbytes)
    site = evidence[0].values["site"]
    msg = (f"{where}: {what} ({dirs}; {size_text(total)}) blocked the host {duration_text(int(blocked.sum()))}; "
           f"the GPU idled {duration_text(int(bubble.sum()))} right after {'it' if one else 'them'}; worst site {site}; "
           f"up to {duration_text(int(cost.sum()))} recoverable, claimed by TC203 (host-sync), not here")
    return Finding(
        title=f"Make the copies from {copies.title_site(site)} asynchronous",
        severity=ctx.severity(recoverable), message=msg,
        recoverable_ns=recoverable,
        estimate="none claimed here: per copy, the smaller of the host time blocked in the copy/sync calls and the "
                 "GPU idle gap right after the copy (values.cost_ns) is host-sync time, which TC203 claims for the "
                 "same waits.",
        fix="Keep per-step values on the GPU (accumulate losses/metrics as tensors, log every N steps); copy "
            "with non_blocking=True into pinned memory and synchronize once, late; use cudaMemcpyAsync + an "
            "event instead of cudaMemcpy.",
        location=f"{_MODE[m]} from {site}{tag}", evidence=evidence,
        values={"copies_count": int(len(calls)), "blocked_ns": int(blocked.sum()), "idle_after_ns": int(bubble.sum()),
                "bytes": total, "analysed_ns": ctx.analysed_ns, "cost_ns": int(cost.sum()), "see": "TC203"})


def _evidence(trace, calls, row, blocked, cost, nbytes) -> tuple[Evidence, ...]:  # type: ignore[no-untyped-def]
    api = trace.api
    cols = copies.api_sites(trace, calls)
    out = []
    for g in copies.site_groups(trace, row, cols):
        i = g.index
        nb = nbytes[i]
        c = calls[i]
        origin = f" from {g.where}" if g.ops else ""
        out.append(Evidence(
            what=f"{len(i)}x {g.name} via {trace.strings[int(api.name[c[0]])]}{origin}",
            start_ns=int(api.start_ns[c].min()), end_ns=int(api.end_ns[c].max()), duration_ns=int(blocked[i].sum()),
            count=len(i), bytes=int(nb[nb >= 0].sum()) if (nb >= 0).any() else None, ops=g.ops, source=g.source,
            values={"blocked_ns": int(blocked[i].sum()), "recoverable_ns": int(cost[i].sum()),
                    "site": g.where + (f" at {g.source}" if g.source else "")}))
    out.sort(key=lambda e: (-(e.duration_ns or 0), e.what))
    return tuple(out)  # the engine keeps the first rule.MAX_EVIDENCE
