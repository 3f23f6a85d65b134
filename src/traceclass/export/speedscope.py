"""Any :class:`Trace` -> speedscope JSON (https://www.speedscope.app/file-format-schema.json).

* Timed intervals become *evented* profiles: one per host thread (annotations, Python frames,
  operators and runtime API calls of that thread together) and one per GPU stream (kernels,
  copies, memsets). Events are written in time order, a close before an open at the same
  instant; an interval that outlives the one it starts in is clipped to it, because speedscope
  rejects partial nesting. Times are microseconds from the trace's first timestamp.
* Stack samples become *sampled* profiles, one per thread, in the order of the sample rows:
  one entry per sample (weight 1/rate seconds) when the sampling interval is known, else one
  entry per row weighted by its time, or by its count (unit ``none``) when the trace has no time
  per sample. Values that are not time (a speedscope file in unit ``none`` or ``bytes``) keep
  that unit and their values. Samples that a reader derived from timed frames are not written
  twice.
* Profile names are readable: host threads by the name the trace gives them and their pid and
  tid (a negative tid, Kineto's 32-bit thread id written signed, as the unsigned number),
  GPU rows by device and stream, GPU-side synchronization records (no stream of their own) as
  ``GPU N sync events``.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np

from traceclass import __version__
from traceclass.model import StackNodes, Trace
from traceclass.model.enums import GpuKind

SCHEMA = "https://www.speedscope.app/file-format-schema.json"
_TORCH_FRAME = re.compile(r"^(?P<file>.+?)\((?P<line>\d+)\): (?P<func>.+)$", re.S)
# on equal bounds the broader kind of interval encloses the narrower one
_ANN, _PY, _OP, _API = 0, 1, 2, 3


class _Frames:
    def __init__(self) -> None:
        self.index: dict[tuple[str, str | None, int | None], int] = {}
        self.items: list[dict[str, Any]] = []

    def add(self, name: str, file: str | None = None, line: int | None = None) -> int:
        key = (name, file or None, line if line and line > 0 else None)
        i = self.index.get(key)
        if i is None:
            i = len(self.items)
            self.index[key] = i
            d: dict[str, Any] = {"name": name}
            if key[1]:
                d["file"] = key[1]
            if key[2]:
                d["line"] = key[2]
            self.items.append(d)
        return i

    def codes(self, trace: Trace, names: np.ndarray, python: bool = False) -> np.ndarray:
        """Frame index per row of a name column, each distinct name resolved once."""
        uniq, inv = np.unique(np.asarray(names, dtype=np.int64), return_inverse=True)
        out = np.empty(len(uniq), dtype=np.int64)
        for k, code in enumerate(uniq.tolist()):
            text = trace.strings[code] if code >= 0 else "(unnamed)"
            m = _TORCH_FRAME.match(text) if python else None
            if m is not None:
                out[k] = self.add(m.group("func"), m.group("file"), int(m.group("line")))
            else:
                out[k] = self.add(text or "(unnamed)")
        return out[inv]


def to_speedscope(trace: Trace) -> dict[str, Any]:
    """The speedscope document for ``trace`` (plain dicts and lists, ready for a JSON encoder)."""
    return build(trace)[0]


def build(trace: Trace) -> tuple[dict[str, Any], int]:
    """The document and the number of intervals clipped to repair partial nesting."""
    frames = _Frames()
    profiles: list[dict[str, Any]] = []
    bounds = trace.time_bounds()
    t0 = bounds[0] if bounds else 0
    t1 = bounds[1] if bounds else 0
    repaired = 0

    for label, parts in _host_groups(trace, frames):
        prof, fixed = _evented(label, parts, t0, t1)
        repaired += fixed
        if prof is not None:
            profiles.append(prof)
    for label, parts in _gpu_groups(trace, frames):
        prof, fixed = _evented(label, parts, t0, t1)
        repaired += fixed
        if prof is not None:
            profiles.append(prof)
    rows = _sample_rows(trace)
    if len(rows):
        taken = {p["name"] for p in profiles}
        for prof in _sampled(trace, frames, rows):
            if prof["name"] in taken:  # the same thread's timed frames are a profile already
                prof["name"] += " samples"
            profiles.append(prof)

    out: dict[str, Any] = {
        "$schema": SCHEMA,
        "shared": {"frames": frames.items},
        "profiles": profiles,
        "name": Path(trace.source.path).name if trace.source.path else "traceclass export",
        "activeProfileIndex": 0,
        "exporter": f"traceclass@{__version__}",
    }
    return out, repaired


def _sample_rows(trace: Trace) -> np.ndarray:
    """Sample rows to write: not those a reader derived from timed frames (written as events)."""
    n = len(trace.samples)
    keep = np.ones(n, dtype=bool)
    derived = trace.meta.get("interval_rows")
    if isinstance(derived, (list, tuple)) and len(derived) == 2:
        keep[int(derived[0]):int(derived[1])] = False
    elif trace.meta.get("samples_from") == "intervals" and len(trace.python):
        keep[:] = False
    return np.flatnonzero(keep)


# --------------------------------------------------------------------------- names


def _thread_labels(trace: Trace) -> dict[tuple[int, int], str]:
    th = trace.threads
    out: dict[tuple[int, int], str] = {}
    for pid, tid, name in zip(th.pid.tolist(), th.tid.tolist(), th.name.tolist()):
        text = trace.strings[name] if name >= 0 else ""
        if text and (pid, tid) not in out:
            out[(pid, tid)] = text
    return out


def _tid_text(tid: int) -> str:
    """Kineto writes 32-bit thread ids as signed numbers: show the unsigned one."""
    return str(tid & 0xFFFFFFFF) if -(1 << 31) <= tid < 0 else str(tid)


def host_label(name: str, pid: int, tid: int) -> str:
    """``MainThread (pid 7, tid 8)``; a name that already carries the tid (Kineto's
    ``thread 8 (python)``) gets only the pid; unknown ids (-1) are left out."""
    t = _tid_text(tid) if tid != -1 else ""
    ids = [f"pid {pid}" if pid >= 0 else "", f"tid {t}" if t else ""]
    if name and t and t in name.split(" (")[0].split():
        ids[1] = ""
    id_text = ", ".join(x for x in ids if x)
    if name and id_text:
        return f"{name} ({id_text})"
    return name or id_text or "all threads"


def gpu_label(device: int, stream: int, sync: bool) -> str:
    dev = f"GPU {device}" if device >= 0 else "GPU"
    no_stream = stream < 0 or stream >= 0xFFFFFFFF
    if sync:
        return f"{dev} sync events" if no_stream else f"{dev} stream {stream} sync events"
    return f"{dev} (no stream)" if no_stream else f"{dev} stream {stream}"


# --------------------------------------------------------------------------- evented


def _host_groups(trace: Trace, frames: _Frames) -> list[tuple[str, list[tuple[np.ndarray, ...]]]]:
    """(profile name, [(start, end, frame, rank) arrays]) per host (pid, tid)."""
    tables = [
        (trace.annotations, _ANN, False),
        (trace.python, _PY, True),
        (trace.ops, _OP, False),
        (trace.api, _API, False),
    ]
    parts: dict[tuple[int, int], list[tuple[np.ndarray, ...]]] = {}
    for table, rank, is_py in tables:
        if len(table) == 0:
            continue
        code = frames.codes(trace, table.name, python=is_py)
        pid, tid = table.pid, table.tid
        keys = np.stack([pid, tid], axis=1)
        uniq, inv = np.unique(keys, axis=0, return_inverse=True)
        inv = inv.reshape(-1)
        for k, (p, t) in enumerate(uniq.tolist()):
            rows = np.flatnonzero(inv == k)
            parts.setdefault((p, t), []).append(
                (table.start_ns[rows], table.end_ns[rows], code[rows], np.full(len(rows), rank))
            )
    names = _thread_labels(trace)
    out = []
    for (p, t) in sorted(parts):
        out.append((host_label(names.get((p, t), ""), p, t), parts[(p, t)]))
    return out


def _gpu_groups(trace: Trace, frames: _Frames) -> list[tuple[str, list[tuple[np.ndarray, ...]]]]:
    g = trace.gpu
    if len(g) == 0:
        return []
    code = frames.codes(trace, g.name)
    # sync records get profiles of their own: they span waits, not work, and overlap the work
    sync = (g.kind == int(GpuKind.SYNC)).astype(np.int64)
    keys = np.stack([g.device.astype(np.int64), sync, g.stream], axis=1)
    uniq, inv = np.unique(keys, axis=0, return_inverse=True)
    inv = inv.reshape(-1)
    out = []
    for k, (dev, is_sync, stream) in enumerate(uniq.tolist()):
        rows = np.flatnonzero(inv == k)
        out.append(
            (gpu_label(dev, stream, bool(is_sync)),
             [(g.start_ns[rows], g.end_ns[rows], code[rows], np.zeros(len(rows), dtype=np.int64))])
        )
    return out


def _evented(
    label: str, parts: list[tuple[np.ndarray, ...]], t0: int, t1: int
) -> tuple[dict[str, Any] | None, int]:
    start = np.concatenate([p[0] for p in parts]).astype(np.int64)
    end = np.concatenate([p[1] for p in parts]).astype(np.int64)
    frame = np.concatenate([p[2] for p in parts]).astype(np.int64)
    rank = np.concatenate([p[3] for p in parts]).astype(np.int64)
    if len(start) == 0:
        return None, 0
    end = np.maximum(end, start)
    # outer before inner: earlier start, then longer, then the broader kind
    order = np.lexsort((np.arange(len(start)), rank, start - end, start))
    s_l, e_l, f_l = start[order].tolist(), end[order].tolist(), frame[order].tolist()
    events: list[dict[str, Any]] = []
    stack_end: list[int] = []
    stack_frame: list[int] = []
    clipped = 0
    for s, e, f in zip(s_l, e_l, f_l):
        while stack_end and stack_end[-1] <= s:
            events.append({"type": "C", "at": (stack_end.pop() - t0) / 1000.0, "frame": stack_frame.pop()})
        if stack_end and e > stack_end[-1]:
            e = stack_end[-1]
            clipped += 1
        events.append({"type": "O", "at": (s - t0) / 1000.0, "frame": f})
        stack_end.append(e)
        stack_frame.append(f)
    while stack_end:
        events.append({"type": "C", "at": (stack_end.pop() - t0) / 1000.0, "frame": stack_frame.pop()})
    return (
        {
            "type": "evented",
            "name": label,
            "unit": "microseconds",
            "startValue": 0.0,
            "endValue": max(t1 - t0, 0) / 1000.0,
            "events": events,
        },
        clipped,
    )


# --------------------------------------------------------------------------- sampled


def _sampled(trace: Trace, frames: _Frames, keep: np.ndarray) -> list[dict[str, Any]]:
    s = trace.samples
    st = trace.stacks
    fr = trace.frames
    code = np.full(len(fr), -1, dtype=np.int64)
    for f in range(len(fr)):
        fi = int(fr.file[f])
        ln = int(fr.line[f])
        code[f] = frames.add(
            trace.strings[int(fr.function[f])] or "(unnamed)",
            trace.strings[fi] if fi >= 0 else None,
            ln if ln > 0 else None,
        )
    nodes = s.node[keep]
    paths = _paths(st, code, np.unique(nodes[nodes >= 0]))
    weight_unit = trace.meta.get("weight_unit")
    weighted = bool((s.weight_ns > 0).any()) and bool((s.weight_ns[s.count > 0] > 0).all())
    if weighted and not weight_unit:
        unit = "seconds"
        weights = s.weight_ns / 1e9
    elif weighted:
        unit = weight_unit if weight_unit in ("none", "bytes") else "none"
        weights = s.weight_ns.astype(np.float64)
    else:
        unit = "none"
        weights = s.count.astype(np.float64)
    # rows that stand for `count` samples of one interval each are written sample by sample,
    # as py-spy does, so the file keeps the sampling rate and the sample counts
    interval = trace.sampling.interval_ns if trace.sampling is not None else None
    per_sample = bool(
        unit == "seconds" and interval and (s.weight_ns[keep] == s.count[keep] * interval).all()
        and int(s.count[keep].sum()) <= 50_000_000
    )
    th = trace.threads
    labels = _thread_labels(trace)
    out = []
    for t in np.unique(s.thread[keep]).tolist():
        rows = keep[s.thread[keep] == t]
        rows = rows[s.count[rows] > 0]
        if len(rows) == 0:
            continue
        if per_sample:
            rows = np.repeat(rows, s.count[rows])
            w = np.full(len(rows), interval / 1e9)
        else:
            w = weights[rows]
        if 0 <= t < len(th):
            pid, tid = int(th.pid[t]), int(th.tid[t])
            name = labels.get((pid, tid)) or (trace.strings[int(th.name[t])] if th.name[t] >= 0 else "")
        else:
            pid = tid = -1
            name = ""
        label = host_label(name, pid, tid)
        out.append(
            {
                "type": "sampled",
                "name": label,
                "unit": unit,
                "startValue": 0,
                "endValue": float(w.sum()),
                "samples": [paths.get(n, []) for n in s.node[rows].tolist()],
                "weights": w.tolist(),
            }
        )
    return out


def _paths(st: StackNodes, code: np.ndarray, leaves: np.ndarray) -> dict[int, list[int]]:
    """Root-first frame indices for each leaf node, sharing work between common prefixes."""
    parent = st.parent.tolist()
    frame = st.frame.tolist()
    memo: dict[int, tuple[int, ...]] = {}
    out: dict[int, list[int]] = {}
    for leaf in leaves.tolist():
        chain = []
        n = leaf
        while n >= 0 and n not in memo:
            chain.append(n)
            n = parent[n]
        prefix = memo.get(n, ()) if n >= 0 else ()
        for node in reversed(chain):
            prefix = prefix + (int(code[frame[node]]),)
            memo[node] = prefix
        out[leaf] = list(memo[leaf])
    return out
