"""Normalization layers: layer, RMS, batch and group norm, forward and backward.

FLOPs per input element (a transcendental or rsqrt per row/channel is negligible and dropped):

* normalize: mean (1), subtract (1), square and accumulate (2), scale by rstd (1) = 5;
  RMS norm skips the mean and subtract: 3;
* batch norm at inference uses the running stats: subtract and scale = 2;
* affine: +1 for the weight multiply, +1 for the bias add, each when the tensor is present;
* backward: grad_input 8 (rebuild x_hat 2, dy*w 1, two row sums 2, combine 3; RMS: 6),
  grad_weight 2 (dy*x_hat, column sum), grad_bias 1 (column sum), each per ``output_mask``.

Bytes: input, weight, bias, running stats (read, and written back when training) and output;
the saved mean/rstd the ``native_*`` ops return (one fp32 value per row, channel or group) are
written too. Backward reads dy, x, the saved stats and the weight, and writes the requested
gradients.
"""

from __future__ import annotations

import math

from traceclass.costmodel.args import Args, Tensor, compute_precision, nbytes
from traceclass.costmodel.cost import OpCost
from traceclass.costmodel.registry import register

_NORMALIZE = 5.0
_NORMALIZE_RMS = 3.0
_NORMALIZE_EVAL = 2.0
_GRAD_INPUT = 8.0
_GRAD_INPUT_RMS = 6.0
_GRAD_WEIGHT = 2.0
_GRAD_BIAS = 1.0


def _stats_dtype(x: Tensor) -> str:
    return compute_precision(x.dtype)


def _cost(x: Tensor, flops_per_elem: float, params: list[Tensor | None], stats: int, note: str = "",
          extra_bytes: float = 0.0) -> OpCost:
    present = [p for p in params if p is not None]
    flops = (flops_per_elem + len(present)) * x.numel
    moved = x.nbytes + sum(p.nbytes for p in present) + nbytes(x.numel, x.dtype)
    moved += nbytes(stats, _stats_dtype(x)) + extra_bytes
    return OpCost(flops, moved, compute_precision(x.dtype), "vector", "norm", note)


def _rows(args: Args, x: Tensor, shape_at: int, weight: Tensor | None) -> int | None:
    """Rows normalized independently: numel / prod(normalized_shape)."""
    shape = args.int_list(shape_at)
    if shape is None and weight is not None:
        shape = weight.shape
    if shape is None or len(shape) > x.ndim or tuple(x.shape[x.ndim - len(shape):]) != tuple(shape):
        return None
    inner = math.prod(shape)
    return x.numel // inner if inner else None


def _mask(args: Args, i: int, n: int, default: tuple[bool, ...]) -> tuple[tuple[bool, ...], str]:
    mask = args.bool_list(i)
    if mask is not None and len(mask) == n:
        return mask, ""
    return default, "output_mask not recorded: assumed every gradient whose input exists"


# --------------------------------------------------------------------------- layer norm / RMS norm


@register("norm", "aten::layer_norm", composite=True)
def _layer_norm(op: str, args: Args) -> OpCost | None:
    x, w, b = args.tensor(0), args.tensor(2), args.tensor(3)
    if x is None or _rows(args, x, 1, w) is None:
        return None
    return _cost(x, _NORMALIZE, [w, b], 0)


@register("norm", "aten::native_layer_norm")
def _native_layer_norm(op: str, args: Args) -> OpCost | None:
    x, w, b = args.tensor(0), args.tensor(2), args.tensor(3)
    if x is None:
        return None
    rows = _rows(args, x, 1, w)
    if rows is None:
        return None
    return _cost(x, _NORMALIZE, [w, b], 2 * rows)


@register("norm", "aten::rms_norm", composite=True)
def _rms_norm(op: str, args: Args) -> OpCost | None:
    x, w = args.tensor(0), args.tensor(2)
    if x is None or _rows(args, x, 1, w) is None:
        return None
    return _cost(x, _NORMALIZE_RMS, [w], 0)


