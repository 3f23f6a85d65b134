"""Chrome trace-event JSON that is not Kineto (py-spy ``-f chrometrace``, generic tracers).

Duration events (``B``/``E`` pairs and ``X``) become timed Python frames per thread, plus
samples-equivalent rows weighted by each frame's self time, so the sampled-profile analysis
applies. A top-level ``samples`` + ``stackFrames`` section (V8/Hermes) becomes real samples.

Pairing follows speedscope's importer, which is as forgiving as Chrome's viewer: per thread,
``B`` events are taken in time order (file order on ties, ``X`` after ``B``, longer ``X``
first), ``E`` events in time order, preferring at equal times the one that matches the open
frame; at equal times a ``B`` goes first only when it has the same name as the next ``E``
(a zero-length frame). An ``E`` that matches nothing open is dropped, frames still open at the
end close at the thread's last timestamp. The result nests by construction.
"""

from __future__ import annotations

import re
from typing import Any, Optional

import msgspec
import numpy as np

from traceclass import units
from traceclass.errors import TraceFormatError
from traceclass.ingest.frametext import parse_pseudo, torch_style
from traceclass.ingest.jsonload import Container
from traceclass.ingest.numbers import decimal_text_to_int
from traceclass.ingest.sampled import ThreadRegistry, assemble
from traceclass.ingest.source import Progress
from traceclass.ingest.stacks import (
    FrameInterner,
    TrieBuilder,
    interval_nodes,
    interval_samples,
    self_times,
)
from traceclass.model import PythonFrames, Samples, SamplingInfo, StringTable, Trace
from traceclass.model.nesting import group_ids

CHUNK_EVENTS = 100_000
#: how far among equal-time E events to look for one that matches the open frame
_MATCH_WINDOW = 1000
_NONE = msgspec.Raw(b"")
_PH_B, _PH_E, _PH_X = 0, 1, 2
_V8_FRAME = re.compile(r"^(?P<func>.*)\((?P<file>[^()]*?):(?P<line>\d+)(?::\d+)?\)$", re.S)


class _Args(msgspec.Struct, gc=False):
    filename: Any = None
    url: Any = None
    line: Any = None
    name: Any = None


def _event_struct(name: str, args: Any) -> type[msgspec.Struct]:
    """The fields read from a trace event; times kept as text (string-typed ts exists)."""
    fields = [(f, Any, None) for f in ("ph", "name", "cat", "pid", "tid")]
    fields += [(f, msgspec.Raw, _NONE) for f in ("ts", "dur", "tdur")] + [("args", args, None)]
    return msgspec.defstruct(name, fields, gc=False)


_Ev = _event_struct("_Ev", Optional[_Args])
#: fallback when some event's args is not an object
_LooseEv = _event_struct("_LooseEv", Any)


_DECODE = msgspec.json.Decoder(list[_Ev])
_DECODE_LOOSE = msgspec.json.Decoder(list[_LooseEv])


class _Ids:
    """pid/tid values as int64; non-numeric strings get stable synthetic ids."""

    def __init__(self) -> None:
        self.synthetic: dict[str, int] = {}

    def __call__(self, v: Any) -> int:
        if isinstance(v, bool) or v is None:
            return -1
        if isinstance(v, int):
            return v if -(1 << 63) < v < (1 << 63) else v % (1 << 63)
        if isinstance(v, float):
            return int(v) if v == v and abs(v) < 9e18 else -1
        s = str(v).strip()
        try:
            return int(s, 0) if s.lower().startswith("0x") else int(s)
        except ValueError:
            pass
        try:
            f = float(s)
            if f == f and abs(f) < 9e18:
                return int(f)
        except ValueError:
            pass
        code = self.synthetic.get(s)
        if code is None:
            code = (1 << 40) + len(self.synthetic)
            self.synthetic[s] = code
        return code


def _times(raws: list[bytes]) -> tuple[np.ndarray, np.ndarray]:
    """µs text (number or numeric string) -> exact int ns, and a validity mask."""
    clean = [r[1:-1] if r[:1] == b'"' else r for r in raws]
    return decimal_text_to_int(clean, 3)


