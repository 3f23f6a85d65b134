"""Collective-communication arguments the profiler wrote on ``record_param_comms`` ops and on
NCCL/RCCL kernels (``Collective name``, ``dtype``, ``In/Out msg nelems``, ``Process Group *``,
``Seq``...): one row per event that carries them.

Kept apart from :class:`~traceclass.model.tables.Ops` and ``GpuActivity`` because few events
have them: a trace with 100k kernels and 500 collectives stores 500 rows here. A row links back
to its event by ``correlation`` (kernels) or ``external_id`` (ops and the kernels they launched).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from traceclass.model.table import Table, column

I8, I32, I64 = np.int8, np.int32, np.int64

#: ``Comms.kind``: where the arguments were written
OP, KERNEL = 0, 1


@dataclasses.dataclass(frozen=True)
class Comms(Table):
    """Collective arguments per event (``-1`` unknown; strings are codes into ``Trace.strings``)."""

    kind: np.ndarray = column(I8, 0, doc="0 record_param_comms op, 1 kernel")
    start_ns: np.ndarray = column(I64)
    end_ns: np.ndarray = column(I64)
    pid: np.ndarray = column(I64, doc="op: process id; kernel: device")
    tid: np.ndarray = column(I64, doc="op: thread id; kernel: stream")
    correlation: np.ndarray = column(I64)
    external_id: np.ndarray = column(I64)
    collective: np.ndarray = column(I32, doc="'Collective name' (allreduce, _allgather_base, send...)")
    dtype: np.ndarray = column(I32, doc="'dtype' (Float, BFloat16...)")
    in_nelems: np.ndarray = column(I64, doc="'In msg nelems'")
    out_nelems: np.ndarray = column(I64, doc="'Out msg nelems'")
    in_split: np.ndarray = column(I32, doc="'In split size' as written ('[]' or '[4, 4]')")
    out_split: np.ndarray = column(I32, doc="'Out split size'")
    group_size: np.ndarray = column(I64, doc="'Group size'")
    pg_name: np.ndarray = column(I32, doc="'Process Group Name'")
    pg_desc: np.ndarray = column(I32, doc="'Process Group Description'")
    pg_ranks: np.ndarray = column(I32, doc="'Process Group Ranks' as written ('[0, 1]')")
    rank_start: np.ndarray = column(I64, doc="'Global rank start'")
    rank_stride: np.ndarray = column(I64, doc="'Global rank stride'")
    rank: np.ndarray = column(I64, doc="'Rank'")
    src_rank: np.ndarray = column(I64, doc="'Src Rank'")
    dst_rank: np.ndarray = column(I64, doc="'Dst Rank'")
    seq: np.ndarray = column(I64, doc="'Seq' (per process group)")
    comms_id: np.ndarray = column(I32, doc="'Comms Id' as text")
