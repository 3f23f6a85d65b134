"""Which roof an op is judged against: the kernel's path, copies on their link, CPU threads."""

from __future__ import annotations

import pytest

from kineto_builder import KinetoBuilder
from traceclass.analysis import analyze
from traceclass.analysis.kernel_precision import kernel_path
from traceclass.analysis.roofline import UNCLASSIFIED
from traceclass.ingest import load

N = 4096
FLOPS = 2 * N**3  # one [4096x4096] x [4096x4096] matmul
SQUARE = dict(dims=[[N, N], [N, N]], types=["float", "float"], strides=[[N, 1], [N, 1]])


@pytest.mark.parametrize("name, path", [
    ("void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_256x64_16x4_nn_align4>(x)", ("tf32", "matrix")),
    ("ampere_tf32_s1688gemm_tf32_128x128_nn", ("tf32", "matrix")),
    ("cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_64x6_tn_align8", ("bf16", "matrix")),
    ("volta_h884gemm_64x64_nn", ("fp16", "matrix")),
    ("sm90_xmma_gemm_e4m3e4m3_bf16f32_f32_tn_n_tilesize128x128x64", ("fp8", "matrix")),
    ("volta_sgemm_64x64_nt", ("fp32", "vector")),
    ("void cutlass::Kernel2<cutlass_80_simt_sgemm_128x32_8x5_nn_align1>(x)", ("fp32", "vector")),
    ("Cijk_Alik_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT64x32x256_MI16x16x1_SN_LDSB1", ("bf16", "matrix")),
    ("Cijk_Ailk_Bljk_HHS_BH_MT128x128x32_MI32x32x8_SN", ("fp16", "matrix")),
    ("Cijk_Ailk_Bljk_SS_MT64x64x8_SN_GRVW4", ("fp32", "vector")),
    ("Cijk_Alik_Bljk_SB_Bias_AS_SAV_UserArgs_MT64x16x32_MI16x16x1_SN", ("fp32", "matrix")),
    ("sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x32", ("tf32", "matrix")),
    ("nvjet_tst_64x64_64x16_2x1_2cta_v_bz_bias_TNT", None),
])
def test_kernel_path_from_name(name, path):
    assert kernel_path(name) == path


def _a100(tmp_path, kernel: str, dur: int):
    b = KinetoBuilder(gpu_name="NVIDIA A100-SXM4-80GB")
    b.top["deviceProperties"][0].update(numSms=108, totalGlobalMem=80 << 30, computeMajor=8)
    ext = b.op("aten::mm", 0, 50_000, **SQUARE)
    b.launch(ext, kernel, 10_000, 100_000, dur)
    a = analyze(load(b.write(tmp_path / "mm.json")))
    (g,) = [g for g in a.ops.groups if g.name == "aten::mm"]
    return g


def test_fp32_gemm_on_tf32_kernels_is_judged_against_the_tf32_roof(tmp_path):
    dur = round(FLOPS / 100e12 * 1e9)  # 100 TFLOP/s: five times the 19.5 TFLOP/s fp32 roof
    g = _a100(tmp_path, "cutlass_80_tensorop_s1688gemm_256x128_32x3_nn_align4", dur)
    assert (g.precision, g.unit) == ("tf32", "matrix")
    assert g.point.bound == "compute-bound"
    assert g.point.pct_of_roof == pytest.approx(100 * FLOPS / (dur / 1e9) / 156e12, rel=1e-9)
    assert "TF32 tensor/matrix cores (kernel names)" in g.note


def test_fp32_gemm_beating_the_fp32_roof_without_a_name_is_tf32(tmp_path):
    dur = round(FLOPS / 100e12 * 1e9)
    g = _a100(tmp_path, "gemm_kernel_generic", dur)
    assert (g.precision, g.unit) == ("tf32", "matrix")
    assert g.point.pct_of_roof == pytest.approx(100 * 100 / 156, rel=1e-3)
    assert "beats the fp32 roof" in g.note


def test_cuda_core_sgemm_keeps_the_fp32_roof(tmp_path):
    dur = round(FLOPS / 15e12 * 1e9)
    g = _a100(tmp_path, "ampere_sgemm_128x64_nn", dur)
    assert (g.precision, g.unit) == ("fp32", "vector")
    assert g.point.pct_of_roof == pytest.approx(100 * 15 / 19.5, rel=1e-3)