@register("norm", "aten::_fused_rms_norm")
def _fused_rms_norm(op: str, args: Args) -> OpCost | None:
    x, w = args.tensor(0), args.tensor(2)
    if x is None:
        return None
    rows = _rows(args, x, 1, w)
    if rows is None:
        return None
    return _cost(x, _NORMALIZE_RMS, [w], rows)


def _backward(dy: Tensor, x: Tensor, w: Tensor | None, mask: tuple[bool, ...], stats_read: float,
              grad_input: float, bias_size: int | None, note: str) -> OpCost:
    flops = 0.0
    moved = dy.nbytes + x.nbytes + stats_read + (w.nbytes if w is not None else 0.0)
    if mask[0]:
        flops += grad_input * x.numel
        moved += nbytes(x.numel, x.dtype)
    if len(mask) > 1 and mask[1] and w is not None:
        flops += _GRAD_WEIGHT * x.numel
        moved += nbytes(w.numel, w.dtype)
    if len(mask) > 2 and mask[2] and bias_size:
        flops += _GRAD_BIAS * x.numel
        moved += nbytes(bias_size, w.dtype if w is not None else x.dtype)
    return OpCost(flops, moved, compute_precision(x.dtype), "vector", "norm", note)


@register("norm", "aten::native_layer_norm_backward")
def _native_layer_norm_backward(op: str, args: Args) -> OpCost | None:
    # (grad_out, input, normalized_shape, mean, rstd, weight, bias, output_mask)
    dy, x, mean, rstd, w, b = (args.tensor(i) for i in (0, 1, 3, 4, 5, 6))
    if dy is None or x is None or dy.shape != x.shape:
        return None
    mask, note = _mask(args, 7, 3, (True, w is not None, b is not None))
    stats = sum(t.nbytes for t in (mean, rstd) if t is not None)
    bias_size = b.numel if b is not None else (w.numel if w is not None else None)
    return _backward(dy, x, w, mask, stats, _GRAD_INPUT, bias_size, note)


@register("norm", "aten::_fused_rms_norm_backward")
def _fused_rms_norm_backward(op: str, args: Args) -> OpCost | None:
    # (grad_out, input, normalized_shape, rstd, weight, output_mask[2])
    dy, x, rstd, w = (args.tensor(i) for i in (0, 1, 3, 4))
    if dy is None or x is None or dy.shape != x.shape:
        return None
    mask, note = _mask(args, 5, 2, (True, w is not None))
    return _backward(dy, x, w, mask, rstd.nbytes if rstd is not None else 0.0, _GRAD_INPUT_RMS, None, note)


# --------------------------------------------------------------------------- batch norm


def _batch_norm(args: Args, training_at: int | None, saved_stats: bool) -> OpCost | None:
    """(input, weight, bias, running_mean, running_var, [training,] ...) forward ops."""
    x = args.tensor(0)
    if x is None or x.ndim < 2:
        return None
    w, b, rm, rv = (args.tensor(i) for i in (1, 2, 3, 4))
    channels = x.shape[1]
    if any(t is not None and t.numel != channels for t in (w, b, rm, rv)):
        return None
    note = ""
    training = args.bool_(training_at) if training_at is not None else False
    if training is None:
        training = True
        note = "training flag not recorded: assumed training (batch statistics)"
    running = [t for t in (rm, rv) if t is not None]
    # training reads and updates the running stats; inference only reads them
    extra = sum(t.nbytes for t in running) * (2 if training else 1)
    stats = 2 * channels if (training and saved_stats) else 0
    return _cost(x, _NORMALIZE if training else _NORMALIZE_EVAL, [w, b], stats, note, extra)


@register("norm", "aten::batch_norm", "aten::_batch_norm_impl_index", composite=True)
def _batch_norm_front(op: str, args: Args) -> OpCost | None:
    return _batch_norm(args, 5, saved_stats=False)


@register("norm", "aten::native_batch_norm", "aten::cudnn_batch_norm", "aten::miopen_batch_norm",
          "aten::_native_batch_norm_legit")
