"""Scaled dot-product attention, forward and backward, in all of ATen's flavours.

FLOPs follow torch.utils.flop_counter (``sdpa_flop_count`` / ``sdpa_backward_flop_count``):
forward ``2*B*Hq*Sq*Sk*(D + Dv)`` (QK^T and PV), backward ``2*B*Hq*Sq*Sk*(3*D + 2*Dv)`` (score
recompute, dV, dP, dQ, dK) which is 2.5x the forward when ``D == Dv``. Softmax, scaling and
dropout are not counted, as in torch and TraceLens. GQA/MQA (fewer K/V heads) counts every
query head; K and V are read at their own size.

Causal attention (``is_causal`` / ``custom_mask_type`` recorded true) with ``Sq == Sk`` counts
only the unmasked half (x 0.5 of torch's count, which ignores causality); ``note`` says so.
With ``Sq != Sk`` the mask alignment (top-left vs bottom-right) differs between kernels, so
the full score matrix is counted and the note says it is an upper bound. A trace without
Concrete Inputs cannot tell causal from not: full count, noted.

Layouts: the ``_scaled_dot_product_*`` ops take (B, H, S, D); ``_flash_attention_*`` and
``_efficient_attention_*`` take (B, S, H, D) (checked against the corpus, where the flash
kernel op sits under SDPA with its dims transposed). torch's formulas read the latter as
(B, H, S, D) when given dense inputs, so for them ``ours == torch(q.transpose(1, 2), ...)``.

Bytes: Q, K, V (and a mask/bias) read, O written; backward reads dO, Q, K, V, O and writes
dQ, dK, dV. The per-row logsumexp (1/D of O) and RNG state are left out. Variable-length
(``cu_seqlens``) and sliding-window calls are not modelled: their work depends on values the
trace does not record.
"""

from __future__ import annotations

import math
from typing import NamedTuple

from traceclass.costmodel.args import Args, Tensor, nbytes
from traceclass.costmodel.cost import OpCost
from traceclass.costmodel.registry import register


class _Sig(NamedTuple):
    bshd: bool  # (B, S, H, D) layout instead of (B, H, S, D)
    q: int
    causal: int | None = None  # bool is_causal
    mask_type: int | None = None  # int custom_mask_type (0 none, 1/2 causal)
    mask: int | None = None  # optional attn_mask / attn_bias tensor
    grad_out: int | None = None  # set for backward ops
    out: int | None = None  # backward: the forward output (read)
    varlen: tuple[int, ...] = ()  # cu_seqlens tensors: present -> not modelled
    window: tuple[int, ...] = ()  # window sizes: set -> not modelled


FORWARD = {
    "aten::scaled_dot_product_attention": _Sig(False, 0, causal=5, mask=3),
    "aten::_scaled_dot_product_attention_math": _Sig(False, 0, causal=5, mask=3),
    "aten::_scaled_dot_product_flash_attention": _Sig(False, 0, causal=4),
    "aten::_scaled_dot_product_flash_attention_for_cpu": _Sig(False, 0, causal=4, mask=5),
    "aten::_scaled_dot_product_efficient_attention": _Sig(False, 0, causal=6, mask=3),
    "aten::_scaled_dot_product_cudnn_attention": _Sig(False, 0, causal=6, mask=3),
    "aten::_flash_attention_forward": _Sig(True, 0, causal=8, varlen=(3, 4), window=(11, 12)),
    "aten::_efficient_attention_forward": _Sig(True, 0, mask_type=9, mask=3, varlen=(4, 5), window=(13,)),
}

BACKWARD = {
    "aten::_scaled_dot_product_flash_attention_backward": _Sig(False, 1, causal=11, grad_out=0, out=4),
    "aten::_scaled_dot_product_flash_attention_for_cpu_backward": _Sig(False, 1, causal=7, mask=8, grad_out=0, out=4),
    "aten::_scaled_dot_product_efficient_attention_backward": _Sig(False, 1, causal=11, mask=4, grad_out=0, out=5),
    "aten::_scaled_dot_product_cudnn_attention_backward": _Sig(False, 1, causal=14, mask=8, grad_out=0, out=4),
    "aten::_flash_attention_backward": _Sig(True, 1, causal=11, grad_out=0, out=4, varlen=(6, 7), window=(15, 16)),
    "aten::_efficient_attention_backward": _Sig(True, 1, mask_type=14, mask=4, grad_out=0, out=5, varlen=(6, 7),
                                                window=(18,)),
}

