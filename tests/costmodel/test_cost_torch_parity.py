"""FLOP parity with torch.utils.flop_counter.FlopCounterMode.

Each case runs real torch ops on CPU (or on the meta device for CUDA-only kernels, which
FlopCounterMode counts through their meta implementations), records them with
torch.profiler(record_shapes=True), reads the exported trace with the traceclass reader, and
compares estimate() with what FlopCounterMode counted. Intentional differences are asserted
as exact relations:

* bias/self terms: ours = torch + one add per output element (TraceLens counts them);
* causal attention with Sq == Sk: ours = torch / 2 (torch ignores the mask);
* grad_weight of a grouped conv: ours = torch - (groups - 1) * forward (torch over-counts);
* conv bias gradient: ours = torch + numel(grad_output);
* _flash/_efficient_attention_* take (B, S, H, D): ours = torch's formula on (B, H, S, D).
"""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional
aten = torch.ops.aten

from cost_helpers import recorded, recorded_ops, torch_flops  # noqa: E402
from torch.utils.flop_counter import sdpa_backward_flop_count, sdpa_flop_count  # noqa: E402

from traceclass.costmodel import estimate  # noqa: E402


def _ours(fn, name: str) -> float:  # type: ignore[no-untyped-def]
    cost = estimate(name, recorded(fn, name))
    assert cost is not None, f"no estimate for {name}"
    return cost.flops


def _r(*shape: int, dtype=torch.float32, grad: bool = False, device: str = "cpu"):  # type: ignore[no-untyped-def]
    return torch.randn(*shape, dtype=dtype, device=device, requires_grad=grad)


# --------------------------------------------------------------------------- GEMM


@pytest.mark.parametrize("m,k,n", [(64, 128, 32), (1, 7, 1), (33, 1, 17)])
def test_mm(m: int, k: int, n: int) -> None:
    a, b = _r(m, k), _r(k, n)
    fn = lambda: torch.mm(a, b)  # noqa: E731
    assert _ours(fn, "aten::mm") == torch_flops(fn)["aten::mm"] == 2 * m * n * k


@pytest.mark.parametrize("bias_shape,beta", [((32,), 1.0), ((64, 32), 0.5), ((1, 32), 1.0), ((32,), 0.0)])
def test_addmm(bias_shape: tuple[int, ...], beta: float) -> None:
    bias, a, b = _r(*bias_shape), _r(64, 128), _r(128, 32)
    fn = lambda: torch.addmm(bias, a, b, beta=beta, alpha=2.0)  # noqa: E731
    bias_adds = 0 if beta == 0 else 64 * 32
    assert _ours(fn, "aten::addmm") == torch_flops(fn)["aten::addmm"] + bias_adds


def test_bmm_and_baddbmm() -> None:
    a, b, c = _r(4, 8, 16), _r(4, 16, 5), _r(4, 8, 5)
    fn = lambda: torch.bmm(a, b)  # noqa: E731
    assert _ours(fn, "aten::bmm") == torch_flops(fn)["aten::bmm"] == 2 * 4 * 8 * 5 * 16
    fn = lambda: torch.baddbmm(c, a, b)  # noqa: E731
    assert _ours(fn, "aten::baddbmm") == torch_flops(fn)["aten::baddbmm"] + 4 * 8 * 5


@pytest.mark.parametrize(
    "sa,sb",
    [((2, 3, 4, 5), (5, 6)), ((2, 1, 4, 5), (3, 5, 6)), ((7, 5), (5, 9)), ((3, 4, 5), (3, 5, 2)), ((6, 5), (2, 5, 3))],
)
def test_matmul_any_rank_matches_the_mm_or_bmm_it_runs(sa: tuple[int, ...], sb: tuple[int, ...]) -> None:
    a, b = _r(*sa), _r(*sb)
    fn = lambda: torch.matmul(a, b)  # noqa: E731
    assert _ours(fn, "aten::matmul") == sum(torch_flops(fn).values())


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("x_shape", [(16, 32), (2, 8, 32)])
def test_linear(bias: bool, x_shape: tuple[int, ...]) -> None:
    layer = torch.nn.Linear(32, 24, bias=bias)
    x = _r(*x_shape)
    with torch.no_grad():
        fn = lambda: layer(x)  # noqa: E731
        m = math.prod(x_shape[:-1])
        assert _ours(fn, "aten::linear") == sum(torch_flops(fn).values()) + (m * 24 if bias else 0)


