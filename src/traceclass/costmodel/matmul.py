"""GEMM family: mm, addmm, bmm, baddbmm, matmul, linear, _scaled_mm, _int_mm, mv, dot, addmv.

FLOPs are ``2*M*N*K`` per product, the count ``torch.utils.flop_counter`` uses. A bias or
``self`` term (addmm, baddbmm, addmv, linear with bias, _scaled_mm with bias) adds one FLOP
per output element, as TraceLens counts it; FlopCounterMode does not, so for those ops
``ours == torch + M*N`` (asserted in tests). ``alpha``/``beta`` scaling happens in the GEMM
epilogue and is not counted; a recorded ``beta == 0`` drops the bias read and add.

Bytes: both operands, the bias as recorded (a broadcast bias is read once), and the output in
the operands' dtype (or the recorded ``out_dtype``). Precision is the first operand's dtype on
the matrix unit; an fp32 GEMM is reported as fp32 and callers choose whether TF32 applies.
"""

from __future__ import annotations

import math

from traceclass.costmodel.args import Args, Tensor, broadcast, nbytes
from traceclass.costmodel.cost import OpCost
from traceclass.costmodel.registry import register


def _cost(a: Tensor, b: Tensor, batch: int, m: int, n: int, k: int, *, bias: Tensor | None = None,
          out_dtype: str | None = None, extra: float = 0.0, note: str = "") -> OpCost:
    out_numel = batch * m * n
    flops = 2.0 * batch * m * n * k + (out_numel if bias is not None else 0)
    moved = a.nbytes + b.nbytes + (bias.nbytes if bias is not None else 0.0) + extra
    moved += nbytes(out_numel, out_dtype or a.dtype)
    return OpCost(flops=flops, bytes=moved, precision=a.dtype, unit="matrix", family="gemm", note=note)


def _bias(args: Args, i: int, beta_at: int, out_shape: tuple[int, ...]) -> Tensor | None:
    """The added tensor at ``i`` unless absent or scaled by a recorded beta of 0."""
    t = args.tensor(i)
    if t is None:
        return None
    if args.float_(beta_at) == 0.0:
        return None
    if broadcast([t.shape, out_shape]) != out_shape:
        raise ValueError("bias does not broadcast to the output")
    return t


def _out_dtype(args: Args, i: int) -> str | None:
    """An ``out_dtype`` ScalarType argument when the overload has one and it was recorded."""
    if args.has_tensor(i):  # an ``out=`` tensor in that slot, not a dtype
        return None
    return args.scalar_type(i)


@register("gemm", "aten::mm")
def _mm(op: str, args: Args) -> OpCost | None:
    a, b = args.tensor(0), args.tensor(1)
    if a is None or b is None or a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[0]:
        return None
    (m, k), n = a.shape, b.shape[1]
    return _cost(a, b, 1, m, n, k, out_dtype=_out_dtype(args, 2))


@register("gemm", "aten::addmm")
def _addmm(op: str, args: Args) -> OpCost | None:
    a, b = args.tensor(1), args.tensor(2)
    if a is None or b is None or a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[0]:
        return None
    (m, k), n = a.shape, b.shape[1]
    out_dtype, beta_at = _dtype_and_beta(args)
    bias = _bias(args, 0, beta_at, (m, n))
    return _cost(a, b, 1, m, n, k, bias=bias, out_dtype=out_dtype)


def _dtype_and_beta(args: Args) -> tuple[str | None, int]:
    """(out_dtype, index of beta) for ``op(self, a, b, [out_dtype,] beta, alpha[, out])``."""
    scalars = [i for i in range(3, len(args)) if not args.has_tensor(i)]
    if len(scalars) == 3:  # the .dtype overload
        return args.scalar_type(scalars[0]), scalars[1]
    return None, scalars[0] if scalars else 3


@register("gemm", "aten::bmm")
def _bmm(op: str, args: Args) -> OpCost | None:
    a, b = args.tensor(0), args.tensor(1)
    if a is None or b is None or a.ndim != 3 or b.ndim != 3:
        return None
    (bt, m, k), (bt2, k2, n) = a.shape, b.shape
    if bt != bt2 or k != k2:
        return None
    return _cost(a, b, bt, m, n, k, out_dtype=_out_dtype(args, 2))


