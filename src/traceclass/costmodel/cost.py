"""The result type of every estimator."""

from __future__ import annotations

import dataclasses

FAMILIES = ("gemm", "conv", "attention", "elementwise", "softmax", "norm", "reduction", "embedding", "copy")


@dataclasses.dataclass(frozen=True)
class OpCost:
    """Analytic work of one op call.

    ``flops`` counts floating-point operations (integer ops count the same way: a MAC is 2).
    ``bytes`` is the ideal traffic: every input read once and every output written once, as
    TraceLens assumes ("100 % cache hit"); real kernels move more. ``precision`` is the
    canonical dtype whose peak bounds the op and ``unit`` says whether that peak is the matrix
    (tensor-core) or the vector path. Matrix ops report their operand dtype (an fp32 GEMM says
    fp32; whether TF32 applies is the caller's call). Vector ops report the dtype ATen computes
    in: fp16/bf16/fp8 data is computed in fp32 ("opmath"), so they say fp32. Ops without
    arithmetic (copies, gathers) report their data dtype.
    """

    flops: float
    bytes: float
    precision: str
    unit: str  # "matrix" | "vector"
    family: str
    note: str = ""
