"""Reading recorded op inputs: tensors, scalars, lists, dtypes; broadcasting and precision.

Everything here returns None for "not recorded / not what was expected" so estimators can
give up (return None) instead of guessing.
"""

from __future__ import annotations

import dataclasses
import math
import re
from typing import Iterable, Sequence

from traceclass.model.dtypes import FLOAT_DTYPES, canonical_dtype, dtype_size
from traceclass.model.strings import OpInputs

# c10::ScalarType codes as Concrete Inputs record them (checked against torch 2.13 traces)
_SCALAR_TYPE = {
    0: "uint8", 1: "int8", 2: "int16", 3: "int32", 4: "int64", 5: "fp16", 6: "fp32", 7: "fp64",
    9: "complex64", 10: "complex128", 11: "bool", 12: "int8", 13: "uint8", 14: "int32", 15: "bf16",
    23: "fp8", 24: "fp8", 25: "fp8", 26: "fp8", 44: "fp8",
}

# ATen computes pointwise and reduction kernels on these dtypes in fp32 ("opmath"), so the fp32
# vector rate, not a half-precision one, bounds them.
_OPMATH = {"fp16": "fp32", "bf16": "fp32", "fp8": "fp32", "fp4": "fp32", "tf32": "fp32"}

_INT_RE = re.compile(r"-?\d+")


@dataclasses.dataclass(frozen=True)
class Tensor:
    """One recorded tensor input."""

    shape: tuple[int, ...]
    dtype: str  # canonical
    itemsize: float
    strides: tuple[int, ...] | None = None

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def stored(self) -> int:
        """Distinct elements behind the view: broadcast (stride-0) dimensions are read once."""
        if self.strides is None or len(self.strides) != len(self.shape):
            return self.numel
        return math.prod(s for s, st in zip(self.shape, self.strides) if st != 0 or s == 0)

    @property
    def nbytes(self) -> float:
        """Bytes read when the op reads this input once."""
        return self.stored * self.itemsize


class Args:
    """Positional view of :class:`OpInputs` with typed accessors."""

    __slots__ = ("_inp",)

    def __init__(self, inputs: OpInputs) -> None:
        self._inp = inputs

    def __len__(self) -> int:
        return len(self._inp.dims)

    def tensor(self, i: int) -> Tensor | None:
        """The tensor at position ``i`` (None if absent, a list, or of unknown dtype)."""
        inp = self._inp
        if i >= len(inp.dims) or i < 0:
            return None
        dims = inp.dims[i]
        if dims is None or any(not isinstance(d, int) for d in dims):
            return None
        dtype = canonical_dtype(inp.dtypes[i]) if i < len(inp.dtypes) else None
        size = dtype_size(dtype)
        if dtype is None or size is None or any(d < 0 for d in dims):
            return None
        strides = None
        if inp.strides is not None and i < len(inp.strides):
            st = inp.strides[i]
            if st is not None and len(st) == len(dims) and all(isinstance(s, int) for s in st):
                strides = tuple(st)
        return Tensor(tuple(dims), dtype, size, strides)

    def has_tensor(self, i: int) -> bool:
        return self.tensor(i) is not None

    def type_str(self, i: int) -> str:
        """The recorded type text at ``i`` (``"Scalar"``, ``"ScalarList"``, ``""`` for None)."""
        t = self._inp.dtypes
        return t[i] if i < len(t) else ""

    @property
    def has_concrete(self) -> bool:
        return self._inp.concrete is not None

    def concrete(self, i: int) -> str | None:
        """Recorded scalar text at ``i``; None when the trace has no Concrete Inputs at all."""
        c = self._inp.concrete
        if c is None:
            return None
        return c[i].strip() if i < len(c) else ""

    def int_(self, i: int) -> int | None:
        text = self.concrete(i)
        if text is None or not _INT_RE.fullmatch(text):
            return None
        return int(text)

    def float_(self, i: int) -> float | None:
        text = self.concrete(i)
        if not text:
            return None
        try:
            return float(text)
        except ValueError:
            return None

    def bool_(self, i: int) -> bool | None:
        text = self.concrete(i)
        if text in ("True", "true", "1"):
            return True
        if text in ("False", "false", "0"):
            return False
        return None

    def int_list(self, i: int) -> tuple[int, ...] | None:
        """``"[1, 2]"`` or ``"3"`` as a tuple; None when not recorded or not an int list."""
        text = self.concrete(i)
        if not text:
            return None
        if _INT_RE.fullmatch(text):
            return (int(text),)
        if text.startswith("[") and text.endswith("]"):
            body = text[1:-1].strip()
            if not body:
                return ()
            parts = [p.strip() for p in body.split(",")]
            if all(_INT_RE.fullmatch(p) for p in parts):
                return tuple(int(p) for p in parts)
        return None

    def bool_list(self, i: int) -> tuple[bool, ...] | None:
        text = self.concrete(i)
        if not text or not (text.startswith("[") and text.endswith("]")):
            return None
        parts = [p.strip() for p in text[1:-1].split(",") if p.strip()]
        if not all(p in ("True", "False") for p in parts):
            return None
        return tuple(p == "True" for p in parts)

    def scalar_type(self, i: int) -> str | None:
        """A ``ScalarType`` argument (recorded as its enum code) as a canonical dtype."""
        code = self.int_(i)
        return None if code is None else _SCALAR_TYPE.get(code)


