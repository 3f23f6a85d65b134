"""The collective arguments of Kineto events (``record_param_comms`` ops and NCCL/RCCL kernels)
into :class:`~traceclass.model.comms.Comms`.

Kineto writes ``Collective name``, ``dtype``, ``In/Out msg nelems``, ``In/Out split size``,
``Group size``, ``Process Group Name/Description/Ranks``, ``Global rank start/stride``,
``Rank``, ``Src/Dst Rank``, ``Seq`` and ``Comms Id`` on the ``record_param_comms`` op and copies
most of them onto the kernel (``shared/reference/kineto-trace.md``). Only events that carry a
collective name or a process group become rows, so the table stays as small as the number of
collectives.
"""

from __future__ import annotations

from operator import attrgetter
from typing import Any

import msgspec
import numpy as np

from traceclass.model.comms import KERNEL, OP, Comms
from traceclass.model.strings import StringTable


class CommArgs(msgspec.Struct, gc=False):
    """The collective fields of an event's ``args`` (a base of the reader's args struct)."""

    coll_name: Any = msgspec.field(name="Collective name", default=None)
    coll_dtype: Any = msgspec.field(name="dtype", default=None)
    in_nelems: Any = msgspec.field(name="In msg nelems", default=None)
    out_nelems: Any = msgspec.field(name="Out msg nelems", default=None)
    in_split: Any = msgspec.field(name="In split size", default=None)
    out_split: Any = msgspec.field(name="Out split size", default=None)
    group_size: Any = msgspec.field(name="Group size", default=None)
    pg_name: Any = msgspec.field(name="Process Group Name", default=None)
    pg_desc: Any = msgspec.field(name="Process Group Description", default=None)
    pg_ranks: Any = msgspec.field(name="Process Group Ranks", default=None)
    rank_start: Any = msgspec.field(name="Global rank start", default=None)
    rank_stride: Any = msgspec.field(name="Global rank stride", default=None)
    rank: Any = msgspec.field(name="Rank", default=None)
    src_rank: Any = msgspec.field(name="Src Rank", default=None)
    dst_rank: Any = msgspec.field(name="Dst Rank", default=None)
    comm_seq: Any = msgspec.field(name="Seq", default=None)
    comms_id: Any = msgspec.field(name="Comms Id", default=None)


#: the columns holding string codes and the args field each is read from, in the order a
#: reader interns them
_TEXT_FIELDS = (("collective", "coll_name"), ("dtype", "coll_dtype"), ("in_split", "in_split"),
                ("out_split", "out_split"), ("pg_name", "pg_name"), ("pg_desc", "pg_desc"),
                ("pg_ranks", "pg_ranks"), ("comms_id", "comms_id"))
TEXT_COLUMNS = frozenset(column for column, _ in _TEXT_FIELDS)
_GET_TEXTS = attrgetter(*(field for _, field in _TEXT_FIELDS))


def comm_rows(args: list[Any]) -> list[int]:
    """Indices of the args that carry collective arguments: a collective name or a process
    group (the events that become rows of the table)."""
    coll, pg = [a.coll_name for a in args], [a.pg_name for a in args]
    n = len(args)
    if coll.count(None) == n and pg.count(None) == n:  # the usual run: no collective, one C pass
        return []
    return [k for k in range(n) if coll[k] is not None or pg[k] is not None]


def comm_columns(is_kernel: bool, args: list[Any], keep: list[int], t: np.ndarray, d: np.ndarray,
                 pid: np.ndarray, tid: np.ndarray, strings: StringTable, ints: Any) -> dict[str, np.ndarray] | None:
    """Columns of the events at ``keep`` (:func:`comm_rows` of ``args``; None when empty).
    ``ints`` is the reader's tolerant list -> int64 converter."""
    if not keep:
        return None
    sub = [args[k] for k in keep]
    idx = np.asarray(keep, dtype=np.int64)

    def text(values: list[Any]) -> np.ndarray:
        return np.asarray(strings.intern_many([_text(v) for v in values]), dtype=np.int32)

    return dict(
        kind=np.full(len(keep), KERNEL if is_kernel else OP, dtype=np.int8),
        start_ns=t[idx], end_ns=t[idx] + d[idx], pid=pid[idx], tid=tid[idx],
        correlation=ints([a.correlation for a in sub]) if is_kernel else np.full(len(sub), -1, dtype=np.int64),
        external_id=ints([a.external_id for a in sub]),
        in_nelems=ints([a.in_nelems for a in sub]), out_nelems=ints([a.out_nelems for a in sub]),
        group_size=ints([a.group_size for a in sub]),
        rank_start=ints([a.rank_start for a in sub]), rank_stride=ints([a.rank_stride for a in sub]),
        rank=ints([a.rank for a in sub]), src_rank=ints([a.src_rank for a in sub]),
        dst_rank=ints([a.dst_rank for a in sub]), seq=ints([a.comm_seq for a in sub]),
        **{column: text([getattr(a, field) for a in sub]) for column, field in _TEXT_FIELDS},
    )


def _text(v: Any) -> str | None:
    return None if v is None else (v if isinstance(v, str) else _json(v))


def comm_texts(a: Any) -> tuple[str | None, ...]:
    """One event's values of the string columns (so a reader can intern them event by event)."""
    return tuple(map(_text, _GET_TEXTS(a)))


def build_comms(cols: dict[str, np.ndarray]) -> Comms:
    if not cols:
        return Comms.empty()
    n = len(cols["kind"])
    comms = Comms.build(n, **cols)
    return comms.take(np.lexsort((comms.kind, comms.start_ns)))


def _json(v: Any) -> str:
    return msgspec.json.encode(v).decode() if not isinstance(v, (int, float)) else str(v)
