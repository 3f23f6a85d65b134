"""Recorded dtype strings -> canonical short names and element sizes.

torch.profiler writes C++ type names (``float``, ``c10::BFloat16``, ``long int``); other sources
write torch names (``torch.float16``) or short names (``bf16``). Everything is mapped to one
short name here so the cost model and the hardware peaks use the same vocabulary.
"""

from __future__ import annotations

_CANON = {
    # torch.profiler (C++ names)
    "double": "fp64",
    "float": "fp32",
    "c10::half": "fp16",
    "c10::bfloat16": "bf16",
    "c10::float8_e4m3fn": "fp8",
    "c10::float8_e5m2": "fp8",
    "c10::float8_e4m3fnuz": "fp8",
    "c10::float8_e5m2fnuz": "fp8",
    "c10::float8_e8m0fnu": "fp8",
    "c10::float4_e2m1fn_x2": "fp4",
    "long int": "int64",
    "long": "int64",
    "int64_t": "int64",
    "int": "int32",
    "short int": "int16",
    "short": "int16",
    "signed char": "int8",
    "unsigned char": "uint8",
    "bool": "bool",
    "c10::complex<float>": "complex64",
    "c10::complex<double>": "complex128",
    "c10::complex<c10::half>": "complex32",
    "c10::qint8": "int8",
    "c10::quint8": "uint8",
    "c10::qint32": "int32",
    # torch names
    "torch.float64": "fp64",
    "torch.float32": "fp32",
    "torch.float16": "fp16",
    "torch.bfloat16": "bf16",
    "torch.int64": "int64",
    "torch.int32": "int32",
    "torch.int8": "int8",
    "torch.uint8": "uint8",
    "torch.bool": "bool",
    "torch.float8_e4m3fn": "fp8",
    "torch.float8_e5m2": "fp8",
}

_SIZE = {
    "fp64": 8,
    "fp32": 4,
    "tf32": 4,
    "fp16": 2,
    "bf16": 2,
    "fp8": 1,
    "fp4": 0.5,
    "int64": 8,
    "int32": 4,
    "int16": 2,
    "int8": 1,
    "uint8": 1,
    "bool": 1,
    "complex64": 8,
    "complex128": 16,
    "complex32": 4,
}

for _short in list(_SIZE):
    _CANON.setdefault(_short, _short)

FLOAT_DTYPES = frozenset({"fp64", "fp32", "tf32", "fp16", "bf16", "fp8", "fp4"})


def canonical_dtype(recorded: str) -> str | None:
    """Short name (``fp32``, ``bf16``, ``int64`` ...) or None for non-tensor / unknown types."""
    if not recorded:
        return None
    return _CANON.get(recorded.strip().lower())


def short_dtype(recorded: str) -> str:
    """Short name when known, else the recorded text (``Scalar``, ``TensorList``)."""
    canon = canonical_dtype(recorded)
    return canon if canon is not None else recorded


def dtype_size(dtype: str | None) -> float | None:
    """Bytes per element of a canonical dtype, None when unknown."""
    if dtype is None:
        return None
    return _SIZE.get(dtype)
