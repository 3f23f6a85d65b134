"""Argument positions the estimators read, checked against torch's own operator schemas.

Kineto records every argument of the called overload in schema order (keyword-only ones
included), so a position table that drifts from the schema would read the wrong value.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from traceclass.costmodel import attention, conv, reduction  # noqa: E402


def _args(op: str, overload: str = "default") -> list[str]:
    packet = getattr(torch.ops.aten, op.removeprefix("aten::"))
    return [a.name for a in getattr(packet, overload)._schema.arguments]


@pytest.mark.parametrize("op,sig", list(attention.FORWARD.items()) + list(attention.BACKWARD.items()))
def test_attention_positions(op: str, sig: attention._Sig) -> None:
    names = _args(op)
    assert names[sig.q] in ("query", "q")
    assert names[sig.q + 1] in ("key", "k") and names[sig.q + 2] in ("value", "v")
    if sig.causal is not None:
        assert names[sig.causal] == "is_causal"
    if sig.mask_type is not None:
        assert names[sig.mask_type] == "custom_mask_type"
    if sig.mask is not None:
        assert names[sig.mask] in ("attn_mask", "attn_bias", "bias")
    if sig.grad_out is not None:
        assert names[sig.grad_out] in ("grad_out", "grad_out_")
    if sig.out is not None:
        assert names[sig.out] == "out"
    for i in sig.varlen:
        assert names[i] in ("cum_seq_q", "cum_seq_k", "cu_seqlens_q", "cu_seqlens_k")
    for i in sig.window:
        assert names[i] in ("window_size_left", "window_size_right", "window_size")


CONV_FIELDS = {"bias": "bias", "stride": "stride", "padding": "padding", "dilation": "dilation", "groups": "groups",
               "output_padding": "output_padding"}


@pytest.mark.parametrize("op,layout", list(conv._LAYOUTS.items()))
def test_conv_positions(op: str, layout: conv._Layout) -> None:
    overload = "input" if op in ("aten::conv_transpose2d", "aten::conv_transpose3d") else "default"
    names = _args(op, overload)
    assert names[0] in ("input", "self") and names[1] == "weight"
    for field, expected in CONV_FIELDS.items():
        pos = getattr(layout, field)
        if pos is not None:
            assert names[pos] == expected, (op, field)
    if not isinstance(layout.transposed, bool):
        assert names[layout.transposed] == "transposed"
    if op == "aten::_slow_conv2d_forward":
        assert names[2] == "kernel_size"


def test_convolution_backward_positions() -> None:
    names = _args("aten::convolution_backward")
    assert names[:3] == ["grad_output", "input", "weight"]
    assert names[7] == "transposed" and names[10] == "output_mask"


@pytest.mark.parametrize("op,red", list(reduction._OPS.items()))
def test_reduction_dim_positions(op: str, red: reduction._Red) -> None:
    packet = getattr(torch.ops.aten, op.removeprefix("aten::"))
    with_dim = [o for o in packet.overloads() if "out" not in o
                and any(a.name == "dim" for a in getattr(packet, o)._schema.arguments)]
    assert with_dim, op
    for o in with_dim:
        names = [a.name for a in getattr(packet, o)._schema.arguments]
        assert names[red.dim_at] == "dim", (op, o)
        assert len(names) > red.full_upto, (op, o)  # a dim overload is never mistaken for a full reduction
        if red.dtype_at is not None and "dtype" in names:
            assert names.index("dtype") == red.dtype_at, (op, o)
    without = [o for o in packet.overloads() if "out" not in o and o not in with_dim
               and getattr(packet, o)._schema.arguments[0].type.kind() == "TensorType"]
    for o in without:
        args = getattr(packet, o)._schema.arguments
        if len(args) > 1 and args[1].type.kind() == "TensorType":
            continue  # max.other / min.other: elementwise, handled before the dim logic
        assert len(args) <= red.full_upto, (op, o)


@pytest.mark.parametrize(
    "op,overload,positions",
    [
        ("aten::addmm", "default", {0: "self", 1: "mat1", 2: "mat2", 3: "beta"}),
        ("aten::addmm", "dtype", {3: "out_dtype", 4: "beta"}),
        ("aten::baddbmm", "default", {0: "self", 1: "batch1", 2: "batch2", 3: "beta"}),
        ("aten::_scaled_mm", "default", {2: "scale_a", 3: "scale_b", 4: "bias", 5: "scale_result", 6: "out_dtype"}),
        ("aten::native_layer_norm", "default", {1: "normalized_shape", 2: "weight", 3: "bias"}),
        ("aten::native_layer_norm_backward", "default", {3: "mean", 4: "rstd", 5: "weight", 6: "bias",
                                                         7: "output_mask"}),
        ("aten::_fused_rms_norm_backward", "default", {3: "rstd", 4: "weight", 5: "output_mask"}),
        ("aten::native_batch_norm", "default", {3: "running_mean", 4: "running_var", 5: "training"}),
        ("aten::batch_norm", "default", {5: "training"}),
        ("aten::native_batch_norm_backward", "default", {5: "save_mean", 6: "save_invstd", 9: "output_mask"}),
        ("aten::cudnn_batch_norm_backward", "default", {0: "input", 1: "grad_output", 5: "save_mean"}),
        ("aten::native_group_norm", "default", {6: "group"}),
        ("aten::native_group_norm_backward", "default", {2: "mean", 3: "rstd", 4: "weight", 9: "output_mask"}),
        ("aten::group_norm", "default", {1: "num_groups", 2: "weight", 3: "bias"}),
        ("aten::_softmax", "default", {2: "half_to_float"}),
        ("aten::softmax", "int", {2: "dtype"}),
        ("aten::_softmax_backward_data", "default", {3: "input_dtype"}),
        ("aten::_to_copy", "default", {1: "dtype"}),
        ("aten::to", "dtype", {1: "dtype", 3: "copy"}),
        ("aten::to", "device", {2: "dtype", 4: "copy"}),
        ("aten::to", "dtype_layout", {1: "dtype", 6: "copy"}),
        ("aten::contiguous", "default", {1: "memory_format"}),
        ("aten::embedding_dense_backward", "default", {2: "num_weights"}),
        ("aten::index_select", "default", {1: "dim", 2: "index"}),
        ("aten::add", "Tensor", {2: "alpha"}),
    ],
)
def test_other_positions(op: str, overload: str, positions: dict[int, str]) -> None:
    names = _args(op, overload)
    for i, expected in positions.items():
        assert names[i] == expected, (op, overload, i)
