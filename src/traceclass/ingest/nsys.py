"""Nsight Systems exports -> :class:`~traceclass.model.Trace`.

``read_nsys_sqlite`` reads an ``nsys export --type sqlite`` file (2020.3 to 2025.5 layouts,
facts in ``shared/reference/nsys-sqlite.md``); ``read_nsys_report`` exports a binary
``.nsys-rep``/``.qdrep`` with the ``nsys`` CLI first. The pieces live in ``nsys_schema``
(safe access, versions, column reads), ``nsys_cuda`` (API and GPU tables), ``nsys_nvtx``
(NVTX ranges and torch ``emit_nvtx`` ops) and ``nsys_samples`` (CPU sampling).
"""

from __future__ import annotations

import os
import shlex
import shutil
import sqlite3
import subprocess
import tempfile
from typing import Any

import numpy as np

from traceclass.errors import TraceFormatError
from traceclass.ingest.nsys_cuda import (
    KERNEL,
    MEMCPY,
    MEMSET,
    RUNTIME,
    SYNC,
    read_api,
    read_gpu,
    split_global_tid,
)
from traceclass.ingest.nsys_devices import read_devices
from traceclass.ingest.nsys_nvtx import NVTX, NvtxResult, read_nvtx
from traceclass.ingest.nsys_samples import EVENTS, SampleResult, read_samples
from traceclass.ingest.nsys_schema import (
    ExportVersion,
    NsysDb,
    detect_version,
    qi,
    sqlite_problem,
    text,
)
from traceclass.ingest.source import Progress
from traceclass.model import (
    Annotations,
    ApiCalls,
    Captured,
    GpuActivity,
    InputsTable,
    Ops,
    SourceInfo,
    StringTable,
    Threads,
    Trace,
)
from traceclass.model.link import link
from traceclass.model.nesting import group_ids, lookup2

#: Seconds ``nsys export`` may take before we give up on it.
NSYS_EXPORT_TIMEOUT_S = 900

#: ``trace.meta`` keys this reader sets for the analysis: ``"stage_projection": "same-thread"``
#: (always: a range's GPU work is what its own thread launched in it) and ``"nvtx_ops": True``
#: (when ``trace.ops`` came from torch ``emit_nvtx`` ranges, whose inputs carry shapes but no
#: dtypes: every ``OpInputs.dtypes`` entry is ``""``).
STAGE_PROJECTION = "stage_projection"
NVTX_OPS = "nvtx_ops"


def read_nsys_sqlite(path: str | os.PathLike[str], progress: Progress = None) -> Trace:
    """Read an Nsight Systems SQLite export.

    The file is opened read-only and never modified. Raises :class:`TraceFormatError` for a
    file that is not an nsys export or cannot be read.
    """
    p = str(path)
    db = NsysDb(p)
    try:
        return _read(db, p, progress)
    except sqlite3.Error as exc:
        raise TraceFormatError(p, sqlite_problem(exc)) from None
    finally:
        db.close()


def shell_quote(text: str) -> str:
    """``text`` as one shell word that survives being printed on one line: runs of spaces,
    tabs, line breaks and other control characters are written as ``$'\\xHH'`` escapes,
    which bash and zsh read back byte for byte."""
    if text.isprintable() and "  " not in text:
        return shlex.quote(text)
    out = []
    for ch in text:
        if ch.isprintable() and ch not in " \\'":
            out.append(ch)
        else:
            out.append("".join(f"\\x{b:02x}" for b in ch.encode("utf-8", errors="surrogateescape")))
    return "$'" + "".join(out) + "'"