def _batch_norm_impl(op: str, args: Args) -> OpCost | None:
    if op == "aten::_native_batch_norm_legit" and not args.has_tensor(3) and len(args) <= 6:
        return _batch_norm_no_stats(args)
    return _batch_norm(args, 5, saved_stats=True)


def _batch_norm_no_stats(args: Args) -> OpCost | None:
    # _native_batch_norm_legit.no_stats(input, weight, bias, training, momentum, eps)
    x = args.tensor(0)
    if x is None or x.ndim < 2:
        return None
    w, b = args.tensor(1), args.tensor(2)
    return _cost(x, _NORMALIZE, [w, b], 2 * x.shape[1])


@register("norm", "aten::_native_batch_norm_legit_no_training")
def _batch_norm_eval(op: str, args: Args) -> OpCost | None:
    return _batch_norm(args, None, saved_stats=False)


@register("norm", "aten::native_batch_norm_backward")
def _native_batch_norm_backward(op: str, args: Args) -> OpCost | None:
    # (grad_out, input, weight, running_mean, running_var, save_mean, save_invstd, train, eps, output_mask)
    dy, x, w = args.tensor(0), args.tensor(1), args.tensor(2)
    if dy is None or x is None or dy.shape != x.shape or x.ndim < 2:
        return None
    mask, note = _mask(args, 9, 3, (True, w is not None, w is not None))
    stats = sum(t.nbytes for t in (args.tensor(i) for i in (3, 4, 5, 6)) if t is not None)
    return _backward(dy, x, w, mask, stats, _GRAD_INPUT, x.shape[1], note)


@register("norm", "aten::cudnn_batch_norm_backward", "aten::miopen_batch_norm_backward")
def _vendor_batch_norm_backward(op: str, args: Args) -> OpCost | None:
    # (input, grad_output, weight, running_mean, running_var, save_mean, save_var, epsilon[, reserve])
    x, dy, w = args.tensor(0), args.tensor(1), args.tensor(2)
    if dy is None or x is None or dy.shape != x.shape or x.ndim < 2:
        return None
    stats = sum(t.nbytes for t in (args.tensor(i) for i in (5, 6)) if t is not None)
    return _backward(dy, x, w, (True, True, True), stats, _GRAD_INPUT, x.shape[1], "")


# --------------------------------------------------------------------------- group norm


@register("norm", "aten::group_norm", composite=True)
def _group_norm(op: str, args: Args) -> OpCost | None:
    # group_norm(input, num_groups, weight, bias, eps, cudnn_enabled)
    x, w, b = args.tensor(0), args.tensor(2), args.tensor(3)
    groups = args.int_(1)
    if x is None or x.ndim < 2 or not groups or x.shape[1] % groups:
        return None
    return _cost(x, _NORMALIZE, [w, b], 0)


@register("norm", "aten::native_group_norm")
def _native_group_norm(op: str, args: Args) -> OpCost | None:
    # native_group_norm(input, weight, bias, N, C, HxW, group, eps) -> (out, mean[N, G], rstd[N, G])
    x, w, b = args.tensor(0), args.tensor(1), args.tensor(2)
    groups = args.int_(6)
    if x is None or x.ndim < 2 or not groups or x.shape[1] % groups:
        return None
    return _cost(x, _NORMALIZE, [w, b], 2 * x.shape[0] * groups)


@register("norm", "aten::native_group_norm_backward")
def _native_group_norm_backward(op: str, args: Args) -> OpCost | None:
    # (grad_out, input, mean, rstd, weight, N, C, HxW, group, output_mask)
    dy, x, mean, rstd, w = (args.tensor(i) for i in (0, 1, 2, 3, 4))
    if dy is None or x is None or dy.shape != x.shape or x.ndim < 2:
        return None
    mask, note = _mask(args, 9, 3, (True, w is not None, w is not None))
    stats = sum(t.nbytes for t in (mean, rstd) if t is not None)
    return _backward(dy, x, w, mask, stats, _GRAD_INPUT, x.shape[1], note)
