"""Kernel family from the kernel name: cuDNN / MIOpen batch-norm kernels are normalization."""

from __future__ import annotations

import pytest

from traceclass.analysis.kernel_families import kernel_family

# names as the corpus traces write them (v100_ns_resolution, a100_nccl_collectives), plus the
# NHWC and inference variants and MIOpen's
BATCH_NORM = [
    "void cudnn::bn_bw_1C11_kernel_new<float, float, float2, 32, true, 1>(float, float, float, float, "
    "cudnnTensorStruct, float const*, cudnnTensorStruct, float const*)",
    "void cudnn::bn_fw_tr_1C11_singleread<float, 512, true, 1, 2, 0>(cudnn::bn_fw_tr_1C11_args<float>)",
    "void cudnn::bn_fw_tr_1C11_kernel_NCHW<float, float, int, 512, true, 1, true>(cudnnTensorStruct)",
    "void cudnn::bn_bw_1C11_singleread<float, 512, true, 1, 2, 0>(cudnn::bn_bw_1C11_args<float>)",
    "void cudnn::bn_fw_inf_1C11_kernel_NCHW<float, float, true, 1>(float, float, cudnnTensorStruct)",
    "void cudnn::ops::bn_fw_tr_1C11_kernel_NCHW<float, float, int, 512, true, 1, true>(cudnnTensorStruct)",
    "void cudnn::batchnorm_fwtr_nhwc_semiPersist<__half, float, float, 512, true, false>(cudnn::bn_args)",
    "void cudnn::batchnorm_bwtr_nhwc_semiPersist<__half, float, float, 512, true, false, false>(cudnn::bn_args)",
    "MIOpenBatchNormFwdTrainSpatial",
    "MIOpenBatchNormBwdSpatial",
]

CONVOLUTION = [
    "void cudnn::cnn::reduce_wgrad_nchw_helper<float, float>(int, int, int, float*, float const*)",
    "void cudnn::winograd_nonfused::winogradForwardOutput4x4<float, float>(cudnn::winograd_nonfused::"
    "WinogradOutputParams<float, float>)",
    "void cudnn::detail::implicit_convolve_sgemm<float, float, 128, 5, 5, 3, 3, 3, 1, true, false, true>(int)",
    "void cudnn::detail::dgrad_engine<float, 128, 6, 7, 3, 3, 5, false>(int, int, int, float const*)",
    "MIOpenConvUni",
    "miopenSp3AsmConv_v21_1_3_gfx9_fp32_stride1",
]


@pytest.mark.parametrize("name", BATCH_NORM, ids=lambda n: n.split("<")[0].removeprefix("void "))
def test_library_batch_norm_kernels_are_norm(name):
    assert kernel_family(name) == "norm"


@pytest.mark.parametrize("name", CONVOLUTION, ids=lambda n: n.split("<")[0].removeprefix("void "))
def test_library_convolution_kernels_stay_conv(name):
    assert kernel_family(name) == "conv"


def test_cudnn_layout_kernels_stay_layout():
    assert kernel_family("void cudnn::ops::nchwToNhwcKernel<float, float, float, false, true, "
                         "(cudnnKernelDataType_t)2>(cudnn::ops::nchw2nhwc_params_t<float>)") == "layout"


def test_v100_corpus_batch_norm_time_is_norm():
    """v100_ns_resolution (a ResNet-style training run on cuDNN): its 530 cudnn::bn_* kernels
    (220 bn_bw_1C11_kernel_new, 140 bn_fw_tr_1C11_singleread, 125 bn_fw_tr_1C11_kernel_NCHW,
    45 bn_bw_1C11_singleread) are normalization, none convolution."""
    import numpy as np

    from conftest import corpus
    from traceclass.analysis.kernel_families import gpu_families
    from traceclass.ingest import load

    t = load(corpus("torch", "gpu", "v100_ns_resolution.json.gz"))
    names = t.names(t.gpu.name)
    bn = np.array(["cudnn::bn_" in n for n in names.tolist()])
    fam = gpu_families(t)
    assert int(bn.sum()) == 530 and set(fam[bn].tolist()) == {"norm"}
    assert int((t.gpu.end_ns - t.gpu.start_ns)[bn].sum()) == 86_044_403  # ns moved from conv to norm