@register("gemm", "aten::baddbmm")
def _baddbmm(op: str, args: Args) -> OpCost | None:
    a, b = args.tensor(1), args.tensor(2)
    if a is None or b is None or a.ndim != 3 or b.ndim != 3:
        return None
    (bt, m, k), (bt2, k2, n) = a.shape, b.shape
    if bt != bt2 or k != k2:
        return None
    out_dtype, beta_at = _dtype_and_beta(args)
    bias = _bias(args, 0, beta_at, (bt, m, n))
    return _cost(a, b, bt, m, n, k, bias=bias, out_dtype=out_dtype)


def _matmul_dims(a: Tensor, b: Tensor) -> tuple[int, int, int, int] | None:
    """(batch, M, N, K) of torch.matmul's broadcasting rules; 1-D operands are unsqueezed."""
    if a.ndim == 0 or b.ndim == 0:
        return None
    sa = a.shape if a.ndim >= 2 else (1,) + a.shape
    sb = b.shape if b.ndim >= 2 else b.shape + (1,)
    (m, k), (k2, n) = sa[-2:], sb[-2:]
    if k != k2:
        return None
    batch_shape = broadcast([sa[:-2], sb[:-2]])
    if batch_shape is None:
        return None
    return math.prod(batch_shape), m, n, k


@register("gemm", "aten::matmul", composite=True)
def _matmul(op: str, args: Args) -> OpCost | None:
    a, b = args.tensor(0), args.tensor(1)
    if a is None or b is None:
        return None
    dims = _matmul_dims(a, b)
    if dims is None:
        return None
    batch, m, n, k = dims
    note = ""
    if a.ndim > 2 and b.ndim > 2 and a.shape[:-2] != b.shape[:-2]:
        note = "broadcast batch dims: each operand counted once"
    return _cost(a, b, batch, m, n, k, note=note)


@register("gemm", "aten::linear", composite=True)
def _linear(op: str, args: Args) -> OpCost | None:
    x, w = args.tensor(0), args.tensor(1)
    if x is None or w is None or x.ndim < 1 or w.ndim not in (1, 2):
        return None
    k = x.shape[-1]
    n = w.shape[0] if w.ndim == 2 else 1
    if (w.shape[-1] if w.ndim == 2 else w.shape[0]) != k:
        return None
    m = math.prod(x.shape[:-1])
    bias = args.tensor(2)
    if bias is not None and broadcast([bias.shape, (m, n)]) != (m, n):
        return None
    return _cost(x, w, 1, m, n, k, bias=bias)


@register("gemm", "aten::_scaled_mm")
def _scaled_mm(op: str, args: Args) -> OpCost | None:
    a, b = args.tensor(0), args.tensor(1)
    if a is None or b is None or a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[0]:
        return None
    (m, k), n = a.shape, b.shape[1]
    scales = sum(t.nbytes for t in (args.tensor(2), args.tensor(3), args.tensor(5)) if t is not None)
    bias = args.tensor(4)
    # torch defaults out_dtype to mat1's dtype; "" recorded means that default
    out = args.scalar_type(6)
    note = ""
    if out is None and args.concrete(6) is None:
        note = "out_dtype not recorded: output assumed in the input dtype (torch's default)"
    return _cost(a, b, 1, m, n, k, bias=bias, out_dtype=out, extra=scales, note=note)


@register("gemm", "aten::_int_mm")
def _int_mm(op: str, args: Args) -> OpCost | None:
    a, b = args.tensor(0), args.tensor(1)
    if a is None or b is None or a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[0]:
        return None
    (m, k), n = a.shape, b.shape[1]
    return _cost(a, b, 1, m, n, k, out_dtype="int32")


@register("gemm", "aten::mv")
def _mv(op: str, args: Args) -> OpCost | None:
    a, v = args.tensor(0), args.tensor(1)
    if a is None or v is None or a.ndim != 2 or v.ndim != 1 or a.shape[1] != v.shape[0]:
        return None
    return _cost(a, v, 1, a.shape[0], 1, a.shape[1])


@register("gemm", "aten::addmv")
def _addmv(op: str, args: Args) -> OpCost | None:
    a, v = args.tensor(1), args.tensor(2)
    if a is None or v is None or a.ndim != 2 or v.ndim != 1 or a.shape[1] != v.shape[0]:
        return None
    bias = _bias(args, 0, 3, (a.shape[0],))
    return _cost(a, v, 1, a.shape[0], 1, a.shape[1], bias=bias)


@register("gemm", "aten::dot", "aten::vdot")
def _dot(op: str, args: Args) -> OpCost | None:
    a, b = args.tensor(0), args.tensor(1)
    if a is None or b is None or a.ndim != 1 or b.ndim != 1 or a.shape != b.shape:
        return None
    return _cost(a, b, 1, 1, 1, a.shape[0])
