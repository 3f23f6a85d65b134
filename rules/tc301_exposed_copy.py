"""TC301 exposed-copy: copies the GPU spends alone, overlapped by no kernel.

What it finds
    Host-to-device, device-to-host and device-to-device copies (memcpy rows) launched in the
    steady-state steps whose time overlaps no kernel on the same device, any stream (compute and
    communication kernels alike). One finding per device and direction, with the exposed wall
    time, the copy count and bytes, and the achieved bandwidth next to the peak: the host link per
    direction for HtoD/DtoH (``host_link`` in hardware/specs.toml), half the memory bandwidth for
    DtoD (a copy reads and writes every byte). Evidence: launch sites (op, API call, source line),
    worst first; the location names the worst site.

    The report's GPU timeline has an ``exposed copy`` figure too; it differs from this rule's on
    purpose: it counts memsets with the copies (memsets have no direction and no link to judge)
    and covers the device's whole GPU window, warm-up and work outside steps included. Both treat
    a copy under any kernel as hidden. On corpus mi300x_resnet_act_checkpoint_train the timeline
    says 2.64 ms over the window; the copies alone are 2.46 ms of it, the memsets 0.18 ms.

Why it matters
    While an exposed copy runs the GPU computes nothing. A copy that overlaps a kernel (pinned
    memory, ``non_blocking=True``, a side stream) costs nothing on the critical path; the same
    copy on the compute stream adds its full time to every step. HTA does not analyse copy
    overlap; TraceLens reports one ``exposed_memcpy`` number without sites.

How to fix
    HtoD: pin host memory (``DataLoader(pin_memory=True)``), copy with ``non_blocking=True`` and
    prefetch the next batch on a side stream. DtoH: keep per-step values on the GPU, copy once.
    DtoD: drop copies the model does not need (``torch.cat`` in loops, ``clone()``, DDP bucket
    copies: ``gradient_as_bucket_view=True``) or overlap them with compute.

Example
    ``x = batch.to("cuda")`` with a pageable CPU batch: an 8 MiB HtoD copy runs for 1.8 ms with
    the GPU idle; with ``pin_memory=True`` and ``non_blocking=True`` issued one step ahead, it
    overlaps the previous step's kernels and disappears from the step time.

Thresholds
    Declared with their defaults, units and reasons in ``RULE.thresholds`` (``traceclass explain TC301``).
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

import numpy as np

from traceclass import units
from traceclass.analysis import copies
from traceclass.analysis.locations import device_tag
from traceclass.analysis.sites import duration_text, size_text
from traceclass.rule import Context, Evidence, Family, Finding, MAX_EVIDENCE, Need, RuleInfo, Threshold, plural

RULE = RuleInfo(code="TC301", name="exposed-copy", family=Family.COPY,
                summary="copies overlapped by no kernel: exposed time, bytes, bandwidth vs link/memory peak",
                needs=(Need.GPU,),
                thresholds=(
                    Threshold('min_exposed_us', 100, 'us',
                              'a device/direction is reported when its copies are exposed for at least this long in the '
                              'steady steps: below 0.1 ms over a whole trace no fix is worth a change.'),
                    Threshold('min_exposed_pct', 1.0, '%',
                              '... and for at least this share of the analysed time (wall time of the steady-state '
                              'steps, the whole trace without steps), the time severity is measured against. Under 1 % '
                              'a fix moves the step by less than steady steps already differ (0.4-2.3 % between the '
                              'steady steps of the corpus training traces on A100 and MI300X).'),
                ))

_FIX = {
    copies.HTOD: "Pin host memory (DataLoader(pin_memory=True)), copy with .to(device, non_blocking=True) and "
                 "prefetch the next batch on a side stream so the copy overlaps kernels.",
    copies.DTOH: "Keep per-step values on the GPU and copy once (avoid .item()/.cpu() per step); if a copy is "
                 "needed, use non_blocking=True into pinned memory and synchronize later.",
    copies.DTOD: "Remove device copies the model does not need (torch.cat in loops, clone(), .contiguous() of "
                 "views, DDP bucket copies: gradient_as_bucket_view=True) or run them on a side stream.",
    copies.OTHER: "Remove the copy or issue it asynchronously so that it overlaps kernels.",
}


def check(ctx: Context, th: Mapping[str, Any]) -> Iterable[Finding]:
    trace = ctx.trace
    rows = copies.memcpy_rows(trace)
    rows = rows[ctx.gpu_analysed[rows]]
    if len(rows) == 0:
        return
    gpu = trace.gpu
    exposed = copies.exposed_each(trace, rows)
    cls = copies.direction_class(trace, rows)
    analysed = ctx.analysed_ns
    devices = np.unique(gpu.device[rows]).tolist()
    for dev in devices:
        for c in range(len(copies.CLASS_LABEL)):
            sel = (gpu.device[rows] == dev) & (cls == c)
            if not sel.any():
                continue
            r, ex = rows[sel], exposed[sel]
            union = copies.exposed_union_ns(trace, r)
            pct = 100.0 * union / analysed if analysed > 0 else 0.0
            if union <= 0 or union < th["min_exposed_us"] * 1000 or pct < th["min_exposed_pct"]:
                continue
            yield _finding(ctx, dev, devices, c, r, ex, union, pct, th)


def _finding(ctx: Context, dev: int, devices: list[int], c: int, r: np.ndarray, ex: np.ndarray, union: int,
             pct: float, th: Mapping[str, Any]) -> Finding:
    trace, gpu = ctx.trace, ctx.trace.gpu
    label = copies.CLASS_LABEL[c]
    analysed = ctx.analysed_ns
    dur = gpu.end_ns[r] - gpu.start_ns[r]
    nb = gpu.bytes[r]
    known = nb >= 0
    total_bytes = int(nb[known].sum()) if known.any() else None
    achieved = total_bytes / (dur[known].sum() / 1e9) if known.any() and dur[known].sum() > 0 else None
    rd = ctx.analysis.devices.get(dev)
    peak, basis = copies.peak_bps(rd.spec if rd else None, c)
    bw = "bytes not recorded"
    if achieved is not None:
        bw = f"{units.byte_rate(achieved)} achieved"
        bw += f" vs {units.byte_rate(peak)} peak ({basis})" if peak else f" (peak unknown: {basis})"
    evidence = _evidence(trace, r, ex)
    worst = evidence[0]
    timeline = next((t for t in ctx.analysis.timelines if t.device == dev), None)
    other = (f"; the timeline's exposed copy ({duration_text(timeline.exposed_copy_ns)}) counts every direction, "
             f"memsets and the whole GPU window" if timeline and timeline.exposed_copy_ns != union else "")
    msg = (f"GPU {dev}: {plural(len(r), label + ' copy', label + ' copies')} exposed for {duration_text(union)}, "
           f"{units.pct(pct, 1)} of the {duration_text(analysed)} analysed (threshold {th['min_exposed_pct']}% and "
           f"{units.duration(th['min_exposed_us'] * 1000)}); {size_text(total_bytes)}{_unknown(int((~known).sum()))}, {bw}; "
           f"worst site {worst.values['site']}{other}")
    values = {"copies_count": int(len(r)), "exposed_ns": union, "copy_ns": int(dur.sum()), "analysed_ns": analysed,
              "exposed_pct": round(pct, 3), "bytes": total_bytes, "bytes_unknown_count": int((~known).sum()),
              "achieved_gb_s": round(achieved / 1e9, 3) if achieved is not None else None,
              "peak_gb_s": round(peak / 1e9, 3) if peak else None, "peak_basis": basis,
              "timeline_exposed_copy_ns": timeline.exposed_copy_ns if timeline else None}
    return Finding(
        title=f"Overlap {label} copies from {copies.title_site(worst.values['site'])} with compute",
        severity=ctx.severity(union), message=msg,
        recoverable_ns=union,
        estimate="exposed wall time of these copies (copy time overlapped by no kernel on the device, union "
                 "over streams), copies launched in the steady-state steps; an upper bound: overlapping or "
                 "removing the copies saves at most this. Unlike the timeline's exposed-copy figure, memsets "
                 "and warm-up work are not counted. Severity: share of the analysed time.",
        fix=_FIX[c], location=f"{label} copies from {worst.values['site']}{device_tag(dev, devices)}",
        evidence=evidence, values=values)


def _evidence(trace, r: np.ndarray, ex: np.ndarray) -> tuple[Evidence, ...]:  # type: ignore[no-untyped-def]
    gpu = trace.gpu
    out = []
    for g in copies.site_groups(trace, r):
        rr = r[g.index]
        nb = gpu.bytes[rr]
        out.append(Evidence(
            what=f"{len(rr)}x {g.name} from {g.where}", start_ns=int(gpu.start_ns[rr].min()),
            end_ns=int(gpu.end_ns[rr].max()), duration_ns=int(ex[g.index].sum()), count=len(rr),
            bytes=int(nb[nb >= 0].sum()) if (nb >= 0).any() else None, ops=g.ops, source=g.source,
            values={"exposed_ns": int(ex[g.index].sum()), "copy_ns": int((gpu.end_ns[rr] - gpu.start_ns[rr]).sum()),
                    "site": g.where + (f" at {g.source}" if g.source else "")}))
    out.sort(key=lambda e: (-(e.duration_ns or 0), e.what))
    return tuple(out)  # the engine keeps the first rule.MAX_EVIDENCE


def _unknown(n: int) -> str:
    return f" (+{plural(n, 'copy')} without a byte count)" if n else ""
