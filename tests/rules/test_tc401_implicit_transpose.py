"""TC401 implicit-transpose: transposing copies, memory-format mismatches, layout kernels."""

from __future__ import annotations

from kineto_builder import KinetoBuilder
from ruletest import findings_for
from traceclass.analysis import layout
from traceclass.ingest import load

SHAPE = [16, 128, 64]
PERMUTED = [8192, 1, 128]  # [16, 64, 128].permute(0, 2, 1)
ROW_MAJOR = [8192, 64, 1]
NBYTES = 16 * 128 * 64 * 4


def _permute_contiguous(b: KinetoBuilder, t0: int, src_strides: list[int], dur: int = 500_000) -> int:
    """permute, then contiguous > clone > copy_ on a [16, 128, 64] fp32 tensor with ``src_strides``."""
    b.op("aten::permute", t0, 10_000, dims=[[16, 64, 128], []], types=["float", "ScalarList"],
         strides=[[8192, 128, 1], []], concrete=["", "[0, 2, 1]"])
    ext = b.op("aten::contiguous", t0 + 20_000, dur, dims=[SHAPE, []], types=["float", "Scalar"],
               strides=[src_strides, []], concrete=["", "0"])
    if src_strides != ROW_MAJOR:  # aten::contiguous returns self when nothing is to be done
        b.op("aten::clone", t0 + 25_000, dur - 10_000, dims=[SHAPE, []], types=["float", "Scalar"],
             strides=[src_strides, []], concrete=["", "0"])
        b.op("aten::copy_", t0 + 30_000, dur - 20_000, dims=[SHAPE, SHAPE, []], types=["float", "float", "Scalar"],
             strides=[ROW_MAJOR, src_strides, []], concrete=["", "", "False"])
    b.op("aten::mm", t0 + 600_000, 1_000_000, dims=[[2048, 64], [64, 64]], types=["float", "float"],
         strides=[[64, 1], [64, 1]])
    return ext


def test_layout_definitions():
    assert layout.is_contiguous((16, 128, 64), (8192, 64, 1))
    assert layout.is_contiguous((1, 128, 64), (5, 64, 1))  # size-1 dims never matter
    assert not layout.is_contiguous((16, 128, 64), (8192, 1, 128))
    assert layout.is_channels_last((32, 3, 3, 3), (27, 1, 9, 3))
    assert layout.format_name((32, 1, 8, 8), (64, 64, 8, 1)) == "ambiguous"  # C == 1: both formats
    assert layout.is_transpose(((16, 128, 64), (8192, 1, 128)), ((16, 128, 64), (8192, 64, 1)))
    assert not layout.is_transpose(((1024, 128), (0, 1)), ((1024, 128), (128, 1)))  # broadcast expansion
    assert not layout.is_transpose(((16, 64), (128, 1)), ((16, 64), (64, 1)))  # gather of a slice
    assert layout.target_strides((32, 3, 32, 32), layout.CHANNELS_LAST) == (3072, 1, 96, 3)


def test_permute_contiguous_on_cpu(tmp_path):
    b = KinetoBuilder(gpu_name=None)
    _permute_contiguous(b, 0, PERMUTED)
    (f,) = findings_for(load(b.write(tmp_path / "cpu.json")), "TC401")
    assert f.location == "host transposing copies: aten::contiguous"
    assert f.recoverable_ns == 500_000  # aten::contiguous inclusive time
    # no steps: the analysed time is the whole trace, 0 .. the end of aten::mm at 1.6 ms
    assert f.values["analysed_ns"] == 1_600_000 and f.values["calls_count"] == 1
    assert "host: 1 transposing copy at 1 site took 500 µs (31.2% of the 1.6 ms analysed" in f.message
    assert f.values["bytes"] == 2 * NBYTES  # read once, written once
    assert f.severity == "medium"  # 31 % of the trace, but 0.5 ms: high needs 1 ms
    (e,) = f.evidence
    assert e.ops == ("aten::contiguous",) and e.duration_ns == 500_000 and e.count == 1
    assert e.values["after_op"] == "aten::permute" and e.values["input_strides"] == "8192,1,128"
    assert "permuted -> contiguous" in e.what


def test_contiguous_input_is_not_a_transpose(tmp_path):
    b = KinetoBuilder(gpu_name=None)
    _permute_contiguous(b, 0, ROW_MAJOR)
    assert findings_for(load(b.write(tmp_path / "noop.json")), "TC401", min_total_us=0, min_share_pct=0.0) == []


