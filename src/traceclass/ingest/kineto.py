"""torch.profiler (Kineto) Chrome-trace JSON -> :class:`~traceclass.model.Trace`.

Facts about the format are in ``shared/reference/kineto-trace.md``. The file arrives in runs of
~1 MB of events (:mod:`traceclass.ingest.jsonstream`); the reader decodes each run into small
typed structs (only the fields we use), turns them into column arrays per category, and drops
the structs before the next run, so peak memory is the columns plus one block and one run.
Raw event slices (a file read whole, or a run the typed decoder refused) are decoded in chunks
of :data:`CHUNK_EVENTS`, with the forgiving repairs. A large file, plain or gzip, is read in
parts by several processes (:func:`_split_at`); strings are interned in event order, so the trace does
not depend on where runs or split points fall.
"""

from __future__ import annotations

import os
import re
import sys
import time
from itertools import repeat
from operator import attrgetter
from typing import Any, Callable, Iterator, Optional

import msgspec
import numpy as np

from traceclass.cores import usable_cores
from traceclass.errors import TraceFormatError
from traceclass.heap import release_free_heap
from traceclass.ingest.jsonload import Container, DecodedRun, locate_bad_event, repair_utf8
from traceclass.ingest.jsonstream import (
    GzipResume,
    NotABoundary,
    StreamUnsupported,
    gzip_split_points,
    split_point,
    stream_container,
    stream_from,
)
from traceclass.ingest.kineto_comms import TEXT_COLUMNS, CommArgs, build_comms, comm_columns, comm_rows, comm_texts
from traceclass.ingest.numbers import decimal_text_to_int
from traceclass.ingest.source import GZIP_MAGIC, Progress
from traceclass.model import (
    Annotations,
    ApiCalls,
    CopyKind,
    DeviceInfo,
    GpuActivity,
    GpuKind,
    InputsTable,
    MemKind,
    MemoryEvents,
    OpInputs,
    Ops,
    PythonFrames,
    SourceInfo,
    StringTable,
    Threads,
    Trace,
    Vendor,
)
from traceclass.model.api_names import CBID_NAMES, api_kind, strip_version
from traceclass.model.link import link
from traceclass.model.names import annotation_kind, short_kernel_name
from traceclass.model.table import narrowed
from traceclass.timings import stage

CHUNK_EVENTS = 10_000
#: Above this magnitude (us) a float64 no longer resolves 1 ns; ``ts`` is then parsed from text.
EXACT_TS_LIMIT_US = float(1 << 43)
#: |ts| or dur beyond this (us) cannot be int64 nanoseconds: such values are not times
_MAX_US = 9.0e15

_EMPTY = msgspec.Raw(b"")


#: integer ids and counts, typed so a chunk's columns convert in C; a file that writes one of
#: them otherwise (a string, a float, null) fails validation and its chunk is read through the
#: tolerant :class:`_LooseArgs` instead
_INT_ARGS = ("external_id", "correlation", "device", "seq", "cbid", "registers", "shared_memory")


class _Args(CommArgs, gc=False):
    external_id: int = msgspec.field(name="External id", default=-1)
    correlation: int = -1
    device: int = -1
    stream: Any = None  # ROCm runtime calls write it as a hex string ("0x0")
    nbytes: Any = msgspec.field(name="bytes", default=None)
    kind: Any = None
    dims: msgspec.Raw = msgspec.field(name="Input Dims", default=_EMPTY)
    types: msgspec.Raw = msgspec.field(name="Input type", default=_EMPTY)
    strides: msgspec.Raw = msgspec.field(name="Input Strides", default=_EMPTY)
    concrete: msgspec.Raw = msgspec.field(name="Concrete Inputs", default=_EMPTY)
    seq: int = msgspec.field(name="Sequence number", default=-1)
    flops: Any = None
    cbid: int = -1
    name: Any = None
    mem_bytes: Any = msgspec.field(name="Bytes", default=None)
    total_allocated: Any = msgspec.field(name="Total Allocated", default=None)
    total_reserved: Any = msgspec.field(name="Total Reserved", default=None)
    device_type: Any = msgspec.field(name="Device Type", default=None)
    device_id: Any = msgspec.field(name="Device Id", default=None)
    grid: Any = None
    block: Any = None
    registers: int = msgspec.field(name="registers per thread", default=-1)
    shared_memory: int = msgspec.field(name="shared memory", default=-1)


#: the same fields, any JSON value (converted one by one): the args of chunks that fail typing
_LooseArgs = msgspec.defstruct(
    "_LooseArgs",
    [(f.name, Any, msgspec.field(name=f.encode_name, default=None if f.name in _INT_ARGS else f.default))
     for f in msgspec.structs.fields(_Args)],
    gc=False,
)
_NO_ARGS = _Args()
_GETTERS = {f: attrgetter(f) for f in _INT_ARGS}


def _event_struct(name: str, ts: tuple[Any, Any], args: Any) -> type[msgspec.Struct]:
    """An event struct: the fields we read, with the given types for ``ts`` and ``args``."""
    fields = [(f, Any, None) for f in ("ph", "cat", "name", "pid", "tid")]
    fields += [("ts", *ts), ("dur", Any, None), ("args", args, None)]
    return msgspec.defstruct(name, fields, gc=False)


#: the usual decode: ts as a number, args typed
_Event = _event_struct("_Event", (Any, None), Optional[_Args])
#: once a file needs exact timestamps (epoch-us floats), ts is kept as its text
_EventRawTs = _event_struct("_EventRawTs", (msgspec.Raw, _EMPTY), Optional[_Args])
#: fallback when some event's args is not an object: args are converted one by one
_LooseEvent = _event_struct("_LooseEvent", (Any, None), Any)


class _TsText(msgspec.Struct, gc=False):
    ts: msgspec.Raw = _EMPTY


_DECODE_EVENTS = msgspec.json.Decoder(list[_Event])
_DECODE_LOOSE = msgspec.json.Decoder(list[_LooseEvent])
_DECODE_RAWTS = msgspec.json.Decoder(list[_EventRawTs])
_DECODE_TS = msgspec.json.Decoder(list[_TsText])

# category codes
_OP, _ANN, _PY, _API, _KERNEL, _MEMCPY, _MEMSET, _SYNC, _MEM, _META, _SPAN, _SKIP = range(12)
_COMMS = 100  # collective args of ops and kernels (columns of their own)
_PH_X, _PH_I, _PH_M, _PH_FLOW = 1, 2, 3, 4
_PHASE = {"X": _PH_X, "i": _PH_I, "I": _PH_I, "M": _PH_M, "s": _PH_FLOW, "f": _PH_FLOW, "t": _PH_FLOW}
_CATEGORY = {
    "cpu_op": _OP,
    "operator": _OP,  # very old Kineto
    "user_annotation": _ANN,
    "python_function": _PY,
    "cuda_runtime": _API,
    "cuda_driver": _API,
    "runtime": _API,
    "kernel": _KERNEL,
    "Kernel": _KERNEL,
    "gpu_memcpy": _MEMCPY,
    "Memcpy": _MEMCPY,
    "gpu_memset": _MEMSET,
    "Memset": _MEMSET,
    "cuda_sync": _SYNC,
    # MTIA (Meta's accelerator): device compute events and their runtime calls, analysed as a
    # device timeline like GPU kernels (correlation ids link them the same way)
    "mtia_ccp_events": _KERNEL,
    "mtia_runtime": _API,
    "cpu_instant_event": _MEM,
    "Trace": _SPAN,
}
KINETO_CATEGORIES = frozenset(_CATEGORY) | {"ac2g", "fwdbwd", "gpu_user_annotation", "overhead"}