@pytest.mark.parametrize("bias", [False, True])
def test_scaled_mm_on_meta(bias: bool) -> None:
    """_scaled_mm needs an FP8 GPU to run; its meta kernel lets FlopCounterMode count it."""
    a = torch.empty(64, 128, dtype=torch.float8_e4m3fn, device="meta")
    b = torch.empty(32, 128, dtype=torch.float8_e4m3fn, device="meta").t()
    scale = torch.empty((), device="meta")
    c = torch.empty(32, dtype=torch.bfloat16, device="meta") if bias else None
    fn = lambda: aten._scaled_mm(a, b, scale, scale, bias=c, out_dtype=torch.bfloat16)  # noqa: E731
    cost = estimate("aten::_scaled_mm", recorded(fn, "aten::_scaled_mm"))
    assert cost is not None and cost.precision == "fp8" and cost.unit == "matrix"
    assert cost.flops == torch_flops(fn)["aten::_scaled_mm"] + (64 * 32 if bias else 0)
    # fp8 operands, fp32 scales, bf16 output (+ bf16 bias)
    assert cost.bytes == 64 * 128 + 128 * 32 + 2 * 4 + 64 * 32 * 2 + (32 * 2 if bias else 0)


# --------------------------------------------------------------------------- convolution


CONV_CASES = [
    # (conv fn, input shape, weight shape, kwargs)
    (F.conv1d, (2, 4, 33), (8, 4, 3), dict(stride=2, padding=1)),
    (F.conv2d, (2, 3, 17, 19), (8, 3, 3, 5), dict(stride=(2, 1), padding=(1, 2), dilation=(1, 2))),
    (F.conv2d, (2, 8, 10, 10), (8, 1, 3, 3), dict(groups=8, padding=1)),  # depthwise
    (F.conv2d, (2, 8, 12, 12), (16, 4, 1, 1), dict(groups=2, stride=2)),
    (F.conv2d, (1, 4, 9, 9), (6, 4, 3, 3), dict(padding="same")),
    (F.conv3d, (1, 2, 6, 7, 8), (4, 2, 3, 3, 3), dict(padding=1)),
    (F.conv_transpose2d, (2, 6, 7, 7), (6, 4, 3, 3), dict(stride=2, padding=1, output_padding=1)),
    (F.conv_transpose2d, (1, 4, 5, 5), (4, 2, 3, 3), dict(groups=2, stride=2)),
]


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("conv,x_shape,w_shape,kw", CONV_CASES)
def test_convolution_forward(conv, x_shape, w_shape, kw, bias: bool) -> None:  # type: ignore[no-untyped-def]
    transposed = conv is F.conv_transpose2d
    c_out = w_shape[1] * kw.get("groups", 1) if transposed else w_shape[0]
    x, w = _r(*x_shape), _r(*w_shape)
    b = _r(c_out) if bias else None
    fn = lambda: conv(x, w, b, **kw)  # noqa: E731
    out_numel = conv(x, w, b, **kw).numel()
    ours = _ours(fn, "aten::convolution")
    assert ours == torch_flops(fn)["aten::convolution"] + (out_numel if bias else 0)
    # the wrapper above it and the backend below it agree with aten::convolution
    for name, inp in recorded_ops(fn):
        if name in ("aten::conv1d", "aten::conv2d", "aten::conv3d", "aten::conv_transpose2d", "aten::_convolution",
                    "aten::mkldnn_convolution"):
            cost = estimate(name, inp)
            if name == "aten::conv2d" and kw.get("padding") == "same":
                assert cost is None  # a str padding is not recorded: "same" or "valid" cannot be told
                continue
            assert cost is not None and cost.flops == ours, name


