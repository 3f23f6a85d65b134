"""TC101 tensor-core-ineligible: matmuls and convolutions that miss the device's tensor cores.

What it finds
    GEMM and convolution op groups (same op, shapes, dtype) on a GPU with tensor/matrix cores, for
    two reasons, one finding per reason and device. (a) *fp32 off the fast path*: fp32 ops whose
    kernels do not use TF32/XF32 tensor cores (kernel names tell: ``ampere_sgemm_*``, ``*simt*``,
    ``scudnn``; ``tensorop_s1688``, ``tf32`` mean they do), on devices with a faster matrix path:
    TF32 (NVIDIA compute capability >= 8.0, MI300), else bf16 (CDNA2), else fp16 (Volta, Turing:
    fp16 tensor cores only, reached through AMP). (b) *misaligned shapes*: fp16/bf16/fp8/int8 ops
    whose leading dimensions (GEMM K and N; convolution input and output channels) are not
    multiples of ``align_bytes`` (8 elements at 2 bytes, 16 at 1 byte), or whose kernels are
    ``_align1``/``_align2`` CUTLASS tiles, estimated against the fraction of the roof that aligned
    groups reach in the trace, or without one the documented GEMM fraction (80 %). Without
    recorded shapes, (a) still fires from kernel names: ``volta_sgemm``/``ampere_sgemm``/
    ``simt_sgemm`` kernels are fp32 on CUDA cores (an upper bound: compute-bound assumed, bytes
    unknown). Ops inside an unfused attention pattern are left to TC102. Devices without matrix
    units (Pascal, CPUs) and devices without a hardware spec are not judged: there is no faster
    path to name, or no roof to measure it with. Steady-state op groups only (the op analysis
    leaves warm-up steps out). The location names the op with the most recoverable time.

Why it matters
    An A100 runs fp32 GEMMs at 19.5 TFLOP/s on CUDA cores and at 156 TFLOP/s with TF32; an MI300X
    runs fp32 at 163 and bf16 at 1307 TFLOP/s. Misaligned leading dimensions force slower kernels
    (unvectorized loads, padded tiles). TensorBoard's AMP rule only says "enable AMP" when no
    kernel at all uses tensor cores; this rule names each op, its shapes and the time at stake.

How to fix
    (a) ``torch.backends.cuda.matmul.allow_tf32 = True`` / ``torch.set_float32_matmul_precision
    ("high")`` and ``torch.backends.cudnn.allow_tf32 = True``; or ``torch.autocast("cuda",
    dtype=torch.bfloat16)`` (fp16 + ``GradScaler`` on Volta/Turing). (b) Pad the dimensions to a
    multiple of 8 (vocabulary size, hidden sizes, channels: pad a 3-channel image input to 4 or 8).

Example
    ``aten::mm [4096x4096] x [4096x4096]`` in fp32 on an A100 with TF32 off runs
    ``ampere_sgemm_128x64_nn`` for 10 ms; at the same fraction of the 156 TFLOP/s TF32 roof as of
    the 19.5 TFLOP/s fp32 one it takes 1.25 ms: 8.75 ms recoverable.

Thresholds
    Declared with their defaults, units and reasons in ``RULE.thresholds`` (``traceclass explain TC101``).
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

import numpy as np

from traceclass.analysis import tensor_cores as tc
from traceclass.analysis import unfused_attention as ua
from traceclass.analysis.locations import device_tag
from traceclass.analysis.sites import duration_text, op_source_codes, source_label
from traceclass.rule import Context, Evidence, Family, Finding, MAX_EVIDENCE, Need, RuleInfo, Threshold, plural

RULE = RuleInfo(code="TC101", name="tensor-core-ineligible", family=Family.COMPUTE,
                summary="fp32 or misaligned matmuls/convolutions that miss the GPU's tensor cores",
                needs=(Need.GPU,),  # without shapes, fp32 CUDA-core kernels are found by name
                thresholds=(
                    Threshold('min_recoverable_us', 100, 'us',
                              'a finding needs at least this much recoverable time in the trace: below 0.1 ms a '
                              'precision change is not worth its numerical risk.'),
                    Threshold('min_recoverable_pct', 1.0, '%',
                              '... and at least 1 % of the analysed time (wall time of the steady-state steps, the '
                              'whole trace without steps; what severity is measured against): a smaller gain is below '
                              'the spread between steady steps (0.4-2.3 % in the corpus training traces).'),
                    Threshold('align_bytes', 16, 'bytes',
                              "the alignment cuBLAS/cuDNN tensor-core kernels want for leading dimensions (NVIDIA's "
                              'Matrix Multiplication Performance Guide: multiples of 8 fp16 / 16 int8 elements, i.e. 16 '
                              'bytes).'),
                ))

_REASON = {tc.FP32: "fp32 matmuls/convolutions off the tensor cores",
           tc.MISALIGNED: "matmuls/convolutions with misaligned dimensions"}


def check(ctx: Context, th: Mapping[str, Any]) -> Iterable[Finding]:
    if len(ctx.trace.gpu) == 0:
        return  # CPU-only trace: no tensor cores to miss
    analysed = ctx.analysed_ns
    claimed = ua.claimed_groups(ctx.trace, ctx.analysis, ctx.unfused_attention)  # left to TC102
    found = tc.candidates(ctx.trace, ctx.analysis, th["align_bytes"], claimed)
    devices = sorted({dev for _, dev in found})
    for (reason, dev), items in sorted(found.items()):
        total = sum(i.recoverable_ns for i in items)
        pct = 100.0 * total / analysed if analysed > 0 else 0.0
        if total < th["min_recoverable_us"] * 1000 or pct < th["min_recoverable_pct"]:
            continue
        yield _finding(ctx, reason, dev, device_tag(dev, devices), items, total, pct, th)


def _finding(ctx: Context, reason: int, dev: int, tag: str, items: list[tc.Candidate], total: int, pct: float,
             th: Mapping[str, Any]) -> Finding:
    items = sorted(items, key=lambda i: (-i.recoverable_ns, i.label))
    time = sum(i.time_ns for i in items)
    spec = ctx.analysis.devices[dev].spec
    target = items[0].target
    reps = np.array([i.member for i in items[:MAX_EVIDENCE]], dtype=np.int64)
    sources_text = [source_label(ctx.trace, int(c)) for c in op_source_codes(ctx.trace, reps)]
    if reason == tc.FP32:
        what = (f"{plural(len(items), 'fp32 op group')} ran {duration_text(time)} off the tensor cores of "
                f"{spec.label if spec else f'device {dev}'} (target precision {target})")
        estimate = (f"per op group: its non-tensor-core time x (1 - lower bound at the {target} matrix roof / lower "
                    f"bound at the fp32 roof), i.e. the same fraction of the roof on the faster path; bytes halve "
                    f"for 16-bit targets. Severity: share of the analysed time.")
        fix = {"tf32": "Enable TF32: torch.set_float32_matmul_precision('high') (or torch.backends.cuda.matmul."
                       "allow_tf32 = True) and torch.backends.cudnn.allow_tf32 = True; or autocast to bf16.",
               "bf16": "Autocast to bf16: with torch.autocast('cuda', dtype=torch.bfloat16): ...",
               "fp16": "Use AMP: torch.autocast('cuda', dtype=torch.float16) with torch.cuda.amp.GradScaler "
                       "(this GPU has fp16 tensor cores, no TF32/bf16)."}[target]
    else:
        what = (f"{plural(len(items), 'op group')} ({duration_text(time)}) {'has' if len(items) == 1 else 'have'} "
                f"leading dimensions that are not multiples of "
                f"{th['align_bytes']} bytes")
        estimate = ("per op group: its time minus the time it would take at the fraction of the roof that aligned "
                    "ops of the same precision reach on this device in this trace (0 when there is none). "
                    "Severity: share of the analysed time.")
        fix = ("Pad the dimensions to multiples of 8 (fp16/bf16) or 16 (fp8/int8): vocabulary and hidden sizes, "
               "head dims, channel counts (pad a 3-channel input to 4 or 8 channels, with channels_last).")
    worst = items[0].name + (f" at {sources_text[0]}" if sources_text and sources_text[0] else "")
    msg = (f"GPU {dev}: {what}; {duration_text(total)} recoverable, {pct:.1f}% of the {duration_text(ctx.analysed_ns)} "
           f"analysed (threshold {th['min_recoverable_pct']}% and {th['min_recoverable_us']} us); worst: {worst}")
    evidence = tuple(Evidence(what=i.label, duration_ns=i.time_ns, count=i.count, ops=(i.name,), kernels=i.kernels,
                              bytes=int(i.values["bytes_per_call"] * i.count) if i.values.get("bytes_per_call")
                              else None, source=src, values=i.values)
                     for i, src in zip(items[:MAX_EVIDENCE], sources_text))
    return Finding(
        severity=ctx.severity(total), message=msg, recoverable_ns=total,
        estimate=estimate, fix=fix, location=f"{_REASON[reason]}: {worst}{tag}", evidence=evidence,
        values={"op_groups_count": len(items), "time_ns": time, "recoverable_ns": total, "analysed_ns": ctx.analysed_ns,
                "target_precision": target if reason == tc.FP32 else None,
                "tensor_core_kernel_pct": tc.tensor_core_share(ctx.trace, ctx.analysis, dev)})
