"""Interned strings and op input signatures.

Tables never hold Python strings per row: a name column holds int32 codes into the trace's
:class:`StringTable`. Predicates over names (``startswith("nccl")``) are evaluated once per
distinct string and broadcast to rows with :meth:`StringTable.mask`.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Iterable, Sequence

import numpy as np


class StringTable:
    """Append-only table of distinct strings; code ``-1`` means "no string"."""

    __slots__ = ("_values", "_index", "_array")

    def __init__(self, values: Iterable[str] = ()) -> None:
        self._values: list[str] = []
        self._index: dict[str, int] = {}
        self._array: np.ndarray | None = None
        for v in values:
            self.intern(v)

    def intern(self, value: str) -> int:
        code = self._index.get(value)
        if code is None:
            code = len(self._values)
            self._values.append(value)
            self._index[value] = code
            self._array = None
        return code

    def intern_many(self, values: Sequence[str | None]) -> np.ndarray:
        """Codes for a sequence of strings (``None`` -> -1); one dict probe per value."""
        codes = list(map(self._index.get, values))
        if None in codes:  # new strings (or None values): intern them in order of appearance
            for i, c in enumerate(codes):
                if c is None:
                    v = values[i]
                    codes[i] = -1 if v is None else self.intern(v)
        return np.fromiter(codes, np.int32, len(codes))

    def code(self, value: str) -> int:
        """Code of ``value`` or -1 when absent (does not intern)."""
        return self._index.get(value, -1)

    def __getitem__(self, code: int) -> str:
        if code < 0:
            return ""
        return self._values[code]

    def __len__(self) -> int:
        return len(self._values)

    @property
    def values(self) -> list[str]:
        return self._values

    def array(self) -> np.ndarray:
        """All strings as an object array (cached), so ``array()[codes]`` decodes a column."""
        if self._array is None or len(self._array) != len(self._values):
            self._array = np.array(self._values + [""], dtype=object)  # last slot serves -1
        return self._array

    def decode(self, codes: np.ndarray) -> np.ndarray:
        """Object array of strings for a code column (-1 -> "")."""
        arr = self.array()
        return arr[np.where(codes < 0, len(arr) - 1, codes)]

    def mask(self, codes: np.ndarray, predicate: Callable[[str], bool]) -> np.ndarray:
        """Boolean mask over ``codes``: ``predicate`` evaluated once per distinct string among
        them (not per string of the table: a rule asks about one group's rows many times), on
        its first :data:`~traceclass.model.names.NAME_SCAN_LIMIT` characters (predicates
        classify names; a hostile 10 MB name must not cost each of them seconds)."""
        from traceclass.model.names import NAME_SCAN_LIMIT

        codes, slots, present = self._present(codes)
        per_string = np.zeros(len(self._values) + 1, dtype=bool)  # the last slot serves -1: False
        values = self._values
        present = present[present < len(values)]
        per_string[present] = np.fromiter(
            (bool(predicate(values[c][:NAME_SCAN_LIMIT])) for c in present.tolist()), dtype=bool, count=len(present)
        )
        return per_string[slots]

    def map(self, codes: np.ndarray, fn: Callable[[str], int], dtype: object = np.int64) -> np.ndarray:
        """Integer value per row computed once per distinct string among ``codes`` (-1 code ->
        fn(""))."""
        codes, slots, present = self._present(codes)
        values = self._values + [""]
        per_string = np.zeros(len(values), dtype=dtype)
        per_string[present] = np.fromiter((fn(values[c]) for c in present.tolist()), dtype=dtype, count=len(present))
        return per_string[slots]

    def _present(self, codes: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(codes, their slots with -1 -> the last slot, the distinct slots in use), in O(rows +
        strings) without sorting."""
        codes = np.asarray(codes)
        slots = np.where(codes < 0, len(self._values), codes)
        used = np.zeros(len(self._values) + 1, dtype=bool)
        used[slots] = True
        return codes, slots, np.flatnonzero(used)


Dims = tuple[int, ...]


@dataclasses.dataclass(frozen=True)
class OpInputs:
    """Recorded inputs of an op call (torch ``record_shapes`` / NVTX ``sizes``).

    One entry per positional input. ``dims[i]`` is ``None`` for non-tensor inputs or lists;
    ``dtypes[i]`` is the recorded type string (``float``, ``c10::BFloat16``, ``Scalar``, ``""``).
    ``strides`` is ``None`` when the trace did not record strides. ``concrete`` holds scalar
    values as strings (``""`` for tensors) when recorded.
    """

    dims: tuple[Dims | None, ...]
    dtypes: tuple[str, ...]
    strides: tuple[Dims | None, ...] | None = None
    concrete: tuple[str, ...] | None = None

    def label(self) -> str:
        """Compact shape text for reports, e.g. ``[512x768] bf16, [768x768] bf16``."""
        from traceclass.model.dtypes import short_dtype

        parts = []
        for i, d in enumerate(self.dims):
            dt = short_dtype(self.dtypes[i]) if i < len(self.dtypes) else ""
            if d is None:
                if self.concrete is not None and i < len(self.concrete) and self.concrete[i]:
                    parts.append(self.concrete[i])
                continue
            shape = "x".join(str(x) for x in d) if d else "scalar"
            parts.append(f"[{shape}]" + (f" {dt}" if dt else ""))
        return ", ".join(parts)


class InputsTable:
    """Distinct :class:`OpInputs` of a trace; op rows reference them by int32 code."""

    __slots__ = ("_values", "_index")

    def __init__(self) -> None:
        self._values: list[OpInputs] = []
        self._index: dict[object, int] = {}

    def intern(self, key: object, make: Callable[[], OpInputs | None]) -> int:
        """Code for ``key`` (any hashable raw form); ``make`` parses it the first time."""
        code = self._index.get(key)
        if code is None:
            value = make()
            if value is None:
                self._index[key] = -1
                return -1
            code = len(self._values)
            self._values.append(value)
            self._index[key] = code
        return code

    def add(self, value: OpInputs) -> int:
        return self.intern(value, lambda: value)

    def __getitem__(self, code: int) -> OpInputs | None:
        return None if code < 0 else self._values[code]

    def __len__(self) -> int:
        return len(self._values)

    def entries(self) -> list[tuple[object, int]]:
        """(raw key, code) in the order the keys were met; code -1 where a key parsed to nothing."""
        return list(self._index.items())

    @property
    def values(self) -> list[OpInputs]:
        return self._values
