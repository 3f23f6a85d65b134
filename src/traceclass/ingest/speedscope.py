"""speedscope JSON (py-spy ``-f speedscope`` and any other exporter) -> :class:`Trace`.

Sampled profiles become sample rows (consecutive equal samples merged, order kept). Evented
profiles in a unit of time become timed Python frames plus samples-equivalent rows weighted by
self time. The rules speedscope's own importer enforces are enforced here too (frame indices in
range, ``weights`` as long as ``samples``, ``at`` non-decreasing, closes in LIFO order), except
that a frame left open at the end is closed at the profile's end, as Chrome does for trace events.

Units ``none`` and ``bytes`` are not time. Their values stay unitless (``meta["weight_unit"]``
names the unit; analyses report them as units or bytes, never as durations), and an evented
profile in such a unit becomes no timed frames (they would be read as nanoseconds): its frames'
self values become sample rows in event order, one row per stretch between two events, which a
sampled speedscope profile replays exactly.
"""

from __future__ import annotations

import re
from typing import Any

import msgspec
import numpy as np

from traceclass.errors import TraceFormatError
from traceclass.ingest.frametext import parse_pseudo, torch_style
from traceclass.ingest.sampled import ThreadRegistry, assemble, has_line_numbers
from traceclass.ingest.source import Progress
from traceclass.ingest.stacks import (
    FrameInterner,
    TrieBuilder,
    insert_stacks,
    interval_nodes,
    interval_samples,
    run_length_samples,
    self_times,
    strip_frames,
)
from traceclass.model import PythonFrames, Samples, SamplingInfo, StringTable, Trace

SCHEMA = "https://www.speedscope.app/file-format-schema.json"
#: unit -> ns per unit; "none" and "bytes" are not time and are kept as abstract units
UNIT_NS = {"nanoseconds": 1.0, "microseconds": 1e3, "milliseconds": 1e6, "seconds": 1e9}
#: the spec's units that are not time
OTHER_UNITS = ("none", "bytes")
_PYSPY_PROFILE = re.compile(r'^(?:Process (?P<pid>\d+) )?Thread (?P<tid>\d+) "(?P<name>.*)"$', re.S)


class _Frame(msgspec.Struct, gc=False):
    name: Any = None
    file: Any = None
    line: Any = None
    col: Any = None


class _Shared(msgspec.Struct, gc=False):
    frames: msgspec.Raw = msgspec.Raw(b"")


class _File(msgspec.Struct, gc=False):
    schema: Any = msgspec.field(name="$schema", default=None)
    shared: msgspec.Raw = msgspec.Raw(b"")
    profiles: msgspec.Raw = msgspec.Raw(b"")
    name: Any = None
    exporter: Any = None
    version: Any = None


class _Profile(msgspec.Struct, gc=False):
    type: Any = None
    name: Any = None
    unit: Any = None
    startValue: Any = None  # noqa: N815 - JSON key
    endValue: Any = None  # noqa: N815 - JSON key
    samples: msgspec.Raw = msgspec.Raw(b"")
    weights: msgspec.Raw = msgspec.Raw(b"")
    events: msgspec.Raw = msgspec.Raw(b"")


class _Event(msgspec.Struct, gc=False, array_like=False):
    type: Any = None
    at: Any = None
    frame: Any = None


_FILE = msgspec.json.Decoder(_File)
_RAWS = msgspec.json.Decoder(list[msgspec.Raw])
_SHARED = msgspec.json.Decoder(_Shared)
_FRAMES = msgspec.json.Decoder(list[_Frame])
_PROFILE = msgspec.json.Decoder(_Profile)
_INT_LISTS = msgspec.json.Decoder(list[list[int]])
_FLOATS = msgspec.json.Decoder(list[float])
_EVENTS = msgspec.json.Decoder(list[_Event])


