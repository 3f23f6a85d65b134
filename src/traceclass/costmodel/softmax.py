"""Softmax and log-softmax, forward and backward.

FLOPs per element (transcendentals count as one, as everywhere in this package):

* softmax: row max, subtract, exp, row sum, divide = 5;
* log_softmax: row max, subtract, exp, row sum, subtract log-sum = 5 (the log is per row);
* softmax backward ``y * (dy - sum(dy * y))``: multiply, row sum, subtract, multiply = 4;
* log_softmax backward ``dy - exp(y) * sum(dy)``: row sum, exp, multiply, subtract = 4.

Bytes: input(s) read once, output written once (its dtype from ``dtype``/``half_to_float``).
"""

from __future__ import annotations

from traceclass.costmodel.args import Args, compute_precision, nbytes
from traceclass.costmodel.cost import OpCost
from traceclass.costmodel.registry import register

_FORWARD_FLOPS = 5.0
_BACKWARD_FLOPS = 4.0


def _forward_cost(args: Args, out_dtype: str | None) -> OpCost | None:
    x = args.tensor(0)
    if x is None:
        return None
    out = out_dtype or x.dtype
    return OpCost(_FORWARD_FLOPS * x.numel, x.nbytes + nbytes(x.numel, out), compute_precision(x.dtype),
                  "vector", "softmax")


@register("softmax", "aten::softmax", "aten::log_softmax", "aten::_safe_softmax", composite=True)
def _softmax(op: str, args: Args) -> OpCost | None:
    # softmax.int(self, dim, dtype=None): the optional dtype sets the output (and compute) type
    return _forward_cost(args, args.scalar_type(2) if not args.has_tensor(2) else None)


@register("softmax", "aten::_softmax", "aten::_log_softmax")
def _softmax_impl(op: str, args: Args) -> OpCost | None:
    # _softmax(self, dim, half_to_float): half inputs may produce an fp32 output
    return _forward_cost(args, "fp32" if args.bool_(2) else None)


@register("softmax", "aten::_softmax_backward_data", "aten::_log_softmax_backward_data")
def _softmax_backward(op: str, args: Args) -> OpCost | None:
    dy, y = args.tensor(0), args.tensor(1)
    if dy is None or y is None or dy.shape != y.shape:
        return None
    out = args.scalar_type(3) or dy.dtype  # input_dtype: the dtype of the forward input
    moved = dy.nbytes + y.nbytes + nbytes(dy.numel, out)
    return OpCost(_BACKWARD_FLOPS * dy.numel, moved, compute_precision(dy.dtype), "vector", "softmax")
