"""Reductions and scans: sum, mean, max, min, amax, amin, arg*, all, any, prod, norm, var,
std, logsumexp, cumsum, cumprod.

FLOPs per *input* element: 1 for sum/mean/prod/max/min/arg*/all/any and the scans; 2 for a
vector 2-norm (square, add); 3 for var/std (Welford: subtract, multiply, add); 4 for
logsumexp (max, subtract, exp, add). Bytes: input read once, output written once (max/min
along a dim also write int64 indices).

The output size needs the reduced dims, read from Concrete Inputs. Overloads without a ``dim``
argument (``sum(self)``) reduce everything. When ``dim`` was not recorded (older traces) the
op gets no model: the output could be anything from one element to half the input.
"""

from __future__ import annotations

import math
from typing import NamedTuple

from traceclass.costmodel.args import Args, Tensor, compute_precision, nbytes
from traceclass.costmodel.cost import OpCost
from traceclass.costmodel.registry import register


class _Red(NamedTuple):
    flops: float
    dim_at: int  # position of ``dim``
    full_upto: int  # overloads with at most this many inputs reduce everything
    dtype_at: int | None  # position of an optional output ``dtype``
    out: str  # "same", "index" (int64), "bool", "sum" (ints widen to int64), "pair" (values+indices)


_OPS = {
    "aten::sum": _Red(1, 1, 2, 3, "sum"),
    "aten::mean": _Red(1, 1, 2, 3, "same"),
    "aten::prod": _Red(1, 1, 2, 3, "sum"),
    "aten::amax": _Red(1, 1, 1, None, "same"),
    "aten::amin": _Red(1, 1, 1, None, "same"),
    "aten::max": _Red(1, 1, 1, None, "pair"),
    "aten::min": _Red(1, 1, 1, None, "pair"),
    "aten::argmax": _Red(1, 1, 1, None, "index"),
    "aten::argmin": _Red(1, 1, 1, None, "index"),
    "aten::all": _Red(1, 1, 1, None, "bool"),
    "aten::any": _Red(1, 1, 1, None, "bool"),
    "aten::logsumexp": _Red(4, 1, 1, None, "same"),
    "aten::var": _Red(3, 1, 2, None, "same"),
    "aten::std": _Red(3, 1, 2, None, "same"),
    "aten::var_mean": _Red(3, 1, 2, None, "pair_same"),
    "aten::std_mean": _Red(3, 1, 2, None, "pair_same"),
    # norm(self, p) and norm(self, p, dtype) reduce everything; norm(self, p, dim, keepdim[, dtype])
    "aten::norm": _Red(2, 2, 3, None, "same"),
    "aten::linalg_vector_norm": _Red(2, 2, 1, 4, "same"),
}

_SCANS = {"aten::cumsum": 2, "aten::cumprod": 2}  # name -> position of dtype


def _reduced_numel(args: Args, x: Tensor, red: _Red) -> int | None:
    """Elements of the output, or None when the reduced dims are not known."""
    if len(args) <= red.full_upto or x.ndim <= 1:
        return 1  # no dim argument, or nothing but everything to reduce
    text = args.concrete(red.dim_at)
    if text is None:
        return None  # trace without Concrete Inputs
    if text == "":
        # dim=None reduces everything; a list that was not recorded is unknown
        return 1 if args.type_str(red.dim_at) == "" else None
    dims = args.int_list(red.dim_at)
    if dims is None:
        return None
    if not dims:
        return 1  # dim=[] reduces everything (amax/amin/sum.dim_IntList)
    if x.ndim == 0:
        return 1 if all(d in (0, -1) for d in dims) else None
    axes = {d % x.ndim for d in dims if -x.ndim <= d < x.ndim}
    if len(axes) != len(set(dims)):
        return None
    kept = [s for i, s in enumerate(x.shape) if i not in axes]
    return math.prod(kept)


def _out_dtype(x: Tensor, kind: str, explicit: str | None) -> str:
    if explicit:
        return explicit
    if kind == "index":
        return "int64"
    if kind == "bool":
        return "uint8" if x.dtype == "uint8" else "bool"
    if kind == "sum" and x.dtype in ("bool", "uint8", "int8", "int16", "int32"):
        return "int64"
    return x.dtype


@register("reduction", *_OPS)
def _reduction(op: str, args: Args) -> OpCost | None:
    x = args.tensor(0)
    if x is None:
        return None
    red = _OPS[op]
    if red.out == "pair" and args.has_tensor(1):
        from traceclass.costmodel.pointwise import binary_cost  # max(self, other) is elementwise

        return binary_cost(args, (0, 1))
    out_numel = _reduced_numel(args, x, red)
    if out_numel is None:
        return None
    explicit = args.scalar_type(red.dtype_at) if red.dtype_at is not None and not args.has_tensor(red.dtype_at) else None
    out_dtype = _out_dtype(x, red.out, explicit)
    moved = x.nbytes + nbytes(out_numel, out_dtype)
    if red.out == "pair" and len(args) > red.full_upto:
        moved += nbytes(out_numel, "int64")  # indices of max/min along a dim
    elif red.out == "pair_same":
        moved += nbytes(out_numel, out_dtype)  # var_mean/std_mean return two tensors
    return OpCost(red.flops * x.numel, moved, compute_precision(x.dtype), "vector", "reduction")


@register("reduction", *_SCANS)
def _scan(op: str, args: Args) -> OpCost | None:
    x = args.tensor(0)
    if x is None:
        return None
    dtype_at = _SCANS[op]
    explicit = args.scalar_type(dtype_at) if not args.has_tensor(dtype_at) else None
    out_dtype = _out_dtype(x, "sum", explicit)
    return OpCost(float(x.numel), x.nbytes + nbytes(x.numel, out_dtype), compute_precision(x.dtype), "vector",
                  "reduction")