@pytest.mark.parametrize("conv,x_shape,w_shape,kw", CONV_CASES)
@pytest.mark.parametrize("needs", [(True, True, True), (False, True, False), (True, False, False)])
def test_convolution_backward(conv, x_shape, w_shape, kw, needs: tuple[bool, bool, bool]) -> None:  # type: ignore[no-untyped-def]
    transposed = conv is F.conv_transpose2d
    groups = kw.get("groups", 1)
    c_out = w_shape[1] * groups if transposed else w_shape[0]
    x, w, b = _r(*x_shape, grad=needs[0]), _r(*w_shape, grad=needs[1]), _r(c_out, grad=needs[2])

    def fn() -> None:
        conv(x, w, b, **kw).sum().backward()

    counted = torch_flops(fn)
    go_numel = conv(x, w, b, **kw).numel()
    inp = recorded(fn, "aten::convolution_backward")
    cost = estimate("aten::convolution_backward", inp)
    assert cost is not None
    forward = counted["aten::convolution"]
    expected = counted["aten::convolution_backward"]
    if needs[1]:
        expected -= (groups - 1) * forward  # torch counts grad_weight of grouped convs groups times
    if needs[2]:
        expected += go_numel
    assert cost.flops == expected


# --------------------------------------------------------------------------- attention


def _meta(*shape: int, dtype=torch.bfloat16):  # type: ignore[no-untyped-def]
    return torch.empty(*shape, dtype=dtype, device="meta")


ATTN_SHAPES = [
    # B, Hq, Hkv, Sq, Sk, D, Dv
    (2, 4, 4, 16, 16, 8, 8),
    (1, 8, 2, 32, 32, 16, 16),  # GQA
    (2, 2, 2, 8, 24, 8, 8),  # cross attention, Sq != Sk
]


@pytest.mark.parametrize("b,hq,hkv,sq,sk,d,dv", ATTN_SHAPES)
@pytest.mark.parametrize("causal", [False, True])
def test_sdpa_on_cpu_matches_torch_formula(b, hq, hkv, sq, sk, d, dv, causal: bool) -> None:  # type: ignore[no-untyped-def]
    """CPU SDPA runs _scaled_dot_product_flash_attention_for_cpu, which FlopCounterMode does not
    count (it reports 0); the registered SDPA formula is the reference."""
    q, k, v = _r(b, hq, sq, d), _r(b, hkv, sk, d), _r(b, hkv, sk, dv)
    fn = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=hq != hkv)  # noqa: E731
    torch_count = sdpa_flop_count(q.shape, k.shape, v.shape)
    factor = 0.5 if causal and sq == sk else 1.0
    for name in ("aten::scaled_dot_product_attention", "aten::_scaled_dot_product_flash_attention_for_cpu"):
        cost = estimate(name, recorded(fn, name))
        assert cost is not None and cost.flops == torch_count * factor, name
        if causal and sq == sk:
            assert "unmasked half" in cost.note
        if causal and sq != sk:
            assert "upper bound" in cost.note


@pytest.mark.parametrize("b,hq,hkv,sq,sk,d,dv", ATTN_SHAPES[:2])
@pytest.mark.parametrize("causal", [False, True])
def test_sdpa_backward_on_cpu_matches_torch_formula(b, hq, hkv, sq, sk, d, dv, causal: bool) -> None:  # type: ignore[no-untyped-def]
    q, k, v = _r(b, hq, sq, d, grad=True), _r(b, hkv, sk, d, grad=True), _r(b, hkv, sk, dv, grad=True)

    def fn() -> None:
        F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=hq != hkv).sum().backward()

    name = "aten::_scaled_dot_product_flash_attention_for_cpu_backward"
    cost = estimate(name, recorded(fn, name))
    k_rep = (b, hq, sk, d)  # the CPU kernel sees K/V repeated to the query heads under GQA
    torch_count = sdpa_backward_flop_count((b, hq, sq, dv), (b, hq, sq, d), k_rep, (b, hq, sk, dv))
    assert cost is not None and cost.flops == torch_count * (0.5 if causal else 1.0)
    fwd = sdpa_flop_count((b, hq, sq, d), k_rep, (b, hq, sk, dv))
    assert cost.flops == pytest.approx(2.5 * fwd * (0.5 if causal else 1.0))  # D == Dv: backward = 2.5x forward


