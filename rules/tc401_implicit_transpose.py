"""TC401 implicit-transpose: copies that only reorder memory, and layout-conversion kernels.

What it finds
    Three kinds of layout work, one finding per kind and device (``host`` for CPU-side copies):
    *transposing copies*: ``aten::contiguous`` / ``clone`` / ``copy_`` / ``to`` / ``_to_copy`` (and the
    ``reshape``/``flatten`` that call them) whose source and destination orders differ, judged from
    ``Input Strides`` (``analysis/layout.py``): ``permute().contiguous()``, ``transpose().reshape()``,
    NCHW <-> NHWC. Broadcast expansions and gathers of slices (same order) are not transposes.
    *memory-format mismatches*: convolutions whose input and weight (or grad) differ in memory
    format (channels_last weight, NCHW input): the conversion copies and layout kernels under them.
    *layout-conversion kernels*: library transposes (cuDNN ``nchwToNhwc``/``nhwcToNchw``, MIOpen
    ``batched_transpose_*``: kernel family ``layout``) launched outside the two cases above.
    Evidence per site: op (and the op that called it), shapes, the op before it when that was a
    permute/transpose, kernels, time (kernel-time union on GPU traces, op time on CPU traces),
    bytes and the user source line (backward ops borrow their forward op's line). The location
    names the worst site (its op chain and source line; its kernel when no op launched it).
    Sites are counted over the whole trace (``analysis/layout_sites`` does not split by step),
    while the share is of the steady steps' time: with warm-up or work outside the steps the share
    is overstated (corpus mi300x_resnet_act_checkpoint_train: 5.64 ms of layout kernels in the
    trace, 3.02 ms of them launched in the two steady steps).

Why it matters
    A transposing copy reads and writes the whole tensor to change nothing but its layout; often
    the consumer could take the strided view (matmul/bmm take transposed operands) or the data
    could be produced in the right layout. XProf flags the same pattern on TPUs (implicit
    transposes, layout-mismatch copies); on GPUs cuDNN/MIOpen add conversion kernels around every
    convolution whose tensors are not in the layout of their fast kernels.

How to fix
    Drop ``.contiguous()`` after ``permute``/``transpose`` when the consumer accepts strides; keep
    one memory format end to end (``model.to(memory_format=torch.channels_last)`` AND channels_last
    inputs, converted once outside the step); for convolutions in fp16/bf16 prefer channels_last.

Example
    ``x.permute(0, 2, 1).contiguous()`` on a ``[16, 64, 128]`` tensor followed by a matmul: an
    ``aten::contiguous`` copy of 512 KiB (input strides ``(8192, 1, 128)``) in every step; passing
    the permuted view to ``torch.matmul`` removes it.

Thresholds
    Declared with their defaults, units and reasons in ``RULE.thresholds`` (``traceclass explain TC401``).
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from traceclass import units
from traceclass.analysis.layout_sites import KERNELS, MISMATCH, TRANSPOSE, LayoutSite, layout_sites
from traceclass.analysis.locations import device_tag
from traceclass.analysis.sites import duration_text, size_text
from traceclass.rule import Context, Evidence, Family, Finding, MAX_EVIDENCE, Need, RuleInfo, Threshold, plural

RULE = RuleInfo(code="TC401", name="implicit-transpose", family=Family.LAYOUT,
                summary="copies that only reorder memory (permute+copy, NCHW<->NHWC) and layout-conversion kernels",
                needs=((Need.GPU, Need.SHAPES),),
                thresholds=(
                    Threshold('min_total_us', 50, 'us',
                              'each kind is then listed when it takes at least this long in the trace (about ten small '
                              'copy kernels), so that a negligible kind does not get a finding of its own.'),
                    Threshold('min_share_pct', 0.5, '%',
                              "a device's layout work is reported when all of it together (the three kinds) takes at "
                              'least this share of the analysed time (the wall time of the steady-state steps, the '
                              'whole trace without steps; what severity is measured against, on every device and on the '
                              "host). The kinds share one cause, the tensors' layouts, and often one fix, so they are "
                              'judged together. Layout work is pure overhead with one-line fixes, so it is reported '
                              'from the smallest spread between steady steps seen in the corpus training traces (0.4 '
                              '%).'),
                ))

_KIND = {TRANSPOSE: "transposing copies", MISMATCH: "memory-format mismatches", KERNELS: "layout-conversion kernels"}
_ONE = {TRANSPOSE: "transposing copy", MISMATCH: "memory-format mismatch", KERNELS: "layout-conversion kernel"}
_FIX = {
    TRANSPOSE: "Drop .contiguous()/.reshape() copies after permute/transpose when the consumer accepts strided "
               "input (matmul/bmm/linear take transposed operands), or produce the tensor in the layout the "
               "consumer needs; keep one memory format end to end.",
    MISMATCH: "Give each convolution one memory format: convert the model AND its inputs to channels_last "
              "(model.to(memory_format=torch.channels_last); x.to(memory_format=torch.channels_last) once, "
              "outside the step), or neither.",
    KERNELS: "The library converts layouts around each call: run the model in the layout of its fast kernels "
             "(channels_last for cuDNN/MIOpen fp16/bf16 convolutions: model.to(memory_format=torch.channels_last) "
             "and channels_last inputs).",
}


def check(ctx: Context, th: Mapping[str, Any]) -> Iterable[Finding]:
    found = layout_sites(ctx.trace, ctx.analysis.gpu_family_code)
    analysed = ctx.analysed_ns
    per_device: dict[int, int] = {}
    for (_, dev), group in found.items():
        per_device[dev] = per_device.get(dev, 0) + sum(s.time_ns for s in group)
    devices = sorted(d for d in per_device if d >= 0)
    for (kind, dev), group in sorted(found.items()):
        total = sum(s.time_ns for s in group)
        device_share = 100.0 * per_device[dev] / analysed if analysed > 0 else 0.0
        if total < th["min_total_us"] * 1000 or device_share < th["min_share_pct"]:
            continue
        yield _finding(ctx, kind, dev, device_tag(dev, devices) if dev >= 0 else "", group, total, device_share, th)


def _identity(s: LayoutSite) -> str:
    """A site as it stays from run to run: op chain (else kernel) and source line, no shapes or counts."""
    what = " > ".join(s.ops) if s.ops else (s.kernels[0] if s.kernels else s.label)
    return what + (f" at {s.source}" if s.source else "")


def _what(s: LayoutSite) -> str:
    """The site in a few words for the opportunity's lead line: the kernel, else the innermost op."""
    if s.kind == KERNELS and s.kernels:
        return s.kernels[0]
    return s.ops[-1] if s.ops else s.label