def looks_like_kineto(container: Container) -> bool:
    """Kineto markers: its top-level keys or any event with a Kineto category."""
    if any(k in container.top for k in ("schemaVersion", "deviceProperties", "distributedInfo")):
        return True
    probe = container.events[:2000]
    if not probe:
        return not container.bare
    buf = b"[" + b",".join(probe) + b"]"
    try:
        evs = _DECODE_EVENTS.decode(buf)
    except msgspec.DecodeError:
        try:
            evs = _DECODE_EVENTS.decode(repair_utf8(buf)[0])
        except msgspec.DecodeError:
            return False
    return any(isinstance(e.cat, str) and e.cat in KINETO_CATEGORIES for e in evs)


def _decode_chunk(state: "_ChunkState", buf: bytes) -> list[Any]:
    try:
        evs = state.decoder.decode(buf)
        state.loose = False
    except msgspec.ValidationError:
        evs = _DECODE_LOOSE.decode(buf)
        state.loose = True
    return evs


#: the categories read as timed rows (their names interned in event order)
_TIMED = np.zeros(16, dtype=bool)
_TIMED[[_OP, _ANN, _PY, _API, _KERNEL, _MEMCPY, _MEMSET, _SYNC]] = True

#: columns of string codes, re-coded when a helper's part is appended
_TEXT_COLUMNS = frozenset({"name"}) | TEXT_COLUMNS

_NARROW = frozenset().union(*(t.narrow_columns() for t in (Ops, Annotations, PythonFrames, ApiCalls, GpuActivity)))


class _Columns:
    """Accumulates per-category column chunks; id columns that fit int32 are held so from the
    first chunk, so reading never holds them at twice their width."""

    def __init__(self) -> None:
        self.parts: dict[int, dict[str, list[np.ndarray]]] = {}

    def add(self, cat: int, **cols: np.ndarray) -> None:
        d = self.parts.setdefault(cat, {})
        for k, v in cols.items():
            d.setdefault(k, []).append(narrowed(v) if k in _NARROW else v)

    def get(self, cat: int) -> dict[str, np.ndarray]:
        """The category's columns, each joined once; its chunks are released as they are
        joined, so the columns are never held twice."""
        d = self.parts.pop(cat, None)
        if not d:
            return {}
        out = {}
        for k in list(d):
            pieces = d.pop(k)
            out[k] = pieces[0] if len(pieces) == 1 else np.concatenate(pieces)
            del pieces
        release_free_heap()  # the chunks' pages, else resident next to the joined columns
        return out


def read_kineto(path: str, data_size: int, container: Container, progress: Progress = None,
                split: bool = True) -> Trace:
    """The trace in ``container``. A large file is read in parts by several processes
    where the machine has the cores (:func:`_split_at`): this one up to the first split point,
    a forked helper from each split point to the next, their columns then appended to ours in
    file order; ``split=False`` reads it all here."""
    top = container.top
    strings = StringTable()
    inputs = InputsTable()
    cols = _Columns()
    counts: dict[str, int] = {}
    thread_names: dict[tuple[int, int], str] = {}
    window: list[tuple[int, int]] = []
    n_total = len(container.events)
    state = _ChunkState(strings, inputs, cols, counts, thread_names, window)
    state.probe_timestamps(container.events[:1000])
    lo = 0

    def parsed(n: int) -> None:
        nonlocal lo, n_total
        lo += n
        n_total = max(n_total, lo)
        if progress is not None:
            progress("parsing", lo, n_total)

    with stage("read split points"):  # a gzip file's: inflating it up to the last one
        points = _split_at(path, container, state, progress) if split else []
    helpers: list[_Helper] = []
    if points:
        try:
            container = stream_container(path, stop=points[0][0])
        except (StreamUnsupported, NotABoundary):  # found in the first block: read it all here
            points = []
        else:
            top = container.top
            try:
                for k, (at, resume) in enumerate(points):
                    helpers.append(_Helper(path, at, points[k + 1][0] if k + 1 < len(points) else None,
                                           bool(state.exact_ts), resume))
            except (OSError, AssertionError, ValueError):  # no process to be had: read it all here
                _stop(helpers)
                return read_kineto(path, data_size, stream_container(path), progress, split=False)
    if container.rest is not None:  # later blocks decoded straight from their text
        container.decode_run = lambda text: _decode_chunk(state, text)
    began = time.monotonic()
    try:
        utf8_fixed = _consume(state, container, path, _runs(container), parsed)
    except (NotABoundary, StreamUnsupported):
        if not helpers:
            raise
        _stop(helpers)  # the guess was not an event's start, or the part before it is damaged
        return read_kineto(path, data_size, stream_container(path), progress, split=False)
    except BaseException:
        _stop(helpers)
        raise
    try:
        for k, helper in enumerate(helpers):
            with stage("read helper join"):
                # a helper still reading long after this part took its time is stuck: read it here
                part = helper.result(patience=HELPER_PATIENCE_S + 3 * (time.monotonic() - began))
            if part is None:  # the helper met something it cannot read: read from its start on here
                _stop(helpers[k + 1:])
                rest = Container(top=top, events=[], bare=False)
                rest.decode_run = container.decode_run
                at, resume = points[k]
                utf8_fixed += _consume(state, rest, path, stream_from(path, at, rest, resume=resume), parsed)
                container.size += rest.size
                break
            utf8_fixed += part.append_to(state)
            top.update(part.top)
            container.size += part.size
            parsed(part.events)
    except BaseException:  # interrupted, or a bad event in a part read here: no helper outlives us
        _stop(helpers)
        raise
    data_size = container.size or data_size

    ops = _build_ops(cols.get(_OP))
    ann = _build_annotations(cols.get(_ANN), strings)
    py = _build_python(cols.get(_PY))
    api = _build_api(cols.get(_API), strings)
    gpu = _build_gpu(cols, strings)
    mem = _build_memory(cols.get(_MEM))
    threads = _build_threads(thread_names, strings)
    comms = build_comms(cols.get(_COMMS))

    notes = []
    if container.repaired:
        notes.append(f"input repaired: {container.repaired}")
    if utf8_fixed:
        notes.append(f"input repaired: {utf8_fixed:,} invalid UTF-8 byte{'s' if utf8_fixed != 1 else ''} "
                     "in event strings replaced by U+FFFD")
    for cat, label in (
        ("cuda_profiler_range", "CUPTI range-profiler counter events"),
        ("gpu_user_annotation", "GPU-side annotation spans (stages are projected from launches instead)"),
    ):
        if counts.get(cat):
            notes.append(f"{counts[cat]} {label} not analysed (not supported yet)")
    if counts.get("mtia_ccp_events"):
        notes.append(f"{counts['mtia_ccp_events']} MTIA device events analysed as device work (timeline, idle, "
                     "ops); MTIA peaks are not in the hardware table, so they get no roofline label")
    if counts.get("cuda_profiler_range") and not len(gpu):
        notes.append(
            "trace was recorded in CUPTI range-profiler mode: it has no kernel events, so no "
            "GPU timeline can be computed"
        )
    if counts.get("?invalid timestamp"):
        notes.append(f"{counts.pop('?invalid timestamp')} events without a usable timestamp (missing, not a "
                     "number, or out of range) were ignored")
    if counts.get("!negative duration"):
        notes.append(f"{counts.pop('!negative duration')} events with a negative duration were read as "
                     "zero-length")
    unknown = {k: v for k, v in counts.items() if k.startswith("?")}
    if unknown:
        desc = ", ".join(f"{k[1:]} ({v})" for k, v in sorted(unknown.items(), key=lambda kv: -kv[1])[:5])
        notes.append(f"events of unrecognized categories ignored: {desc}")

    devices = _devices(top, gpu)
    captured = {"ops", "annotations", "api"}
    if devices or len(gpu) or any(k in top for k in ("cuda_runtime_version", "hip_runtime_version")):
        captured.add("gpu")
    if len(py) or top.get("with_stack"):
        captured.add("python")
    if len(mem) or top.get("profile_memory"):
        captured.add("memory")
    if top.get("record_shapes") or len(inputs):
        captured.add("shapes")

    meta = _meta(top)
    # sorted: the order things were met in depends on how the file was cut into runs
    meta["event_counts"] = {k: v for k, v in sorted(counts.items()) if not k.startswith(("?", "!"))}
    trace = Trace(
        source=SourceInfo(
            path=path,
            format="kineto",
            producer="torch.profiler (Kineto)",
            format_version=str(top.get("schemaVersion", "")),
            size_bytes=data_size,
        ),
        strings=strings,
        inputs=inputs,
        devices=devices,
        threads=threads,
        ops=ops,
        annotations=ann,
        python=py,
        api=api,
        gpu=gpu,
        memory=mem,
        comms=comms,
        window=(min(w[0] for w in window), max(w[1] for w in window)) if window else None,
        captured=frozenset(captured),
        meta=meta,
        notes=tuple(notes),
    )
    if progress is not None:
        progress("linking", 0, 1)
    with stage("link"):
        linked = link(trace)
    del trace
    release_free_heap()
    return linked