def test_beating_every_roof_names_the_suspect_figure(tmp_path):
    dur = round(FLOPS / 400e12 * 1e9)  # above the 156 TFLOP/s TF32 peak
    g = _a100(tmp_path, "cutlass_80_tensorop_s1688gemm_256x128_32x3_nn_align4", dur)
    assert g.point.bound == UNCLASSIFIED and g.point.pct_of_roof is None and g.point.gap_ns is None
    assert "suspect figure: the tf32 matrix peak of a100-sxm4-80gb (156 TFLOP/s; measured 400 TFLOP/s)" in g.note


def _copy_trace(tmp_path, direction: str, src: str, dst: str, nbytes: int, dur: int):
    b = KinetoBuilder(gpu_name="NVIDIA A100-SXM4-80GB")
    b.top["deviceProperties"][0].update(numSms=108, totalGlobalMem=80 << 30, computeMajor=8)
    n = nbytes // 4
    ext = b.op("aten::copy_", 0, dur + 100_000, dims=[[n], [n], []], types=["float", "float", "bool"])
    corr = b.runtime("cudaMemcpyAsync", 10_000, 5_000, ext=ext)
    b.memcpy(direction, src, dst, 50_000, dur, nbytes, corr=corr)
    a = analyze(load(b.write(tmp_path / "copy.json")))
    (g,) = [g for g in a.ops.groups if g.name == "aten::copy_"]
    return g


def test_pinned_host_to_device_copy_is_judged_against_the_link_bytes_once(tmp_path):
    nbytes = 55_600_000
    dur = round(nbytes / 7.6e9 * 1e9)  # 7.6 GB/s
    g = _copy_trace(tmp_path, "HtoD", "Pinned", "Device", nbytes, dur)
    assert g.unit == "link" and g.bytes == nbytes
    assert g.point.bound == "memory-bound"
    assert g.point.pct_of_roof == pytest.approx(100 * 7.6 / 32, rel=1e-4)  # PCIe Gen4 x16, one direction
    assert g.point.lower_bound_ns == pytest.approx(nbytes / 32e9 * 1e9)


def test_device_to_device_copy_reads_and_writes_memory(tmp_path):
    nbytes = 100_000_000
    dur = 200_000  # 2 x 100 MB in 0.2 ms = 1,000 GB/s of 2,039
    g = _copy_trace(tmp_path, "DtoD", "Device", "Device", nbytes, dur)
    assert g.unit == "vector" and g.bytes == 2 * nbytes
    assert g.point.pct_of_roof == pytest.approx(100 * 1000 / 2039, rel=1e-4)


def test_cpu_op_on_several_threads_gets_their_cores(tmp_path):
    b = KinetoBuilder(gpu_name=None)
    n = 1024
    dims = dict(dims=[[n, n], [n, n]], types=["float", "float"])
    # 2 GFLOP in 10 ms on each of 4 threads: 214.7 GFLOP/s per instance, beyond one 96 GFLOP/s core
    for tid in (1, 2, 3, 4):
        b.op("aten::mm", 0, 10_000_000, tid=tid, **dims)
    a = analyze(load(b.write(tmp_path / "cpu.json")))
    (g,) = [g for g in a.ops.groups if g.name == "aten::mm"]
    assert "CPU roof for 4 cores: the threads seen running this op" in g.note
    assert g.point.pct_of_roof == pytest.approx(100 * 2 * n**3 / 0.01 / (4 * 96e9), rel=1e-6)


def test_cpu_op_beating_its_core_roof_says_so(tmp_path):
    b = KinetoBuilder(gpu_name=None)
    n = 1024
    b.op("aten::mm", 0, 5_000_000, dims=[[n, n], [n, n]], types=["float", "float"])  # 429 GFLOP/s on one thread
    a = analyze(load(b.write(tmp_path / "cpu1.json")))
    (g,) = [g for g in a.ops.groups if g.name == "aten::mm"]
    assert g.point.bound == UNCLASSIFIED and g.point.pct_of_roof is None
    assert "needs at least 5 cores of this CPU" in g.note and "--cpu NAME:CORES" in g.note
