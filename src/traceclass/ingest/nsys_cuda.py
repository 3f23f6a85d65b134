"""CUDA tables of an nsys export -> ``ApiCalls`` and ``GpuActivity``.

The CUPTI tables (KERNEL, MEMCPY, MEMSET, SYNCHRONIZATION, RUNTIME) are read column-wise
with :meth:`NsysDb.ints`; names stay StringIds ids until the end and are interned once per
distinct id. GPU rows are joined to their API call here (correlation id *and* process),
because correlation ids are only unique within one process.
"""

from __future__ import annotations

from typing import Callable, Mapping

import numpy as np

from traceclass.ingest.nsys_schema import NsysDb
from traceclass.model import ApiCalls, ApiKind, GpuActivity, GpuKind, MemKind, StringTable
from traceclass.model.api_names import api_kind, strip_version
from traceclass.model.enums import COPY_KIND_LABEL, MEM_KIND_LABEL, CopyKind
from traceclass.model.nesting import lookup, lookup2

RUNTIME = "CUPTI_ACTIVITY_KIND_RUNTIME"
KERNEL = "CUPTI_ACTIVITY_KIND_KERNEL"
MEMCPY = "CUPTI_ACTIVITY_KIND_MEMCPY"
MEMSET = "CUPTI_ACTIVITY_KIND_MEMSET"
SYNC = "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION"

Phase = Callable[[str], None]

#: Output column -> (SQL expression, columns it needs). A column missing from this export's
#: schema makes the expression NULL, which reads as the column's fill value.
_COMMON: dict[str, tuple[str, tuple[str, ...]]] = {
    "start_ns": ("start", ("start",)),
    "end_ns": ("end", ("end",)),
    "device": ("deviceId", ("deviceId",)),
    "stream": ("streamId", ("streamId",)),
    "correlation": ("correlationId", ("correlationId",)),
    "gpid": ("globalPid", ("globalPid",)),
    "graph": ("graphNodeId IS NOT NULL", ("graphNodeId",)),
}
_KERNEL: dict[str, tuple[str, tuple[str, ...]]] = {
    **_COMMON,
    "name": ("shortName", ("shortName",)),
    "full_name": ("demangledName", ("demangledName",)),
    "grid": ("gridX * gridY * gridZ", ("gridX", "gridY", "gridZ")),
    "block": ("blockX * blockY * blockZ", ("blockX", "blockY", "blockZ")),
    "registers": ("registersPerThread", ("registersPerThread",)),
    "shared_mem": (
        "staticSharedMemory + dynamicSharedMemory",
        ("staticSharedMemory", "dynamicSharedMemory"),
    ),
}
_MEMCPY: dict[str, tuple[str, tuple[str, ...]]] = {
    **_COMMON,
    "bytes": ("bytes", ("bytes",)),
    "copy_kind": ("copyKind", ("copyKind",)),
    "src_mem": ("srcKind", ("srcKind",)),
    "dst_mem": ("dstKind", ("dstKind",)),
}
_MEMSET: dict[str, tuple[str, tuple[str, ...]]] = {**_COMMON, "bytes": ("bytes", ("bytes",)), "dst_mem": ("memKind", ("memKind",))}
_SYNC: dict[str, tuple[str, tuple[str, ...]]] = {k: v for k, v in _COMMON.items() if k != "graph"}
_RUNTIME: dict[str, tuple[str, tuple[str, ...]]] = {
    "start_ns": ("start", ("start",)),
    "end_ns": ("end", ("end",)),
    "gtid": ("globalTid", ("globalTid",)),
    "correlation": ("correlationId", ("correlationId",)),
    "name": ("nameId", ("nameId",)),
}
_FILL = {"graph": 0, "copy_kind": int(CopyKind.UNKNOWN), "src_mem": int(MemKind.UNKNOWN),
         "dst_mem": int(MemKind.UNKNOWN)}

#: Display name of a GPU-side sync record, as Kineto names its ``cuda_sync`` events.
_SYNC_NAME = {
    ApiKind.SYNC_DEVICE: "Context Sync",
    ApiKind.SYNC_STREAM: "Stream Sync",
    ApiKind.SYNC_EVENT: "Event Sync",
    ApiKind.STREAM_WAIT: "Stream Wait Event",
}

_MEM_TITLE = {k: v.title() for k, v in MEM_KIND_LABEL.items()}


Spec = Mapping[str, tuple[str, tuple[str, ...]]]


