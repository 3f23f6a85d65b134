"""Elementwise ops: unary, binary and ternary, out-of-place and in-place (``_``), with broadcasting.

FLOPs are a constant per *output* element, 1 unless listed otherwise in ``_OPS`` (a
transcendental counts as one FLOP, as TraceLens and XLA count them). Deviations and why:
``sigmoid`` 3 (exp, add, divide), ``silu`` 4 (sigmoid, multiply), ``gelu`` 5 (erf form:
scale, erf, add, two multiplies; the tanh form would be ~9 but ``approximate`` is a string
argument the profiler does not record), ``addcmul``/``addcdiv``/``lerp`` 3, ``add``/``sub``
with ``alpha != 1`` 2, ``leaky_relu`` 2, backward activations as listed; ``fill_``/``zero_``
compute nothing.

Bytes: every tensor operand read once (broadcast, stride-0 dims once), the output written
once. In-place ops write their ``self``; ``fill_``/``zero_`` do not read it. The output dtype
follows torch's type promotion (dimensioned tensors over 0-d tensors over Python scalars),
comparisons give bool, and float-only functions of integer inputs give fp32.
"""

from __future__ import annotations

from typing import NamedTuple

from traceclass.costmodel.args import Args, Tensor, broadcast, compute_precision, nbytes, result_dtype, scalar_kind
from traceclass.costmodel.cost import OpCost
from traceclass.costmodel.registry import Estimator, register


class _Pw(NamedTuple):
    flops: float
    operands: tuple[int, ...]  # positions that may hold tensor operands
    out: str = "promote"  # "promote" | "float" (ints -> fp32) | "bool" | "self" (dtype of operand 0)
    promote_from: tuple[int, ...] | None = None  # operands that set the result type (default: all)
    scalars: tuple[int, ...] = ()  # Scalar positions that take part in type promotion
    reads_self: bool = True
    min_args: int = 1  # fewer recorded arguments means another overload (``where(condition)``)


_U = (0,)
_B = (0, 1)
_T = (0, 1, 2)

_OPS: dict[str, _Pw] = {
    # unary
    **{n: _Pw(1, _U) for n in ("abs", "neg", "negative", "relu", "sign", "sgn", "floor", "ceil", "round",
                               "trunc", "frac", "square", "bitwise_not", "nan_to_num", "hardtanh", "relu6",
                               "threshold", "positive")},
    **{n: _Pw(1, _U, "float") for n in ("reciprocal", "sqrt", "rsqrt", "exp", "exp2", "expm1", "log", "log2",
                                        "log10", "log1p", "sin", "cos", "tan", "tanh", "sinh", "cosh", "asin",
                                        "acos", "atan", "erf", "erfc", "erfinv")},
    **{n: _Pw(1, _U, "bool") for n in ("isnan", "isinf", "isneginf", "isposinf", "isfinite", "logical_not",
                                       "signbit")},
    "sigmoid": _Pw(3, _U, "float"),
    "silu": _Pw(4, _U, "float"),
    "gelu": _Pw(5, _U, "float"),
    "mish": _Pw(5, _U, "float"),
    "hardswish": _Pw(3, _U),
    "hardsigmoid": _Pw(3, _U),
    "leaky_relu": _Pw(2, _U),
    "elu": _Pw(3, _U, "float"),
    "softplus": _Pw(3, _U, "float"),
    "clamp": _Pw(1, _T, scalars=(1, 2)),
    "clip": _Pw(1, _T, scalars=(1, 2)),
    "clamp_min": _Pw(1, _B, scalars=(1,)),
    "clamp_max": _Pw(1, _B, scalars=(1,)),
    # binary
    **{n: _Pw(1, _B, scalars=(1,)) for n in ("mul", "multiply", "maximum", "minimum", "fmax", "fmin",
                                             "remainder", "fmod", "floor_divide", "bitwise_and", "bitwise_or",
                                             "bitwise_xor", "copysign")},
    **{n: _Pw(1, _B, "float", scalars=(1,)) for n in ("div", "divide", "true_divide", "atan2", "hypot", "pow",
                                                      "xlogy")},
    **{n: _Pw(1, _B, "bool") for n in ("eq", "ne", "lt", "le", "gt", "ge", "greater", "less", "greater_equal",
                                       "less_equal", "not_equal", "logical_and", "logical_or", "logical_xor")},
    "add": _Pw(1, _B, scalars=(1,)),  # alpha handled in _flops
    "sub": _Pw(1, _B, scalars=(1,)),
    "subtract": _Pw(1, _B, scalars=(1,)),
    "rsub": _Pw(1, _B, scalars=(1,)),
    # ternary
    "where": _Pw(1, _T, promote_from=(1, 2), scalars=(1, 2), min_args=3),
    "masked_fill": _Pw(1, _T, "self"),
    "lerp": _Pw(3, _T, promote_from=(0, 1)),
    "addcmul": _Pw(3, _T),
    "addcdiv": _Pw(3, _T, "float"),
    # backward of activations: (grad_output, input-or-output, ...)
    "threshold_backward": _Pw(1, _B),
    "hardtanh_backward": _Pw(1, _B),
    "leaky_relu_backward": _Pw(2, _B),
    "sigmoid_backward": _Pw(3, _B),  # dy * y * (1 - y)
    "tanh_backward": _Pw(3, _B),  # dy * (1 - y^2)
    "silu_backward": _Pw(7, _B),  # sigmoid (3), 1 + x * (1 - s) (3), times dy (1)
    "gelu_backward": _Pw(8, _B),  # Phi(x) + x * phi(x): erf, exp and 6 arithmetic ops
    # write-only
    "fill": _Pw(0, _B, "self", reads_self=False),
    "zero": _Pw(0, _U, "self", reads_self=False),
}