def read_speedscope(path: str, data: bytes, progress: Progress = None) -> Trace:
    size = len(data)
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    try:
        top = _FILE.decode(data)
    except msgspec.DecodeError as exc:
        raise TraceFormatError(path, f"invalid speedscope JSON ({exc})") from None
    del data
    notes: list[str] = []
    if top.schema != SCHEMA:
        notes.append(
            "no speedscope $schema key" if top.schema is None else "unexpected speedscope $schema value"
        )
    try:
        profiles = _RAWS.decode(top.profiles) if bytes(top.profiles) else []
    except (msgspec.DecodeError, msgspec.ValidationError):
        raise TraceFormatError(path, '"profiles" is not a list') from None
    if not profiles:
        raise TraceFormatError(path, 'speedscope file has no "profiles"')
    try:
        frames_raw = _SHARED.decode(top.shared).frames if bytes(top.shared) else msgspec.Raw(b"")
        frames_list = _FRAMES.decode(frames_raw) if bytes(frames_raw) else None
    except (msgspec.DecodeError, msgspec.ValidationError):
        frames_list = None
    if frames_list is None:
        raise TraceFormatError(path, 'speedscope file has no valid "shared.frames" list')
    exporter = top.exporter if isinstance(top.exporter, str) else ""
    is_pyspy = exporter.startswith("py-spy")

    strings = StringTable()
    interner = FrameInterner(strings)
    threads = ThreadRegistry(strings)
    trie = TrieBuilder()
    frame_map, pseudo = _shared_frames(frames_list, interner)
    del frames_list
    sample_parts: list[Samples] = []
    py_parts: list[dict[str, np.ndarray]] = []
    unitless_evented = 0
    sampled_weights: set[int] = set()
    units: set[str] = set()
    odd_units: set[str] = set()
    skipped: dict[str, int] = {}
    unusable: list[str] = []
    for idx, raw in enumerate(profiles):
        try:
            prof = _PROFILE.decode(raw)
        except msgspec.DecodeError as exc:
            raise TraceFormatError(path, f"profile {idx}: invalid JSON ({exc})") from None
        label = _label(prof, idx)
        unit = prof.unit if isinstance(prof.unit, str) else "none"
        odd_unit = unit not in UNIT_NS and unit not in OTHER_UNITS
        if odd_unit:
            unit = "none"
        scale = UNIT_NS.get(unit, 1.0)
        n_threads, n_notes = len(threads), len(notes)
        try:
            if prof.type == "sampled":
                row = _thread_row(threads, prof, idx, is_pyspy)
                part = _sampled(path, label, prof, frame_map, pseudo, scale, trie, row)
                if part is not None:
                    samples, weights = part
                    sample_parts.append(samples)
                    sampled_weights.update(weights)
            elif prof.type == "evented":
                row = _thread_row(threads, prof, idx, is_pyspy)
                py = _evented(path, label, prof, frame_map, scale, notes)
                if py is not None and unit not in UNIT_NS:
                    sample_parts.append(_unitless_samples(py, trie, row))
                    unitless_evented += 1
                elif py is not None:
                    py.pop("slice_row")
                    py.pop("slice_len")
                    py["thread_row"] = np.full(len(py["start_ns"]), row, dtype=np.int64)
                    py_parts.append(py)
            else:
                key = str(prof.type)[:40]
                skipped[key] = skipped.get(key, 0) + 1
                continue
        except TraceFormatError as exc:
            # speedscope opens the other profiles of the file: so does traceclass
            threads.truncate(n_threads)
            del notes[n_notes:]
            unusable.append(exc.problem)
            continue
        units.add(unit)
        if odd_unit:
            odd_units.add(str(prof.unit)[:40])
        if progress is not None:
            progress("parsing", idx + 1, len(profiles))
    del profiles

    python = PythonFrames.empty()
    meta: dict[str, Any] = {}
    if py_parts:
        python, derived = _python_table(py_parts, interner, strings, threads, trie)
        # rows derived from the timed frames (writers skip them: the frames are written instead)
        first = sum(len(p) for p in sample_parts)
        meta["interval_rows"] = [first, first + len(derived)]
        sample_parts.append(derived)
    samples = Samples.concat(sample_parts) if sample_parts else Samples.empty()
    if not len(samples) and not len(python) and unusable:
        raise TraceFormatError(path, unusable[0])
    for problem in unusable:
        notes.append(f"skipped {problem}; the file's other profiles are analysed")
    if not len(samples) and not len(python):
        raise TraceFormatError(path, "speedscope file holds no samples and no events")

    for kind, n in skipped.items():
        notes.append(f"{n} profile{'s' if n != 1 else ''} of unsupported type {kind!r} skipped")
    time_units = units & set(UNIT_NS)
    if odd_units:
        notes.append(f"{len(odd_units)} unit name(s) not in the speedscope spec: read as 'none'")
    if units - set(UNIT_NS):
        odd = "bytes" if units - set(UNIT_NS) == {"bytes"} else "none"
        meta["weight_unit"] = odd
        notes.append(
            f"profile values are in unit {odd!r}, not time: shares are exact, values are counts of that unit"
            + (" (evented profiles read as self values per frame, not as timed frames)" if unitless_evented else "")
        )
        if time_units:
            notes.append("file mixes profiles in units of time and in other units: all values are read unitless")
    n_evented = len(py_parts) + unitless_evented
    if n_evented and len(sample_parts) > n_evented:
        notes.append("file mixes sampled and evented profiles")
    if n_evented:
        meta["samples_from"] = "intervals" if len(sample_parts) == n_evented else "mixed"
    interval = None
    if len(sampled_weights) == 1 and time_units and not (units - set(UNIT_NS)):
        (interval,) = sampled_weights
    if is_pyspy:
        notes.append(
            "py-spy speedscope has no timestamps: per-thread profiles are not time-aligned "
            "(each profile's length is samples x interval, not wall time)"
        )
        notes.append("whether idle samples were kept (py-spy --idle) is not recorded in the file")
    sampling = SamplingInfo(
        interval_ns=interval if interval and interval > 0 else None,
        includes_idle=None,
        gil_only=None,
        has_line_numbers=has_line_numbers(interner),
        timed=False,
    )
    version = str(top.version) if top.version is not None else (exporter.partition("@")[2] if exporter else "")
    return assemble(
        path=path,
        fmt="pyspy-speedscope" if is_pyspy else "speedscope",
        producer=exporter,
        size=size,
        strings=strings,
        frames=interner,
        trie=trie,
        threads=threads,
        samples=samples,
        sampling=sampling,
        notes=notes,
        python=python,
        meta=meta,
        format_version=version,
    )