def read_chrome_trace(path: str, size: int, container: Container, progress: Progress = None) -> Trace:
    strings = StringTable()
    ids = _Ids()
    counts: dict[str, int] = {}
    thread_names: dict[tuple[int, int], str] = {}
    process_names: dict[int, str] = {}
    cols: dict[str, list[np.ndarray]] = {k: [] for k in ("ph", "name", "pid", "tid", "ts", "dur", "file", "line")}
    producer = ""
    events = container.events
    n_total = len(events)
    for lo in range(0, n_total, CHUNK_EVENTS):
        buf = b"[" + b",".join(events[lo : lo + CHUNK_EVENTS]) + b"]"
        try:
            evs: list[Any] = _DECODE.decode(buf)
        except msgspec.ValidationError:
            evs = _DECODE_LOOSE.decode(buf)
        except msgspec.DecodeError as exc:
            raise TraceFormatError(path, f"invalid event near event {lo}: {exc}") from None
        del buf
        if not producer:
            producer = next((e.cat for e in evs if e.cat == "py-spy"), "")
        _chunk(evs, strings, ids, cols, counts, thread_names, process_names)
        del evs
        if progress is not None:
            progress("parsing", min(lo + CHUNK_EVENTS, n_total), n_total)
    container.events = []
    c = {k: (np.concatenate(v) if v else np.zeros(0, dtype=np.int64)) for k, v in cols.items()}

    notes: list[str] = []
    if container.repaired:
        notes.append(f"input repaired: {container.repaired}")
    interner = FrameInterner(strings)
    threads = ThreadRegistry(strings)
    trie = TrieBuilder()
    iv = _pair_events(c, strings, counts, thread_names)
    python = PythonFrames.empty()
    derived = Samples.empty()
    if iv is not None:
        python, derived = _intervals(iv, strings, interner, threads, trie, thread_names, process_names)
    sampled = _sample_section(path, container.top, strings, interner, threads, trie, ids, thread_names, notes)
    if sampled is None and not len(python):
        what = f" ({', '.join(f'{k}: {v}' for k, v in sorted(counts.items()))})" if counts else ""
        raise TraceFormatError(
            path, f"no duration events (B/E/X) or samples: nothing to profile{what}"
        )
    meta: dict[str, Any] = {}
    if sampled is not None:
        samples, interval = sampled
        meta["samples_from"] = "samples"
        if len(python):
            notes.append("duration events kept as timed frames; hot spots come from the samples section")
    else:
        samples, interval = derived, None
        meta["samples_from"] = "intervals"
    _notes(notes, counts, ids, producer)
    sampling = SamplingInfo(
        interval_ns=interval,
        includes_idle=None,
        gil_only=None,
        has_line_numbers=bool((np.asarray(interner.line) > 0).any()) if len(interner) else False,
        timed=sampled is not None,
    )
    return assemble(
        path=path,
        fmt="chrome-trace",
        producer=producer,
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
    )


def _chunk(
    evs: list[Any],
    strings: StringTable,
    ids: _Ids,
    cols: dict[str, list[np.ndarray]],
    counts: dict[str, int],
    thread_names: dict[tuple[int, int], str],
    process_names: dict[int, str],
) -> None:
    keep: list[int] = []
    phs: list[int] = []
    for i, e in enumerate(evs):
        ph = e.ph
        if ph == "B":
            phs.append(_PH_B)
        elif ph == "E":
            phs.append(_PH_E)
        elif ph == "X":
            phs.append(_PH_X)
        else:
            if ph == "M":
                _metadata(e, ids, thread_names, process_names)
            key = f"ph {ph!s:.10}"
            counts[key] = counts.get(key, 0) + 1
            continue
        keep.append(i)
    if not keep:
        return
    sub = [evs[i] for i in keep]
    ts, ok = _times([bytes(e.ts) for e in sub])
    dur, dur_ok = _times([bytes(e.dur) if bytes(e.dur) else bytes(e.tdur) for e in sub])
    ph = np.asarray(phs, dtype=np.int8)
    # an X without any duration is skipped, like speedscope does
    valid = ok & ((ph != _PH_X) | dur_ok)
    dropped = int((~valid).sum())
    if dropped:
        counts["dropped: no usable ts/dur"] = counts.get("dropped: no usable ts/dur", 0) + dropped
    args = [_args(e.args) for e in sub]
    files = [a.filename if isinstance(a.filename, str) else (a.url if isinstance(a.url, str) else None) for a in args]
    lines = [a.line for a in args]
    cols["ph"].append(ph[valid])
    cols["name"].append(strings.intern_many([_name(e.name) for e in sub])[valid])
    cols["pid"].append(np.fromiter((ids(e.pid) for e in sub), dtype=np.int64, count=len(sub))[valid])
    cols["tid"].append(np.fromiter((ids(e.tid) for e in sub), dtype=np.int64, count=len(sub))[valid])
    cols["ts"].append(ts[valid])
    cols["dur"].append(np.where(dur_ok, np.maximum(dur, 0), -1)[valid])
    cols["file"].append(strings.intern_many([f if f else None for f in files])[valid])
    cols["line"].append(
        np.fromiter(
            (ln if isinstance(ln, int) and not isinstance(ln, bool) and ln > 0 else -1 for ln in lines),
            dtype=np.int64,
            count=len(sub),
        )[valid]
    )


