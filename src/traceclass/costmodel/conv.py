"""Convolutions, forward and backward.

Forward FLOPs are torch.utils.flop_counter's: ``2 * N * C_out * prod(out_spatial) *
(C_in/groups) * prod(kernel)`` (a transposed conv iterates over the *input* positions
instead), plus one FLOP per output element for the bias when there is one (TraceLens counts
it, torch does not: ``ours == torch + numel(out)``).

The output size needs stride/padding/dilation: they are read from Concrete Inputs. A trace
without Concrete Inputs (recorded before ~2024) does not say them, and the output size is then
ambiguous (a 3x3 kernel on 56x56 gives 56, 54 or 28 depending on them): such forward ops get
no model rather than a guess.

Backward (``convolution_backward``) does not need them: ``grad_output`` carries the output
size. Per ``output_mask``: grad_input costs the forward FLOPs, grad_weight costs the forward
FLOPs, grad_bias one add per grad_output element. torch counts grad_weight of a grouped
convolution ``groups`` times too high (it uses the full C_in, not C_in/groups); we do not, so
``ours == torch - (groups - 1) * forward`` there. When ``output_mask`` is not recorded, grad_input
and grad_weight are assumed (what training a conv layer needs) and the bias gradient is left
out; ``note`` says so.
"""

from __future__ import annotations

import math
from typing import NamedTuple

from traceclass.costmodel.args import Args, Tensor, nbytes
from traceclass.costmodel.cost import OpCost
from traceclass.costmodel.registry import register


class _Layout(NamedTuple):
    """Argument positions of one conv overload (None: not an argument of it)."""

    bias: int | None
    stride: int | None
    padding: int | None
    dilation: int | None
    groups: int | None
    transposed: int | bool  # position of the flag, or the fixed value
    output_padding: int | None = None


_LAYOUTS = {
    "aten::convolution": _Layout(2, 3, 4, 5, 8, 6, 7),
    "aten::_convolution": _Layout(2, 3, 4, 5, 8, 6, 7),
    "aten::conv1d": _Layout(2, 3, 4, 5, 6, False),
    "aten::conv2d": _Layout(2, 3, 4, 5, 6, False),
    "aten::conv3d": _Layout(2, 3, 4, 5, 6, False),
    "aten::conv_transpose1d": _Layout(2, 3, 4, 7, 6, True, 5),
    "aten::conv_transpose2d": _Layout(2, 3, 4, 7, 6, True, 5),
    "aten::conv_transpose3d": _Layout(2, 3, 4, 7, 6, True, 5),
    "aten::cudnn_convolution": _Layout(None, 3, 2, 4, 5, False),
    "aten::cudnn_convolution_transpose": _Layout(None, 4, 2, 5, 6, True, 3),
    "aten::miopen_convolution": _Layout(2, 4, 3, 5, 6, False),
    "aten::miopen_convolution_transpose": _Layout(2, 5, 3, 6, 7, True, 4),
    "aten::mkldnn_convolution": _Layout(2, 4, 3, 5, 6, False),
    "aten::_slow_conv2d_forward": _Layout(3, 4, 5, None, None, False),
}

_COMPOSITE = {"aten::convolution", "aten::_convolution", "aten::conv1d", "aten::conv2d", "aten::conv3d",
              "aten::conv_transpose1d", "aten::conv_transpose2d", "aten::conv_transpose3d"}


def _expand(values: tuple[int, ...] | None, n: int, default: int) -> tuple[int, ...] | None:
    if values is None:
        return None
    if len(values) == 0:
        return (default,) * n
    if len(values) == 1:
        return values * n
    return values if len(values) == n else None


def _out_spatial(x: tuple[int, ...], k: tuple[int, ...], stride: tuple[int, ...], pad: tuple[int, ...],
                 dil: tuple[int, ...], transposed: bool, out_pad: tuple[int, ...]) -> tuple[int, ...] | None:
    out = []
    for i in range(len(x)):
        if transposed:
            o = (x[i] - 1) * stride[i] - 2 * pad[i] + dil[i] * (k[i] - 1) + out_pad[i] + 1
        else:
            o = (x[i] + 2 * pad[i] - dil[i] * (k[i] - 1) - 1) // stride[i] + 1
        if o <= 0:
            return None
        out.append(o)
    return tuple(out)