def _label(prof: _Profile, idx: int) -> str:
    return f"profile {idx}" + (f" ({prof.name[:60]!r})" if isinstance(prof.name, str) and prof.name else "")


def _shared_frames(frames: list[_Frame], interner: FrameInterner) -> tuple[np.ndarray, np.ndarray]:
    """Frame id per shared frame (-1 for py-spy's thread/process pseudo-frames) and pseudo flags."""
    n = len(frames)
    out = np.full(n, -1, dtype=np.int64)
    pseudo = np.zeros(n, dtype=bool)
    for i, f in enumerate(frames):
        name = f.name if isinstance(f.name, str) else ("" if f.name is None else str(f.name))
        file = f.file if isinstance(f.file, str) and f.file else None
        line = f.line if isinstance(f.line, int) and not isinstance(f.line, bool) and f.line > 0 else None
        if file is None and not line and parse_pseudo(name) is not None:
            pseudo[i] = True
            continue
        out[i] = interner.add(name, file, line)
    return out, pseudo


def _thread_row(threads: ThreadRegistry, prof: _Profile, idx: int, is_pyspy: bool) -> int:
    """py-spy names profiles 'Thread TID "name"'; other exporters get one thread per profile."""
    name = prof.name if isinstance(prof.name, str) else ""
    m = _PYSPY_PROFILE.match(name) if is_pyspy or name.startswith(("Thread ", "Process ")) else None
    if m is not None:
        pid = int(m.group("pid")) if m.group("pid") else -1
        return threads.get(pid, int(m.group("tid")), m.group("name"))
    # no thread ids in the file: the profile index stands in for the tid
    return threads.get(-1, idx, name, key=f"profile {idx}")