_IN_PLACE_ONLY = {"zero"}


def _alpha_flops(args: Args, base: str) -> float:
    if base in ("add", "sub", "subtract", "rsub"):
        alpha = args.float_(2)
        if alpha is not None and alpha != 1.0 and not args.has_tensor(2):
            return 1.0  # alpha * other before the add
    return 0.0


def _cost(args: Args, pw: _Pw, in_place: bool, base: str = "") -> OpCost | None:
    if len(args) < pw.min_args:
        return None
    tensors: dict[int, Tensor] = {i: t for i in pw.operands if (t := args.tensor(i)) is not None}
    self_t = tensors.get(0)
    if self_t is None:
        return None
    if in_place:
        out_shape = self_t.shape
        if broadcast([t.shape for t in tensors.values()]) != out_shape:
            return None
    else:
        shape = broadcast([t.shape for t in tensors.values()])
        if shape is None:
            return None
        out_shape = shape
    promote = [tensors[i] for i in (pw.promote_from or pw.operands) if i in tensors]
    kinds = [k for i in pw.scalars if i not in tensors and (k := scalar_kind(args.concrete(i)))]
    computed = result_dtype(promote, kinds) if promote else self_t.dtype
    if in_place or pw.out == "self":
        out_dtype = self_t.dtype
    elif pw.out == "bool":
        out_dtype = "bool"
    elif pw.out == "float" and computed in ("bool", "uint8", "int8", "int16", "int32", "int64"):
        out_dtype = computed = "fp32"
    else:
        out_dtype = computed
    out_numel = 1
    for d in out_shape:
        out_numel *= d
    reads = sum(t.nbytes for i, t in tensors.items() if i != 0 or pw.reads_self)
    moved = reads + nbytes(out_numel, out_dtype)
    flops = (pw.flops + _alpha_flops(args, base)) * out_numel
    note = ""
    if not in_place and any(t.shape != out_shape for t in tensors.values()):
        note = f"broadcast: output shape [{'x'.join(map(str, out_shape)) or 'scalar'}]"
    return OpCost(flops, moved, compute_precision(computed), "vector", "elementwise", note)


def binary_cost(args: Args, operands: tuple[int, ...]) -> OpCost | None:
    """An elementwise binary op over ``operands`` (used by reductions with a tensor ``other``)."""
    return _cost(args, _Pw(1, operands), in_place=False)


def _make(base: str, in_place: bool) -> Estimator:
    pw = _OPS[base]

    def estimate(op: str, args: Args) -> OpCost | None:
        return _cost(args, pw, in_place, base)

    return estimate


for _base in _OPS:
    if _base not in _IN_PLACE_ONLY:
        register("elementwise", f"aten::{_base}")(_make(_base, in_place=False))
    register("elementwise", f"aten::{_base}_")(_make(_base, in_place=True))
