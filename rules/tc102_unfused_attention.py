"""TC102 unfused-attention: attention written as matmul -> softmax -> matmul over an S x S matrix.

What it finds
    Eager attention: a softmax over an ``S x S`` score tensor (last two dims equal, at least
    ``min_seq_count``) with a matmul (``aten::bmm``/``matmul``/``baddbmm``) among the ``window_count``
    ops before it and one after it on the same thread, scaling, masking and dropout ops in
    between (forward); ``aten::_softmax_backward_data`` over ``S x S`` between the matmuls of
    the backward pass (backward). One finding per direction (forward, backward) and device;
    evidence per shape with the source ``file:line`` when the trace has Python stacks.

Why it matters
    The unfused form writes and reads the ``B x H x S x S`` score matrix to device memory
    several times (scores, scaled, softmax, dropout), so it is memory-bound and quadratic in
    memory; fused attention (``torch.nn.functional.scaled_dot_product_attention``: FlashAttention,
    memory-efficient or cuDNN kernels) keeps the tiles on chip and runs near the matrix roof.
    In the corpus video transformer (H100, S = 3,137) the pattern holds 81 % of GPU time.

How to fix
    Replace ``softmax(q @ k.transpose(-2, -1) * scale + mask) @ v`` with
    ``torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask,
    dropout_p=p, is_causal=...)`` (Hugging Face models: ``attn_implementation="sdpa"`` or
    ``"flash_attention_2"``). fp32 inputs take the memory-efficient kernel; bf16/fp16 the flash one.

Example
    ``aten::bmm [96x3137x64] x [96x64x3137] -> aten::mul -> aten::_softmax [8x12x3137x3137] ->
    aten::bmm`` in bf16 on an H100: 10.7 ms per layer; fused flash attention for
    Q, K, V of ``[96, 3137, 64]`` (242 GFLOP) at 75 % of the 989 TFLOP/s bf16 roof takes
    0.33 ms: 10.4 ms recoverable per layer.

Thresholds
    Declared with their defaults, units and reasons in ``RULE.thresholds`` (``traceclass explain TC102``).
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

import numpy as np

from traceclass.analysis import unfused_attention as ua
from traceclass.analysis.achievable import DOCUMENTED
from traceclass.analysis.locations import device_tag
from traceclass.analysis.sites import duration_text, op_source_codes, source_label
from traceclass.rule import Context, Evidence, Family, Finding, Need, RuleInfo, Threshold, plural

RULE = RuleInfo(code="TC102", name="unfused-attention", family=Family.COMPUTE,
                summary="eager attention (matmul -> softmax -> matmul over S x S) instead of fused SDPA",
                needs=(Need.OPS, Need.SHAPES),
                thresholds=(
                    Threshold("min_seq_count", 128, "count",
                              "below 128 the score matrix of a head fits on chip and the fused kernel's gain is "
                              "small next to launch costs."),
                    Threshold("window_count", 4, "count",
                              "ops allowed between a matmul and the softmax (scale, mask, dropout, a dtype copy)."),
                    Threshold("min_recoverable_us", 100, "us",
                              "a finding needs at least this much recoverable time (the floor of TC101: below "
                              "0.1 ms the change is within the spread between steady steps)."),
                    Threshold("min_recoverable_pct", 1.0, "%",
                              "... and at least this share of the analysed time (the same floor as TC101)."),
                ))

MAX_EVIDENCE = 20


def check(ctx: Context, th: Mapping[str, Any]) -> Iterable[Finding]:
    seq, window = int(th["min_seq_count"]), int(th["window_count"])
    found = (ctx.unfused_attention if (seq, window) == (ua.MIN_SEQ, ua.WINDOW)
             else ua.find(ctx.trace, ctx.analysis, seq, window))
    by: dict[tuple[bool, int], list[ua.Instance]] = {}
    for i in found:
        by.setdefault((i.backward, i.device), []).append(i)
    devices = sorted({d for _, d in by})
    for (backward, dev), items in sorted(by.items()):
        rec = int(sum(max(0.0, i.time_ns - i.projected_ns) for i in items if i.projected_ns == i.projected_ns))
        pct = 100.0 * rec / ctx.analysed_ns if ctx.analysed_ns > 0 else 0.0
        if rec < th["min_recoverable_us"] * 1000 or pct < th["min_recoverable_pct"]:
            continue
        yield _finding(ctx, backward, dev, device_tag(dev, devices), items, rec, pct, th)


def _finding(ctx: Context, backward: bool, dev: int, tag: str, items: list[ua.Instance], rec: int, pct: float,
             th: Mapping[str, Any]) -> Finding:
    trace = ctx.trace
    shapes: dict[tuple[int, int, int, str], list[ua.Instance]] = {}
    for i in items:
        shapes.setdefault((i.bh, i.seq, i.head_dim, i.precision), []).append(i)
    ordered = sorted(shapes.items(), key=lambda kv: -sum(i.time_ns for i in kv[1]))[:MAX_EVIDENCE]
    reps = np.array([v[0].softmax_row for _, v in ordered], dtype=np.int64)
    sources = [source_label(trace, int(c)) for c in op_source_codes(trace, reps)]
    time = sum(i.time_ns for i in items)
    direction = "backward" if backward else "forward"
    evidence = []
    for ((bh, seq, d, prec), inst), src in zip(ordered, sources):
        t = sum(i.time_ns for i in inst)
        proj = sum(i.projected_ns for i in inst)
        names = list(dict.fromkeys(trace.strings[int(trace.ops.name[r])] for r in inst[0].rows))
        evidence.append(Evidence(
            what=f"{direction} attention, {bh} batch x heads, S = {seq}, D = {d}, {prec}: "
                 f"{' -> '.join(names)} ({plural(len(inst), 'instance')})",
            duration_ns=t, count=len(inst), ops=tuple(names), source=src,
            values={"seq": seq, "head_dim": d, "batch_heads": bh, "time_ns": t, "projected_fused_ns": round(proj),
                    "fused_flops_per_instance": inst[0].flops, "fused_bytes_per_instance": inst[0].bytes,
                    "recoverable_ns": int(max(0.0, t - proj))}))
    (bh, seq, d, prec), _ = ordered[0]
    worst = f"S = {seq}, D = {d}" + (f" at {sources[0]}" if sources and sources[0] else "")
    proj_total = sum(i.projected_ns for i in items)
    msg = (f"GPU {dev}: {plural(len(items), f'unfused {direction} attention')} took {duration_text(time)}; fused "
           f"attention would take about {duration_text(proj_total)}: {duration_text(rec)} recoverable, "
           f"{pct:.1f}% of the {duration_text(ctx.analysed_ns)} analysed (threshold {th['min_recoverable_pct']}% "
           f"and {th['min_recoverable_us']} us); worst: {worst}")
    estimate = (f"per instance: time of the ops from the first matmul to the last minus the flash-attention cost "
                f"model's FLOPs and bytes (Q, K, V of [B*H, S, D], full score matrix) at "
                f"{100 * DOCUMENTED['attention'].fraction:.0f}% of the matrix roof and "
                f"{100 * DOCUMENTED['memory'].fraction:.0f}% of the memory bandwidth ({DOCUMENTED['attention'].source}). "
                "Severity: share of the analysed time.")
    fix = ("Use torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=..., dropout_p=..., "
           "is_causal=...) instead of softmax(q @ k.transpose(-2, -1) * scale) @ v; Hugging Face models: "
           "attn_implementation='sdpa'.")
    return Finding(
        severity=ctx.severity(rec), message=msg, recoverable_ns=rec,
        estimate=estimate, fix=fix, location=f"unfused {direction} attention: S = {seq}, D = {d}{tag}",
        evidence=tuple(evidence),
        values={"instances_count": len(items), "time_ns": time, "projected_fused_ns": round(proj_total),
                "recoverable_ns": rec, "analysed_ns": ctx.analysed_ns})