def _name(v: Any) -> str:
    if isinstance(v, str):
        return v
    return "(unnamed)" if v is None else str(v)


def _args(a: Any) -> _Args:
    if isinstance(a, _Args):
        return a
    if isinstance(a, dict):
        return _Args(filename=a.get("filename"), url=a.get("url"), line=a.get("line"), name=a.get("name"))
    return _Args()


def _metadata(e: Any, ids: _Ids, thread_names: dict[tuple[int, int], str], process_names: dict[int, str]) -> None:
    a = _args(e.args)
    if not isinstance(a.name, str):
        return
    if e.name == "thread_name":
        thread_names[(ids(e.pid), ids(e.tid))] = a.name
    elif e.name == "process_name":
        process_names[ids(e.pid)] = a.name


class _Intervals:
    def __init__(self) -> None:
        self.start: list[int] = []
        self.end: list[int] = []
        self.name: list[int] = []
        self.file: list[int] = []
        self.line: list[int] = []
        self.parent: list[int] = []
        self.depth: list[int] = []
        self.pid: list[int] = []
        self.tid: list[int] = []


def _pair_events(
    c: dict[str, np.ndarray],
    strings: StringTable,
    counts: dict[str, int],
    thread_names: dict[tuple[int, int], str],
) -> _Intervals | None:
    n = len(c["ph"])
    if n == 0:
        return None
    # py-spy writes them with filename "" and line 0, both stored as unknown
    pseudo = strings.mask(c["name"], lambda s: parse_pseudo(s) is not None) & (c["file"] < 0) & (c["line"] < 0)
    if pseudo.any():
        # py-spy's thread/process roots name the thread; they are not calls
        for code, pid, tid in set(zip(c["name"][pseudo].tolist(), c["pid"][pseudo].tolist(), c["tid"][pseudo].tolist())):
            p = parse_pseudo(strings[code])
            if p is not None and p.kind == "thread" and p.name:
                thread_names.setdefault((pid, tid), p.name)
        c = {k: v[~pseudo] for k, v in c.items()}
        n = len(c["ph"])
        if n == 0:
            return None
    out = _Intervals()
    thread, n_threads = group_ids(c["pid"], c["tid"])
    order = np.argsort(thread, kind="stable")
    bounds = np.r_[0, np.flatnonzero(np.diff(thread[order])) + 1, n]
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        rows = order[lo:hi]
        _pair_thread(c, rows, out, counts)
    return out


