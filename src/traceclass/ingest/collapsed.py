"""Collapsed stacks (py-spy ``-f raw``, Brendan Gregg's ``stackcollapse-*``) -> :class:`Trace`.

One line per unique stack, ``frame;frame;...;leaf COUNT``, root first, split on the last
space (py-spy frames contain spaces). Lines that do not have that form (comments, junk) are
skipped, as speedscope does; a file where most lines lack it is not collapsed stacks. Text
may be UTF-8 or UTF-16 with a BOM, with LF or CRLF line ends.
"""

from __future__ import annotations

import array

import numpy as np

from traceclass.errors import TraceFormatError
from traceclass.ingest.frametext import parse_frame, parse_pseudo
from traceclass.ingest.sampled import ThreadRegistry, assemble, has_line_numbers
from traceclass.ingest.source import Progress, read_bytes
from traceclass.ingest.stacks import FrameInterner, TrieBuilder, aggregate_samples, insert_stacks
from traceclass.model import SamplingInfo, StringTable, Trace

_MAX_COUNT = (1 << 62) - 1
#: A file is rejected when fewer than this share of its non-comment lines are stack lines.
MIN_VALID_SHARE = 0.5


def decode_text(path: str, data: bytes) -> str:
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        try:
            return data.decode("utf-16")
        except UnicodeDecodeError:
            raise TraceFormatError(path, "UTF-16 text with invalid code units") from None
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    if b"\x00" in data[:65536]:
        raise TraceFormatError(path, "binary file of unknown format (not collapsed stacks)")
    return data.decode("utf-8", errors="replace")


def read_collapsed(path: str, progress: Progress = None) -> Trace:
    data = read_bytes(path, progress=progress)
    size = len(data)
    text = decode_text(path, data)
    del data
    head = text[:512].lstrip().lower()
    if head.startswith(("<?xml", "<svg", "<!doctype svg")):
        raise TraceFormatError(
            path,
            "an SVG image without flamegraph frames (<g><title>NAME (N samples, P%)</title><rect>): "
            "not a profile",
        )
    lines = text.splitlines()
    del text

    strings = StringTable()
    frames = FrameInterner(strings)
    threads = ThreadRegistry(strings)
    frame_ids: dict[str, int] = {}
    thread_of_roots: dict[tuple[str, ...], int] = {}
    getitem = frame_ids.__getitem__

    flat = array.array("i")
    lengths = array.array("q")
    counts = array.array("q")
    thread_rows = array.array("i")
    default_thread = -1
    comments = bad = 0
    py_frames = 0
    n_lines = len(lines)

    for i, raw in enumerate(lines):
        line = raw.rstrip()
        if not line:
            continue
        c0 = line[0]
        if c0 == "#" or line.startswith("//"):
            comments += 1
            continue
        stack, sep, cnt = line.rpartition(" ")
        if not sep or not (cnt.isascii() and cnt.isdigit()):
            bad += 1
            continue
        parts = stack.split(";") if stack else []
        if parts and (parts[0].startswith("thread (") or parts[0].startswith("process ")):
            k = 0
            while k < len(parts) and parse_pseudo(parts[k]) is not None:
                k += 1
            roots = tuple(parts[:k])
            row = thread_of_roots.get(roots)
            if row is None:
                row = _thread_for_roots(threads, roots)
                thread_of_roots[roots] = row
            parts = parts[k:]
        else:
            if default_thread < 0:
                default_thread = threads.get(-1, -1, "", key="all")
            row = default_thread
        n0 = len(flat)
        try:
            flat.extend(map(getitem, parts))
        except KeyError:
            del flat[n0:]
            for t in parts:
                if t not in frame_ids:
                    f = parse_frame(t)
                    frame_ids[t] = frames.add(*f)
                    if f.file is not None and (f.file.endswith(".py") or f.file.startswith("<frozen")):
                        py_frames += 1
            flat.extend(map(getitem, parts))
        lengths.append(len(parts))
        counts.append(_count(cnt))
        thread_rows.append(row)
        if progress is not None and (i & 0xFFFF) == 0:
            progress("parsing", i, n_lines)

    n_valid = len(lengths)
    candidates = n_valid + bad
    if n_valid == 0:
        raise TraceFormatError(
            path, "no line has the collapsed-stack form 'frame;frame;...;frame COUNT': not a profile"
        )
    if n_valid < MIN_VALID_SHARE * candidates:
        raise TraceFormatError(
            path,
            f"only {n_valid} of {candidates} lines have the collapsed-stack form "
            "'frame;frame;...;frame COUNT': not a collapsed-stack profile",
        )
    del lines

    trie = TrieBuilder()
    flat_np = np.frombuffer(flat, dtype=np.int32) if len(flat) else np.zeros(0, dtype=np.int32)
    leaf = insert_stacks(trie, flat_np, np.frombuffer(lengths, dtype=np.int64))
    count_np = np.frombuffer(counts, dtype=np.int64)
    samples = aggregate_samples(
        np.frombuffer(thread_rows, dtype=np.int32), leaf, count_np, np.zeros(n_valid, dtype=np.int64)
    )

    is_pyspy = py_frames > 0 and py_frames * 2 >= len(frame_ids)
    notes = []
    if bad:
        notes.append(f"{bad} line{'s' if bad != 1 else ''} skipped: not of the form 'stack COUNT'")
    notes.append(
        "collapsed stacks carry no sampling rate, so the profile is measured in samples"
        + (" (py-spy samples at 100 Hz unless --rate was given)" if is_pyspy else "")
    )
    if default_thread >= 0:
        notes.append(
            "stacks are not split by thread"
            + (" (py-spy writes thread roots with --threads)" if is_pyspy else "")
        )
    if is_pyspy:
        notes.append(
            "whether idle samples were kept (py-spy --idle) is not recorded in collapsed stacks"
        )
    sampling = SamplingInfo(
        interval_ns=None,
        includes_idle=None,
        gil_only=None,
        has_line_numbers=has_line_numbers(frames),
        timed=False,
    )
    return assemble(
        path=path,
        fmt="collapsed",
        producer="py-spy" if is_pyspy else "",
        size=size,
        strings=strings,
        frames=frames,
        trie=trie,
        threads=threads,
        samples=samples,
        sampling=sampling,
        notes=notes,
        meta={"comment_lines": comments} if comments else {},
    )


def _count(digits: str) -> int:
    """A sample count, clamped: past 19 digits int() would only spend time (and beyond 4,300
    it refuses: Python's int-string limit) to reach a value the clamp discards anyway."""
    digits = digits.lstrip("0")
    return _MAX_COUNT if len(digits) > 19 else min(int(digits or "0"), _MAX_COUNT)


def _thread_for_roots(threads: ThreadRegistry, roots: tuple[str, ...]) -> int:
    pid = tid = -1
    name = ""
    for text in roots:
        p = parse_pseudo(text)
        if p is None:
            continue
        if p.kind == "process":
            pid = p.ident
        else:
            tid, name = p.ident, p.name
    return threads.get(pid, tid, name, key="" if tid >= 0 or pid >= 0 else "all")


__all__ = ["read_collapsed", "decode_text"]