def _consume(state: "_ChunkState", container: Container, path: str, runs: Iterator[list[Any]],
             parsed: Callable[[int], None]) -> int:
    """Every run into ``state``'s columns; returns the invalid UTF-8 bytes replaced."""
    utf8_fixed = 0
    for events in runs:
        if isinstance(events, DecodedRun):
            n_run = len(events)
            state.process(events, events.text)
            del events
            parsed(n_run)
            continue
        while events:
            chunk = events[:CHUNK_EVENTS]
            # drop the chunk's raw slices from the list as we go: ~50 bytes per event that
            # would otherwise stay allocated until the whole file is parsed
            del events[:CHUNK_EVENTS]
            buf = b"[" + b",".join(chunk) + b"]"
            n_chunk = len(chunk)
            try:
                evs = _decode_chunk(state, buf)
            except msgspec.DecodeError:
                # a stray byte in a name or category: replaced, as the forgiving path does
                buf, fixed = repair_utf8(buf)
                try:
                    if not fixed:
                        raise
                    evs = _decode_chunk(state, buf)
                except msgspec.DecodeError:
                    raise TraceFormatError(path, locate_bad_event(container, chunk)) from None
                utf8_fixed += fixed
            del chunk
            state.process(evs, buf)
            del evs, buf
            parsed(n_chunk)
        del events
    return utf8_fixed


#: Files with this much content (decompressed) are read in parts by several processes where cores are
#: free (one part per core, each at least half this size): at 64 MB a sequential read takes
#: ~0.7 s on this project's VM, a fork and a hand-over ~0.05 s. There is no upper limit: the
#: parts' columns together are the trace's columns, held once while reading, less than the
#: later stages hold (10 GB V100 replica: 1.86 GB here + 1.51 GB in the helper at most while
#: reading, 3.75 GB here later)
SPLIT_ABOVE = 64 << 20
#: at most this many processes read one file
SPLIT_PARTS = 8
#: seconds a helper may take beyond three times this process's part before its part is read
#: here instead (it is stuck)
HELPER_PATIENCE_S = 30.0
#: a gzip file is split as if its content were this many times its size (traces compress
#: ~8-20:1; the corpus V100 trace 13:1, its replica 8.5:1)
GZIP_SPLIT_RATIO = 8
#: set to 0 to read every file in this process
SPLIT_ENV = "TRACECLASS_SPLIT_READ"


