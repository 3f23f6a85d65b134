"""Readers: any supported input file -> :class:`~traceclass.model.Trace`.

:func:`load` detects the format from the content (the SQLite header, gzip magic, the JSON
container's keys), never from the file name alone; only binary ``.nsys-rep``/``.qdrep``
reports are recognised by extension, because they must be exported by ``nsys`` first.
"""

from __future__ import annotations

import os
from pathlib import Path

import msgspec

from traceclass.errors import TraceFormatError
from traceclass.ingest.source import Progress, read_bytes, sniff
from traceclass.model import Trace

FORMATS = (
    "kineto",
    "nsys-sqlite",
    "nsys-rep",
    "speedscope",
    "collapsed",
    "chrome-trace",
    "flamegraph-svg",
)


def load(path: str | os.PathLike[str], progress: Progress = None, fmt: str | None = None) -> Trace:
    """Read a trace file of any supported format.

    Raises :class:`TraceFormatError` (one line, naming the file) on unreadable input.
    """
    p = str(path)
    kind = fmt or sniff(p)
    try:
        if kind == "nsys-sqlite":
            from traceclass.ingest.nsys import read_nsys_sqlite

            return read_nsys_sqlite(p, progress=progress)
        if kind == "nsys-rep":
            from traceclass.ingest.nsys import read_nsys_report

            return read_nsys_report(p, progress=progress)
        if kind == "collapsed":
            from traceclass.ingest.collapsed import read_collapsed

            return read_collapsed(p, progress=progress)
        if kind == "flamegraph-svg":
            from traceclass.ingest import flamegraph_svg

            return flamegraph_svg.read(p, progress=progress)
        if kind in ("json", "kineto", "speedscope", "chrome-trace"):
            return _load_json(p, progress, kind)
    except TraceFormatError:
        raise
    except MemoryError:
        raise TraceFormatError(p, "not enough memory to analyze this file") from None
    except RecursionError:
        raise TraceFormatError(p, "structure nested too deeply") from None
    except msgspec.MsgspecError as exc:
        # a reader met JSON of an unexpected shape (events that are not objects, ...)
        raise TraceFormatError(p, f"unexpected JSON structure ({' '.join(str(exc).split())[:160]})") from None
    except (OverflowError, UnicodeError) as exc:
        raise TraceFormatError(p, f"value out of range or undecodable text ({type(exc).__name__})") from None
    raise TraceFormatError(p, f"unsupported format {kind!r}; supported: {', '.join(FORMATS)}")


def _load_json(path: str, progress: Progress, kind: str) -> Trace:
    from traceclass.ingest.jsonload import decode_container, first_char

    data = read_bytes(path, progress=progress)
    size = len(data)
    if not first_char(data):
        raise TraceFormatError(path, "file is empty" if not data else "file contains only whitespace")
    if first_char(data) not in (b"{", b"["):
        raise TraceFormatError(path, "not a JSON trace (expected '{' or '[' at the start)")
    if kind in ("json", "speedscope") and first_char(data) == b"{" and _is_speedscope(data):
        from traceclass.ingest.speedscope import read_speedscope

        return read_speedscope(path, data, progress=progress)
    container = decode_container(path, data)
    del data
    from traceclass.ingest.kineto import looks_like_kineto, read_kineto

    if not container.bare and not container.has_events:
        raise TraceFormatError(path, "JSON object has no \"traceEvents\" list: not a Chrome/Kineto trace")
    if not container.events:
        raise TraceFormatError(path, "the trace holds no events (empty \"traceEvents\")")
    if kind == "kineto" or (kind != "chrome-trace" and looks_like_kineto(container)):
        return read_kineto(path, size, container, progress=progress)
    from traceclass.ingest.chrome import read_chrome_trace

    return read_chrome_trace(path, size, container, progress=progress)


def _is_speedscope(data: bytes) -> bool:
    head = data[:4096]
    if b"speedscope.app/file-format-schema" in head:
        return True
    # unpretty files may put "shared" before "profiles"; both keys mark the format
    return b'"profiles"' in data[:1 << 20] and b'"shared"' in data[:1 << 20] and b'"traceEvents"' not in head


__all__ = ["FORMATS", "load", "Path"]