def _finding(ctx: Context, kind: int, dev: int, tag: str, group: list[LayoutSite], total: int,
             device_share: float, th: Mapping[str, Any]) -> Finding:
    group = sorted(group, key=lambda s: (-s.time_ns, s.label))
    analysed = ctx.analysed_ns
    where = f"GPU {dev}" if dev >= 0 else "host"
    count = sum(s.count for s in group)
    known = [s.bytes for s in group if s.bytes is not None]
    worst = group[0]
    share = 100.0 * total / analysed if analysed > 0 else 0.0
    msg = (f"{where}: {plural(count, _ONE[kind], _KIND[kind])} at {plural(len(group), 'site')} took {duration_text(total)} ({units.pct(share, 1)} "
           f"of the {duration_text(analysed)} analysed; all layout work {units.pct(device_share, 1)}, threshold "
           f"{th['min_share_pct']}%; this kind threshold {units.duration(th['min_total_us'] * 1000)})"
           f"{', ' + size_text(sum(known)) + ' moved' if known else ''}; worst: {worst.label}"
           f"{' at ' + worst.source if worst.source else ''}")
    time_basis = "their kernels' time (union per call)" if dev >= 0 else "their inclusive op time"
    evidence = tuple(Evidence(what=s.label, start_ns=s.first_ns, end_ns=s.last_end_ns, duration_ns=s.time_ns,
                              count=s.count, bytes=s.bytes, ops=s.ops, kernels=s.kernels, source=s.source,
                              values=_values(s)) for s in group[:MAX_EVIDENCE])
    return Finding(
        title=f"Avoid {_KIND[kind]} ({_what(worst)})",
        severity=ctx.severity(total), message=msg, recoverable_ns=total,
        estimate=f"the layout work's full time ({time_basis}) over the whole trace; an upper bound: removing a "
                 f"copy saves it, but the consumer may read a strided input somewhat slower. Severity: share of "
                 f"the analysed time.",
        fix=_FIX[kind], location=f"{'host ' if dev < 0 else ''}{_KIND[kind]}: {_identity(worst)}{tag}",
        evidence=evidence,
        values={"sites_count": len(group), "calls_count": count, "time_ns": total, "analysed_ns": analysed,
                "share_pct": round(share, 3), "bytes": sum(known) if known else None})


def _values(s: LayoutSite) -> dict[str, Any]:
    out: dict[str, Any] = {"mean_ns": s.time_ns // max(s.count, 1)}
    if s.strides:
        out["input_strides"] = s.strides
    if s.after:
        out["after_op"] = s.after
    if s.formats:
        out["formats"] = s.formats
    return out
