"""TC701 exposed-communication: collectives the GPU waits for with no compute alongside.

What it finds
    Per device, the time inside the steady-state steps during which a collective-communication
    kernel runs (NCCL/RCCL, ``ncclDevKernel_*``, symmetric-memory all-reduce) and no compute
    kernel does, on any stream (``analysis/comm.py``; copies do not hide communication). Also the
    comm/compute overlap, HTA's measure: overlapped time / communication time. One finding per
    device; evidence per collective (the ``nccl:*`` range around the launch, else the ``c10d::*``
    op, else the kernel name) with the kernel count, message size (the collective op's largest
    tensor argument, when the trace records shapes; bytes when it records the dtype),
    communication time and exposed time, most exposed first. The device timeline's
    ``exposed comm`` uses the same definition over the whole GPU window; this rule counts only
    the steady steps' wall time, so its share is of the same time as every other rule's.

Why it matters
    Data-parallel training hides the gradient all-reduce behind the backward pass, tensor and
    pipeline parallelism hide their collectives behind the next layer's compute. Exposed
    communication is step time in which the GPU only moves data: it grows with the number of
    ranks and the model size, not with the GPU's speed. Part of it can be waiting for slower
    ranks (a collective's kernel runs until every peer has arrived); one rank's trace cannot tell
    that from transfer time, the traces of all ranks can (HTA's straggler analysis).

How to fix
    Overlap: let DDP start bucket all-reduces during backward (do not ``synchronize`` or
    ``.item()`` between ``backward()`` and the optimizer; tune ``bucket_cap_mb``,
    ``gradient_as_bucket_view=True``); FSDP ``backward_prefetch=BACKWARD_PRE`` and
    ``forward_prefetch=True``; issue collectives with ``async_op=True`` and ``wait()`` as late as
    possible. Communicate less: gradient accumulation with ``no_sync()``, a larger batch per rank,
    communication hooks (bf16/fp16 compression, PowerSGD). When a collective waits long on some
    ranks only, balance the work before it (stragglers, uneven data).

Example
    Corpus a100_nccl_collectives (DDP, 2 ranks, A100): 14 NCCL kernels run 34.9 ms inside the two
    steady steps; compute covers 15.7 % of it, 29.4 ms is exposed, 6.6 % of the 445 ms analysed,
    29.3 ms of it in the 10 gradient all-reduces (``nccl:all_reduce``). Corpus
    a100_train_rank0_of16 (TorchRec, 16 ranks): 133 ms exposed, 15.4 % of the step time, overlap
    1.4 %; 103 ms of it in 8 all-reduces.

Thresholds
    Declared with their defaults, units and reasons in ``RULE.thresholds`` (``traceclass explain TC701``).
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

import numpy as np

from traceclass import units
from traceclass import timeline as tl
from traceclass.analysis import comm
from traceclass.analysis.locations import device_tag
from traceclass.analysis.sites import duration_text, size_text
from traceclass.rule import Context, Evidence, Family, Finding, Need, RuleInfo, Threshold, plural

RULE = RuleInfo(code="TC701", name="exposed-communication", family=Family.COMMUNICATION,
                summary="collective communication not overlapped by compute: exposed share of step time, overlap %",
                needs=(Need.GPU,),
                thresholds=(
                    Threshold('min_exposed_pct', 5.0, '%',
                              'a device is reported when its exposed communication is at least 5 % of the analysed '
                              "time: TraceLens' pre-check flags exposed communication above 5 % (and overlap below 70 "
                              '%); torch-tb-profiler advises gradient compression/accumulation when communication takes '
                              'more than 10 % of the step. Severity: the exposed time against the analysed time, on the '
                              'shared scale.'),
                ))

FIX = ("Overlap communication with compute: no sync between backward() and the optimizer so DDP all-reduces buckets "
       "during backward (bucket_cap_mb, gradient_as_bucket_view=True); FSDP backward_prefetch/forward_prefetch; "
       "async_op=True collectives waited on late. Communicate less: gradient accumulation with no_sync(), larger "
       "batches per rank, compression hooks. Compare ranks when a collective waits long (stragglers).")


def check(ctx: Context, th: Mapping[str, Any]) -> Iterable[Finding]:
    trace = ctx.trace
    analysed = ctx.analysed_ns
    if analysed <= 0 or len(trace.gpu) == 0:
        return
    fam = ctx.analysis.gpu_family_code
    rows = comm.comm_rows(trace, fam)
    if len(rows) == 0:
        return
    gpu = trace.gpu
    within = ctx.analysed.intervals
    # kernels that run at least partly inside the analysed windows
    rows = rows[tl.overlap_each(gpu.start_ns[rows], gpu.end_ns[rows], within) > 0]
    devices = np.unique(gpu.device[rows]).tolist()
    for dev in devices:
        r = rows[gpu.device[rows] == dev]
        cover = comm.compute_cover(trace, fam, dev)
        total, exposed = comm.exposed(trace, r, cover, within)
        share = 100.0 * exposed / analysed
        if exposed <= 0 or share < th["min_exposed_pct"]:
            continue
        yield _finding(ctx, th, dev, device_tag(dev, devices), r, cover, total, exposed, share)


def _finding(ctx: Context, th: Mapping[str, Any], dev: int, tag: str, rows: np.ndarray, cover: tl.Intervals,
             total: int, exposed: int, share: float) -> Finding:
    analysed = ctx.analysed_ns
    overlap = 100.0 * (total - exposed) / total if total else 0.0
    evidence = _evidence(ctx, rows, cover)
    top = evidence[0]
    timeline = next((t for t in ctx.analysis.timelines if t.device == dev), None)
    message = (f"GPU {dev}: {plural(len(rows), 'communication kernel')} ran {duration_text(total)} inside the steady "
               f"steps, {duration_text(exposed)} of it with no compute kernel alongside: {units.pct(share, 1)} of the "
               f"{duration_text(analysed)} analysed (threshold {th['min_exposed_pct']}%); comm/compute overlap "
               f"{units.pct(overlap, 1)} (TraceLens flags below 70%); most exposed: {top.values['collective']} "
               f"x{top.count} ({duration_text(top.duration_ns)} exposed)")
    names = sorted(e.values["collective"] for e in evidence[:2])
    return Finding(
        title=f"Overlap {' + '.join(names)} with compute",
        severity=ctx.severity(exposed), message=message, recoverable_ns=exposed,
        estimate=("communication-kernel time inside the steady steps with no compute kernel running on the device "
                  "(union over streams); an upper bound of what overlapping saves: part of it can be waiting for "
                  "slower ranks, which overlap does not remove. Severity: share of the analysed time."),
        fix=FIX, location="exposed communication: " + " + ".join(names) + tag, evidence=evidence,
        values={"comm_ns": total, "exposed_ns": exposed, "analysed_ns": analysed, "exposed_pct": round(share, 3),
                "overlap_pct": round(overlap, 2), "kernels_count": int(len(rows)),
                "collectives_count": len({e.values["collective"] for e in evidence}),
                "threshold_pct": th["min_exposed_pct"],
                "timeline_comm_ns": timeline.comm_ns if timeline else None,
                "timeline_exposed_comm_ns": timeline.exposed_comm_ns if timeline else None},
    )


def _evidence(ctx: Context, rows: np.ndarray, cover: tl.Intervals) -> tuple[Evidence, ...]:
    trace = ctx.trace
    gpu = trace.gpu
    within = ctx.analysed.intervals
    col = comm.collectives(trace, rows)
    out = []
    for name in sorted(set(col.name.tolist())):
        m = col.name == name
        r = rows[m]
        total, exposed = comm.exposed(trace, r, cover, within)
        el, nb = col.elements[m], col.bytes[m]
        known_el = el >= 0
        known_b = nb >= 0
        size = (f", {size_text(int(nb[known_b].sum()))} in messages" if known_b.all() else
                f", {int(el[known_el].sum()):,} elements in messages (dtype not recorded)" if known_el.all() else
                "" if not known_el.any() else f", size recorded for {int(known_el.sum())} of {len(r)}")
        kernels = sorted({trace.strings[int(c)] for c in gpu.name[r].tolist()})
        out.append(Evidence(
            what=f"{name}: {plural(len(r), 'kernel')}, {duration_text(total)} in {ctx.steps_word}, "
                 f"{duration_text(exposed)} exposed{size}",
            start_ns=int(gpu.start_ns[r].min()), end_ns=int(gpu.end_ns[r].max()), duration_ns=exposed,
            count=len(r), bytes=int(nb.sum()) if known_b.all() and len(r) else None, kernels=tuple(kernels[:4]),
            values={"collective": name, "comm_ns": total, "exposed_ns": exposed,
                    "elements": int(el.sum()) if known_el.all() else None,
                    "bytes": int(nb.sum()) if known_b.all() else None,
                    "mean_message_bytes": int(nb.mean()) if known_b.all() and len(r) else None}))
    out.sort(key=lambda e: (-(e.duration_ns or 0), e.values["collective"]))
    return tuple(out)  # the engine keeps the first rule.MAX_EVIDENCE
