"""Source text of the leaf lines of sampled Python stacks, when the files are at hand.

Without ``--native`` py-spy shows a thread blocked in ``time.sleep``, ``lock.acquire`` or
``sock.recv`` as the *Python line that made the call*: those functions are C code and have no
frame. Only the line's text tells a line that waits from a line that computes, so readers
look the line up when the file exists (absolute paths, or paths relative to roots the
caller names, the trace's directory, or the current directory).

The text is stored in ``Trace.meta["source_lines"]`` (frame row -> stripped line) for the
classifier only. It comes from arbitrary files and is never rendered: reports show file and
line number, not file contents.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np

from traceclass.model import Trace

META_KEY = "source_lines"
#: Files larger than this are not source code we want to read line by line.
MAX_FILE_BYTES = 4 << 20
MAX_FILES = 2000
MAX_LINE_CHARS = 300
_SUFFIXES = (".py", ".pyw", ".pyx")


def leaf_frames(trace: Trace) -> np.ndarray:
    """Frame rows that are the leaf of at least one sample."""
    nodes = trace.samples.node
    nodes = nodes[nodes >= 0]
    if len(nodes) == 0:
        return np.zeros(0, dtype=np.int64)
    return np.unique(trace.stacks.frame[np.unique(nodes)]).astype(np.int64)


def attach_source_lines(trace: Trace, roots: Sequence[str | os.PathLike[str]] = ()) -> Trace:
    """A trace whose ``meta`` maps leaf frames to their source line, where the file is found.

    Relative file names are tried against ``roots``, the trace file's directory and the
    current directory.
    Lines found earlier (in ``meta``) are kept.
    """
    frames = trace.frames
    if len(frames) == 0 or len(trace.samples) == 0:
        return trace
    known: dict[int, str] = dict(trace.meta.get(META_KEY) or {})
    rows = [r for r in leaf_frames(trace).tolist() if r not in known]
    if not rows:
        return trace
    search = [Path(r) for r in roots]
    if trace.source.path:
        search.append(Path(trace.source.path).resolve().parent)
    # py-spy writes the main script's path as the program saw it, usually relative to the
    # directory it was started in, which is where people run traceclass from
    search.append(Path.cwd())
    cache: dict[str, list[str] | None] = {}
    files_read = 0
    for r in rows:
        fcode, line = int(frames.file[r]), int(frames.line[r])
        if fcode < 0 or line <= 0:
            continue
        name = trace.strings[fcode]
        if not name.endswith(_SUFFIXES):
            continue
        if name not in cache:
            if files_read >= MAX_FILES:
                continue
            cache[name] = _read_lines(_candidates(name, search))
            files_read += 1
        lines = cache[name]
        if lines is not None and line <= len(lines):
            text = lines[line - 1].strip()
            if text:
                known[r] = text[:MAX_LINE_CHARS]
    if not known:
        return trace
    meta = dict(trace.meta)
    meta[META_KEY] = known
    return trace.replace(meta=meta)


def _candidates(name: str, roots: Iterable[Path]) -> list[Path]:
    p = Path(name)
    if p.is_absolute():
        out = [p]
        # a profile recorded elsewhere (container, CI) keeps absolute paths of that machine;
        # the same file may sit in a named root under its base name
        out += [r / p.name for r in roots]
        return out
    return [r / p for r in roots]


def _read_lines(paths: list[Path]) -> list[str] | None:
    for p in paths:
        try:
            if not p.is_file() or p.stat().st_size > MAX_FILE_BYTES:
                continue
            with open(p, "rb") as fh:
                data = fh.read()
        except OSError:
            continue
        return data.decode("utf-8", errors="replace").splitlines()
    return None