def _split_at(path: str, container: Container, state: "_ChunkState", progress: Progress = None
              ) -> list[tuple[int, GzipResume | None]]:
    """Where helper processes should start reading (ascending content offsets, one per helper,
    each with where a gzip stream was there), or [] to read the file here alone: one part per
    free core, up to :data:`SPLIT_PARTS`, each at least half of :data:`SPLIT_ABOVE`."""
    if os.environ.get(SPLIT_ENV, "1") == "0" or container.rest is None or container.bare:
        return []
    if not sys.platform.startswith("linux"):
        return []  # a forked helper starts in ~1 ms; a spawned one would re-import for ~0.3 s
    cores = usable_cores()
    if cores < 2 or state.exact_ts is None:
        return []
    mp = sys.modules.get("multiprocessing")
    if mp is not None and (mp.parent_process() is not None or mp.current_process().daemon):
        return []  # a worker of a pool (the cluster engine's, Dask's): its siblings use the cores
    threading = sys.modules.get("threading")
    if threading is not None and threading.active_count() > 1:
        return []  # a fork copies locks other threads may hold (a notebook's output streams)
    try:
        size = os.stat(path).st_size
        with open(path, "rb") as fh:
            gz = fh.read(2) == GZIP_MAGIC
    except OSError:
        return []
    if gz:
        # the content's size is not known before inflating it; traces compress ~8-20:1, and
        # the parts stay above half of SPLIT_ABOVE at the lowest of those ratios
        size *= GZIP_SPLIT_RATIO
    if size < SPLIT_ABOVE:
        return []
    parts = max(2, min(cores, SPLIT_PARTS, size // max(SPLIT_ABOVE // 2, 1)))
    if gz:
        try:
            # the pass inflates most of the file before parsing starts: seconds at GBs
            shown = None if progress is None else (lambda done, total: progress("splitting", done, total))
            return list(gzip_split_points(path, parts, shown))
        except (OSError, TraceFormatError):
            return []  # read alone, which reports what is wrong with the file
    points: list[tuple[int, GzipResume | None]] = []
    for k in range(1, parts):
        at = split_point(path, max(k * size // parts, points[-1][0] + 1 if points else 0), size)
        if at is not None and (not points or at > points[-1][0]):
            points.append((at, None))
    return points


class _Part:
    """What the helper read: its columns, string and inputs tables, counts and sizes."""

    def __init__(self, head: dict[str, Any], columns: list[tuple[int, str, np.ndarray]]) -> None:
        self.head = head
        self.columns = columns
        self.top: dict[str, Any] = head["top"]
        self.size: int = head["size"]
        self.events: int = head["events"]

    def append_to(self, state: "_ChunkState") -> int:
        """Its rows after ``state``'s, its strings and inputs re-coded in ``state``'s tables
        (interned in the order the helper met them: the codes a single reader would give)."""
        h = self.head
        codes = np.append(state.strings.intern_many(h["strings"]), np.int32(-1))
        values = h["input_values"]
        inputs = {c: state.inputs.intern(key, (lambda c=c: values[c] if c >= 0 else None))
                  for key, c in h["inputs"]}
        in_codes = np.array([inputs.get(c, -1) for c in range(len(values))] + [-1], dtype=np.int32)
        for cat, name, arr in self.columns:
            if name in _TEXT_COLUMNS:
                arr = codes[arr]  # -1 reads the last entry: -1
            elif cat == _OP and name == "inputs":
                arr = in_codes[arr]
            state.cols.add(cat, **{name: arr})
        self.columns = []
        for k, v in h["counts"].items():
            state.counts[k] = state.counts.get(k, 0) + v
        state.thread_names.update(h["thread_names"])
        state.window.extend(h["window"])
        return int(h["utf8_fixed"])


def _stop(helpers: list["_Helper"]) -> None:
    for helper in helpers:
        helper.stop()


class _Helper:
    """A forked process reading a file from content offset ``at`` (an event's start; for gzip,
    where ``resume`` left the stream) to ``stop`` (the next helper's start) or the end."""

    def __init__(self, path: str, at: int, stop: int | None, exact_ts: bool,
                 resume: GzipResume | None = None) -> None:
        import multiprocessing  # only when a file is split: ~10 ms of imports

        ctx = multiprocessing.get_context("fork")
        self.conn, child = ctx.Pipe(duplex=False)
        # forked, not pickled: the resume point's decompressor is copied with the memory
        self.proc = ctx.Process(target=_help, args=(path, at, stop, exact_ts, child, resume), daemon=True)
        self.proc.start()
        child.close()

    def result(self, patience: float = 600.0) -> _Part | None:
        """Its part, or None when it failed, died or has not answered in ``patience`` seconds
        (the caller reads that part itself)."""
        deadline = time.monotonic() + patience
        try:
            while not self.conn.poll(0.05):
                if not self.proc.is_alive() or time.monotonic() > deadline:
                    return None
            status, head = self.conn.recv()
            if status != "ok":
                return None
            columns = []
            for cat, name, dtype, shape in head.pop("columns"):
                arr = np.empty(shape, dtype=np.dtype(dtype))
                if arr.size:
                    self.conn.recv_bytes_into(arr)
                columns.append((cat, name, arr))
            return _Part(head, columns)
        except (EOFError, OSError, ValueError):
            return None
        finally:
            self.stop()

    def stop(self) -> None:
        if self.proc.is_alive():
            self.proc.kill()
        self.proc.join()
        self.conn.close()


def _help(path: str, at: int, stop: int | None, exact_ts: bool, conn: Any, resume: GzipResume | None = None
          ) -> None:
    """The helper's work: read from ``at`` to ``stop``, send the head then each column's bytes."""
    try:
        with stage("read helper"):
            state = _ChunkState(StringTable(), InputsTable(), _Columns(), {}, {}, [])
            state.exact_ts = exact_ts
            state.decoder = _DECODE_RAWTS if exact_ts else _DECODE_EVENTS
            container = Container(top={}, events=[], bare=False)
            container.decode_run = lambda text: _decode_chunk(state, text)
            n = [0]

            def parsed(k: int) -> None:
                n[0] += k

            runs = stream_from(path, at, container, stop=stop, resume=resume)
            utf8_fixed = _consume(state, container, path, runs, parsed)
            columns = []
            for cat in list(state.cols.parts):
                columns += [(cat, name, arr) for name, arr in state.cols.get(cat).items()]
        head = dict(
            strings=state.strings.values, inputs=state.inputs.entries(),
            input_values=state.inputs.values, counts=state.counts, thread_names=state.thread_names,
            window=state.window, utf8_fixed=utf8_fixed, top=container.top, size=container.size, events=n[0],
            columns=[(cat, name, arr.dtype.str, arr.shape) for cat, name, arr in columns],
        )
    except BaseException as exc:  # noqa: BLE001 - reported to the parent, which reads this part itself
        conn.send(("failed", f"{type(exc).__name__}: {exc}"))
        conn.close()
        return
    conn.send(("ok", head))
    while columns:
        _, _, arr = columns.pop(0)
        if arr.size:
            conn.send_bytes(np.ascontiguousarray(arr))
        del arr
    conn.close()


def _runs(container: Container) -> Iterator[list[msgspec.Raw]]:
    """The container's raw events in runs: all of them, or (streamed) one block at a time."""
    first, container.events = container.events, []
    yield first
    if container.rest is not None:
        yield from container.rest


class _CategoriesSeen:
    """The distinct ``cat`` values of a file, numbered as they appear, with what each means:
    an event's category becomes one dict probe, and counting the skipped ones a bincount.
    Beyond :attr:`LIMIT` distinct values (a hostile file) new ones get id -1 and are counted
    one by one."""

    LIMIT = 4096

    def __init__(self) -> None:
        self.values: list[Any] = []
        self.index: dict[Any, int] = {}
        self.code = np.zeros(0, dtype=np.int8)
        self.memory = np.zeros(0, dtype=bool)
        self.mtia = -2
        for c in (*_CATEGORY, "cpu_instant_event"):
            self._add(c)
        self._arrays()

    def _add(self, c: Any) -> None:
        if c not in self.index:
            self.index[c] = len(self.values)
            self.values.append(c)

    def _arrays(self) -> None:
        # id -1 (beyond the table) reads the last entry: an unknown category, never memory
        vals = self.values + [None]
        self.code = np.array([_CATEGORY.get(c, -1) if isinstance(c, str) else -1 for c in vals], dtype=np.int8)
        self.memory = np.array([c == "cpu_instant_event" for c in vals], dtype=bool)
        self.mtia = self.index.get("mtia_ccp_events", -2)

    def ids(self, cats: list[Any]) -> np.ndarray:
        n = len(cats)
        try:
            cid = np.fromiter(map(self.index.get, cats, repeat(-1, n)), np.int32, n)
        except TypeError:  # an unhashable category in a hostile file: read as its text
            cats = [c if isinstance(c, str) else str(c) for c in cats]
            cid = np.fromiter(map(self.index.get, cats, repeat(-1, n)), np.int32, n)
        new = np.flatnonzero(cid < 0)
        if len(new) and len(self.values) < self.LIMIT:
            for i in new.tolist():
                if len(self.values) >= self.LIMIT:
                    break
                self._add(cats[i])
            self._arrays()
            cid[new] = np.fromiter(map(self.index.get, (cats[i] for i in new.tolist()), repeat(-1)),
                                   np.int32, len(new))
        return cid

    def unknown_key(self, i: int | None, value: Any = None) -> str:
        c = self.values[i] if i is not None else value
        return c if c in ("gpu_user_annotation", "overhead", "cuda_profiler_range") else "?" + str(c)[:40]

    def flow_key(self, i: int | None, value: Any = None) -> str:
        c = self.values[i] if i is not None else value
        return f"flow:{c if isinstance(c, str) else str(c)}"


class _ChunkState:
    def __init__(self, strings, inputs, cols, counts, thread_names, window):  # type: ignore[no-untyped-def]
        self.strings: StringTable = strings
        self.inputs: InputsTable = inputs
        self.cols: _Columns = cols
        self.counts: dict[str, int] = counts
        self.thread_names: dict[tuple[int, int], str] = thread_names
        self.window: list[tuple[int, int]] = window
        self.exact_ts: bool | None = None
        self.decoder = _DECODE_EVENTS
        self.loose = False
        self.cats_seen = _CategoriesSeen()

    def probe_timestamps(self, sample: list[msgspec.Raw]) -> None:
        """Choose the decoder from the first events: epoch-us files get ``ts`` as text from
        the first chunk on, sparing the first chunk a second decode for its timestamps."""
        try:
            evs = _DECODE_LOOSE.decode(b"[" + b",".join(sample) + b"]")
        except msgspec.DecodeError:
            return
        ts = _floats([e.ts for e in evs])
        finite = np.isfinite(ts) & (np.abs(ts) < _MAX_US)
        if finite.any():
            self.exact_ts = bool(np.abs(ts[finite]).max() >= EXACT_TS_LIMIT_US)
            if self.exact_ts:
                self.decoder = _DECODE_RAWTS

    def process(self, evs: list[Any], buf: bytes) -> None:
        n = len(evs)
        if n == 0:
            return
        codes = self._categories(evs)
        # times only for the events kept: flows (a third of a GPU trace's events) and metadata
        # are counted or read without them
        rows = np.flatnonzero((codes != _SKIP) & (codes != _META))
        if len(rows) == n:
            ts_ns, dur_ns, valid, negative = self._times(evs, buf)
        else:
            ts_ns, dur_ns = np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64)
            valid, negative = np.zeros(n, dtype=bool), np.zeros(n, dtype=bool)
            if len(rows):
                ts_ns[rows], dur_ns[rows], valid[rows], negative[rows] = self._times(
                    [evs[i] for i in rows.tolist()], buf, rows)
        bad = ~valid & (codes != _META) & (codes != _SKIP)
        if bad.any():  # no usable timestamp: the event cannot be placed in time
            self.counts["?invalid timestamp"] = self.counts.get("?invalid timestamp", 0) + int(bad.sum())
            codes = np.where(bad, _SKIP, codes).astype(np.int8)
        neg = negative & (codes != _SKIP)
        if neg.any():
            self.counts["!negative duration"] = self.counts.get("!negative duration", 0) + int(neg.sum())
        names, comm = self._intern_in_event_order(evs, codes)
        for c in np.unique(codes).tolist():
            if c == _SKIP:
                continue
            idx = np.flatnonzero(codes == c)
            sub = [evs[i] for i in idx.tolist()]
            t, d = ts_ns[idx], dur_ns[idx]
            if c == _META:
                self._meta(sub)
            elif c == _SPAN:
                for k, e in enumerate(sub):
                    if isinstance(e.name, str) and e.name.startswith("PyTorch Profiler"):
                        self.window.append((int(t[k]), int(t[k] + d[k])))
            elif c == _MEM:
                self._memory(sub, t)
            else:
                self._timed(c, sub, t, d, names[idx], comm[idx])

    def _intern_in_event_order(self, evs: list[Any], codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """String codes of the timed events' names (-1 elsewhere) and which events carry
        collective arguments, after interning the names and, each right after its event's name,
        the collective texts, in the order the events come: so a string's code does not depend
        on how the file was cut into runs or split between processes (reports break ties between
        equal times by these codes)."""
        n = len(evs)
        names = np.full(n, -1, dtype=np.int32)
        comm_mask = np.zeros(n, dtype=bool)
        rows = np.flatnonzero(_TIMED[codes])
        if not len(rows):
            return names, comm_mask
        kept = [evs[i] for i in rows.tolist()]
        values = [e.name for e in kept]
        if not all(map(str.__instancecheck__, values)):
            values = [_str(v) for v in values]
        # events with collective texts: each one's texts right after its name
        texts: list[tuple[int, Any]] = []
        kinds = codes[rows]
        comm = np.flatnonzero((kinds == _OP) | (kinds == _KERNEL))
        if len(comm):
            args = [kept[i].args for i in comm.tolist()]
            args = [_args(a) for a in args] if self.loose else [a if a is not None else _NO_ARGS for a in args]
            texts = [(int(comm[k]), args[k]) for k in comm_rows(args)]
            comm_mask[rows[[k for k, _ in texts]]] = True
        strings = self.strings
        got = np.empty(len(kept), dtype=np.int32)
        done = 0
        for k, a in texts:
            got[done:k + 1] = strings.intern_many(values[done:k + 1])
            done = k + 1
            for v in comm_texts(a):
                if v is not None:
                    strings.intern(v)
        got[done:] = strings.intern_many(values[done:])
        names[rows] = got
        return names, comm_mask

    def _categories(self, evs: list[Any]) -> np.ndarray:
        """Category code per event, and counts of what is skipped (flows, unknown categories)."""
        n = len(evs)
        phs = [e.ph for e in evs]  # faster than map(attrgetter) on msgspec structs
        cats = [e.cat for e in evs]
        try:
            ph = np.fromiter(map(_PHASE.get, phs, repeat(0, n)), np.int8, n)
        except TypeError:  # an unhashable ph in a hostile file
            ph = np.array([_PHASE.get(p, 0) if isinstance(p, str) else 0 for p in phs], dtype=np.int8)
        cats_seen = self.cats_seen
        cid = cats_seen.ids(cats)
        cat = cats_seen.code[cid]
        codes = np.full(n, _SKIP, dtype=np.int8)
        x = ph == _PH_X
        codes[x & (cat >= 0)] = cat[x & (cat >= 0)]
        codes[ph == _PH_M] = _META
        codes[(ph == _PH_I) & cats_seen.memory[cid]] = _MEM
        counts = self.counts
        n_mtia = int(np.count_nonzero(cid == cats_seen.mtia))
        if n_mtia:
            counts["mtia_ccp_events"] = counts.get("mtia_ccp_events", 0) + n_mtia
        # skipped events counted per category id, one key per distinct category
        for rows, label in ((x & (cat < 0), cats_seen.unknown_key), (ph == _PH_FLOW, cats_seen.flow_key)):
            ids = cid[rows]
            if not len(ids):
                continue
            per_id = np.bincount(ids[ids >= 0])
            for i in np.flatnonzero(per_id).tolist():
                key = label(i)
                counts[key] = counts.get(key, 0) + int(per_id[i])
            for i in np.flatnonzero(rows)[ids < 0].tolist():  # categories beyond the table
                key = label(None, cats[i])
                counts[key] = counts.get(key, 0) + 1
        other = np.flatnonzero(ph == 0)
        for i in other.tolist():
            key = f"?ph {phs[i]}"[:40]
            counts[key] = counts.get(key, 0) + 1
        return codes

    def _times(self, evs: list[Any], buf: bytes, rows: np.ndarray | None = None
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(ts_ns, dur_ns, valid ts, negative duration) per event; ``evs`` are the events at
        ``rows`` of the run ``buf`` holds (all of them when None)."""
        dur = _floats([e.dur for e in evs])
        dur_ok = np.isfinite(dur) & (np.abs(dur) < _MAX_US)
        negative = dur_ok & (dur < 0)
        dur_ns = np.where(dur_ok, np.rint(np.where(dur_ok, dur, 0.0) * 1000.0), 0).astype(np.int64)
        dur_ns = np.maximum(dur_ns, 0)
        if evs and type(evs[0]) is _EventRawTs:
            ts_ns, ok = decimal_text_to_int([e.ts for e in evs], 3)
            return np.where(ok, ts_ns, 0), dur_ns, ok, negative
        ts = _floats([e.ts for e in evs])
        finite = np.isfinite(ts) & (np.abs(ts) < _MAX_US)
        if self.exact_ts is None and finite.any():
            self.exact_ts = bool(np.abs(ts[finite]).max() >= EXACT_TS_LIMIT_US)
            if self.exact_ts and not self.loose:
                # epoch-us floats lose ns digits in float64: read ts as text from now on
                self.decoder = _DECODE_RAWTS
        safe = np.where(finite, ts, 0.0)
        if self.exact_ts:
            texts = [x.ts for x in _DECODE_TS.decode(buf)]
            if rows is not None:
                texts = [texts[i] for i in rows.tolist()]
            ts_ns, ok = decimal_text_to_int(texts, 3)
            if not ok.all():  # keep int64 throughout: a float detour would lose the ns digits
                fallback = np.rint(safe * 1000.0).astype(np.int64)
                ts_ns = np.where(ok, ts_ns, fallback)
            valid = ok | finite
        else:
            ts_ns = np.rint(safe * 1000.0).astype(np.int64)
            valid = finite
        return ts_ns, dur_ns, valid, negative

    def _meta(self, sub: list[Any]) -> None:
        for e in sub:
            if e.name == "thread_name":
                tname = _args(e.args).name
                pid, tid = _int_or_none(e.pid), _int_or_none(e.tid)
                if isinstance(tname, str) and pid is not None and tid is not None:
                    self.thread_names[(pid, tid)] = tname

    def _memory(self, sub: list[Any], t: np.ndarray) -> None:
        keep = [k for k, e in enumerate(sub) if e.name == "[memory]"]
        if not keep:
            return
        args = [_args(sub[k].args) for k in keep]
        self.cols.add(
            _MEM,
            ts_ns=t[keep],
            bytes=_ints([a.mem_bytes for a in args], 0),
            total_allocated=_ints([a.total_allocated for a in args]),
            total_reserved=_ints([a.total_reserved for a in args]),
            device_type=_ints([a.device_type for a in args]),
            device=_ints([a.device_id for a in args]),
        )

    def _timed(self, c: int, sub: list[Any], t: np.ndarray, d: np.ndarray, names: np.ndarray,
               comm: np.ndarray) -> None:
        if self.loose:
            args = [_args(e.args) for e in sub]
        else:
            args = [e.args for e in sub]
            if None in args:
                args = [a if a is not None else _NO_ARGS for a in args]
        ic = self._int_column
        if c in (_KERNEL, _MEMCPY, _MEMSET, _SYNC):
            dev = ic(args, "device")
            pid = _ints([e.pid for e in sub])
            dev = np.where(dev >= 0, dev, pid)
            stream = _ints([a.stream for a in args])
            tid = _ints([e.tid for e in sub])
            stream = np.where((stream == -1) & (c != _SYNC), tid, stream)
            extra: dict[str, np.ndarray] = {}
            if c == _KERNEL:
                extra["grid"] = _products([a.grid for a in args])
                extra["block"] = _products([a.block for a in args])
                extra["registers"] = ic(args, "registers")
                extra["shared_mem"] = ic(args, "shared_memory")
            if c in (_MEMCPY, _MEMSET):
                extra["bytes"] = _ints([a.nbytes for a in args])
            self.cols.add(
                c,
                start_ns=t,
                end_ns=t + d,
                device=dev,
                stream=stream,
                name=names,
                correlation=ic(args, "correlation"),
                external_id=ic(args, "external_id"),
                **extra,
            )
            if c == _KERNEL:
                self._comms(True, args, comm, t, d, dev, stream)
            return
        pid = _ints([e.pid for e in sub])
        tid = _ints([e.tid for e in sub])
        base = dict(start_ns=t, end_ns=t + d, pid=pid, tid=tid, name=names)
        if c == _OP:
            inputs = self._inputs(args)
            self._comms(False, args, comm, t, d, pid, tid)
            self.cols.add(
                c,
                external_id=ic(args, "external_id"),
                seq=ic(args, "seq"),
                inputs=inputs,
                flops=_floats([a.flops for a in args]),
                **base,
            )
        elif c == _ANN:
            self.cols.add(c, external_id=ic(args, "external_id"), **base)
        elif c == _PY:
            self.cols.add(c, **base)
        elif c == _API:
            cbid = ic(args, "cbid")
            self.cols.add(
                c,
                correlation=ic(args, "correlation"),
                external_id=ic(args, "external_id"),
                cbid=cbid,
                **base,
            )

    def _int_column(self, args: list[Any], field: str) -> np.ndarray:
        """An integer args field as an int64 column (-1 where absent)."""
        if not self.loose:  # typed ints: converted in C
            try:
                return np.fromiter(map(_GETTERS[field], args), np.int64, len(args))
            except OverflowError:  # beyond int64 (msgspec accepts uint64): reduced as _ints does
                pass
        return _ints(list(map(_GETTERS[field], args)))

    def _comms(self, is_kernel: bool, args: list[_Args], comm: np.ndarray, t: np.ndarray, d: np.ndarray,
               pid: np.ndarray, tid: np.ndarray) -> None:
        """The rows ``comm`` marks (found while interning, :meth:`_intern_in_event_order`)."""
        found = comm_columns(is_kernel, args, np.flatnonzero(comm).tolist(), t, d, pid, tid, self.strings, _ints)
        if found is not None:
            self.cols.add(_COMMS, **found)

    def _inputs(self, args: list[_Args]) -> np.ndarray:
        out = np.full(len(args), -1, dtype=np.int32)
        dims, types = [a.dims for a in args], [a.types for a in args]
        n = len(args)
        if dims.count(_EMPTY) == n and types.count(_EMPTY) == n:  # no shapes recorded: one C pass
            return out
        intern = self.inputs.intern
        for k, a in enumerate(args):
            if dims[k] is _EMPTY and types[k] is _EMPTY:
                continue
            key = (bytes(a.dims), bytes(a.types), bytes(a.strides), bytes(a.concrete))
            out[k] = intern(key, lambda key=key: _parse_inputs(*key))
        return out


def _args(a: Any) -> Any:
    """An event's args as :class:`_Args` or :class:`_LooseArgs` (same attribute names)."""
    if a is None:
        return _NO_ARGS
    if type(a) is _Args or type(a) is _LooseArgs:
        return a
    if isinstance(a, dict):
        try:
            return _ARGS_FROM_DICT(a)
        except (msgspec.ValidationError, TypeError):
            return _NO_ARGS
    return _NO_ARGS


def _ARGS_FROM_DICT(d: dict) -> Any:  # noqa: N802 - a converter, named like the type it makes
    # Raw fields cannot be converted from Python objects: re-encode those keys
    raw_keys = {"Input Dims", "Input type", "Input Strides", "Concrete Inputs"}
    plain = {k: v for k, v in d.items() if k not in raw_keys}
    a = msgspec.convert(plain, _LooseArgs, strict=False)
    extra = {}
    for k, field in (("Input Dims", "dims"), ("Input type", "types"),
                     ("Input Strides", "strides"), ("Concrete Inputs", "concrete")):
        if k in d:
            extra[field] = msgspec.Raw(msgspec.json.encode(d[k]))
    return msgspec.structs.replace(a, **extra) if extra else a


def _str(v: Any) -> str:
    return v if isinstance(v, str) else ("" if v is None else str(v))


def _floats(values: list[Any]) -> np.ndarray:
    n = len(values)
    nones = values.count(None)
    if nones == n:  # a field most events lack (flops)
        return np.full(n, np.nan)
    if nones == 0:
        try:  # fromiter skips np.array's shape discovery (~100 ns a value)
            return np.fromiter(values, np.float64, n)
        except (TypeError, ValueError):
            pass
    try:
        return np.array(values, dtype=np.float64)
    except (TypeError, ValueError):
        return np.array([_float_or_nan(v) for v in values], dtype=np.float64)


def _float_or_nan(v: Any) -> float:
    if isinstance(v, bool) or v is None:
        return np.nan
    try:
        return float(v)
    except (TypeError, ValueError, OverflowError):
        return np.nan


def _ints(values: list[Any], fill: int = -1) -> np.ndarray:
    n = len(values)
    nones = values.count(None)
    if nones == n:
        return np.full(n, fill, dtype=np.int64)
    if set(map(type, values)) <= _INT_OR_NONE:  # the usual case, converted in C
        try:
            if nones == 0:
                return np.fromiter(values, np.int64, n)
            return np.array([fill if v is None else v for v in values], dtype=np.int64)
        except OverflowError:
            pass
    return np.array([_int_or(v, fill) for v in values], dtype=np.int64)


_INT_OR_NONE = {int, type(None)}


def _int_or(v: Any, fill: int) -> int:
    if v is None or isinstance(v, bool):
        return fill
    if isinstance(v, int):
        return v if -(1 << 63) < v < (1 << 63) else v % (1 << 63)
    if isinstance(v, float):
        return int(v) if v == v and abs(v) < 9e18 else fill
    if isinstance(v, str):
        s = v.strip()
        try:
            return int(s, 0) if s.lower().startswith("0x") else int(float(s))
        except ValueError:
            return fill
    return fill


def _int_or_none(v: Any) -> int | None:
    r = _int_or(v, -(1 << 62))
    return None if r == -(1 << 62) else r


def _products(values: list[Any]) -> np.ndarray:
    """x*y*z of ``[x, y, z]`` launch dimensions (-1 when absent or malformed)."""
    try:
        arr = np.array(values, dtype=np.int64)
        if arr.ndim == 2 and arr.shape[1] > 0 and (arr >= 0).all():
            return arr.prod(axis=1)
    except (TypeError, ValueError, OverflowError):
        pass
    out = np.full(len(values), -1, dtype=np.int64)
    for k, v in enumerate(values):
        if isinstance(v, list) and v:
            p = 1
            for x in v:
                x = _int_or(x, -1)
                if x < 0:
                    p = -1
                    break
                p *= x
            out[k] = p
        elif v is not None:
            out[k] = _int_or(v, -1)
    return out


def _dims(v: Any) -> Any:
    """Tensor dims -> tuple of ints; tensor list -> tuple of tuples; other -> None."""
    if isinstance(v, list):
        if all(isinstance(x, int) and not isinstance(x, bool) for x in v):
            return tuple(v)
        if all(isinstance(x, list) for x in v):
            inner = [_dims(x) for x in v]
            if all(isinstance(x, tuple) for x in inner):
                return tuple(inner)
    return None


def _parse_inputs(dims_b: bytes, types_b: bytes, strides_b: bytes, conc_b: bytes) -> OpInputs | None:
    try:
        dims = msgspec.json.decode(dims_b) if dims_b else []
        types = msgspec.json.decode(types_b) if types_b else []
        strides = msgspec.json.decode(strides_b) if strides_b else None
        conc = msgspec.json.decode(conc_b) if conc_b else None
    except msgspec.DecodeError:
        return None
    if not isinstance(dims, list):
        return None
    n = len(dims)
    types = [t if isinstance(t, str) else "" for t in types] if isinstance(types, list) else []
    types += [""] * (n - len(types))
    # an input recorded with empty dims is a tensor only if its type says so; [] with a tensor
    # dtype is a 0-d tensor
    dd = tuple(_dims(d) if (d != [] or _is_tensor_type(types[i])) else None for i, d in enumerate(dims))
    st = None
    if isinstance(strides, list):
        st = tuple(_dims(s) for s in strides) + (None,) * max(0, n - len(strides))
    cc = None
    if isinstance(conc, list):
        cc = tuple(c if isinstance(c, str) else str(c) for c in conc)
    return OpInputs(dims=dd, dtypes=tuple(types[:n]), strides=st, concrete=cc)


_NON_TENSOR = {"", "Scalar", "ScalarList", "TensorList", "GenericList", "None", "Device", "Layout",
               "MemoryFormat", "ScalarType", "bool"}


def _is_tensor_type(t: str) -> bool:
    return t not in _NON_TENSOR and not t.endswith("List")


# --------------------------------------------------------------------------- tables


def _build_ops(c: dict[str, np.ndarray]) -> Ops:
    if not c:
        return Ops.empty()
    return Ops.build(len(c["start_ns"]), **c)


def _build_annotations(c: dict[str, np.ndarray], strings: StringTable) -> Annotations:
    if not c:
        return Annotations.empty()
    kind = strings.map(c["name"], lambda s: int(annotation_kind(s)), np.int8)
    return Annotations.build(len(c["start_ns"]), kind=kind, **c)


def _build_python(c: dict[str, np.ndarray]) -> PythonFrames:
    if not c:
        return PythonFrames.empty()
    return PythonFrames.build(len(c["start_ns"]), **c)


def _build_api(c: dict[str, np.ndarray], strings: StringTable) -> ApiCalls:
    if not c:
        return ApiCalls.empty()
    cbid = c.pop("cbid")
    names = c["name"]
    invalid = strings.code("INVALID")
    if invalid >= 0:
        bad = names == invalid
        for cb in np.unique(cbid[bad]):
            label = CBID_NAMES.get(int(cb), f"INVALID (cbid {int(cb)})")
            names[bad & (cbid == cb)] = strings.intern(label)
    # strip _vNNNN suffixes once per distinct name
    remap = np.array(
        [strings.intern(strip_version(s)) for s in list(strings.values)], dtype=np.int32
    )
    names = np.where(names >= 0, remap[np.maximum(names, 0)], names)
    c["name"] = names
    kind = strings.map(names, lambda s: int(api_kind(s)), np.int8)
    return ApiCalls.build(len(names), kind=kind, **c)


_MEMCPY_NAME = re.compile(r"Memcpy\s+(\w+)\s*(?:\((\w+)\s*->\s*(\w+)\))?")
_COPY_KIND = {
    "HtoD": CopyKind.HTOD,
    "DtoH": CopyKind.DTOH,
    "DtoD": CopyKind.DTOD,
    "HtoH": CopyKind.HTOH,
    "PtoP": CopyKind.PTOP,
    "HtoA": CopyKind.HTOA,
    "AtoH": CopyKind.ATOH,
    "AtoA": CopyKind.ATOA,
    "AtoD": CopyKind.ATOD,
    "DtoA": CopyKind.DTOA,
}
_MEM_KIND = {
    "Pageable": MemKind.PAGEABLE,
    "Pinned": MemKind.PINNED,
    "Device": MemKind.DEVICE,
    "Managed": MemKind.MANAGED,
    "Array": MemKind.ARRAY,
}


def _copy_attrs(name: str) -> tuple[int, int, int]:
    m = _MEMCPY_NAME.search(name)
    if not m:
        return int(CopyKind.UNKNOWN), int(MemKind.UNKNOWN), int(MemKind.UNKNOWN)
    kind = _COPY_KIND.get(m.group(1), CopyKind.UNKNOWN)
    src = _MEM_KIND.get(m.group(2) or "", MemKind.UNKNOWN)
    dst = _MEM_KIND.get(m.group(3) or "", MemKind.UNKNOWN)
    return int(kind), int(src), int(dst)


def _build_gpu(cols: _Columns, strings: StringTable) -> GpuActivity:
    parts = []
    for cat, kind in ((_KERNEL, GpuKind.KERNEL), (_MEMCPY, GpuKind.MEMCPY),
                      (_MEMSET, GpuKind.MEMSET), (_SYNC, GpuKind.SYNC)):
        c = cols.get(cat)
        if not c:
            continue
        n = len(c["start_ns"])
        extra: dict[str, Any] = {}
        if kind == GpuKind.KERNEL:
            full = c["name"]
            short = strings.map(full, lambda s: strings.intern(short_kernel_name(s)), np.int32)
            c["name"] = np.where(full >= 0, short, full)
            extra["full_name"] = np.where(short != full, full, -1)
        elif kind == GpuKind.MEMCPY:
            attrs = {code: _copy_attrs(strings[code]) for code in np.unique(c["name"]).tolist()}
            ck = np.array([attrs[x][0] for x in c["name"].tolist()], dtype=np.int8)
            extra["copy_kind"] = ck
            extra["src_mem"] = np.array([attrs[x][1] for x in c["name"].tolist()], dtype=np.int8)
            extra["dst_mem"] = np.array([attrs[x][2] for x in c["name"].tolist()], dtype=np.int8)
        elif kind == GpuKind.MEMSET:
            extra["dst_mem"] = strings.map(
                c["name"],
                lambda s: int(MemKind.DEVICE if "Device" in s else MemKind.UNKNOWN),
                np.int8,
            )
        part = GpuActivity.build(n, kind=np.full(n, int(kind), dtype=np.int8), **c, **extra)
        del c, extra
        parts.append({name: getattr(part, name) for name in GpuActivity.columns()})
        del part
    if not parts:
        return GpuActivity.empty()
    # joined and put in time order one column at a time, each column's parts released as it
    # goes: the table is never held twice (three times while a whole-table concat and take
    # overlapped)
    start = parts[0]["start_ns"] if len(parts) == 1 else np.concatenate([p["start_ns"] for p in parts])
    order = None if bool((start[1:] >= start[:-1]).all()) else np.argsort(start, kind="stable")
    del start
    out: dict[str, np.ndarray] = {}
    for name in GpuActivity.columns():
        pieces = [p.pop(name) for p in parts]
        col = pieces[0] if len(pieces) == 1 else np.concatenate(pieces)
        del pieces
        out[name] = col if order is None else col[order]
        del col
    return GpuActivity(**out)


def _build_memory(c: dict[str, np.ndarray]) -> MemoryEvents:
    if not c:
        return MemoryEvents.empty()
    return MemoryEvents.build(len(c["ts_ns"]), **c)


def _build_threads(names: dict[tuple[int, int], str], strings: StringTable) -> Threads:
    if not names:
        return Threads.empty()
    keys = list(names)
    return Threads.build(
        len(keys),
        pid=[k[0] for k in keys],
        tid=[k[1] for k in keys],
        name=strings.intern_many([names[k] for k in keys]),
    )


def _devices(top: dict[str, Any], gpu: GpuActivity) -> tuple[DeviceInfo, ...]:
    props = top.get("deviceProperties")
    amd = "hip_runtime_version" in top or "roctracer_version" in top
    out: list[DeviceInfo] = []
    if isinstance(props, list):
        for k, p in enumerate(props):
            if not isinstance(p, dict):
                continue
            name = str(p.get("name") or "")
            vendor = Vendor.AMD if (amd or "AMD" in name or "Instinct" in name) else Vendor.NVIDIA
            major, minor = p.get("computeMajor"), p.get("computeMinor")
            cc = None
            if isinstance(major, int) and isinstance(minor, int):
                cc = f"gfx{major}{minor}" if vendor == Vendor.AMD else f"{major}.{minor}"
            out.append(
                DeviceInfo(
                    index=_int_or(p.get("id", k), k),
                    name=name,
                    vendor=vendor,
                    memory_bytes=_int_or_none(p.get("totalGlobalMem")),
                    sm_count=_int_or_none(p.get("numSms")),
                    compute_capability=cc,
                )
            )
    used = sorted(set(np.unique(gpu.device).tolist())) if len(gpu) else []
    known = {d.index for d in out}
    if used and out and not set(used) & known and len(out) == 1:
        # ROCm numbers devices differently from deviceProperties (e.g. device 9 vs id 0):
        # a single described device is the one in use
        d = out[0]
        out = [DeviceInfo(**{**d.__dict__, "index": used[0]})]
    elif used and out and len(used) == 1 and used[0] not in known:
        out.append(DeviceInfo(index=used[0], name="", vendor=Vendor.AMD if amd else Vendor.UNKNOWN))
    for u in used:
        if u not in {d.index for d in out}:
            out.append(DeviceInfo(index=u, name="", vendor=Vendor.AMD if amd else Vendor.UNKNOWN))
    return tuple(out)


_SAFE_META = (
    "schemaVersion",
    "displayTimeUnit",
    "baseTimeNanoseconds",
    "cuda_runtime_version",
    "cuda_driver_version",
    "cupti_version",
    "hip_runtime_version",
    "hip_driver_version",
    "roctracer_version",
    "record_shapes",
    "with_stack",
    "profile_memory",
    "with_modules",
    "with_flops",
)


def _meta(top: dict[str, Any]) -> dict[str, Any]:
    """Top-level facts safe to show: versions and flags, never host or user names."""
    meta: dict[str, Any] = {k: top[k] for k in _SAFE_META if k in top and not isinstance(top[k], (list, dict))}
    dist = top.get("distributedInfo")
    if isinstance(dist, dict):
        for k in ("backend", "rank", "world_size", "nccl_version"):
            if k in dist and not isinstance(dist[k], (list, dict)):
                meta[f"distributed.{k}"] = dist[k]
        if isinstance(dist.get("pg_config"), list):  # not a scalar: kept off reports, read by the cluster step
            meta["distributed.pg_config"] = dist["pg_config"]
    return meta
