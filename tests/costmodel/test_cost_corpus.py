"""The cost model on real traces from the corpus: specific ops, and robustness over everything."""

from __future__ import annotations

import functools

import pytest
from conftest import CORPUS

from traceclass.costmodel import FAMILIES, estimate, registry
from traceclass.costmodel.args import Args
from traceclass.ingest import load
from traceclass.model.strings import OpInputs

TORCH = CORPUS / "torch"


@functools.lru_cache(maxsize=None)
def _ops(name: str) -> list[tuple[str, OpInputs | None]]:
    path = TORCH / name
    if not path.exists():
        pytest.skip(f"corpus file not available: {path}")
    t = load(path)
    names = t.strings.decode(t.ops.name)
    return [(str(n), t.inputs[ic]) for n, ic in zip(names, t.ops.inputs.tolist())]


def _first(trace: str, op: str) -> OpInputs:
    for n, inp in _ops(trace):
        if n == op and inp is not None:
            return inp
    raise AssertionError(f"{op} not in {trace}")


def test_h100_bert_addmm() -> None:
    inp = _first("gpu/h100_bert-small_inference.json.gz", "aten::addmm")
    c = estimate("aten::addmm", inp)
    assert c is not None
    (n,), (m, k), (_, n2) = inp.dims[0], inp.dims[1], inp.dims[2]
    assert n == n2
    assert c.flops == 2 * m * n * k + m * n
    assert c.bytes == 2 * (n + m * k + k * n + m * n)
    assert (c.precision, c.unit, c.family) == ("bf16", "matrix", "gemm")


def test_h100_bert_flash_attention_and_its_sdpa_front_end_agree() -> None:
    trace = "gpu/h100_bert-small_inference.json.gz"
    kernel = estimate("aten::_flash_attention_forward", _first(trace, "aten::_flash_attention_forward"))
    front = estimate("aten::scaled_dot_product_attention", _first(trace, "aten::scaled_dot_product_attention"))
    middle = estimate("aten::_scaled_dot_product_flash_attention",
                      _first(trace, "aten::_scaled_dot_product_flash_attention"))
    assert kernel is not None and front is not None and middle is not None
    assert kernel.flops == front.flops == middle.flops == 4 * 1 * 8 * 141 * 141 * 64
    assert kernel.bytes == front.bytes
    assert kernel.note == ""  # BERT is not causal, and the trace says so


def test_mi300x_resnet_conv_forward_and_backward() -> None:
    trace = "gpu/mi300x_resnet_act_checkpoint_train.json.gz"
    fwd = _first(trace, "aten::miopen_convolution")
    c = estimate("aten::miopen_convolution", fwd)
    assert c is not None and c.family == "conv" and c.precision == "bf16"
    x, w = fwd.dims[0], fwd.dims[1]
    # every convolution_backward in the trace has a known mask and a positive cost
    bwd = [inp for n, inp in _ops(trace) if n == "aten::convolution_backward" and inp is not None]
    assert bwd
    for inp in bwd:
        cb = estimate("aten::convolution_backward", inp)
        assert cb is not None and cb.flops > 0 and "not recorded" not in cb.note
    assert c.flops > 0 and x[1] == w[1]


def test_cpu_trace_ops() -> None:
    trace = "cpu/mixed_stack.step6.pt.trace.json.gz"
    for op in ("aten::mm", "aten::addmm", "aten::mkldnn_convolution", "aten::native_layer_norm_backward",
               "aten::_scaled_dot_product_attention_math", "aten::_softmax_backward_data", "aten::addcdiv_"):
        c = estimate(op, _first(trace, op))
        assert c is not None and c.bytes > 0, op


def test_legacy_trace_without_concrete_inputs() -> None:
    trace = "gpu/a100_train_rank0_of16.json.gz"
    c = estimate("aten::addmm", _first(trace, "aten::addmm"))
    assert c is not None and c.flops == 2 * 4096 * 100 * 64 + 4096 * 64


CORPUS_TRACES = [
    "gpu/a100_train_rank0_of16.json.gz", "gpu/b200_eager.json.gz", "gpu/h100_bert-small_inference.json.gz",
    "gpu/h100_qwen1.5-0.5b_inference.json.gz", "gpu/h100_timesformer_inference.json.gz",
    "gpu/mi250_minitoy_train.json.gz", "gpu/mi300x_resnet_act_checkpoint_train.json.gz",
    "gpu/mi300x_sglang_decode_cudagraph.json.gz", "gpu/mi300x_sglang_decode_graph_capture.json.gz",
    "gpu/mi300x_torch_compile_triton.json.gz", "gpu/no_distributed_info.json.gz",
    "cpu/mixed_stack.step6.pt.trace.json.gz", "cpu/rank_non_gpu.json.gz",
]


@pytest.mark.parametrize("trace", CORPUS_TRACES)
def test_every_recorded_op_estimates_without_error(trace: str) -> None:
    """Calls the estimators directly (no safety net) on every distinct recorded op."""
    seen: set[tuple[str, OpInputs]] = set()
    modelled = 0
    for name, inp in _ops(trace):
        if inp is None or not inp.dims or (name, inp) in seen:
            continue
        seen.add((name, inp))
        entry = registry._TABLE.get(registry._canonical(name))
        if entry is None:
            continue
        family, fn = entry
        c = fn(registry._canonical(name), Args(inp))
        if c is None:
            continue
        modelled += 1
        assert c.family == family in FAMILIES
        assert c.flops >= 0 and c.bytes >= 0
        assert c.unit in ("matrix", "vector")
        assert c.precision and " " not in c.precision
    if trace not in ("cpu/rank_non_gpu.json.gz",):
        assert modelled > 0