def _pair_thread(c: dict[str, np.ndarray], rows: np.ndarray, out: _Intervals, counts: dict[str, int]) -> None:
    ph = c["ph"][rows]
    ts = c["ts"][rows]
    dur = c["dur"][rows]
    name = c["name"][rows]
    file = c["file"][rows]
    line = c["line"][rows]
    pid, tid = int(c["pid"][rows[0]]), int(c["tid"][rows[0]])
    idx = np.arange(len(rows))
    is_b, is_e, is_x = ph == _PH_B, ph == _PH_E, ph == _PH_X
    xd = np.where(is_x, dur, 0)
    # begin queue: time, then B before X, longer X first, then file order
    b_rows = np.flatnonzero(is_b | is_x)
    b_rows = b_rows[np.lexsort((idx[b_rows], -xd[b_rows], is_x[b_rows], ts[b_rows]))]
    # end queue: time, then real E before X ends; X ends keep the begin queue's X order
    x_rank = np.zeros(len(rows), dtype=np.int64)
    x_in_b = b_rows[is_x[b_rows]]
    x_rank[x_in_b] = np.arange(len(x_in_b))
    e_time = np.where(is_x, ts + xd, ts)
    e_rows = np.flatnonzero(is_e | is_x)
    e_rows = e_rows[np.lexsort((np.where(is_x[e_rows], x_rank[e_rows], idx[e_rows]), is_x[e_rows], e_time[e_rows]))]
    b_ts = ts[b_rows].tolist()
    b_list = b_rows.tolist()
    e_ts = e_time[e_rows].tolist()
    e_list = e_rows.tolist()
    name_l, file_l, line_l, ts_l = name.tolist(), file.tolist(), line.tolist(), ts.tolist()
    end_time = int(max(e_time.max(), ts.max()))

    stack: list[int] = []  # output rows of open frames
    stack_ev: list[int] = []  # event rows (within this thread) of open frames
    bi = ei = 0
    nb, ne = len(b_list), len(e_list)
    unmatched = mismatched = 0
    while bi < nb or ei < ne:
        if ei >= ne:
            take_b = True
        elif bi >= nb or b_ts[bi] > e_ts[ei]:
            take_b = False
        elif b_ts[bi] < e_ts[ei]:
            take_b = True
        else:
            # equal times: an E that closes the open frame goes first (py-spy ends a span and
            # starts the next one at the same instant); otherwise a B named like the E is a
            # zero-length frame and opens first
            e = e_list[ei]
            closes_top = bool(stack_ev) and _same(stack_ev[-1], e, name_l, file_l, line_l)
            take_b = not closes_top and name_l[b_list[bi]] == name_l[e]
        if take_b:
            r = b_list[bi]
            bi += 1
            row = len(out.start)
            out.start.append(ts_l[r])
            out.end.append(ts_l[r])
            out.name.append(name_l[r])
            out.file.append(file_l[r])
            out.line.append(line_l[r])
            out.parent.append(stack[-1] if stack else -1)
            out.depth.append(len(stack))
            out.pid.append(pid)
            out.tid.append(tid)
            stack.append(row)
            stack_ev.append(r)
            continue
        if stack:
            top = stack_ev[-1]
            _prefer_match(e_list, e_ts, ei, top, name_l, file_l, line_l)
        r = e_list[ei]
        t = e_ts[ei]
        ei += 1
        if not stack:
            unmatched += 1
            continue
        top = stack_ev[-1]
        if name_l[r] != name_l[top]:
            mismatched += 1
            continue
        out.end[stack[-1]] = t
        stack.pop()
        stack_ev.pop()
    if stack:
        for row in stack:
            out.end[row] = max(end_time, out.start[row])
        counts["frames closed at the thread's end"] = counts.get("frames closed at the thread's end", 0) + len(stack)
    if unmatched:
        counts["E with nothing open, dropped"] = counts.get("E with nothing open, dropped", 0) + unmatched
    if mismatched:
        counts["E not matching the open frame, dropped"] = (
            counts.get("E not matching the open frame, dropped", 0) + mismatched
        )


def _same(a: int, b: int, name_l: list[int], file_l: list[int], line_l: list[int]) -> bool:
    return name_l[a] == name_l[b] and file_l[a] == file_l[b] and line_l[a] == line_l[b]


def _prefer_match(
    e_list: list[int], e_ts: list[int], ei: int, top: int, name_l: list[int], file_l: list[int], line_l: list[int]
) -> None:
    """Among E events at the front's time, move one matching the open frame to the front."""
    front = e_list[ei]
    if name_l[front] == name_l[top] and file_l[front] == file_l[top] and line_l[front] == line_l[top]:
        return
    t = e_ts[ei]
    stop = min(len(e_list), ei + _MATCH_WINDOW)
    by_name = -1
    for k in range(ei + 1, stop):
        if e_ts[k] != t:
            break
        r = e_list[k]
        if name_l[r] == name_l[top]:
            if file_l[r] == file_l[top] and line_l[r] == line_l[top]:
                e_list[ei], e_list[k] = e_list[k], e_list[ei]
                return
            if by_name < 0:
                by_name = k
    if by_name >= 0 and name_l[front] != name_l[top]:
        e_list[ei], e_list[by_name] = e_list[by_name], e_list[ei]


