"""Data movement without arithmetic: copies, dtype conversions, gathers (embedding lookups).

Copies cost no FLOPs (``precision`` is then just the data dtype: no compute peak applies); bytes are the source read once plus the destination written once, in
the destination dtype (a bf16 -> fp32 conversion writes twice what it reads). ``contiguous``
and ``to`` are no-ops when nothing changes; they are modelled as such when the trace shows
it (strides / target dtype recorded), and left unmodelled when it cannot be told.

Embedding and ``index_select`` read only the gathered rows (plus the indices) and write them:
``numel(indices) * row`` elements, not the whole table. ``embedding_dense_backward`` adds each
gradient row into a zeroed ``num_weights x dim`` table: one add per gradient element.
"""

from __future__ import annotations

import math

from traceclass.costmodel.args import Args, Tensor, compute_precision, nbytes
from traceclass.costmodel.cost import OpCost
from traceclass.costmodel.registry import register


def _copy(src: Tensor, dst_numel: int, dst_dtype: str, note: str = "") -> OpCost:
    if dst_dtype != src.dtype and not note:
        note = f"dtype conversion {src.dtype} -> {dst_dtype}"
    return OpCost(0.0, src.nbytes + nbytes(dst_numel, dst_dtype), src.dtype, "vector", "copy", note)


@register("copy", "aten::copy_")
def _copy_(op: str, args: Args) -> OpCost | None:
    dst, src = args.tensor(0), args.tensor(1)
    if dst is None or src is None:
        return None
    return _copy(src, dst.numel, dst.dtype)


@register("copy", "aten::clone", composite=True)
def _clone(op: str, args: Args) -> OpCost | None:
    x = args.tensor(0)
    return None if x is None else _copy(x, x.numel, x.dtype)


def _is_contiguous(t: Tensor, channels_last: bool) -> bool | None:
    if t.strides is None:
        return None
    shape, strides = t.shape, t.strides
    order = list(range(t.ndim))
    if channels_last:
        if t.ndim not in (4, 5):
            return False
        order = [0] + list(range(2, t.ndim)) + [1]  # N, spatial..., C from slowest to fastest
    expected = 1
    for i in reversed(order):
        if shape[i] != 1 and strides[i] != expected:
            return False
        expected *= shape[i]
    return True


@register("copy", "aten::contiguous", composite=True)
def _contiguous(op: str, args: Args) -> OpCost | None:
    x = args.tensor(0)
    if x is None:
        return None
    fmt = args.int_(1)  # MemoryFormat: 0 contiguous, 2 channels_last, 3 channels_last_3d
    already = _is_contiguous(x, channels_last=fmt in (2, 3)) if fmt in (None, 0, 2, 3) else None
    if already:
        return OpCost(0.0, 0.0, x.dtype, "vector", "copy", "already contiguous: no copy")
    if already is None:
        return _copy(x, x.numel, x.dtype, "strides not recorded: assumed a copy (no-op if already contiguous)")
    return _copy(x, x.numel, x.dtype)


@register("copy", "aten::_to_copy", composite=True)
def _to_copy(op: str, args: Args) -> OpCost | None:
    # _to_copy(self, dtype, layout, device, pin_memory, non_blocking, memory_format)
    x = args.tensor(0)
    if x is None:
        return None
    if args.concrete(1) is None:
        return _copy(x, x.numel, x.dtype, "target dtype not recorded: assumed unchanged")
    return _copy(x, x.numel, args.scalar_type(1) or x.dtype)


@register("copy", "aten::to", composite=True)
def _to(op: str, args: Args) -> OpCost | None:
    """``to`` copies only when something changes; unknown device changes leave it unmodelled."""
    x = args.tensor(0)
    if x is None or not args.has_concrete:
        return None
    if args.has_tensor(1):  # to.other(self, other, non_blocking, copy, memory_format)
        target, copy_at, device_arg = args.tensor(1).dtype, 3, True  # type: ignore[union-attr]
    elif len(args) == 5:  # to.dtype(self, dtype, non_blocking, copy, memory_format)
        target, copy_at, device_arg = args.scalar_type(1), 3, False
    elif len(args) == 6:  # to.device(self, device, dtype, non_blocking, copy, memory_format)
        target, copy_at, device_arg = args.scalar_type(2), 4, True
    elif len(args) == 8:  # to.dtype_layout(self, dtype, layout, device, pin_memory, non_blocking, copy, fmt)
        target, copy_at, device_arg = args.scalar_type(1), 6, True
    else:
        return None
    if target is None:
        if device_arg:
            return None
        target = x.dtype
    if target != x.dtype or args.bool_(copy_at):
        return _copy(x, x.numel, target)
    if device_arg:
        return None  # same dtype: a copy only if the device changes, which is not recorded
    return OpCost(0.0, 0.0, x.dtype, "vector", "copy", "no-op: dtype unchanged")


# --------------------------------------------------------------------------- gathers


def _gather(table: Tensor, index: Tensor, rows: int, row_elems: int, note: str = "") -> OpCost:
    gathered = nbytes(rows * row_elems, table.dtype)
    return OpCost(0.0, gathered + index.nbytes + gathered, table.dtype, "vector", "embedding", note)


@register("embedding", "aten::embedding", composite=True)
def _embedding(op: str, args: Args) -> OpCost | None:
    w, idx = args.tensor(0), args.tensor(1)
    if w is None or idx is None or w.ndim != 2 or idx.dtype not in ("int64", "int32"):
        return None
    return _gather(w, idx, idx.numel, w.shape[1])


@register("embedding", "aten::index_select")
def _index_select(op: str, args: Args) -> OpCost | None:
    x, idx = args.tensor(0), args.tensor(2)
    dim = args.int_(1)
    if x is not None and x.ndim <= 1 and dim is None:
        dim = 0  # the only dim there is
    if x is None or idx is None or dim is None or idx.ndim > 1:
        return None
    if x.ndim == 0:
        return _gather(x, idx, idx.numel, 1)
    if not -x.ndim <= dim < x.ndim:
        return None
    dim %= x.ndim
    outer = math.prod(x.shape[:dim])
    inner = math.prod(x.shape[dim + 1:])
    return _gather(x, idx, outer * idx.numel, inner)


@register("embedding", "aten::embedding_dense_backward")
def _embedding_backward(op: str, args: Args) -> OpCost | None:
    # (grad_output, indices, num_weights, padding_idx, scale_grad_by_freq)
    g, idx = args.tensor(0), args.tensor(1)
    num_weights = args.int_(2)
    if g is None or idx is None or not num_weights or g.ndim < 1:
        return None
    dim = g.shape[-1]
    moved = g.nbytes + idx.nbytes + nbytes(num_weights * dim, g.dtype)
    return OpCost(float(g.numel), moved, compute_precision(g.dtype), "vector", "embedding")
