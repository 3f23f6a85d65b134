"""The map step: one rank's trace -> a compact, JSON-serialisable summary.

It runs the single-trace pipeline (:func:`traceclass.engine.run`) and keeps what the reduce step
needs, a few KB to a few hundred KB per rank whatever the trace size:

* ``steps``: per steady step (``ProfilerStep#N`` after warm-up; the whole trace without steps)
  its number, host window, and, as exact interval unions inside the window (integer ns):
  **compute** (GPU: kernels that are not communication; CPU-only traces: top-level ops of the
  step threads that are not collectives), **comm** (communication kernels; CPU: the backend's
  collective ranges such as ``gloo:all_reduce``), **exposed_comm** (comm not overlapped by
  compute), **data** (data-loading ranges of the step threads) and **other** = wall -
  |compute U comm| (time the rank neither computed nor communicated: host work, waits);
* ``collectives``: one row per collective instance (columns): process group, ``Seq`` and
  ``Comms Id`` when recorded, normalized name, dtype, in/out elements, split sizes, group size and
  ranks, ``src``/``dst`` for point-to-point, stream, start/end, kernel count, launch time, step,
  bytes (output for all-gather, input otherwise);
* the clock anchor ``base_time_ns`` (Kineto ``baseTimeNanoseconds``; times in the summary are the
  trace's own ns, epoch ns = base + t), ``pg_config``, the rank identity, device busy %, and the
  findings of the single-trace rules (code, fingerprint, recoverable share).

Collective instances: GPU traces use the communication kernels (kernels launched by one
``record_param_comms`` op form one instance); their args come from the kernel itself, else from
the op with the same ``External id``. CPU-only traces (gloo) use the backend's ranges
(``gloo:all_reduce`` on the work threads); their sizes come from ``record_param_comms`` args
when recorded, else from the k-th ``c10d::`` op of the same collective (largest tensor).
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from traceclass import timeline as tl
from traceclass.analysis.comm import _message_size, collectives as kernel_collectives
from traceclass.analysis.data_loading import DEFAULT_PATTERN, critical_threads, data_ranges
from traceclass.cluster.identity import identify
from traceclass.cluster.names import normalize
from traceclass.model import AnnotationKind, GpuKind, Trace
from traceclass.model.comms import KERNEL, OP
from traceclass.model.dtypes import canonical_dtype, dtype_size
from traceclass.model.names import step_number

SCHEMA = "traceclass.tcsum/1"
_BACKEND_PREFIXES = ("gloo:", "nccl:", "mpi:", "ucc:", "xccl:")
_COMM_OP_PREFIXES = ("c10d::", "record_param_comms", "symm_mem::") + _BACKEND_PREFIXES
#: c10 ScalarType names (what Kineto writes in ``dtype``) the shared dtype table does not know
_SCALAR_BYTES = {"BFloat16": 2, "Half": 2, "Short": 2, "Byte": 1, "Char": 1, "Bool": 1, "Double": 8,
                 "Float8_e4m3fn": 1, "Float8_e5m2": 1, "Float8_e4m3fnuz": 1, "Float8_e5m2fnuz": 1}
COLUMNS = ("group", "group_desc", "group_ranks", "group_size", "seq", "comms_id", "name", "raw_name", "dtype",
           "in_nelems", "out_nelems", "in_split", "out_split", "bytes", "src", "dst", "stream", "start_ns",
           "end_ns", "kernels", "launch_ns", "step")


def dtype_bytes(dtype: str) -> int | None:
    if not dtype:
        return None
    if dtype in _SCALAR_BYTES:
        return _SCALAR_BYTES[dtype]
    size = dtype_size(canonical_dtype(dtype))
    return int(size) if size else None


def summarize(trace: Trace, analysis: Any, report: Any) -> dict[str, Any]:
    """The summary of one analysed trace (see the module docstring)."""
    comm_rows = np.flatnonzero((trace.gpu.kind == GpuKind.KERNEL) & (analysis.gpu_family == "comm"))
    if len(comm_rows):
        coll, comm_iv, compute_iv = _gpu_collectives(trace, analysis, comm_rows)
        kind = "gpu"
    else:
        coll = _host_collectives(trace)
        comm_iv = tl.merge(np.asarray(coll["start_ns"], np.int64), np.asarray(coll["end_ns"], np.int64))
        compute_iv = _host_compute(trace)
        kind = "gpu" if len(trace.gpu) else "cpu"
        if len(trace.gpu):
            g = trace.gpu
            k = (g.kind == GpuKind.KERNEL) & (analysis.gpu_family != "comm")
            compute_iv = tl.merge(g.start_ns[k], g.end_ns[k])
    steps = _steps(trace, analysis, compute_iv, comm_iv)
    coll["step"] = _step_of(_step_windows(trace, analysis, steady_only=False), np.asarray(coll["launch_ns"], np.int64), np.asarray(coll["start_ns"], np.int64))
    meta = trace.meta
    c = trace.comms
    ident = identify(trace.source.path, meta, c.rank, c.rank_start, [trace.strings[int(x)] for x in c.pg_ranks])
    analysed = max(int(sum(steps["wall_ns"])), 1)
    busy = [d.busy_pct for d in report.devices] if getattr(report, "devices", None) else []
    if kind == "gpu" and busy:
        busy_pct = float(np.mean(busy))
    else:
        busy_pct = 100.0 * (sum(steps["compute_ns"]) + sum(steps["comm_ns"]) - sum(steps["overlap_ns"])) / analysed
    base = meta.get("baseTimeNanoseconds")
    return {
        "schema": SCHEMA,
        "file": os.path.basename(trace.source.path),
        "format": trace.source.format,
        "size_bytes": int(trace.source.size_bytes),
        "rank": ident.rank,
        "rank_source": ident.source,
        "world_size": ident.world_size,
        "job": ident.job,
        "backend": meta.get("distributed.backend"),
        "base_time_ns": int(base) if isinstance(base, (int, float)) and not isinstance(base, bool) else None,
        "pg_config": _pg_config(meta.get("distributed.pg_config")),
        "kind": kind,
        "device_name": next((d.name for d in trace.devices if d.index >= 0 and d.name), ""),
        "device_busy_pct": round(busy_pct, 3),
        "steps": steps,
        "steps_synthetic": bool(analysis.occurrences.synthetic),
        "collectives": {k: _plain(coll[k]) for k in COLUMNS},
        "findings": [
            {"code": f.code, "name": f.name, "severity": f.severity, "fingerprint": f.fingerprint,
             "location": f.location, "recoverable_ns": int(f.recoverable_ns),
             "recoverable_pct": round(100.0 * f.recoverable_ns / analysed, 3)}
            for f in report.findings
        ],
        "notes": list(trace.notes),
    }


def _plain(v: Any) -> list:
    return v.tolist() if isinstance(v, np.ndarray) else list(v)


def _pg_config(cfg: Any) -> list[dict[str, Any]]:
    out = []
    for g in cfg if isinstance(cfg, list) else []:
        if isinstance(g, dict):
            ranks = g.get("ranks")
            out.append({"pg_name": str(g.get("pg_name", "")), "pg_desc": str(g.get("pg_desc", "")),
                        "pg_size": g.get("pg_size"),
                        "ranks": [int(r) for r in ranks] if isinstance(ranks, list) and len(ranks) <= 4096 else None})
    return out


def _gpu_collectives(trace: Trace, analysis: Any, rows: np.ndarray) -> tuple[dict[str, Any], tl.Intervals, tl.Intervals]:
    gpu, comms, s = trace.gpu, trace.comms, trace.strings
    by_corr = {int(k): i for i, k in enumerate(comms.correlation.tolist()) if comms.kind[i] == KERNEL and k >= 0}
    by_ext = {int(k): i for i, k in enumerate(comms.external_id.tolist()) if comms.kind[i] == OP and k >= 0}
    a = np.array([by_corr.get(int(x), -1) for x in gpu.correlation[rows].tolist()], dtype=np.int64)
    b = np.array([by_ext.get(int(x), -1) if x >= 0 else -1 for x in gpu.external_id[rows].tolist()], dtype=np.int64)
    # kernels of one record_param_comms op are one instance
    key = np.where(b >= 0, b, -2 - np.arange(len(rows)))
    uniq, first, inv = np.unique(key, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")
    n = len(uniq)
    start = np.full(n, np.iinfo(np.int64).max, dtype=np.int64)
    end = np.full(n, np.iinfo(np.int64).min, dtype=np.int64)
    np.minimum.at(start, inv, gpu.start_ns[rows])
    np.maximum.at(end, inv, gpu.end_ns[rows])
    kernels = np.bincount(inv, minlength=n)
    api = gpu.api[rows]
    launch_each = np.where(api >= 0, trace.api.start_ns[np.maximum(api, 0)] if len(trace.api) else -1, -1)
    launch = np.full(n, np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(launch, inv, np.where(launch_each >= 0, launch_each, np.iinfo(np.int64).max))
    launch = np.where(launch == np.iinfo(np.int64).max, -1, launch)
    rep = first  # representative kernel row (position in rows) per instance
    ra, rb = a[rep], b[rep]
    fallback = kernel_collectives(trace, rows[rep])

    def col(name: str) -> np.ndarray:
        vals = getattr(comms, name)
        va = np.where(ra >= 0, vals[np.maximum(ra, 0)] if len(vals) else -1, -1)
        vb = np.where(rb >= 0, vals[np.maximum(rb, 0)] if len(vals) else -1, -1)
        return np.where(va != -1, va, vb)

    raw = [s[int(c)] if c >= 0 else str(fallback.name[i]) for i, c in enumerate(col("collective").tolist())]
    dtype = [s[int(c)] for c in col("dtype").tolist()]
    in_n, out_n = col("in_nelems"), col("out_nelems")
    names = [normalize(r) for r in raw]
    in_split = [s[int(c)] for c in col("in_split").tolist()]
    names = [("all_to_allv" if nm == "all_to_all" and sp.strip("[] ") else nm) for nm, sp in zip(names, in_split)]
    nbytes = []
    for i, nm in enumerate(names):
        size = dtype_bytes(dtype[i])
        nel = int(out_n[i]) if nm == "all_gather" else int(in_n[i])
        if size and nel >= 0:
            nbytes.append(nel * size)
        else:
            nbytes.append(int(fallback.bytes[i]))
    coll = {
        "group": [s[int(c)] for c in col("pg_name").tolist()],
        "group_desc": [s[int(c)] for c in col("pg_desc").tolist()],
        "group_ranks": [s[int(c)] for c in col("pg_ranks").tolist()],
        "group_size": col("group_size"), "seq": col("seq"),
        "comms_id": [s[int(c)] for c in col("comms_id").tolist()],
        "name": names, "raw_name": raw, "dtype": dtype, "in_nelems": in_n, "out_nelems": out_n,
        "in_split": in_split, "out_split": [s[int(c)] for c in col("out_split").tolist()],
        "bytes": np.asarray(nbytes, dtype=np.int64), "src": col("src_rank"), "dst": col("dst_rank"),
        "stream": gpu.stream[rows[rep]], "start_ns": start, "end_ns": end, "kernels": kernels,
        "launch_ns": launch,
    }
    coll = {k: (_reorder(v, order)) for k, v in coll.items()}
    coll = _time_order(coll)
    comm_iv = tl.merge(gpu.start_ns[rows], gpu.end_ns[rows])
    k = (gpu.kind == GpuKind.KERNEL) & (analysis.gpu_family != "comm")
    return coll, comm_iv, tl.merge(gpu.start_ns[k], gpu.end_ns[k])


def _reorder(v: Any, order: np.ndarray) -> Any:
    return v[order] if isinstance(v, np.ndarray) else [v[i] for i in order.tolist()]


def _time_order(coll: dict[str, Any]) -> dict[str, Any]:
    order = np.lexsort((np.asarray(coll["end_ns"]), np.asarray(coll["start_ns"])))
    return {k: _reorder(v, order) for k, v in coll.items()}


def _host_collectives(trace: Trace) -> dict[str, Any]:
    """Collective ranges of a CPU backend (``gloo:all_reduce``), sized from the comms args or the
    ``c10d::`` op of the same collective and ordinal."""
    ann, s = trace.annotations, trace.strings
    is_coll = s.mask(ann.name, lambda x: x.startswith(_BACKEND_PREFIXES))
    rows = np.flatnonzero(is_coll & (ann.kind == AnnotationKind.COMMUNICATION))
    rows = rows[np.lexsort((ann.end_ns[rows], ann.start_ns[rows]))]
    n = len(rows)
    raw = [s[int(c)] for c in ann.name[rows].tolist()]
    names = [normalize(r) for r in raw]
    # sizes: k-th range of a collective <- k-th sized source of the same collective
    src_bytes = np.full(n, -1, dtype=np.int64)
    in_n = np.full(n, -1, dtype=np.int64)
    out_n = np.full(n, -1, dtype=np.int64)
    dtype = [""] * n
    group = [""] * n
    gsize = np.full(n, -1, dtype=np.int64)
    gr = [""] * n
    seq = np.full(n, -1, dtype=np.int64)
    c = trace.comms
    op_rows = np.flatnonzero(c.kind == OP)
    queues: dict[str, list[tuple]] = {}
    if len(op_rows):
        for i in op_rows[np.argsort(c.start_ns[op_rows], kind="stable")].tolist():
            nm = normalize(s[int(c.collective[i])])
            dt = s[int(c.dtype[i])]
            size = dtype_bytes(dt)
            nel = int(c.out_nelems[i]) if nm == "all_gather" else int(c.in_nelems[i])
            queues.setdefault(nm, []).append((nel * size if size and nel >= 0 else -1, int(c.in_nelems[i]),
                                              int(c.out_nelems[i]), dt, s[int(c.pg_name[i])],
                                              int(c.group_size[i]), s[int(c.pg_ranks[i])], int(c.seq[i])))
    else:
        ops = trace.ops
        is_c10d = s.mask(ops.name, lambda x: x.startswith("c10d::") and "wait" not in x and "barrier" not in x)
        for i in np.flatnonzero(is_c10d)[np.argsort(ops.start_ns[is_c10d], kind="stable")].tolist():
            nm = normalize(s[int(ops.name[i])])
            code = int(ops.inputs[i])
            nel, nb = _message_size(trace.inputs[code]) if code >= 0 else (-1, -1)
            queues.setdefault(nm, []).append((nb, nel, nel, "", "", -1, "", -1))
    taken: dict[str, int] = {}
    for k, nm in enumerate(names):
        q = queues.get(nm, [])
        j = taken.get(nm, 0)
        taken[nm] = j + 1
        if j < len(q):
            src_bytes[k], in_n[k], out_n[k], dtype[k], group[k], gsize[k], gr[k], seq[k] = q[j]
    # the work thread of a range stands in for a stream: its order among the collective threads
    tids = ann.tid[rows]
    lane = {t: i for i, t in enumerate(dict.fromkeys(tids.tolist()))}
    return {
        "group": group, "group_desc": [""] * n, "group_ranks": gr, "group_size": gsize, "seq": seq,
        "comms_id": [""] * n, "name": names, "raw_name": raw, "dtype": dtype, "in_nelems": in_n,
        "out_nelems": out_n, "in_split": [""] * n, "out_split": [""] * n, "bytes": src_bytes,
        "src": np.full(n, -1, dtype=np.int64), "dst": np.full(n, -1, dtype=np.int64),
        "stream": np.array([lane[t] for t in tids.tolist()], dtype=np.int64),
        "start_ns": ann.start_ns[rows], "end_ns": ann.end_ns[rows], "kernels": np.zeros(n, dtype=np.int64),
        "launch_ns": np.full(n, -1, dtype=np.int64),
    }


def _host_compute(trace: Trace) -> tl.Intervals:
    """Top-level ops of the step threads that are not collectives (CPU-only traces)."""
    ops, s = trace.ops, trace.strings
    threads = critical_threads(trace)
    on = np.zeros(len(ops), dtype=bool)
    for pid, tid in threads:
        on |= (ops.pid == pid) & (ops.tid == tid)
    comm = s.mask(ops.name, lambda x: x.startswith(_COMM_OP_PREFIXES))
    k = on & (ops.depth == 0) & ~comm
    return tl.merge(ops.start_ns[k], ops.end_ns[k])


def _step_windows(trace: Trace, analysis: Any, steady_only: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    occ = analysis.occurrences
    kinds = np.asarray(occ.kinds, dtype=np.int64)
    if len(occ.stage) == 0:
        z = np.zeros(0, dtype=np.int64)
        return z, z, z
    is_step = kinds[occ.stage] == AnnotationKind.STEP
    if steady_only:
        keep = is_step & occ.steady()
        if not keep.any():
            keep = is_step
    else:
        keep = is_step
    idx = np.flatnonzero(keep)
    idx = idx[np.argsort(occ.start_ns[idx], kind="stable")]
    ann = trace.annotations
    srow = np.flatnonzero(ann.kind == AnnotationKind.STEP)
    number = {(int(a), int(b)): step_number(trace.strings[int(c)])
              for a, b, c in zip(ann.start_ns[srow].tolist(), ann.tid[srow].tolist(), ann.name[srow].tolist())}
    # ProfilerStep#N numbers line steps up across ranks; the position stands in where N is absent
    nums = np.array([number.get((int(occ.start_ns[i]), int(occ.tid[i])), None) for i in idx.tolist()], dtype=object)
    nums = np.array([n if n is not None else k for k, n in enumerate(nums.tolist())], dtype=np.int64)
    return nums, occ.start_ns[idx].astype(np.int64), occ.end_ns[idx].astype(np.int64)


def _step_of(steps: tuple[np.ndarray, np.ndarray, np.ndarray], launch: np.ndarray, start: np.ndarray) -> np.ndarray:
    """Step number whose host window holds the launch (else the start) of each collective, -1 none."""
    nums, s, e = steps
    t = np.where(launch >= 0, launch, start)
    if len(s) == 0:
        return np.full(len(t), -1, dtype=np.int64)
    k = np.searchsorted(s, t, side="right") - 1
    inside = (k >= 0) & (t < e[np.maximum(k, 0)])
    return np.where(inside, nums[np.maximum(k, 0)], -1)


def _steps(trace: Trace, analysis: Any, compute_iv: tl.Intervals, comm_iv: tl.Intervals) -> dict[str, list]:
    nums, s, e = _step_windows(trace, analysis, steady_only=True)
    compute = tl.overlap_each(s, e, compute_iv)
    comm = tl.overlap_each(s, e, comm_iv)
    exposed = tl.overlap_each(s, e, tl.subtract(comm_iv, compute_iv))
    busy_iv = tl.merge(np.concatenate([compute_iv[0], comm_iv[0]]), np.concatenate([compute_iv[1], comm_iv[1]]))
    busy = tl.overlap_each(s, e, busy_iv)
    data = tl.overlap_each(s, e, data_ranges(trace, DEFAULT_PATTERN).union)
    return {
        "step": nums.tolist(), "start_ns": s.tolist(), "end_ns": e.tolist(), "wall_ns": (e - s).tolist(),
        "compute_ns": compute.tolist(), "comm_ns": comm.tolist(), "exposed_comm_ns": exposed.tolist(),
        "overlap_ns": (comm - exposed).tolist(), "data_ns": data.tolist(), "other_ns": ((e - s) - busy).tolist(),
    }