def _intervals(
    iv: _Intervals,
    strings: StringTable,
    interner: FrameInterner,
    threads: ThreadRegistry,
    trie: TrieBuilder,
    thread_names: dict[tuple[int, int], str],
    process_names: dict[int, str],
) -> tuple[PythonFrames, Samples]:
    n = len(iv.start)
    if n == 0:
        return PythonFrames.empty(), Samples.empty()
    name = np.asarray(iv.name, dtype=np.int64)
    file = np.asarray(iv.file, dtype=np.int64)
    line = np.asarray(iv.line, dtype=np.int64)
    gid, n_frames = group_ids(name, file, line)
    first = np.zeros(n_frames, dtype=np.int64)
    first[gid[::-1]] = np.arange(n - 1, -1, -1)
    frame_of_group = np.array(
        [
            interner.add(strings[int(name[r])], strings[int(file[r])] if file[r] >= 0 else None,
                         int(line[r]) if line[r] > 0 else None)
            for r in first.tolist()
        ],
        dtype=np.int64,
    )
    frame = frame_of_group[gid]
    pid = np.asarray(iv.pid, dtype=np.int64)
    tid = np.asarray(iv.tid, dtype=np.int64)
    tgid, n_thr = group_ids(pid, tid)
    tfirst = np.zeros(n_thr, dtype=np.int64)
    tfirst[tgid[::-1]] = np.arange(n - 1, -1, -1)
    row_of_group = np.array(
        [
            threads.get(int(pid[r]), int(tid[r]), _thread_label(int(pid[r]), int(tid[r]), thread_names, process_names))
            for r in tfirst.tolist()
        ],
        dtype=np.int64,
    )
    thread_row = row_of_group[tgid]
    parent = np.asarray(iv.parent, dtype=np.int64)
    depth = np.asarray(iv.depth, dtype=np.int64)
    start = np.asarray(iv.start, dtype=np.int64)
    end = np.asarray(iv.end, dtype=np.int64)
    node = interval_nodes(trie, frame, parent, depth)
    derived = interval_samples(thread_row, node, self_times(start, end, parent))
    names = strings.intern_many(
        [
            torch_style(strings[interner.function[f]], strings[interner.file[f]] if interner.file[f] >= 0 else None,
                        interner.line[f] if interner.line[f] >= 0 else None)
            for f in range(len(interner))
        ]
    )
    python = PythonFrames.build(
        n,
        start_ns=start,
        end_ns=end,
        pid=pid,
        tid=tid,
        name=names[frame],
        parent=parent,
        depth=np.minimum(depth, np.iinfo(np.int16).max),
    )
    return python, derived


def _thread_label(pid: int, tid: int, thread_names: dict[tuple[int, int], str], process_names: dict[int, str]) -> str:
    name = thread_names.get((pid, tid), "")
    proc = process_names.get(pid)
    if proc and name:
        return f"{proc}: {name}"
    return name or (proc or "")