def read_nsys_report(path: str | os.PathLike[str], progress: Progress = None) -> Trace:
    """Export a binary ``.nsys-rep``/``.qdrep`` report with ``nsys`` and read the result."""
    p = str(path)
    command_hint = f"nsys export --type sqlite --output report.sqlite {shell_quote(p)}"
    if not os.path.isfile(p):
        raise TraceFormatError(p, "no such file")
    nsys = shutil.which("nsys")
    if nsys is None:
        raise TraceFormatError(
            p,
            "binary Nsight Systems report and `nsys` is not on PATH; export it first with "
            f"`{command_hint}` and analyze report.sqlite",
        )
    with tempfile.TemporaryDirectory(prefix="traceclass-nsys-") as tmp:
        out = os.path.join(tmp, "x.sqlite")
        if progress is not None:
            progress("nsys export", 0, 1)
        try:
            proc = subprocess.run(
                [nsys, "export", "--type", "sqlite", "--output", out, p],
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=NSYS_EXPORT_TIMEOUT_S,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise TraceFormatError(
                p, f"`nsys export` did not finish within {NSYS_EXPORT_TIMEOUT_S} s; run `{command_hint}` yourself"
            ) from None
        except OSError as exc:
            raise TraceFormatError(p, f"cannot run nsys ({exc.strerror or exc})") from None
        if proc.returncode != 0 or not os.path.isfile(out):
            said = _last_line(proc.stderr) or _last_line(proc.stdout) or f"exit status {proc.returncode}"
            raise TraceFormatError(p, f"`nsys export` failed: {said}")
        trace = read_nsys_sqlite(out, progress=progress)
    meta = dict(trace.meta)
    meta["nsys.exported_from"] = "nsys-rep"
    source = SourceInfo(
        path=p,
        format=trace.source.format,
        producer=trace.source.producer,
        format_version=trace.source.format_version,
        size_bytes=os.path.getsize(p),
    )
    return trace.replace(source=source, meta=meta)


def _last_line(raw: bytes | None) -> str:
    lines = [ln.strip() for ln in (raw or b"").decode("utf-8", "replace").splitlines() if ln.strip()]
    return lines[-1][:300] if lines else ""


# --------------------------------------------------------------------------- the reader


def _read(db: NsysDb, path: str, progress: Progress) -> Trace:
    steps = ["metadata", RUNTIME, KERNEL, MEMCPY, MEMSET, SYNC, NVTX, EVENTS, "linking"]
    done = [0]

    def phase(name: str) -> None:
        if progress is not None:
            progress(f"reading {name}", min(done[0], len(steps)), len(steps))
        done[0] += 1

    phase("metadata")
    version = detect_version(db)
    strings = StringTable()
    inputs = InputsTable()
    notes: list[str] = []
    window = _window(db)

    phase(RUNTIME)
    api, api_proc = read_api(db, strings, notes)
    gpu = read_gpu(db, strings, api, api_proc, notes, phase)

    data_end = max(
        [int(t.end_ns.max()) for t in (api, gpu) if len(t)], default=None
    )
    trace_end = window[1] if window else data_end
    phase(NVTX)
    nvtx = read_nvtx(db, strings, inputs, trace_end)
    phase(EVENTS)
    sampled = read_samples(db, strings)

    capture_types = {v for k, v in db.key_values("META_DATA_CAPTURE") if k == "CAPTURE_EVENT_TYPE"}
    captured = set()
    if any(t in db.columns for t in (KERNEL, MEMCPY, MEMSET)):
        captured.add(Captured.GPU)
    if RUNTIME in db.columns:
        captured.add(Captured.API)
    if nvtx is not None:
        captured.add(Captured.ANNOTATIONS)
        notes.extend(nvtx.notes)
        if len(nvtx.ops):
            captured.add(Captured.OPS)
        if nvtx.has_shapes:
            captured.add(Captured.SHAPES)
    if sampled is not None:
        captured.add(Captured.SAMPLES)
    notes.extend(_absence_notes(db, nvtx is not None, capture_types))
    if len(gpu):
        unlinked = int(((gpu.api < 0) & (gpu.kind == 0)).sum())
        if unlinked and RUNTIME in db.columns:
            notes.append(f"{unlinked} kernels have no matching CUDA API call (correlation id)")

    ann = nvtx.annotations if nvtx is not None else None
    ops = nvtx.ops if nvtx is not None else None
    threads, sample_thread = _threads(db, strings, api, ann, ops, sampled)
    extra: dict[str, Any] = {}
    if ann is not None:
        extra["annotations"] = ann
    if ops is not None:
        extra["ops"] = ops
    if sampled is not None:
        extra.update(
            frames=sampled.frames,
            stacks=sampled.stacks,
            samples=sampled.samples.replace(thread=sample_thread),
            sampling=sampled.info,
        )

    meta = _meta(db, version, capture_types)
    meta["event_counts"] = _counts(api, gpu, nvtx, sampled)
    # an NVTX range owns the GPU work its own thread launched inside it (nsys' nvtx_gpu_proj
    # rule); Kineto's helper-thread extension (autograd) does not apply to NVTX ranges
    meta[STAGE_PROJECTION] = "same-thread"
    if ops is not None and len(ops):
        # ops are emit_nvtx ranges: names and sizes only, every input dtype "" (unknown)
        meta[NVTX_OPS] = True
    producer = f"Nsight Systems {version.product}".strip()
    if version.source == "schema features":
        producer += " (era guessed from the schema; the export records no version)"
    trace = Trace(
        source=SourceInfo(
            path=path,
            format="nsys-sqlite",
            producer=producer,
            format_version=version.schema,
            size_bytes=os.path.getsize(path),
        ),
        strings=strings,
        inputs=inputs,
        devices=read_devices(db, gpu),
        threads=threads,
        api=api,
        gpu=gpu,
        window=window,
        captured=frozenset(captured),
        meta=meta,
        notes=tuple(notes),
        **extra,
    )
    phase("linking")
    return link(trace)


def _window(db: NsysDb) -> tuple[int, int] | None:
    if not db.has("ANALYSIS_DETAILS", "startTime", "stopTime"):
        return None
    row = db.con.execute("SELECT min(startTime), max(stopTime) FROM ANALYSIS_DETAILS").fetchone()
    if row and isinstance(row[0], int) and isinstance(row[1], int) and row[1] >= row[0]:
        return int(row[0]), int(row[1])
    return None


def _absence_notes(db: NsysDb, has_nvtx: bool, capture_types: set[str]) -> list[str]:
    notes = []
    if KERNEL not in db.columns:
        if MEMCPY in db.columns or MEMSET in db.columns:
            notes.append("CUDA kernel table absent: no kernel executions were recorded (copies/memsets only)")
        else:
            notes.append("CUDA kernel table absent: GPU activity was not captured")
    if RUNTIME not in db.columns:
        notes.append("CUDA API table absent: CUDA runtime/driver calls were not captured")
    if not has_nvtx:
        if "NvtxEvents" in capture_types:
            notes.append("NVTX was traced but the application emitted no NVTX events (no NVTX_EVENTS table)")
        else:
            notes.append("NVTX table absent: NVTX ranges were not captured")
    return notes


def _counts(
    api: ApiCalls, gpu: GpuActivity, nvtx: NvtxResult | None, sampled: SampleResult | None
) -> dict[str, int]:
    kinds = np.bincount(gpu.kind.astype(np.int64), minlength=4) if len(gpu) else np.zeros(4, int)
    counts = {
        "kernels": int(kinds[0]),
        "memcpy": int(kinds[1]),
        "memset": int(kinds[2]),
        "sync": int(kinds[3]),
        "api_calls": len(api),
    }
    if nvtx is not None:
        counts.update({f"nvtx_{k}": int(v) for k, v in nvtx.counts.items()})
    if sampled is not None:
        counts["cpu_samples"] = len(sampled.samples)
    return counts


_SAFE_EXPORT_KEYS = {
    "EXPORT_PRODUCT_VERSION": "nsys.product_version",
    "EXPORT_SCHEMA_VERSION": "nsys.schema_version",
    "EXPORT_PARAM_TIME_NORMALIZE": "nsys.time_normalized",
}


def _meta(db: NsysDb, version: ExportVersion, capture_types: set[str]) -> dict[str, Any]:
    """Versions and capture facts; never paths, user or host names from the export."""
    meta: dict[str, Any] = {
        "nsys.product_version": version.product,
        "nsys.schema_version": version.schema,
        "nsys.version_source": version.source,
    }
    for key, out in _SAFE_EXPORT_KEYS.items():
        if key in version.metadata:
            meta[out] = version.metadata[key]
    if capture_types:
        meta["nsys.capture_event_types"] = sorted(capture_types)
    if db.has("TARGET_INFO_SESSION_START_TIME", "utcEpochNs"):
        row = db.con.execute("SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME LIMIT 1").fetchone()
        if row and isinstance(row[0], int):
            meta["nsys.utc_epoch_ns"] = int(row[0])
    return meta


# --------------------------------------------------------------------------- threads


def _threads(
    db: NsysDb,
    strings: StringTable,
    api: ApiCalls,
    ann: Annotations | None,
    ops: Ops | None,
    sampled: SampleResult | None,
) -> tuple[Threads, np.ndarray]:
    """Threads that own rows, named from ThreadNames (processes from PROCESSES)."""
    pids = [api.pid]
    tids = [api.tid]
    for t in (ann, ops):
        if t is not None:
            pids.append(t.pid)
            tids.append(t.tid)
    s_pid = s_tid = np.zeros(0, np.int64)
    if sampled is not None:
        s_pid, s_tid = split_global_tid(sampled.sample_gtid)
        pids.append(s_pid)
        tids.append(s_tid)
    pid = np.concatenate(pids)
    tid = np.concatenate(tids)
    known = (pid >= 0) & (tid >= 0)
    pid, tid = pid[known], tid[known]
    sample_thread = np.zeros(0, np.int32)
    if len(pid) == 0:
        if sampled is not None:
            sample_thread = np.full(len(s_pid), -1, np.int32)
        return Threads.empty(), sample_thread
    gid, n = group_ids(pid, tid)
    first = np.zeros(n, dtype=np.int64)
    first[gid[::-1]] = np.arange(len(gid))[::-1]
    t_pid, t_tid = pid[first], tid[first]
    name = np.full(n, -1, dtype=np.int32)
    if db.has("ThreadNames", "nameId", "globalTid"):
        tn = db.ints("ThreadNames", {"gtid": "globalTid", "name": "nameId"})
        (codes,) = db.intern_ids(strings, tn["name"])
        n_pid, n_tid = split_global_tid(tn["gtid"])
        hit = lookup2(n_pid, n_tid, t_pid, t_tid)
        ok = hit >= 0
        name[ok] = codes[hit[ok]]
    if db.has("PROCESSES", "pid", "name"):
        rows = db.con.execute(f"SELECT pid, CAST(name AS BLOB) FROM {qi('PROCESSES')}").fetchall()
        procs = {int(p): text(nm) for p, nm in rows if isinstance(p, int) and nm is not None}
        for i in np.flatnonzero((name < 0) & (t_pid == t_tid)).tolist():
            pname = procs.get(int(t_pid[i]))
            if pname:
                name[i] = strings.intern(os.path.basename(pname) or pname)
    threads = Threads.build(n, pid=t_pid, tid=t_tid, name=name)
    if sampled is not None:
        row = lookup2(t_pid, t_tid, s_pid, s_tid)
        sample_thread = row.astype(np.int32)
    return threads, sample_thread


__all__ = ["read_nsys_sqlite", "read_nsys_report"]
