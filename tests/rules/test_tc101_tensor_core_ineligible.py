"""TC101 tensor-core-ineligible: fp32 off TF32/fp16 tensor cores, misaligned 16-bit shapes."""

from __future__ import annotations

import pytest

from kineto_builder import KinetoBuilder
from ruletest import findings_for
from traceclass.config import AnalysisConfig
from traceclass.ingest import load

N = 4096
SQUARE = dict(dims=[[N, N], [N, N]], types=["float", "float"], strides=[[N, 1], [N, 1]])
# SM count and memory as the driver reports them: hardware lookup checks both against the name
BOARDS = {"NVIDIA A100-SXM4-80GB": (108, 80 << 30), "Tesla V100-SXM2-32GB": (80, 32 << 30),
          "NVIDIA GeForce GTX 1050": (5, 2 << 30)}


def _mm_trace(tmp_path, gpu: str, kernel: str, dur: int = 10_000_000, **op_args):
    b = KinetoBuilder(gpu_name=gpu)
    sms, mem = BOARDS[gpu]
    b.top["deviceProperties"][0].update(numSms=sms, totalGlobalMem=mem)
    ext = b.op("aten::mm", 0, 50_000, **(op_args or SQUARE))
    b.launch(ext, kernel, 10_000, 100_000, dur)
    return load(b.write(tmp_path / "mm.json"))


def test_fp32_sgemm_on_a100_could_use_tf32(tmp_path):
    t = _mm_trace(tmp_path, "NVIDIA A100-SXM4-80GB", "ampere_sgemm_128x64_nn")
    (f,) = findings_for(t, "TC101")
    assert f.location == "fp32 matmuls/convolutions off the tensor cores: aten::mm"
    # no steps: the analysed time is the whole trace, 0 .. 10.1 ms
    assert f.values["analysed_ns"] == 10_100_000
    assert f.message.startswith("GPU 0: 1 fp32 op group ran 10 ms off the tensor cores of")
    assert "8.75 ms recoverable, 86.6% of the 10.1 ms analysed (threshold 1.0% and 100 us); worst: aten::mm" \
        in f.message
    # compute-bound at both roofs: 10 ms x (1 - 19.5 / 156 TFLOP/s)
    assert f.recoverable_ns == 8_750_000
    assert f.values["target_precision"] == "tf32" and f.severity == "high"
    assert f.values["tensor_core_kernel_pct"] == 0.0
    (e,) = f.evidence
    assert e.values["lower_bound_fp32_ns"] == pytest.approx(2 * N**3 / 19.5e12 * 1e9, abs=0.1)
    assert e.kernels == ("ampere_sgemm_128x64_nn",) and "0% on TF32 kernels" in e.what
    assert "allow_tf32" in f.fix


def test_fp32_already_on_tf32_kernels_is_fine(tmp_path):
    t = _mm_trace(tmp_path, "NVIDIA A100-SXM4-80GB", "cutlass_80_tensorop_s1688gemm_256x128_32x3_nn_align4")
    assert findings_for(t, "TC101", min_recoverable_us=0, min_recoverable_pct=0.0) == []


def test_v100_has_fp16_tensor_cores_only(tmp_path):
    t = _mm_trace(tmp_path, "Tesla V100-SXM2-32GB", "volta_sgemm_128x64_nn")
    (f,) = findings_for(t, "TC101")
    assert f.values["target_precision"] == "fp16" and "GradScaler" in f.fix
    # fp16 tensor cores at 125 TFLOP/s vs 15.7 fp32; both compute-bound
    assert f.recoverable_ns == round(10_000_000 * (1 - 15.7 / 125))


def test_no_tensor_cores_and_no_gpu_mean_no_finding(tmp_path):
    t = _mm_trace(tmp_path, "NVIDIA GeForce GTX 1050", "maxwell_sgemm_128x64_nn")
    cfg = AnalysisConfig(device="gtx-1050")  # Pascal: no matrix units
    assert findings_for(t, "TC101", cfg, min_recoverable_us=0, min_recoverable_pct=0.0) == []
    b = KinetoBuilder(gpu_name=None)
    b.op("aten::mm", 0, 10_000_000, **SQUARE)
    assert findings_for(load(b.write(tmp_path / "cpu.json")), "TC101", min_recoverable_us=0,
                        min_recoverable_pct=0.0) == []