def test_math_sdpa_matches_the_bmms_it_runs() -> None:
    q, k, v = _r(2, 4, 16, 8), _r(2, 4, 16, 8), _r(2, 4, 16, 8)
    fn = lambda: aten._scaled_dot_product_attention_math(q, k, v)  # noqa: E731
    assert _ours(fn, "aten::_scaled_dot_product_attention_math") == sum(torch_flops(fn).values())
    causal = lambda: aten._scaled_dot_product_attention_math(q, k, v, is_causal=True)  # noqa: E731
    # the math kernel computes the full matrix and masks it; we count the unmasked half
    assert _ours(causal, "aten::_scaled_dot_product_attention_math") * 2 == sum(torch_flops(causal).values())


def _gpu_attention_cases():  # type: ignore[no-untyped-def]
    """(op name, callable on meta tensors, layout) for CUDA-only attention kernels."""
    cases = []
    for b, hq, hkv, sq, sk, d, dv in ATTN_SHAPES:
        for causal in (False, True):
            q, k, v = _meta(b, hq, sq, d), _meta(b, hkv, sk, d), _meta(b, hkv, sk, dv)
            qt, kt, vt = (_meta(b, sq, hq, d), _meta(b, sk, hkv, d), _meta(b, sk, hkv, dv))
            cases += [
                ("aten::_scaled_dot_product_flash_attention",
                 lambda q=q, k=k, v=v, c=causal: aten._scaled_dot_product_flash_attention(q, k, v, 0.0, c), causal),
                ("aten::_scaled_dot_product_efficient_attention",
                 lambda q=q, k=k, v=v, c=causal: aten._scaled_dot_product_efficient_attention(q, k, v, None, True,
                                                                                             0.0, c), causal),
                ("aten::_scaled_dot_product_cudnn_attention",
                 lambda q=q, k=k, v=v, c=causal: aten._scaled_dot_product_cudnn_attention(q, k, v, None, True, 0.0,
                                                                                         c), causal),
                ("aten::_flash_attention_forward",
                 lambda q=qt, k=kt, v=vt, c=causal, sq=sq, sk=sk: aten._flash_attention_forward(
                     q, k, v, None, None, sq, sk, 0.0, c, False), causal),
                ("aten::_efficient_attention_forward",
                 lambda q=qt, k=kt, v=vt, c=causal, sq=sq, sk=sk: aten._efficient_attention_forward(
                     q, k, v, None, None, None, sq, sk, 0.0, 1 if c else 0, True), causal),
            ]
    return cases


def _bhsd_shapes(inp, bshd: bool):  # type: ignore[no-untyped-def]
    q, k, v = inp.dims[0], inp.dims[1], inp.dims[2]
    if bshd:
        q, k, v = ((s[0], s[2], s[1], s[3]) for s in (q, k, v))
    return q, k, v


@pytest.mark.parametrize("name,fn,causal", _gpu_attention_cases())
def test_cuda_attention_kernels_on_meta(name: str, fn, causal: bool) -> None:  # type: ignore[no-untyped-def]
    inp = recorded(fn, name)
    cost = estimate(name, inp)
    assert cost is not None and cost.family == "attention" and cost.unit == "matrix"
    bshd = name in ("aten::_flash_attention_forward", "aten::_efficient_attention_forward")
    q, k, v = _bhsd_shapes(inp, bshd)
    reference = sdpa_flop_count(q, k, v)
    if not bshd:  # (torch's own count of the (B, S, H, D) kernels is wrong, or raises when Sq != Sk)
        assert torch_flops(fn)[name] == reference  # FlopCounterMode uses the same formula
    halve = causal and q[2] == k[2]
    assert cost.flops == reference * (0.5 if halve else 1.0)


