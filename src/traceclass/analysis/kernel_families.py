"""Kernel name -> family, for the timeline split, nsys heuristics and kernel tables.

Families: ``comm``, ``gemm``, ``conv``, ``attention``, ``norm``, ``softmax``, ``reduction``,
``elementwise``, ``layout`` (transposes and layout conversions), ``copy`` (copy/cat kernels),
``embedding``, ``memcpy``, ``memset``, ``sync``, ``other``. Patterns are checked in order;
the first match wins, so ``comm`` beats ``reduce`` for ``ncclDevKernel_ReduceScatter``.
"""

from __future__ import annotations

import re

import numpy as np

from traceclass.model import GpuKind, Trace
from traceclass.model.names import NAME_SCAN_LIMIT

COMM_PATTERN = re.compile(
    r"(?i)(^|[^a-z])(nccl|rccl|hccl)|ncclKernel|ncclDevKernel|multimem_\w*(all_?reduce|all_?gather)"
    r"|cross_device_reduce|one_shot_all_reduce|two_shot_all_reduce|custom_?all_?reduce"
)

_FAMILIES: list[tuple[str, re.Pattern[str]]] = [
    ("comm", COMM_PATTERN),
    (
        "layout",
        re.compile(
            r"(?i)nchwToNhwc|nhwcToNchw|batched_transpose|transpose|permute|"
            r"convertTensor|nchw2nhwc|nhwc2nchw|layout_conversion"
        ),
    ),
    (
        "attention",
        re.compile(
            r"(?i)flash|fmha|attention|attn|sdpa|mha_|paged_attention|cutlass.*fmha|"
            r"xformers|softmax_warp_(fwd|bwd).*attn"
        ),
    ),
    (
        "conv",
        # cuDNN's and MIOpen's own names mostly mean convolution, but not their batch-norm
        # kernels (cudnn::bn_fw_tr_1C11_kernel_NCHW, cudnn::batchnorm_fwtr_nhwc_semiPersist,
        # MIOpenBatchNormBwdSpatial): those fall through to ``norm``
        re.compile(
            r"(?i)conv|implicit_gemm|cudnn::(?!(?:\w+::)*(?:bn_|batchnorm))|miopen(?!batchnorm)|wgrad|dgrad|fprop|"
            r"xmma_fprop|igemm|winograd|im2col|col2im"
        ),
    ),
    (
        "gemm",
        re.compile(
            r"(?i)gemm|gemv|matmul|sgemm|hgemm|dgemm|cublas|cutlass|nvjet|Cijk_|"
            r"ampere_|volta_|turing_|sm\d+_xmma|hipblaslt|_mm_|bmm|wmma|mfma|ck::|"
            r"gemm_kernel|splitKreduce"
        ),
    ),
    ("norm", re.compile(r"(?i)layer_?norm|rms_?norm|batch_?norm|group_?norm|instance_?norm|bn_fw|bn_bw|\bnorm_")),
    ("softmax", re.compile(r"(?i)softmax")),
    ("embedding", re.compile(r"(?i)embedding|index_select|gather_kernel|indexSelect")),
    (
        "reduction",
        re.compile(r"(?i)reduce|reduction|sum_kernel|argmax|argmin|cumsum|scan|topk|sort|mean_kernel"),
    ),
    ("copy", re.compile(r"(?i)copy|CatArray|cat_|direct_copy|memcpy|clone|to_copy|index_put|scatter")),
    (
        "elementwise",
        re.compile(
            r"(?i)elementwise|vectorized|unrolled|pointwise|triton_poi|triton_|_foreach|"
            r"multi_tensor_apply|fill|add|mul|div|relu|gelu|silu|sigmoid|tanh|exp|act_and_mul|"
            r"rotary|quant|dropout|where|clamp|abs|neg|pow|sqrt"
        ),
    ),
]

FAMILY_ORDER = tuple(name for name, _ in _FAMILIES) + ("memcpy", "memset", "sync", "other")
#: family name -> its code in :func:`gpu_family_codes` (compare codes, not an object array of names)
FAMILY_CODE = {name: i for i, name in enumerate(FAMILY_ORDER)}


def kernel_family(name: str) -> str:
    """Family of one kernel name (``other`` when nothing matches); the first
    :data:`~traceclass.model.names.NAME_SCAN_LIMIT` characters decide."""
    name = name[:NAME_SCAN_LIMIT]
    for family, pattern in _FAMILIES:
        if pattern.search(name):
            return family
    return "other"


def gpu_family_codes(trace: Trace) -> np.ndarray:
    """Family per ``trace.gpu`` row as an index into :data:`FAMILY_ORDER` (int8), computed once
    per distinct name."""
    gpu = trace.gpu
    if len(gpu) == 0:
        return np.zeros(0, dtype=np.int8)
    codes = np.unique(gpu.name)
    index = FAMILY_CODE
    names = trace.strings
    lut = np.array([index[kernel_family(names[c]) if c >= 0 else "other"] for c in codes.tolist()], dtype=np.int8)
    fam = lut[np.searchsorted(codes, gpu.name)]
    kind = gpu.kind
    fam = np.where(kind == GpuKind.MEMCPY, index["memcpy"], fam)
    fam = np.where(kind == GpuKind.MEMSET, index["memset"], fam)
    fam = np.where(kind == GpuKind.SYNC, index["sync"], fam)
    return fam.astype(np.int8)


_FAMILY_NAMES = np.array(FAMILY_ORDER, dtype=object)


def gpu_families(trace: Trace, codes: np.ndarray | None = None) -> np.ndarray:
    """Family string per ``trace.gpu`` row (object array); pass ``codes`` if already computed."""
    c = gpu_family_codes(trace) if codes is None else codes
    return _FAMILY_NAMES[c.astype(np.int64)] if len(c) else np.zeros(0, dtype=object)
