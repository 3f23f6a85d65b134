"""Eager attention written out as matmul -> [scale/mask] -> softmax -> [dropout] -> matmul.

Forward: a softmax op (``aten::_softmax``, ``aten::softmax``, ``aten::_safe_softmax``) over an
``S x S`` score tensor (its last two dims equal, at least ``min_seq``) with a matmul
(``aten::bmm``/``matmul``/``baddbmm``/``mm``) among the ``window`` owner ops before it on the
same thread and one among the ``window`` after it. Backward: ``aten::_softmax_backward_data``
over ``S x S`` with up to two matmuls on each side (dV/dP before, dQ/dK after). The instance is
the stretch of owner ops from the first matmul to the last; its time is their GPU time (host
time on CPU traces), each op counted once even when two instances would share it.

Projected fused time: the flash-attention cost model (:mod:`traceclass.costmodel.attention`,
``_scaled_dot_product_flash_attention`` and its backward) for Q, K, V of ``[B*H, S, D]`` (D
from the first matmul's operand, the full, non-causal score matrix: conservative) at an
achievable rate: the documented attention fraction of the matrix roof (FlashAttention-3:
75 % of the H100 peak; :mod:`traceclass.analysis.achievable`) for compute, 90 % of the
memory bandwidth for bytes. Saving = instance time - projected time, never below 0.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from traceclass import costmodel
from traceclass.analysis.achievable import DOCUMENTED
from traceclass.model import Trace
from traceclass.model.strings import OpInputs

SOFTMAX_FWD = ("aten::_softmax", "aten::softmax", "aten::_safe_softmax")
SOFTMAX_BWD = ("aten::_softmax_backward_data",)
MATMULS = ("aten::bmm", "aten::matmul", "aten::baddbmm", "aten::mm", "aten::einsum")
MIN_SEQ = 128  # TC102's default min_seq_count
WINDOW = 4  # TC102's default window_count
_DTYPE_TEXT = {"bf16": "c10::BFloat16", "fp16": "c10::Half", "fp32": "float"}


@dataclasses.dataclass(frozen=True)
class Instance:
    backward: bool
    softmax_row: int  # op row of the softmax
    rows: tuple[int, ...]  # owner op rows of the stretch, matmul to matmul
    device: int
    bh: int  # batch x heads
    seq: int
    head_dim: int
    precision: str
    time_ns: int  # GPU (or host) time of the stretch
    projected_ns: float  # fused (flash) attention at an achievable rate
    flops: float  # fused-attention FLOPs of the projection
    bytes: float


def _codes(trace: Trace, names: tuple[str, ...]) -> np.ndarray:
    found = [c for c in (trace.strings.code(n) for n in names) if c >= 0]
    return np.array(found or [-2], np.int64)


def find(trace: Trace, analysis, min_seq: int = MIN_SEQ, window: int = WINDOW) -> list[Instance]:  # type: ignore[no-untyped-def]
    """Unfused attention instances in the steady-state op time."""
    ops = trace.ops
    if not len(ops):
        return []
    opa = analysis.ops
    timed = opa.owner_time.rows
    owner = timed[opa.owner_of_op[timed] == timed].astype(np.int64)
    if not len(owner):
        return []
    order = owner[np.lexsort((ops.start_ns[owner], ops.tid[owner]))]
    names = ops.name[order]
    tids = ops.tid[order]
    fwd, bwd, mm = (np.isin(names, _codes(trace, n)) for n in (SOFTMAX_FWD, SOFTMAX_BWD, MATMULS))
    out: list[Instance] = []
    used = np.zeros(len(order), dtype=bool)
    for k in np.flatnonzero(fwd | bwd).tolist():
        backward = bool(bwd[k])
        inputs = trace.inputs[int(ops.inputs[order[k]])]
        dims = inputs.dims[0] if inputs is not None and inputs.dims and inputs.dims[0] else None
        if dims is None or len(dims) < 2 or dims[-1] != dims[-2] or dims[-1] < min_seq:
            continue
        seq = int(dims[-1])
        bh = int(np.prod(dims[:-2])) if len(dims) > 2 else 1
        lo, hi = max(0, k - window), min(len(order), k + window + 1)
        same = tids[lo:hi] == tids[k]
        before = [lo + j for j in range(k - lo) if mm[lo + j] and same[j]]
        after = [k + 1 + j for j in range(hi - k - 1) if mm[k + 1 + j] and same[k + 1 - lo + j]]
        if not before or not after:
            continue
        take = 2 if backward else 1
        first, last = before[-take:][0], after[:take][-1]
        head_dim = _head_dim(trace, int(order[before[-1]]), seq)
        if head_dim is None:
            continue
        stretch = np.arange(first, last + 1)
        stretch = stretch[(tids[stretch] == tids[k]) & ~used[stretch]]
        used[stretch] = True
        rows = order[stretch]
        time_ns = int(opa.owner_time.of(rows).sum())
        g = opa.op_group[order[before[-1]]]
        grp = opa.groups[int(g)] if g >= 0 else None
        precision = grp.precision if grp is not None and grp.precision else "fp32"
        device = grp.device if grp is not None else -1
        flops, nbytes, projected = _projection(analysis, device, precision, bh, seq, head_dim, backward)
        out.append(Instance(backward, int(order[k]), tuple(int(r) for r in rows), device, bh, seq, head_dim,
                            precision, time_ns, projected, flops, nbytes))
    return out


def _head_dim(trace: Trace, mm_row: int, seq: int) -> int | None:
    """D of the matmul next to the softmax: the operand dim that is not S."""
    inputs = trace.inputs[int(trace.ops.inputs[mm_row])]
    if inputs is None:
        return None
    shapes = [d for d in inputs.dims if d is not None and len(d) >= 2]
    for d in shapes:
        a, b = int(d[-2]), int(d[-1])
        if a == seq and b != seq:
            return b
        if b == seq and a != seq:
            return a
    return None


def _projection(analysis, device: int, precision: str, bh: int, seq: int, d: int,  # type: ignore[no-untyped-def]
                backward: bool) -> tuple[float, float, float]:
    """FLOPs, bytes and achievable time (ns) of fused flash attention for this instance."""
    t = _DTYPE_TEXT.get(precision, "float")
    qkv = (1, bh, seq, d)
    if backward:
        name = "aten::_scaled_dot_product_flash_attention_backward"
        inputs = OpInputs(dims=(qkv, qkv, qkv, qkv, qkv), dtypes=(t,) * 5)
    else:
        name = "aten::_scaled_dot_product_flash_attention"
        inputs = OpInputs(dims=(qkv, qkv, qkv), dtypes=(t,) * 3)
    cost = costmodel.estimate(name, inputs)
    if cost is None:
        return 0.0, 0.0, float("nan")
    roof = analysis.roof(device, cost.precision, "matrix") if device >= 0 else None
    if roof is None or not roof.peak_flops or not roof.bandwidth_bps:
        return cost.flops, cost.bytes, float("nan")
    t_comp = cost.flops / (roof.peak_flops * DOCUMENTED["attention"].fraction)
    t_mem = cost.bytes / (roof.bandwidth_bps * DOCUMENTED["memory"].fraction)
    return cost.flops, cost.bytes, max(t_comp, t_mem) * 1e9


def claimed_groups(trace: Trace, analysis, inst: list[Instance]) -> frozenset[int]:  # type: ignore[no-untyped-def]
    """Op group indices whose every owner instance lies inside one of the unfused attention
    instances ``inst``: fusing removes them, so other rules leave them."""
    if not inst:
        return frozenset()
    opa = analysis.ops
    inside = np.zeros(len(trace.ops), dtype=bool)
    inside[np.fromiter((r for i in inst for r in i.rows), dtype=np.int64)] = True
    groups = opa.op_group
    hit = np.unique(groups[inside & (groups >= 0)])
    missed = np.unique(groups[~inside & (groups >= 0)])
    return frozenset(int(g) for g in np.setdiff1d(hit, missed).tolist())