def test_flash_forward_layout_differs_from_torch_formula_on_dense_inputs() -> None:
    """torch reads _flash_attention_forward's (B, S, H, D) inputs as (B, H, S, D)."""
    q = _meta(2, 16, 4, 8)  # B=2, S=16, H=4, D=8
    fn = lambda: aten._flash_attention_forward(q, q, q, None, None, 16, 16, 0.0, False, False)  # noqa: E731
    cost = estimate("aten::_flash_attention_forward", recorded(fn, "aten::_flash_attention_forward"))
    assert cost is not None and cost.flops == 4 * 2 * 4 * 16 * 16 * 8
    assert torch_flops(fn)["aten::_flash_attention_forward"] == 4 * 2 * 16 * 4 * 4 * 8


def _backward_cases():  # type: ignore[no-untyped-def]
    b, h, s, d = 2, 4, 16, 8
    q, go, out = _meta(b, h, s, d), _meta(b, h, s, d), _meta(b, h, s, d)
    lse = _meta(b, h, s, dtype=torch.float32)
    seed = torch.empty(2, dtype=torch.int64, device="meta")
    off = torch.empty((), dtype=torch.int64, device="meta")
    qt, got, outt = _meta(b, s, h, d), _meta(b, s, h, d), _meta(b, s, h, d)
    cases = []
    for causal in (False, True):
        cases += [
            ("aten::_scaled_dot_product_flash_attention_backward",
             lambda c=causal: aten._scaled_dot_product_flash_attention_backward(
                 go, q, q, q, out, lse, None, None, s, s, 0.0, c, seed, off), causal, False),
            ("aten::_scaled_dot_product_efficient_attention_backward",
             lambda c=causal: aten._scaled_dot_product_efficient_attention_backward(
                 go, q, q, q, None, out, lse, seed, off, 0.0, [True, True, True, False], c), causal, False),
            ("aten::_scaled_dot_product_cudnn_attention_backward",
             lambda c=causal: aten._scaled_dot_product_cudnn_attention_backward(
                 go, q, q, q, out, lse, seed, off, None, None, None, s, s, 0.0, c), causal, False),
            ("aten::_flash_attention_backward",
             lambda c=causal: aten._flash_attention_backward(
                 got, qt, qt, qt, outt, lse, None, None, s, s, 0.0, c, seed, off), causal, True),
            ("aten::_efficient_attention_backward",
             lambda c=causal: aten._efficient_attention_backward(
                 got, qt, qt, qt, None, outt, None, None, s, s, lse, 0.0, seed, off, 1 if c else 0, False),
             causal, True),
        ]
    return cases


@pytest.mark.parametrize("name,fn,causal,bshd", _backward_cases())
def test_cuda_attention_backward_kernels_on_meta(name: str, fn, causal: bool, bshd: bool) -> None:  # type: ignore[no-untyped-def]
    try:
        inp = recorded(fn, name)
    except (RuntimeError, NotImplementedError) as e:  # pragma: no cover - depends on torch build
        pytest.skip(f"{name} has no meta kernel in this torch: {e}")
    cost = estimate(name, inp)
    assert cost is not None
    shapes = [inp.dims[i] for i in (1, 2, 3)]
    if bshd:
        shapes = [(s[0], s[2], s[1], s[3]) for s in shapes]
    q, k, v = shapes
    reference = sdpa_backward_flop_count(q, q, k, v)
    if not bshd:
        assert torch_flops(fn)[name] == reference
    assert cost.flops == reference * (0.5 if causal else 1.0)
    assert cost.flops == pytest.approx(2.5 * sdpa_flop_count(q, k, v) * (0.5 if causal else 1.0))