def _sample_section(
    path: str,
    top: dict[str, Any],
    strings: StringTable,
    interner: FrameInterner,
    threads: ThreadRegistry,
    trie: TrieBuilder,
    ids: _Ids,
    thread_names: dict[tuple[int, int], str],
    notes: list[str],
) -> tuple[Samples, int | None] | None:
    samples = top.get("samples")
    frames = top.get("stackFrames")
    if not isinstance(samples, list) or not samples:
        return None
    if not isinstance(frames, dict):
        frames = {}
    # frame id -> (frame row, parent id); depth by walking parents, memoized, cycle-safe
    info: dict[str, tuple[int, str | None]] = {}
    for key, sf in frames.items():
        if not isinstance(sf, dict):
            continue
        text = _name(sf.get("name"))
        m = _V8_FRAME.match(text)
        if m is not None:
            fid = interner.add(m.group("func") or "(anonymous)", m.group("file") or None, int(m.group("line")))
        else:
            fid = interner.add(text, None, None)
        parent = sf.get("parent")
        info[str(key)] = (fid, None if parent is None else str(parent))
    depth: dict[str, int] = {}
    for key in info:
        chain = []
        k: str | None = key
        while k is not None and k in info and k not in depth and len(chain) <= len(info):
            chain.append(k)
            k = info[k][1]
        base = depth.get(k, -1) if k is not None else -1
        if len(chain) > len(info):
            raise TraceFormatError(path, "stackFrames parents form a cycle")
        for j, kk in enumerate(reversed(chain)):
            depth[kk] = base + 1 + j
    keys = sorted(info, key=lambda k: depth[k])
    node_of: dict[str, int] = {}
    for d in sorted(set(depth.values())):
        level = [k for k in keys if depth[k] == d]
        parents = np.array(
            [node_of.get(info[k][1], -1) if info[k][1] is not None else -1 for k in level], dtype=np.int64
        )
        fr = np.array([info[k][0] for k in level], dtype=np.int64)
        for k, nd in zip(level, trie.insert(parents, fr, d).tolist()):
            node_of[k] = nd
    n = len(samples)
    ts_raw = [msgspec.json.encode(s.get("ts")) if isinstance(s, dict) else b"" for s in samples]
    ts, ok = _times(ts_raw)
    node = np.array(
        [node_of.get(str(s.get("sf")), -1) if isinstance(s, dict) else -1 for s in samples], dtype=np.int64
    )
    pid = np.array([ids(s.get("pid")) if isinstance(s, dict) else -1 for s in samples], dtype=np.int64)
    tid = np.array([ids(s.get("tid")) if isinstance(s, dict) else -1 for s in samples], dtype=np.int64)
    keep = ok
    if not keep.all():
        notes.append(f"{int((~keep).sum())} samples without a usable timestamp dropped")
    ts, node, pid, tid = ts[keep], node[keep], pid[keep], tid[keep]
    if len(ts) == 0:
        return None
    tgid, n_thr = group_ids(pid, tid)
    rows = np.empty(n_thr, dtype=np.int64)
    for g in range(n_thr):
        r = int(np.flatnonzero(tgid == g)[0])
        rows[g] = threads.get(int(pid[r]), int(tid[r]), thread_names.get((int(pid[r]), int(tid[r])), ""))
    thread_row = rows[tgid]
    order = np.lexsort((ts, thread_row))
    ts_sorted, th_sorted = ts[order], thread_row[order]
    gaps = np.diff(ts_sorted)[np.diff(th_sorted) == 0]
    gaps = gaps[gaps > 0]
    interval = int(np.median(gaps)) if len(gaps) else None
    notes.append(
        "samples carry timestamps; each stands for the median sampling interval"
        + (f" ({units.duration(interval)})" if interval else "")
    )
    del n
    return (
        Samples.build(
            len(order),
            node=node[order],
            thread=th_sorted,
            count=np.ones(len(order), dtype=np.int64),
            weight_ns=np.full(len(order), interval or 0, dtype=np.int64),
            ts_ns=ts_sorted,
        ),
        interval,
    )


def _notes(notes: list[str], counts: dict[str, int], ids: _Ids, producer: str) -> None:
    if producer == "py-spy":
        notes.append(
            "py-spy chrometrace: spans stretch over samples py-spy dropped (idle threads without "
            "--idle), so times are upper bounds, not CPU time; thread ids are pthread ids"
        )
    repaired = {k: v for k, v in counts.items() if not k.startswith("ph ")}
    if repaired:
        notes.append("unbalanced events tolerated: " + ", ".join(f"{k} ({v})" for k, v in sorted(repaired.items())))
    ignored = {k[3:]: v for k, v in counts.items() if k.startswith("ph ") and k != "ph M"}
    if ignored:
        notes.append(
            "events of other phases ignored: " + ", ".join(f"{k} ({v})" for k, v in sorted(ignored.items(), key=lambda kv: -kv[1])[:6])
        )
    if ids.synthetic:
        notes.append(f"{len(ids.synthetic)} non-numeric pid/tid values mapped to synthetic ids")