def _padding(args: Args, i: int, n: int, x: tuple[int, ...], k: tuple[int, ...],
             dil: tuple[int, ...]) -> tuple[int, ...] | None:
    text = (args.concrete(i) or "").strip("'\"").lower()
    if text == "valid":
        return (0,) * n
    if text == "same":  # torch allows it with stride 1 only: output size == input size
        total = [d * (kk - 1) for d, kk in zip(dil, k)]
        if any(t % 2 for t in total):
            return None  # asymmetric padding; not expressible per side
        return tuple(t // 2 for t in total)
    return _expand(args.int_list(i), n, 0)


def _forward(op: str, args: Args) -> OpCost | None:
    lay = _LAYOUTS[op]
    x, w = args.tensor(0), args.tensor(1)
    if x is None or w is None or w.ndim < 3:
        return None
    n_sp = w.ndim - 2
    if x.ndim == n_sp + 1:  # unbatched input of conv1d/2d/3d
        x_shape = (1,) + x.shape
    elif x.ndim == n_sp + 2:
        x_shape = x.shape
    else:
        return None
    if not args.has_concrete:
        return None  # stride/padding/dilation not recorded: the output size is ambiguous
    transposed = lay.transposed if isinstance(lay.transposed, bool) else args.bool_(lay.transposed)
    if transposed is None:
        return None
    k = w.shape[2:]
    dil = _expand(args.int_list(lay.dilation), n_sp, 1) if lay.dilation is not None else (1,) * n_sp
    stride = _expand(args.int_list(lay.stride), n_sp, 1)
    if dil is None or stride is None:
        return None
    pad = _padding(args, lay.padding, n_sp, x_shape[2:], k, dil) if lay.padding is not None else (0,) * n_sp
    out_pad = (0,) * n_sp
    if transposed and lay.output_padding is not None:
        out_pad = _expand(args.int_list(lay.output_padding), n_sp, 0)
    if pad is None or out_pad is None:
        return None
    groups = args.int_(lay.groups) if lay.groups is not None else 1
    if groups is None or groups < 1:
        return None
    batch, c_in = x_shape[0], x_shape[1]
    if transposed:
        if c_in != w.shape[0]:
            return None
        c_out = w.shape[1] * groups
    else:
        if c_in != w.shape[1] * groups:
            return None
        c_out = w.shape[0]
    out_sp = _out_spatial(x_shape[2:], k, stride, pad, dil, transposed, out_pad)
    if out_sp is None:
        return None
    out_numel = batch * c_out * math.prod(out_sp)
    per_position = 2.0 * w.shape[1] * math.prod(k)  # C_in/groups (or C_out/groups) x kernel
    flops = per_position * (math.prod(x_shape) if transposed else out_numel)
    bias = args.tensor(lay.bias) if lay.bias is not None else None
    if bias is not None:
        if bias.numel != c_out:
            return None
        flops += out_numel
    moved = x.nbytes + w.nbytes + (bias.nbytes if bias is not None else 0.0) + nbytes(out_numel, x.dtype)
    note = f"output {'x'.join(str(d) for d in (batch, c_out) + out_sp)}"
    if groups > 1:
        note += f", groups={groups}"
    return OpCost(flops, moved, x.dtype, "matrix", "conv", note)


for _name in _LAYOUTS:
    register("conv", _name, composite=_name in _COMPOSITE)(_forward)


def _infer_transposed(go: Tensor, x: Tensor, w: Tensor) -> bool | None:
    """Which conv the shapes fit when the flag was not recorded; None when both fit differently."""
    plain = go.shape[1] == w.shape[0]
    trans = x.shape[1] == w.shape[0]
    if plain and not trans:
        return False
    if trans and not plain:
        return True
    if plain and trans and math.prod(go.shape[2:]) == math.prod(x.shape[2:]):
        return False  # same FLOPs either way
    return None


@register("conv", "aten::convolution_backward")
def _backward(op: str, args: Args) -> OpCost | None:
    go, x, w = args.tensor(0), args.tensor(1), args.tensor(2)
    if go is None or x is None or w is None or w.ndim < 3 or go.ndim != w.ndim or x.ndim != w.ndim:
        return None
    if go.shape[0] != x.shape[0]:
        return None
    notes = []
    transposed = args.bool_(7)
    if transposed is None:
        transposed = _infer_transposed(go, x, w)
        if transposed is None:
            return None
    mask = args.bool_list(10)
    if mask is None or len(mask) != 3:
        mask = (True, True, False)
        notes.append("output_mask not recorded: assumed grad_input and grad_weight, no grad_bias")
    per_position = 2.0 * w.shape[1] * math.prod(w.shape[2:])
    forward = per_position * (x.numel if transposed else go.numel)
    flops = 0.0
    moved = go.nbytes
    if mask[0]:
        flops += forward
        moved += w.nbytes + nbytes(x.numel, x.dtype)
    if mask[1]:
        flops += forward
        moved += x.nbytes + nbytes(w.numel, w.dtype)
    if mask[2]:
        flops += go.numel
        moved += nbytes(go.shape[1], go.dtype)
    grads = [g for g, m in zip(("input", "weight", "bias"), mask) if m]
    notes.insert(0, "grad " + "+".join(grads) if grads else "no gradient requested")
    return OpCost(flops, moved, x.dtype, "matrix", "conv", "; ".join(notes))