def _sampled(
    path: str,
    label: str,
    prof: _Profile,
    frame_map: np.ndarray,
    pseudo: np.ndarray,
    scale: float,
    trie: TrieBuilder,
    row: int,
) -> tuple[Samples, set[int]] | None:
    if not bytes(prof.samples):
        raise TraceFormatError(path, f'{label}: sampled profile without "samples"')
    try:
        raws = _RAWS.decode(prof.samples)
    except msgspec.DecodeError as exc:
        raise TraceFormatError(path, f"{label}: samples: {exc}") from None
    n = len(raws)
    try:
        weights = np.array(_FLOATS.decode(prof.weights), dtype=np.float64) if bytes(prof.weights) else None
    except msgspec.DecodeError as exc:
        raise TraceFormatError(path, f"{label}: weights: {exc}") from None
    if weights is None:
        raise TraceFormatError(path, f'{label}: sampled profile without "weights"')
    if len(weights) != n:
        raise TraceFormatError(path, f"{label}: {len(weights)} weights for {n} samples (must be equal)")
    if n == 0:
        return None
    if not np.isfinite(weights).all() or (weights < 0).any():
        raise TraceFormatError(path, f"{label}: negative or non-finite sample weight")
    # samples repeat a few distinct stacks: decode each distinct stack text once
    index: dict[bytes, int] = {}
    setdefault = index.setdefault
    codes = np.fromiter((setdefault(bytes(r), len(index)) for r in raws), dtype=np.int64, count=n)
    del raws
    try:
        stacks = _INT_LISTS.decode(b"[" + b",".join(index) + b"]")
    except msgspec.DecodeError as exc:
        raise TraceFormatError(path, f"{label}: a sample is not a list of frame indices ({exc})") from None
    del index
    lengths = np.fromiter(map(len, stacks), dtype=np.int64, count=len(stacks))
    flat = np.fromiter((x for s in stacks for x in s), dtype=np.int64, count=int(lengths.sum()))
    del stacks
    if len(flat) and (flat.min() < 0 or flat.max() >= len(frame_map)):
        raise TraceFormatError(
            path, f"{label}: sample refers to frame {int(flat.max() if flat.max() >= len(frame_map) else flat.min())}, "
            f"but shared.frames has {len(frame_map)}"
        )
    is_pseudo = pseudo[flat]
    flat_f, lengths_f = strip_frames(frame_map[flat], lengths, is_pseudo)
    leaf_unique = insert_stacks(trie, flat_f, lengths_f)
    with np.errstate(over="ignore"):
        scaled = np.rint(weights * scale)
    if len(scaled) and not float(np.max(scaled)) < 2.0**62:  # also inf: a finite weight times the unit
        raise TraceFormatError(path, f"{label}: sample weight out of range (beyond 2^62 ns)")
    weight_ns = scaled.astype(np.int64)
    thread = np.full(n, row, dtype=np.int64)
    samples = run_length_samples(thread, leaf_unique[codes], weight_ns)
    return samples, set(np.unique(weight_ns[weight_ns > 0]).tolist())


