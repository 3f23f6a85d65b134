"""Columnar table base class.

A table is a frozen dataclass whose fields are equally long numpy arrays, one per column.
Column names are the dataclass field names, declared once in :mod:`traceclass.model.tables`;
code elsewhere reads ``trace.gpu.start_ns``, never ``df["start_ns"]``. Each field's
``metadata["dtype"]`` fixes the column's dtype and ``metadata["fill"]`` the value that means
"unknown" (``-1`` for indices and ids, ``NaN`` for floats). A ``narrow`` column (process and
thread ids, correlation and external ids, streams) is int64 by declaration but held as int32
whenever every value fits: such ids are compared and looked up, never multiplied, and at
10 GB of trace their upper halves are hundreds of MB of zeros.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar, TypeVar

import numpy as np

T = TypeVar("T", bound="Table")


#: rows per block where a computation over a whole table runs a block at a time: each temporary
#: is then a few MB (1M rows of int64 = 8 MB) however large the trace, and the per-block Python
#: overhead stays invisible. The blocked modules alias it so tests can force tiny blocks.
BLOCK_ROWS = 1 << 20


def row_index_dtype(n_rows: int) -> type[np.signedinteger]:  # type: ignore[type-arg]
    """The narrowest signed integer that indexes ``n_rows`` rows (and holds -1): row numbers
    kept in cached facts are int32 until a table outgrows it."""
    return np.int32 if n_rows < 2**31 else np.int64


def column(dtype: Any, fill: Any = -1, doc: str = "", text: bool = False, enum: Any = None,
           narrow: bool = False) -> Any:
    """Declare a column: its numpy dtype, the fill value for "unknown", and its meaning.

    ``text``: the column holds codes into ``Trace.strings``; ``enum``: it holds values of this
    IntEnum. :meth:`Table.to_pandas` decodes both when given the string table. ``narrow``: an
    int64 id column held as int32 when every value fits (see :func:`narrowed`)."""
    return dataclasses.field(metadata={"dtype": np.dtype(dtype), "fill": fill, "doc": doc, "text": text,
                                       "enum": enum, "narrow": narrow})


_I32 = np.iinfo(np.int32)


def narrowed(values: np.ndarray) -> np.ndarray:
    """An integer id array as int32 when every value fits, else as int64 (the same array when
    it already has that dtype)."""
    arr = np.asarray(values)
    if arr.dtype == np.int32:
        return arr
    if arr.dtype != np.int64:
        arr = arr.astype(np.int64)
    if len(arr) == 0 or (int(arr.min()) >= _I32.min and int(arr.max()) <= _I32.max):
        return arr.astype(np.int32)
    return arr


def _declared(f: Any, values: Any) -> np.ndarray:
    """A column's values with the dtype its declaration allows."""
    if f.metadata.get("narrow"):
        return narrowed(values)
    arr = np.asarray(values)
    want = f.metadata["dtype"]
    return arr if arr.dtype == want else arr.astype(want)


@dataclasses.dataclass(frozen=True)
class Table:
    """Base of every model table. Subclasses only declare columns."""

    __doc_columns__: ClassVar[str] = ""

    def __post_init__(self) -> None:
        n = None
        for f in dataclasses.fields(self):
            arr = _declared(f, getattr(self, f.name))
            if arr.ndim != 1:
                raise ValueError(f"{type(self).__name__}.{f.name}: column must be 1-D")
            if n is None:
                n = len(arr)
            elif len(arr) != n:
                raise ValueError(
                    f"{type(self).__name__}.{f.name}: {len(arr)} rows, expected {n}"
                )
            object.__setattr__(self, f.name, arr)

    def __len__(self) -> int:
        first = dataclasses.fields(self)[0].name
        return len(getattr(self, first))

    @classmethod
    def columns(cls) -> tuple[str, ...]:
        return tuple(f.name for f in dataclasses.fields(cls))

    @classmethod
    def empty(cls: type[T]) -> T:
        return cls.build(0)

    @classmethod
    def build(cls: type[T], n: int, **cols: Any) -> T:
        """Make a table of ``n`` rows; columns not given are filled with their "unknown" value."""
        values: dict[str, Any] = {}
        for f in dataclasses.fields(cls):
            if f.name in cols:
                values[f.name] = _declared(f, cols.pop(f.name))
            elif f.metadata.get("narrow"):
                values[f.name] = np.full(n, f.metadata["fill"], dtype=np.int32)
            else:
                values[f.name] = np.full(n, f.metadata["fill"], dtype=f.metadata["dtype"])
        if cols:
            raise TypeError(f"{cls.__name__}: unknown columns {sorted(cols)}")
        return cls(**values)

    def take(self: T, index: Any) -> T:
        """Rows selected by an index array or boolean mask, as a new table."""
        return type(self)(**{name: getattr(self, name)[index] for name in self.columns()})

    def replace(self: T, **cols: Any) -> T:
        return dataclasses.replace(self, **cols)

    @classmethod
    def concat(cls: type[T], parts: list[T]) -> T:
        if not parts:
            return cls.empty()
        return cls(
            **{name: np.concatenate([getattr(p, name) for p in parts]) for name in cls.columns()}
        )

    def to_pandas(self, strings: Any = None) -> Any:
        """A pandas DataFrame of the table (copies nothing it does not have to).

        With ``strings`` (the trace's :class:`~traceclass.model.strings.StringTable`), name
        columns become their text ("" for unknown) and enum columns their lower-case member
        names ("" for a value outside the enum); without it they stay integer codes."""
        import pandas as pd

        cols: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            values = getattr(self, f.name)
            if strings is not None and f.metadata.get("text"):
                values = strings.decode(values)
            elif strings is not None and f.metadata.get("enum") is not None:
                values = _enum_names(f.metadata["enum"], values)
            cols[f.name] = values
        return pd.DataFrame(cols, copy=False)

    @classmethod
    def describe(cls) -> list[tuple[str, str, str]]:
        """(column, dtype, meaning) for documentation."""
        return [
            (f.name, "int32 or int64" if f.metadata.get("narrow") else str(f.metadata["dtype"]), f.metadata["doc"])
            for f in dataclasses.fields(cls)
        ]

    @classmethod
    def narrow_columns(cls) -> frozenset[str]:
        """Names of the columns held as int32 when their values fit."""
        return frozenset(f.name for f in dataclasses.fields(cls) if f.metadata.get("narrow"))


def _enum_names(enum: Any, values: np.ndarray) -> np.ndarray:
    members = {int(m): m.name.lower() for m in enum}
    lut = np.array([members.get(i, "") for i in range(max(members) + 2)], dtype=object)  # last: unknown
    v = values.astype(np.int64)
    return lut[np.where((v < 0) | (v > max(members)), len(lut) - 1, v)]