def broadcast(shapes: Iterable[Sequence[int]]) -> tuple[int, ...] | None:
    """NumPy/torch broadcast of ``shapes``; None when they are incompatible."""
    shapes = [tuple(s) for s in shapes]
    if not shapes:
        return None
    ndim = max(len(s) for s in shapes)
    out = []
    for k in range(ndim):
        size = 1
        for s in shapes:
            j = len(s) - ndim + k
            d = s[j] if j >= 0 else 1
            if d == 1:
                continue
            if size not in (1, d):
                return None
            size = d
        out.append(size)
    return tuple(out)


def compute_precision(dtype: str) -> str:
    """The dtype whose peak bounds a vector (pointwise/reduction) kernel on ``dtype`` data."""
    return _OPMATH.get(dtype, dtype)


_FLOAT_RANK = {"fp8": 0, "fp4": 0, "fp16": 1, "bf16": 1, "fp32": 2, "fp64": 3}
_INT_RANK = {"bool": 0, "uint8": 1, "int8": 1, "int16": 2, "int32": 3, "int64": 4}


def _category(dtype: str) -> int:
    if dtype.startswith("complex"):
        return 3
    if dtype in FLOAT_DTYPES:
        return 2
    return 0 if dtype == "bool" else 1


def _promote(a: str, b: str) -> str:
    if a == b:
        return a
    ca, cb = _category(a), _category(b)
    if ca != cb:
        return a if ca > cb else b
    if ca == 2:
        if {a, b} == {"fp16", "bf16"}:
            return "fp32"
        return a if _FLOAT_RANK.get(a, 2) >= _FLOAT_RANK.get(b, 2) else b
    if ca == 1:
        if {a, b} == {"uint8", "int8"}:
            return "int16"
        return a if _INT_RANK.get(a, 4) >= _INT_RANK.get(b, 4) else b
    return a


def result_dtype(tensors: Sequence[Tensor], scalar_kinds: Sequence[str] = ()) -> str:
    """torch's type promotion for pointwise ops (``torch.result_type``), simplified.

    Dimensioned tensors win over 0-d tensors, which win over Python scalars, unless the
    lower-priority operand is of a higher category (bool < int < float < complex).
    ``scalar_kinds`` are canonical-ish kinds of Scalar arguments: "float", "int" or "bool".
    """
    dimmed = [t.dtype for t in tensors if t.ndim > 0]
    zero_d = [t.dtype for t in tensors if t.ndim == 0]
    result: str | None = None
    for group in (dimmed, zero_d):
        if not group:
            continue
        g = group[0]
        for d in group[1:]:
            g = _promote(g, d)
        if result is None or _category(g) > _category(result):
            result = g
    for kind in scalar_kinds:
        cat = {"bool": 0, "int": 1, "float": 2}.get(kind, 1)
        if result is None or cat > _category(result):
            result = {0: "bool", 1: "int64", 2: "fp32"}[cat]
    return result or "fp32"


def scalar_kind(text: str | None) -> str | None:
    """Kind of a recorded Scalar value: "bool", "int" or "float"; None when not recorded."""
    if not text:
        return None
    if text in ("True", "False"):
        return "bool"
    if _INT_RE.fullmatch(text):
        return "int"
    try:
        float(text)
    except ValueError:
        return None
    return "float"


def nbytes(numel: float, dtype: str) -> float:
    """Bytes of ``numel`` elements of canonical ``dtype`` (which must have a known size)."""
    size = dtype_size(dtype)
    if size is None:
        raise ValueError(f"unknown element size for {dtype!r}")
    return numel * size