def _bf16(m: int, k: int, n: int) -> dict:
    return dict(dims=[[m, k], [k, n]], types=["c10::BFloat16"] * 2, strides=[[k, 1], [n, 1]])


def test_bf16_aligned_on_h100_is_eligible(tmp_path):
    b = KinetoBuilder()
    ext = b.op("aten::mm", 0, 50_000, **_bf16(8192, 4096, 4096))
    b.launch(ext, "sm90_xmma_gemm_bf16bf16_bf16f32", 10_000, 100_000, 2_000_000)
    assert findings_for(load(b.write(tmp_path / "ok.json")), "TC101", min_recoverable_us=0,
                        min_recoverable_pct=0.0) == []


def test_bf16_misaligned_against_aligned_reference(tmp_path):
    b = KinetoBuilder()
    ext = b.op("aten::mm", 0, 50_000, **_bf16(8192, 4096, 4096))
    b.launch(ext, "sm90_xmma_gemm_bf16bf16_bf16f32", 10_000, 100_000, 400_000)
    ext = b.op("aten::mm", 100_000, 50_000, **_bf16(8192, 4095, 4096))
    b.launch(ext, "cutlass_gemm_align1", 110_000, 500_000, 600_000)
    (f,) = findings_for(load(b.write(tmp_path / "mis.json")), "TC101")
    assert f.location == "matmuls/convolutions with misaligned dimensions: aten::mm"
    # the aligned GEMM reaches lb/400 us of the roof; at that fraction K=4095 takes 400 us x 4095/4096
    assert f.recoverable_ns == int(600_000 - 400_000 * 4095 / 4096)
    (e,) = f.evidence
    assert "leading dims 4095x4096, not multiples of 8" in e.what
    assert e.values["aligned_roof_ratio"] == pytest.approx(2 * 8192 * 4096**2 / 989.5e12 * 1e9 / 400_000, abs=1e-4)


def test_bf16_misaligned_without_aligned_sibling_uses_the_documented_gemm_fraction(tmp_path):
    b = KinetoBuilder()
    ext = b.op("aten::mm", 0, 50_000, **_bf16(8192, 4095, 4096))
    b.launch(ext, "cutlass_gemm_align1", 10_000, 100_000, 600_000)
    (f,) = findings_for(load(b.write(tmp_path / "mis1.json")), "TC101")
    lb = 2 * 8192 * 4095 * 4096 / 989.5e12 * 1e9  # H100 SXM bf16 dense peak
    assert f.recoverable_ns == int(600_000 - lb / 0.8)  # 80 %: the documented GEMM ceiling
    (e,) = f.evidence
    assert e.values["aligned_ratio_basis"] == "documented fraction of the roof"
    assert e.values["aligned_roof_ratio"] == 0.8


def test_fp32_cuda_core_kernels_found_by_name_without_shapes(tmp_path):
    b = KinetoBuilder(gpu_name="Tesla V100-SXM2-32GB")
    b.top["deviceProperties"][0].update(numSms=80, totalGlobalMem=32 << 30, computeMajor=7)
    del b.top["record_shapes"]
    ext = b.op("aten::mm", 0, 50_000)
    b.launch(ext, "volta_sgemm_128x64_nn", 10_000, 100_000, 10_000_000)
    (f,) = findings_for(load(b.write(tmp_path / "noshape.json")), "TC101")
    assert f.values["target_precision"] == "fp16"
    assert f.recoverable_ns == round(10_000_000 * (1 - 15.7 / 125))  # compute-bound at both roofs
    (e,) = f.evidence
    assert "shapes not recorded" in e.what and e.kernels == ("volta_sgemm_128x64_nn",)
    assert e.values["estimate"].startswith("upper bound")
