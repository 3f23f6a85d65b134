"""TC602 memory-pressure: the GPU's memory is nearly full.

What it finds
    From the allocator totals of the memory events (``profile_memory=True``;
    ``analysis/memory.py``), the peak memory each GPU held (the larger of peak allocated and
    peak reserved) against the device's memory size (Kineto's ``totalGlobalMem``). A GPU at or
    above ``min_peak_pct`` gets a finding with both peaks, when they happened, the gap between
    reserved and allocated (memory the caching allocator holds but no tensor uses:
    fragmentation), and the ``cudaMalloc``/``cudaFree`` calls made inside the steady steps (the
    caching allocator freeing its cache and allocating again, the time pressure costs). The host
    (CPU) peak, when the trace has CPU memory events, is reported as ``info``: the trace does not
    say how much memory the host has. Silent without memory events, and for a GPU whose memory
    size the trace does not give.

Why it matters
    At the limit, the next longer sequence or larger batch fails with out-of-memory; before that
    the caching allocator starts to free cached blocks and call ``cudaMalloc`` inside the step
    (each call synchronizes the device), and fragmentation can make an allocation fail while
    enough memory is free in total.

How to fix
    Hold less: activation checkpointing (``torch.utils.checkpoint``) trades recompute for
    activation memory; mixed precision (``torch.autocast`` with bf16/fp16) halves activations;
    smaller micro-batches with gradient accumulation; FSDP/ZeRO to shard parameters, gradients and
    optimizer state; ``set_to_none=True`` on ``zero_grad``. Against fragmentation (reserved far
    above allocated): ``PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True``.

Example
    A trace on an 80 GB H100 whose allocator reserved 76 GB at its peak (72 GB allocated): 95 %
    of the device, with 40 ``cudaFree``/``cudaMalloc`` calls inside the steady steps costing
    12 ms; checkpointing the transformer blocks brings the peak back under 60 GB. In the corpus
    no GPU trace comes close: the fullest, mi300x_sglang_decode_graph_capture, reserved 152 GB of
    the MI300X's 206 GB (73.8 %); the CPU traces with memory events get the host peak as ``info``
    (mixed_stack: 78.4 MB allocated).

Thresholds
    Declared with their defaults, units and reasons in ``RULE.thresholds`` (``traceclass explain TC602``).
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

import numpy as np

from traceclass.analysis.locations import device_tag
from traceclass.analysis.memory import DEVICE_TYPE_LABEL, MemoryPeak, allocator_calls, memory_peaks
from traceclass.analysis.sites import duration_text, size_text
from traceclass.rule import Context, Evidence, Family, Finding, Need, RuleInfo, Threshold, plural

RULE = RuleInfo(code="TC602", name="memory-pressure", family=Family.MEMORY,
                summary="peak GPU memory (allocated/reserved) near the device's capacity; host peak as info",
                needs=(Need.MEMORY,),
                thresholds=(
                    Threshold('min_peak_pct', 90.0, '%',
                              "torch-tb-profiler's recommendation fires when peak memory exceeds 90 % of "
                              "``totalGlobalMem``: above it, the allocator's cache, the CUDA context and the workspaces "
                              'of cuBLAS/cuDNN/NCCL (not counted in the allocator totals) leave little room. Severity: '
                              "the allocator calls' time inside the steady steps against the analysed time, on the "
                              'shared scale, at least ``low`` (a full GPU is a risk even when it costs no time yet).'),
                ))

FIX = ("Hold less memory: activation checkpointing (torch.utils.checkpoint), mixed precision (torch.autocast bf16/fp16), "
       "smaller micro-batches with gradient accumulation, FSDP/ZeRO sharding; against fragmentation (reserved far above "
       "allocated) PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True.")


def check(ctx: Context, th: Mapping[str, Any]) -> Iterable[Finding]:
    peaks = memory_peaks(ctx.trace)
    gpus = [p for p in peaks if p.accelerator]
    devices = [p.device for p in gpus]
    for p in gpus:
        if not p.capacity_bytes:
            continue
        pct = 100.0 * p.peak_bytes / p.capacity_bytes
        if pct >= th["min_peak_pct"]:
            yield _gpu_finding(ctx, th, p, pct, device_tag(p.device, devices))
    for p in peaks:
        if not p.accelerator and p.peak_allocated_bytes > 0:
            yield _host_finding(p)


def _gpu_finding(ctx: Context, th: Mapping[str, Any], p: MemoryPeak, pct: float, tag: str) -> Finding:
    trace = ctx.trace
    api = trace.api
    calls = allocator_calls(trace)
    calls = calls[ctx.analysed.synthetic | ctx.analysed.holds(api.start_ns[calls])]
    call_ns = int((api.end_ns[calls] - api.start_ns[calls]).sum())
    severity = ctx.severity(call_ns)
    if severity == "info":
        severity = "low"
    label = DEVICE_TYPE_LABEL.get(p.device_type, f"device type {p.device_type}")
    res = p.peak_reserved_bytes
    frag = res - p.peak_allocated_bytes if res is not None else None
    message = (f"GPU {p.capacity_device} ({label} memory events of device {p.device}): peak "
               f"{size_text(p.peak_bytes)} of {size_text(p.capacity_bytes)}, {pct:.1f}% (threshold "
               f"{th['min_peak_pct']}%); allocated {size_text(p.peak_allocated_bytes)}"
               + (f", reserved {size_text(res)} ({size_text(frag)} held but not allocated at the peaks)"
                  if res is not None else ", reserved not recorded")
               + (f"; {plural(len(calls), 'allocator call')} inside {ctx.steps_word} took {duration_text(call_ns)}"
                  if len(calls) else f"; no allocator call inside {ctx.steps_word}"))
    evidence = [Evidence(what=f"peak allocated {size_text(p.peak_allocated_bytes)}", start_ns=p.peak_allocated_ns,
                         bytes=p.peak_allocated_bytes, values={"kind": "allocated"})]
    if res is not None:
        evidence.append(Evidence(what=f"peak reserved {size_text(res)}", start_ns=p.peak_reserved_ns, bytes=res,
                                 values={"kind": "reserved"}))
    if len(calls):
        names, inv = np.unique(api.name[calls], return_inverse=True)
        dur = api.end_ns[calls] - api.start_ns[calls]
        for k, code in enumerate(names.tolist()):
            m = inv.reshape(-1) == k
            evidence.append(Evidence(
                what=f"{trace.strings[int(code)]} x{int(m.sum())} inside {ctx.steps_word}",
                start_ns=int(api.start_ns[calls[m]].min()), end_ns=int(api.end_ns[calls[m]].max()),
                duration_ns=int(dur[m].sum()), count=int(m.sum()), values={"kind": "allocator calls"}))
    return Finding(
        severity=severity, message=message, recoverable_ns=call_ns,
        estimate=("host time of the cudaMalloc/cudaFree calls inside the steady steps (the caching allocator "
                  "releasing and re-allocating under pressure); the out-of-memory risk itself costs no time until "
                  "it fails, so the severity is at least low. Severity: share of the analysed time."),
        fix=FIX, location=f"GPU memory near capacity{tag}", evidence=tuple(evidence),
        values={"device_type": p.device_type, "memory_device": p.device, "device": p.capacity_device,
                "peak_bytes": p.peak_bytes, "peak_allocated_bytes": p.peak_allocated_bytes,
                "peak_reserved_bytes": res, "capacity_bytes": p.capacity_bytes, "peak_pct": round(pct, 2),
                "threshold_pct": th["min_peak_pct"], "allocator_calls_count": int(len(calls)),
                "allocator_call_ns": call_ns, "events_count": p.events},
    )


def _host_finding(p: MemoryPeak) -> Finding:
    return Finding(
        severity="info",
        message=(f"host (CPU) memory: peak {size_text(p.peak_allocated_bytes)} allocated by PyTorch's CPU allocator "
                 f"({plural(p.events, 'memory event')}); the trace does not give the host's memory size"),
        recoverable_ns=0, estimate="nothing to recover: the host peak is reported for reference",
        fix="Nothing to do unless the host runs short of memory: then fewer DataLoader workers or prefetched batches, "
            "or pinned buffers reused instead of reallocated.",
        location="host memory peak",
        evidence=(Evidence(what=f"peak allocated {size_text(p.peak_allocated_bytes)}", start_ns=p.peak_allocated_ns,
                           bytes=p.peak_allocated_bytes, values={"kind": "allocated"}),),
        values={"device_type": p.device_type, "peak_allocated_bytes": p.peak_allocated_bytes,
                "events_count": p.events},
    )