# the SDPA front ends run one of the kernels below them (flash/efficient/cudnn/math)
_COMPOSITE = {"aten::scaled_dot_product_attention", "aten::_scaled_dot_product_attention_math",
              "aten::_scaled_dot_product_flash_attention", "aten::_scaled_dot_product_efficient_attention",
              "aten::_scaled_dot_product_flash_attention_backward",
              "aten::_scaled_dot_product_efficient_attention_backward"}


class _Dims(NamedTuple):
    batch: int  # product of leading batch dims
    hq: int
    hkv: int
    sq: int
    sk: int
    d: int
    dv: int


def _bhsd(t: Tensor, bshd: bool) -> tuple[int, int, int, int] | None:
    """(batch, heads, seq, dim) of a q/k/v tensor."""
    s = t.shape
    if bshd:
        return (s[0], s[2], s[1], s[3]) if t.ndim == 4 else None
    if t.ndim == 3:  # (N, L, E): one head
        return s[0], 1, s[1], s[2]
    if t.ndim >= 4:  # (N, ..., H, L, E)
        return math.prod(s[:-3]), s[-3], s[-2], s[-1]
    return None


def _dims(q: Tensor, k: Tensor, v: Tensor, bshd: bool) -> _Dims | None:
    dq, dk, dvv = _bhsd(q, bshd), _bhsd(k, bshd), _bhsd(v, bshd)
    if dq is None or dk is None or dvv is None:
        return None
    (b, hq, sq, d), (bk, hk, sk, dk_), (bv, hv, sv, dv) = dq, dk, dvv
    if not (b == bk == bv and hk == hv and sk == sv and d == dk_) or hk == 0 or hq % hk:
        return None
    return _Dims(b, hq, hk, sq, sk, d, dv)


def _causal(args: Args, sig: _Sig) -> bool | None:
    if sig.causal is not None:
        return args.bool_(sig.causal)
    if sig.mask_type is not None:
        kind = args.int_(sig.mask_type)
        return None if kind is None else kind != 0
    return False


def _unsupported(args: Args, sig: _Sig) -> bool:
    if any(args.has_tensor(i) for i in sig.varlen):
        return True
    for i in sig.window:
        w = args.int_(i)
        if w is not None and w >= 0:
            return True
    return False


def _estimate(op: str, args: Args, sig: _Sig, backward: bool) -> OpCost | None:
    q, k, v = args.tensor(sig.q), args.tensor(sig.q + 1), args.tensor(sig.q + 2)
    if q is None or k is None or v is None or _unsupported(args, sig):
        return None
    dims = _dims(q, k, v, sig.bshd)
    if dims is None:
        return None
    scores = 2.0 * dims.batch * dims.hq * dims.sq * dims.sk
    flops = scores * ((3 * dims.d + 2 * dims.dv) if backward else (dims.d + dims.dv))
    notes = []
    causal = _causal(args, sig)
    if causal is None:
        notes.append("is_causal not recorded: counted the full score matrix (an upper bound if causal)")
    elif causal and dims.sq == dims.sk:
        flops *= 0.5
        notes.append("causal: counted the unmasked half only")
    elif causal:
        notes.append(f"causal with Sq={dims.sq} != Sk={dims.sk}: counted the full score matrix (upper bound)")
    if dims.hq != dims.hkv:
        notes.append(f"GQA: {dims.hq} query heads over {dims.hkv} KV heads")
    out_bytes = nbytes(dims.batch * dims.hq * dims.sq * dims.dv, q.dtype)
    mask = args.tensor(sig.mask) if sig.mask is not None else None
    moved = q.nbytes + k.nbytes + v.nbytes + (mask.nbytes if mask is not None else 0.0)
    if backward:
        go = args.tensor(sig.grad_out) if sig.grad_out is not None else None
        o = args.tensor(sig.out) if sig.out is not None else None
        moved += (go.nbytes if go is not None else out_bytes) + (o.nbytes if o is not None else out_bytes)
        moved += nbytes(q.numel, q.dtype) + nbytes(k.numel, k.dtype) + nbytes(v.numel, v.dtype)
    else:
        moved += out_bytes
    return OpCost(flops, moved, q.dtype, "matrix", "attention", "; ".join(notes))


def _forward(op: str, args: Args) -> OpCost | None:
    return _estimate(op, args, FORWARD[op], backward=False)


def _backward(op: str, args: Args) -> OpCost | None:
    return _estimate(op, args, BACKWARD[op], backward=True)


for _name in FORWARD:
    register("attention", _name, composite=_name in _COMPOSITE)(_forward)
for _name in BACKWARD:
    register("attention", _name, composite=_name in _COMPOSITE)(_backward)
