"""TC302 pageable-copy: host <-> device copies from or to pageable (unpinned) host memory.

What it finds
    Copies launched in the steady-state steps whose host side is pageable memory: Kineto names them ``Memcpy HtoD (Pageable ->
    Device)`` / ``Memcpy DtoH (Device -> Pageable)``, nsys exports set ``srcKind``/``dstKind``
    to 0. One finding per device and direction with the count, bytes, copy time, how many went
    through an async API (the case of nsys ``analyze``'s ``cuda_memcpy_async`` rule, which lists
    those calls and nothing else) and the achieved bandwidth against the host link. When the
    trace does not say whether host memory was pinned (ROCm names the host side ``Host``), an
    ``info`` finding says so instead of guessing.

Why it matters
    The GPU's copy engines can only read pinned memory. A pageable copy is staged: the driver
    copies the data into a pinned bounce buffer on the CPU and DMAs it from there, in chunks, so
    it runs well below the link rate and an "async" copy blocks the host until staging is done:
    it can never overlap anything.

How to fix
    Allocate the host buffers pinned: ``DataLoader(pin_memory=True)``, ``tensor.pin_memory()``,
    ``torch.empty(..., pin_memory=True)`` for reused staging buffers, ``cudaMallocHost`` /
    ``cudaHostRegister`` in CUDA code; then copy with ``non_blocking=True``.

Example
    ``x.to("cuda", non_blocking=True)`` on a batch built with ``torch.from_numpy``: five 8 MiB
    copies at 4.7 GB/s take 1.8 ms each on an H100 whose PCIe Gen5 link moves 64 GB/s per
    direction; pinned, each would take about 0.13 ms and overlap compute.

Thresholds
    Declared with their defaults, units and reasons in ``RULE.thresholds`` (``traceclass explain TC302``).
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

import numpy as np

from traceclass import units
from traceclass.analysis import copies
from traceclass.analysis.locations import device_tag
from traceclass.analysis.sites import duration_text, size_text
from traceclass.model import ApiKind, CopyKind, MemKind, Vendor
from traceclass.rule import Context, Evidence, Family, Finding, MAX_EVIDENCE, Need, RuleInfo, Threshold, plural

RULE = RuleInfo(code="TC302", name="pageable-copy", family=Family.COPY,
                summary="host<->device copies through pageable host memory (staged, never asynchronous)",
                needs=(Need.GPU,),
                thresholds=(
                    Threshold('min_copies_count', 1, 'count',
                              "nsys' rule reports every pageable async copy, and so do we; raise it to silence sporadic "
                              'one-off copies (a checkpoint load, a metrics ``.cpu()``). Severity: the staging cost '
                              'against the analysed time (the shared scale); a few tiny copies rate ``low`` (or '
                              '``info`` when nothing is recoverable), however many there are.'),
                ))

# Without a host-link figure, pinned copies of the same trace give the reference rate, but only
# copies of at least 1 MiB: at 16+ GB/s their transfer (64+ us) dwarfs the ~5-10 us fixed cost of
# a copy, so their rate measures the link, not the launch overhead.
_RATE_MIN_BYTES = 1 << 20
_EXPLICIT = (CopyKind.HTOD, CopyKind.DTOH, CopyKind.HTOA, CopyKind.ATOH)  # not UVM page migrations
_FIX = ("Pin the host memory (DataLoader(pin_memory=True), tensor.pin_memory(), a reused pinned staging "
        "buffer; cudaMallocHost/cudaHostRegister in CUDA code) and copy with non_blocking=True.")


def check(ctx: Context, th: Mapping[str, Any]) -> Iterable[Finding]:
    trace = ctx.trace
    rows = copies.memcpy_rows(trace)
    rows = rows[ctx.gpu_analysed[rows]]
    if len(rows) == 0:
        return
    gpu = trace.gpu
    rows = rows[np.isin(gpu.copy_kind[rows], [int(k) for k in _EXPLICIT])]
    cls = copies.direction_class(trace, rows)
    host = copies.host_mem(trace, rows)
    devices = np.unique(gpu.device[rows]).tolist()
    for dev in devices:
        on = gpu.device[rows] == dev
        tag = device_tag(dev, devices)
        for c in (copies.HTOD, copies.DTOH):
            r = rows[on & (cls == c) & (host == MemKind.PAGEABLE)]
            if len(r) >= th["min_copies_count"]:
                pinned = rows[on & (cls == c) & (host == MemKind.PINNED)]
                yield _finding(ctx, dev, tag, c, r, pinned, th)
        unknown = rows[on & np.isin(cls, (copies.HTOD, copies.DTOH)) & (host == MemKind.UNKNOWN)]
        if len(unknown) >= th["min_copies_count"]:
            yield _unknown_finding(ctx, dev, tag, unknown)


def _reference(ctx: Context, dev: int, c: int, pinned: np.ndarray) -> tuple[float | None, str]:
    """Rate a pinned copy would reach: the host link, else pinned copies of the same trace."""
    rd = ctx.analysis.devices.get(dev)
    peak, basis = copies.peak_bps(rd.spec if rd else None, c)
    if peak:
        return peak, f"the {units.byte_rate(peak)} host link per direction"
    gpu = ctx.trace.gpu
    ok = pinned[gpu.bytes[pinned] >= _RATE_MIN_BYTES]
    dur = int((gpu.end_ns[ok] - gpu.start_ns[ok]).sum())
    if dur > 0:
        rate = float(gpu.bytes[ok].sum()) / (dur / 1e9)
        return rate, f"the {units.byte_rate(rate)} that pinned copies of 1 MiB or more reached in this trace ({basis})"
    return None, basis


def _finding(ctx: Context, dev: int, tag: str, c: int, r: np.ndarray, pinned: np.ndarray,
             th: Mapping[str, Any]) -> Finding:
    trace, gpu = ctx.trace, ctx.trace.gpu
    label = copies.CLASS_LABEL[c]
    dur = gpu.end_ns[r] - gpu.start_ns[r]
    nb = np.maximum(gpu.bytes[r], 0)
    ref, basis = _reference(ctx, dev, c, pinned)
    if ref:
        ideal = np.ceil(nb / ref * 1e9).astype(np.int64)
        recoverable = int(np.maximum(dur - ideal, 0).sum())
        estimate = (f"copy time minus the time the same bytes take at {basis}, summed over the copies: the "
                    f"staging cost; an upper bound, pinned copies reach somewhat less than the link peak")
    else:
        recoverable = 0
        estimate = f"not estimated: no reference rate ({basis}) and no pinned copy in the trace to compare with"
    a = gpu.api[r]
    api_kind = np.where(a >= 0, trace.api.kind[np.maximum(a, 0)], -1) if len(trace.api) else np.full(len(r), -1)
    n_async = int((api_kind == ApiKind.MEMCPY_ASYNC).sum())
    achieved = float(nb.sum()) / (dur.sum() / 1e9) if dur.sum() > 0 else None
    rate = units.byte_rate(achieved) if achieved is not None else "rate unknown"
    evidence = _evidence(trace, r)
    site = evidence[0].values["site"]
    one = len(r) == 1
    msg = (f"GPU {dev}: {plural(len(r), f'pageable {label} copy', f'pageable {label} copies')} (threshold "
           f"{th['min_copies_count']}), {size_text(int(nb.sum()))} in {duration_text(int(dur.sum()))} = {rate}"
           + (f" vs {units.byte_rate(ref)} pinned" if ref else "")
           + (("; issued through an async API (pageable memory makes it synchronous)" if one else
               f"; {n_async} issued through an async API (pageable memory makes them synchronous)") if n_async
              else f"; issued through {'a synchronous API' if one else 'synchronous APIs'}")
           + f"; worst site {site}")
    values = {"copies_count": int(len(r)), "async_api_count": n_async, "copy_ns": int(dur.sum()),
              "bytes": int(nb.sum()), "achieved_gb_s": round(achieved / 1e9, 3) if achieved else None,
              "reference_gb_s": round(ref / 1e9, 3) if ref else None, "analysed_ns": ctx.analysed_ns}
    return Finding(
        title=f"Pin the host memory of {label} copies from {copies.title_site(site)}",
        severity=ctx.severity(recoverable), message=msg,
        recoverable_ns=recoverable, estimate=estimate + ". Severity: share of the analysed time.",
        fix=_FIX, location=f"pageable {label} copies from {site}{tag}", evidence=evidence, values=values)


def _unknown_finding(ctx: Context, dev: int, tag: str, r: np.ndarray) -> Finding:
    gpu = ctx.trace.gpu
    dur = int((gpu.end_ns[r] - gpu.start_ns[r]).sum())
    nb = gpu.bytes[r]
    total = int(nb[nb >= 0].sum()) if (nb >= 0).any() else None
    rd = ctx.trace.device(dev)
    why = "ROCm traces name the host side 'Host'" if rd and rd.vendor == Vendor.AMD else "recorded as unknown"
    evidence = _evidence(ctx.trace, r)
    msg = (f"GPU {dev}: {plural(len(r), 'host<->device copy', 'host<->device copies')} ({size_text(total)}, "
           f"{duration_text(dur)}) whose host memory kind the trace does not record ({why}): pageable or pinned "
           f"cannot be told")
    return Finding(
        title=f"Check the host memory kind of copies from {copies.title_site(evidence[0].values['site'])}",
        severity="info", message=msg, recoverable_ns=0,
        estimate="not estimated: whether these copies were staged through pageable memory is unknown",
        fix="Check that the host tensors copied to or from the GPU are pinned (tensor.is_pinned()); if not, "
            "pin them (pin_memory=True) and copy with non_blocking=True.",
        location=f"copies with unknown host memory kind from {evidence[0].values['site']}{tag}", evidence=evidence,
        values={"copies_count": int(len(r)), "copy_ns": dur, "bytes": total})


def _evidence(trace, r: np.ndarray) -> tuple[Evidence, ...]:  # type: ignore[no-untyped-def]
    gpu = trace.gpu
    out = []
    for g in copies.site_groups(trace, r):
        rr = r[g.index]
        nb = gpu.bytes[rr]
        dur = int((gpu.end_ns[rr] - gpu.start_ns[rr]).sum())
        out.append(Evidence(what=f"{len(rr)}x {g.name} from {g.where}", start_ns=int(gpu.start_ns[rr].min()),
                            end_ns=int(gpu.end_ns[rr].max()), duration_ns=dur, count=len(rr),
                            bytes=int(nb[nb >= 0].sum()) if (nb >= 0).any() else None, ops=g.ops, source=g.source,
                            values={"site": g.where + (f" at {g.source}" if g.source else "")}))
    out.sort(key=lambda e: (-(e.duration_ns or 0), e.what))
    return tuple(out)  # the engine keeps the first rule.MAX_EVIDENCE