def _read(db: NsysDb, table: str, spec: Spec,
          notes: list[str]) -> dict[str, np.ndarray] | None:
    lacking = db.missing(table, ("start", "end"))
    if lacking:
        notes.append(f"{table} lacks column(s) {', '.join(lacking)}: table skipped")
        return None
    exprs = {
        name: (expr if not db.missing(table, cols) else "NULL")
        for name, (expr, cols) in spec.items()
    }
    cols = db.ints(table, exprs, fill=_FILL)
    # CUPTI writes start = end = 0 when it could not time an activity
    untimed = (cols["start_ns"] <= 0) & (cols["end_ns"] <= 0)
    if untimed.any():
        notes.append(f"{int(untimed.sum())} rows of {table} have no timestamps and were dropped")
        cols = {k: v[~untimed] for k, v in cols.items()}
    cols["end_ns"] = np.maximum(cols["end_ns"], cols["start_ns"])
    return cols


def split_global_tid(gtid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """OS pid and tid from a serialized globalTid (-1 stays unknown)."""
    known = gtid >= 0
    pid = np.where(known, (gtid >> 24) & 0xFFFFFF, -1)
    tid = np.where(known, gtid & 0xFFFFFF, -1)
    return pid, tid


def process_key(global_id: np.ndarray) -> np.ndarray:
    """Process identity (VM bits + pid) of a globalTid or globalPid; -1 when unknown."""
    return np.where(global_id >= 0, global_id >> 24, -1)


def read_api(db: NsysDb, strings: StringTable, notes: list[str]) -> tuple[ApiCalls, np.ndarray]:
    """CUDA runtime and driver calls (one table), sorted by start; also their process keys."""
    if RUNTIME not in db.columns:
        return ApiCalls.empty(), np.zeros(0, np.int64)
    c = _read(db, RUNTIME, _RUNTIME, notes)
    if c is None:
        return ApiCalls.empty(), np.zeros(0, np.int64)
    order = np.argsort(c["start_ns"], kind="stable")
    c = {k: v[order] for k, v in c.items()}
    (raw_names,) = db.intern_ids(strings, c["name"])
    # strip the _vNNNN suffix and classify once per distinct name
    distinct = np.unique(raw_names[raw_names >= 0])
    stripped = np.full(len(strings) + 1, -1, dtype=np.int32)
    kinds = np.zeros(len(strings) + 1, dtype=np.int8)
    for code in distinct.tolist():
        s = strip_version(strings[code])
        new = strings.intern(s)
        stripped[code] = new
        kinds[code] = int(api_kind(s))
    safe = np.where(raw_names >= 0, raw_names, len(stripped) - 1)
    pid, tid = split_global_tid(c["gtid"])
    api = ApiCalls.build(
        len(raw_names),
        start_ns=c["start_ns"],
        end_ns=c["end_ns"],
        pid=pid,
        tid=tid,
        name=stripped[safe],
        kind=kinds[safe],
        correlation=c["correlation"],
    )
    return api, process_key(c["gtid"])


def read_gpu(
    db: NsysDb,
    strings: StringTable,
    api: ApiCalls,
    api_proc: np.ndarray,
    notes: list[str],
    phase: Phase,
) -> GpuActivity:
    """Kernels, copies, memsets and GPU-side sync records, joined to their API call."""
    parts: list[GpuActivity] = []
    specs: tuple[tuple[str, Spec, GpuKind], ...] = (
        (KERNEL, _KERNEL, GpuKind.KERNEL),
        (MEMCPY, _MEMCPY, GpuKind.MEMCPY),
        (MEMSET, _MEMSET, GpuKind.MEMSET),
        (SYNC, _SYNC, GpuKind.SYNC),
    )
    for table, spec, kind in specs:
        if table not in db.columns:
            continue
        phase(table)
        c = _read(db, table, spec, notes)
        if c is None:
            continue
        # GPU times are ns since the session start: negative ones or ones past 2**62 ns are
        # damage, and would wrap the device timelines' arithmetic
        wild = (c["start_ns"] < 0) | (c["end_ns"] >= 1 << 62)
        if wild.any():
            notes.append(f"{int(wild.sum())} rows of {table} have timestamps out of range (negative or "
                         "past 2^62 ns) and were dropped")
            c = {k: v[~wild] for k, v in c.items()}
        n = len(c["start_ns"])
        gpid = c.pop("gpid")
        c["api"] = join_api(api, api_proc, c["correlation"], process_key(gpid))
        if "graph" in c:
            c["graph"] = c["graph"] != 0
        if kind == GpuKind.KERNEL:
            name, full = db.intern_ids(strings, c["name"], c["full_name"])
            c["name"] = name
            c["full_name"] = np.where(full != name, full, -1)
        elif kind == GpuKind.MEMCPY:
            c["name"] = _copy_names(strings, c["copy_kind"], c["src_mem"], c["dst_mem"])
        elif kind == GpuKind.MEMSET:
            c["name"] = _memset_names(strings, c["dst_mem"])
        else:
            c["name"] = _sync_names(strings, api, c["api"])
        parts.append(GpuActivity.build(n, kind=np.full(n, int(kind), dtype=np.int8), **c))
    if not parts:
        return GpuActivity.empty()
    gpu = GpuActivity.concat(parts)
    return gpu.take(np.argsort(gpu.start_ns, kind="stable"))


def join_api(
    api: ApiCalls, api_proc: np.ndarray, corr: np.ndarray, proc: np.ndarray
) -> np.ndarray:
    """Row in ``api`` of each GPU row's launching call: same correlation id, same process."""
    out = np.full(len(corr), -1, dtype=np.int32)
    if len(api) == 0 or len(corr) == 0:
        return out
    # correlation 0 is CUPTI's "none" (e.g. UVM migrations)
    todo = (corr > 0) & (proc >= 0)
    if todo.any():
        out[todo] = _lookup_pair(api_proc, api.correlation, proc[todo], corr[todo])
    # globalPid missing on the GPU row: the correlation alone decides when one process made calls
    orphan = (out < 0) & (corr > 0) & (proc < 0)
    if orphan.any() and len(np.unique(api_proc)) == 1:
        out[orphan] = lookup(api.correlation, corr[orphan])
    return out


def _lookup_pair(ta: np.ndarray, tb: np.ndarray, qa: np.ndarray, qb: np.ndarray) -> np.ndarray:
    # one int64 key (dense process index, correlation) is several times faster than lookup2
    procs, inv = np.unique(np.concatenate([ta, qa]), return_inverse=True)
    if len(procs) < (1 << 30) and tb.min(initial=0) >= 0 and max(tb.max(initial=0), qb.max(initial=0)) < (1 << 32):
        key = inv.astype(np.int64) << 32
        tk = key[: len(ta)] | np.maximum(tb, 0)
        qk = key[len(ta):] | qb
        found = lookup(tk, qk)
        # rows of the table whose correlation was unknown (-1) must not match anything
        ok = found >= 0
        ok[ok] = tb[found[ok]] >= 0
        return np.where(ok, found, -1)
    return lookup2(ta, tb, qa, qb)


def _copy_names(strings: StringTable, ck: np.ndarray, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """Kineto-style memcpy names: ``Memcpy HtoD (Pageable -> Device)``."""
    out = np.empty(len(ck), dtype=np.int32)
    if len(ck) == 0:
        return out
    combo = (ck.astype(np.int64) << 16) | ((src & 0xFF) << 8) | (dst & 0xFF)
    uniq, inv = np.unique(combo, return_inverse=True)
    codes = []
    for u in uniq.tolist():
        k, s, d = u >> 16, (u >> 8) & 0xFF, u & 0xFF
        ck = _copy_kind(k)
        label = COPY_KIND_LABEL[ck] if ck is not None else f"kind {k}"
        codes.append(strings.intern(f"Memcpy {label} ({_mem(s)} -> {_mem(d)})"))
    return np.asarray(codes, dtype=np.int32)[inv.ravel()]


def _memset_names(strings: StringTable, mem: np.ndarray) -> np.ndarray:
    uniq, inv = np.unique(mem, return_inverse=True)
    codes = [strings.intern(f"Memset ({_mem(int(m))})") for m in uniq.tolist()]
    return np.asarray(codes, dtype=np.int32)[inv.ravel()] if len(mem) else np.empty(0, np.int32)


def _sync_names(strings: StringTable, api: ApiCalls, rows: np.ndarray) -> np.ndarray:
    # syncType numbering changed between nsys versions; the API call says what was waited on
    kind = np.full(len(rows), -1, dtype=np.int64)
    has = rows >= 0
    kind[has] = api.kind[rows[has]]
    out = np.full(len(rows), strings.intern("Synchronization"), dtype=np.int32)
    for k, label in _SYNC_NAME.items():
        out[kind == int(k)] = strings.intern(label)
    return out


def _copy_kind(value: int) -> CopyKind | None:
    try:
        return CopyKind(value)
    except ValueError:
        return None


def _mem(value: int) -> str:
    try:
        return _MEM_TITLE[MemKind(value)]
    except ValueError:
        return "Unknown"