def _evented(
    path: str, label: str, prof: _Profile, frame_map: np.ndarray, scale: float, notes: list[str]
) -> dict[str, np.ndarray] | None:
    if not bytes(prof.events):
        raise TraceFormatError(path, f'{label}: evented profile without "events"')
    try:
        events = _EVENTS.decode(prof.events)
    except msgspec.DecodeError as exc:
        raise TraceFormatError(path, f"{label}: events: {exc}") from None
    n_frames = len(frame_map)
    starts: list[float] = []
    ends: list[float] = []
    frames: list[int] = []
    parents: list[int] = []
    depths: list[int] = []
    stack: list[int] = []  # rows of open frames
    slice_row: list[int] = []  # the frame on top between two events, in order
    slice_len: list[float] = []
    last = -np.inf
    for k, ev in enumerate(events):
        at, fr = ev.at, ev.frame
        if isinstance(at, bool) or not isinstance(at, (int, float)):
            raise TraceFormatError(path, f"{label}: event {k} has no numeric 'at'")
        if isinstance(fr, bool) or not isinstance(fr, int) or not 0 <= fr < n_frames:
            raise TraceFormatError(path, f"{label}: event {k} refers to frame {fr!r}, not in shared.frames")
        if at < last:
            raise TraceFormatError(path, f"{label}: event {k} goes back in time ('at' must not decrease)")
        if stack and at > last:
            slice_row.append(stack[-1])
            slice_len.append(at - last)
        last = at
        if ev.type == "O":
            row = len(starts)
            starts.append(at)
            ends.append(at)
            frames.append(fr)
            parents.append(stack[-1] if stack else -1)
            depths.append(len(stack))
            stack.append(row)
        elif ev.type == "C":
            if not stack:
                raise TraceFormatError(path, f"{label}: event {k} closes frame {fr} but no frame is open")
            top = stack[-1]
            if frames[top] != fr:
                raise TraceFormatError(
                    path,
                    f"{label}: event {k} closes frame {fr} while frame {frames[top]} is open on top "
                    "(closes must be in LIFO order)",
                )
            ends[top] = at
            stack.pop()
        else:
            raise TraceFormatError(path, f"{label}: event {k} has type {ev.type!r} (expected 'O' or 'C')")
    if stack:
        end = prof.endValue if isinstance(prof.endValue, (int, float)) and prof.endValue >= last else last
        for row in stack:
            ends[row] = end
        if end > last:
            slice_row.append(stack[-1])
            slice_len.append(end - last)
        notes.append(f"{label}: {len(stack)} frame(s) never closed; closed at the profile's end")
    if not starts:
        return None
    fmap = frame_map[np.asarray(frames, dtype=np.int64)]
    if (fmap < 0).any():
        # a py-spy pseudo-frame in an evented profile: keep it as a plain frame name
        raise TraceFormatError(path, f"{label}: evented profile uses thread/process pseudo-frames")
    return {
        "start_ns": np.rint(np.asarray(starts) * scale).astype(np.int64),
        "end_ns": np.rint(np.asarray(ends) * scale).astype(np.int64),
        "frame": fmap,
        "parent": np.asarray(parents, dtype=np.int64),
        "depth": np.asarray(depths, dtype=np.int64),
        "slice_row": np.asarray(slice_row, dtype=np.int64),
        "slice_len": np.rint(np.asarray(slice_len, dtype=np.float64) * scale).astype(np.int64),
    }


def _unitless_samples(py: dict[str, np.ndarray], trie: TrieBuilder, row: int) -> Samples:
    """Sample rows of an evented profile whose unit is not time: each stretch between two
    events charged to the frame on top, in event order (a weighted sampled profile)."""
    node = interval_nodes(trie, py["frame"], py["parent"], py["depth"])
    keep = py["slice_len"] > 0
    rows = py["slice_row"][keep]
    return run_length_samples(np.full(len(rows), row, dtype=np.int64), node[rows], py["slice_len"][keep])


def _python_table(
    parts: list[dict[str, np.ndarray]],
    interner: FrameInterner,
    strings: StringTable,
    threads: ThreadRegistry,
    trie: TrieBuilder,
) -> tuple[PythonFrames, Samples]:
    offset = 0
    cols: dict[str, list[np.ndarray]] = {}
    for p in parts:
        p = dict(p)
        p["parent"] = np.where(p["parent"] >= 0, p["parent"] + offset, -1)
        offset += len(p["start_ns"])
        for k, v in p.items():
            cols.setdefault(k, []).append(v)
    c = {k: np.concatenate(v) for k, v in cols.items()}
    frame = c["frame"]
    node = interval_nodes(trie, frame, c["parent"], c["depth"])
    self_ns = self_times(c["start_ns"], c["end_ns"], c["parent"])
    derived = interval_samples(c["thread_row"], node, self_ns)
    fn = np.asarray(interner.function, dtype=np.int64)
    fi = np.asarray(interner.file, dtype=np.int64)
    ln = np.asarray(interner.line, dtype=np.int64)
    # one name string per distinct frame, torch.profiler's form
    names = strings.intern_many(
        [
            torch_style(strings[int(fn[f])], strings[int(fi[f])] if fi[f] >= 0 else None,
                        int(ln[f]) if ln[f] >= 0 else None)
            for f in range(len(fn))
        ]
    )
    tpid = np.asarray(threads.pid, dtype=np.int64)
    ttid = np.asarray(threads.tid, dtype=np.int64)
    row = c["thread_row"]
    python = PythonFrames.build(
        len(frame),
        start_ns=c["start_ns"],
        end_ns=c["end_ns"],
        pid=tpid[row],
        tid=ttid[row],
        name=names[frame],
        parent=c["parent"],
        depth=np.minimum(c["depth"], np.iinfo(np.int16).max),
    )
    return python, derived