def test_channels_last_weight_with_nchw_input(tmp_path):
    b = KinetoBuilder(gpu_name=None)
    x, w = [32, 3, 32, 32], [32, 3, 3, 3]
    nchw, cl_w, cl_x = [3072, 1024, 32, 1], [27, 1, 9, 3], [3072, 1, 96, 3]
    conv_args = dict(dims=[x, w, [32], [], [], [], [], [], []], types=["float"] * 3 + ["ScalarList"] * 3 + ["Scalar", "ScalarList", "Scalar"],
                     strides=[nchw, cl_w, [1], [], [], [], [], [], []],
                     concrete=["", "", "", "[1, 1]", "[1, 1]", "[1, 1]", "False", "[0, 0]", "1"])
    b.op("aten::conv2d", 0, 1_000_000, **conv_args)
    b.op("aten::convolution", 1_000, 998_000, **conv_args)
    b.op("aten::_convolution", 2_000, 996_000, **conv_args)
    b.op("aten::contiguous", 3_000, 300_000, dims=[x, []], types=["float", "Scalar"], strides=[nchw, []],
         concrete=["", "2"])
    b.op("aten::copy_", 4_000, 290_000, dims=[x, x, []], types=["float", "float", "Scalar"], strides=[cl_x, nchw, []],
         concrete=["", "", "False"])
    b.op("aten::mkldnn_convolution", 310_000, 600_000, dims=[x, w], types=["float", "float"], strides=[cl_x, cl_w])
    (f,) = findings_for(load(b.write(tmp_path / "cl.json")), "TC401")
    assert f.location == "host memory-format mismatches: aten::conv2d"
    assert f.recoverable_ns == 300_000 and f.values["bytes"] == 2 * 32 * 3 * 32 * 32 * 4
    (e,) = f.evidence
    assert e.ops == ("aten::conv2d",)
    assert e.values["formats"] == "input contiguous, weight channels_last"


def test_gpu_copy_kernels_and_layout_kernels(tmp_path):
    b = KinetoBuilder()
    ext = b.op("aten::contiguous", 0, 50_000, dims=[SHAPE, []], types=["float", "Scalar"],
               strides=[PERMUTED, []], concrete=["", "0"])
    cp = b.op("aten::copy_", 5_000, 40_000, dims=[SHAPE, SHAPE, []], types=["float", "float", "Scalar"],
              strides=[ROW_MAJOR, PERMUTED, []], concrete=["", "", "False"])
    b.launch(cp, "at::native::elementwise_kernel", 10_000, 100_000, 30_000)
    b.launch(cp, "at::native::elementwise_kernel", 20_000, 120_000, 30_000, stream=8)  # overlaps: union 50 us
    conv = b.op("aten::cudnn_convolution", 60_000, 40_000)  # shapes not recorded
    b.launch(conv, "cudnn::ops::nchwToNhwcKernel", 65_000, 200_000, 70_000)
    b.launch(conv, "sm80_xmma_fprop_implicit_gemm", 70_000, 270_000, 400_000)
    b.launch(conv, "cudnn::ops::nhwcToNchwKernel", 75_000, 670_000, 30_000)
    fs = {f.location: f for f in findings_for(load(b.write(tmp_path / "gpu.json")), "TC401")}
    assert set(fs) == {"transposing copies: aten::contiguous", "layout-conversion kernels: aten::cudnn_convolution"}
    t = fs["transposing copies: aten::contiguous"]
    assert t.recoverable_ns == 50_000 and t.values["analysed_ns"] == 700_000  # no steps: 0 .. 700 us
    assert t.evidence[0].kernels == ("at::native::elementwise_kernel",) and ext > 0
    k = fs["layout-conversion kernels: aten::cudnn_convolution"]
    assert k.recoverable_ns == 100_000 and k.values["calls_count"] == 2
    assert {e.what for e in k.evidence} == {"1x cudnn::ops::nchwToNhwcKernel launched by aten::cudnn_convolution",
                                            "1x cudnn::ops::nhwcToNchwKernel launched by aten::cudnn_convolution"}


def test_small_layout_work_stays_quiet(tmp_path):
    b = KinetoBuilder(gpu_name=None)
    _permute_contiguous(b, 0, PERMUTED, dur=40_000)
    t = load(b.write(tmp_path / "small.json"))
    assert findings_for(t, "TC401") == []  # 40 us < min_total_us = 50
    assert len(findings_for(t, "TC401", min_total_us=40)) == 1
