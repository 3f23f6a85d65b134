"""Which execution path a GEMM/convolution kernel took, read from its name: precision and unit.

An op's dtype says what the program asked for; the kernel says what ran. An fp32 ``aten::mm``
runs on TF32 tensor cores when TF32 is allowed (``cutlass_80_tensorop_s1688gemm``,
``ampere_tf32_*``, ``*xf32*``) and on CUDA cores otherwise (``volta_sgemm``,
``cutlass_80_simt_sgemm``); the two roofs differ by 8x on an A100. The roof an op is judged
against must be the one of the path that ran.

Name grammar (first match wins, so more specific families come first):

* fp8: ``e4m3``, ``e5m2``, ``fp8``, ``f8f8`` -> fp8 matrix;
* bf16 / fp16 tensor ops: ``bf16``, ``bfloat16``; ``h16816``, ``h1688``, ``h884``, ``hmma``,
  ``f16f16``, ``fp16`` -> matrix. CUTLASS writes the accumulator after the input type
  (``tensorop_bf16_s16816gemm``: bf16 inputs, fp32 accumulate), so the 16-bit token is checked
  before the ``s16816`` TF32 token;
* TF32 tensor ops: ``tf32``, ``xf32``, ``tensorop_s1688``/``tensorop_s16816``, ``_s1688gemm``
  -> tf32 matrix;
* CUDA-core fp32: ``sgemm`` and ``simt`` names without a tensor-op token (``volta_sgemm_*``,
  ``ampere_sgemm_*``, ``cutlass_80_simt_sgemm``, ``gemmSN``) -> fp32 vector;
* fp64: ``dgemm``, ``_d884``/``dmma`` -> fp64 (matrix with ``dmma``/``d884``, else vector);
* AMD Tensile ``Cijk_<A>_<B>_<type>_...``: the type token's first letter is the input type
  (``S`` fp32, ``H`` fp16, ``B`` bf16, ``D`` fp64; ``HHS``/``BBS``: 16-bit inputs, fp32
  compute); an ``MI<m>x<n>x<k>`` token means MFMA (matrix), its absence the vector ALUs;
* other MFMA/WMMA/wgmma/xmma names carry no precision of their own: None (the op dtype decides).

None means the name does not say; the caller keeps the op's own precision.
"""

from __future__ import annotations

import re

_FP8 = re.compile(r"(?i)e4m3|e5m2|fp8|f8f8|_f8_")
_BF16 = re.compile(r"(?i)bf16|bfloat16")
_FP16 = re.compile(r"(?i)h16816|h1688|h884|hmma|f16f16|fp16|_f16_|tensorop_h|hgemm")
_TF32 = re.compile(r"(?i)tf32|xf32|tensorop_s1688|tensorop_s16816|tensorop_s884|_s1688gemm|_s16816gemm")
_SIMT_FP32 = re.compile(r"(?i)sgemm|simt_s|gemmSN|_sgemv|gemv2T_kernel_val<int, int, float|scudnn")
_FP64 = re.compile(r"(?i)dgemm|_d884|dmma")
_TENSILE = re.compile(r"Cijk_[A-Za-z]+_[A-Za-z]+_(?P<t>[A-Z0-9]+?)_(?P<rest>.*)")
_MFMA_TOKEN = re.compile(r"_MI\d+x\d+x\d+")
_TENSILE_TYPE = {"S": "fp32", "H": "fp16", "B": "bf16", "D": "fp64"}


def kernel_path(name: str) -> tuple[str, str] | None:
    """(precision, unit) the GEMM/conv kernel ``name`` ran on, or None when the name does not say."""
    m = _TENSILE.search(name)
    if m:
        t = m.group("t")
        if t.startswith(("F8", "I8")) or "F8" in t:
            return ("fp8" if "F8" in t else "int8"), "matrix"
        prec = _TENSILE_TYPE.get(t[:1])
        if prec is None:
            return None
        unit = "matrix" if _MFMA_TOKEN.search(m.group("rest")) else "vector"
        return prec, unit
    if _FP8.search(name):
        return "fp8", "matrix"
    if _BF16.search(name):
        return "bf16", "matrix"
    if _FP16.search(name):
        return "fp16", "matrix"
    if _TF32.search(name):
        return "tf32", "matrix"
    if _FP64.search(name):
        return "fp64", "matrix" if re.search(r"(?i)_d884|dmma", name) else "vector"
    if _SIMT_FP32.search(name):
        return "fp32", "vector"
    return None


def describe(path: tuple[str, str]) -> str:
    """Words for a path: ``TF32 tensor cores``, ``fp32 CUDA cores / vector ALUs``."""
    prec, unit = path
    if unit == "vector":
        return f"{prec} CUDA cores / vector ALUs"
    return f"{prec.upper() if prec == 'tf32' else prec} tensor/matrix cores"
