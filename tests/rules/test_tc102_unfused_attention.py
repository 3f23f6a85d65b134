"""TC102 unfused-attention: bmm -> scale -> softmax -> bmm over S x S, with the fused projection."""

from __future__ import annotations

from conftest import corpus
from kineto_builder import KinetoBuilder
from ruletest import findings_for
from traceclass import hardware
from traceclass.ingest import load

BF16 = "c10::BFloat16"
BH, S, D = 96, 512, 64


def _attention(tmp_path, seq: int = S, dur: int = 1_000_000, softmax: str = "aten::_softmax"):
    b = KinetoBuilder()
    t = 0
    chain = [
        ("aten::bmm", [[BH, seq, D], [BH, D, seq]], [BF16, BF16], "sm90_xmma_gemm_bf16bf16_bf16f32"),
        ("aten::mul", [[8, 12, seq, seq], []], [BF16, "double"], "vectorized_elementwise_kernel"),
        (softmax, [[8, 12, seq, seq], [], []], [BF16, "int", "bool"], "cunn_SoftMaxForward"),
        ("aten::bmm", [[BH, seq, seq], [BH, seq, D]], [BF16, BF16], "sm90_xmma_gemm_bf16bf16_bf16f32"),
    ]
    for name, dims, types, kernel in chain:
        ext = b.op(name, t, 20_000, dims=dims, types=types)
        b.launch(ext, kernel, t + 5_000, 100_000 + t * 100, dur)
        t += 30_000
    return load(b.write(tmp_path / "attn.json"))


def test_unfused_forward_attention_with_projected_flash_time(tmp_path):
    (f,) = findings_for(_attention(tmp_path), "TC102")
    spec = hardware.get("h100-sxm")
    flops = 4.0 * BH * S * S * D  # QK^T and PV
    nbytes = 4.0 * BH * S * D * 2  # Q, K, V read, O written, bf16
    projected = max(flops / (spec.peaks["matrix_bf16"] * 0.75), nbytes / (spec.memory_bandwidth_bps * 0.9)) * 1e9
    assert f.values["time_ns"] == 4_000_000  # four ops of 1 ms GPU time each
    assert f.values["projected_fused_ns"] == round(projected)
    assert f.recoverable_ns == int(4_000_000 - projected)
    assert f.location == "unfused forward attention: S = 512, D = 64"
    (e,) = f.evidence
    assert e.ops == ("aten::bmm", "aten::mul", "aten::_softmax")
    assert e.values["seq"] == S and e.values["head_dim"] == D and e.values["batch_heads"] == BH
    assert "scaled_dot_product_attention" in f.fix


def test_short_sequences_and_non_square_softmax_are_not_attention(tmp_path):
    assert findings_for(_attention(tmp_path, seq=64), "TC102") == []
    assert findings_for(_attention(tmp_path), "TC102", min_seq_count=1024) == []


def test_corpus_timesformer_attention_fires():
    path = corpus("torch", "gpu", "h100_timesformer_inference.json.gz")
    (f,) = findings_for(path, "TC102")
    assert f.values["instances_count"] == 12
    assert f.location.startswith("unfused forward attention: S = 3137, D = 64")
    assert f.values["time_ns"] > 100_000_000 and f.values["projected_fused_ns"] < 5_000_000


def test_unfused_backward_attention(tmp_path):
    b = KinetoBuilder()
    t = 0
    chain = [  # BmmBackward of P @ V (dV, dP), softmax backward, BmmBackward of Q @ K^T (dQ, dK)
        ("aten::bmm", [[BH, S, S], [BH, S, D]], [BF16, BF16]),
        ("aten::bmm", [[BH, S, D], [BH, D, S]], [BF16, BF16]),
        ("aten::_softmax_backward_data", [[8, 12, S, S], [8, 12, S, S], [], []], [BF16, BF16, "int", "int"]),
        ("aten::bmm", [[BH, S, S], [BH, S, D]], [BF16, BF16]),
        ("aten::bmm", [[BH, D, S], [BH, S, S]], [BF16, BF16]),
    ]
    for name, dims, types in chain:
        ext = b.op(name, t, 20_000, dims=dims, types=types)
        b.launch(ext, "sm90_xmma_gemm_bf16bf16_bf16f32" if "bmm" in name else "softmax_bwd", t + 5_000,
                 100_000 + t * 100, 1_000_000)
        t += 30_000
    (f,) = findings_for(load(b.write(tmp_path / "bwd.json")), "TC102")
    spec = hardware.get("h100-sxm")
    flops = 2.0 * BH * S * S * (3 * D + 2 * D)  # score recompute, dV, dP, dQ, dK
    nbytes = 4.0 * BH * S * D * 2 + 4.0 * BH * S * D * 2  # dO, Q, K, V, O read; dQ, dK, dV written
    projected = max(flops / (spec.peaks["matrix_bf16"] * 0.75), nbytes / (spec.memory_bandwidth_bps * 0.9)) * 1e9
    assert f.location == "unfused backward attention: S = 512, D = 64"
    assert f.values["time_ns"] == 5_000_000
    assert f.values["projected_fused_ns"] == round(projected)
