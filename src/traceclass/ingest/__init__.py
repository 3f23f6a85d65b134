"""Readers: any supported input file -> :class:`~traceclass.model.Trace`.

A reader is one module in :mod:`traceclass.ingest.readers` with ``NAME``, ``DESCRIPTION``,
``sniff(probe)`` and ``read(probe)``. :func:`load` asks each reader in :data:`READERS` order
whether it accepts the file (from its content: the SQLite header and tables, gzip magic, the
JSON container's keys; only binary ``.nsys-rep``/``.qdrep`` reports by extension, because
they must be exported by ``nsys`` first) and reads it with the first that does, or with the
reader named by ``fmt``.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType
from typing import TYPE_CHECKING

from traceclass.errors import ConfigError, TraceFormatError
from traceclass.ingest.probe import Probe
from traceclass.ingest.source import Progress

if TYPE_CHECKING:  # the package stays cheap to import: the CLI's --help lists FORMATS
    from traceclass.model import Trace

#: Reader modules in sniffing order: specific formats first, the catch-alls (any Chrome-trace
#: JSON, any text) last.
READERS = ("nsys_sqlite", "nsys_rep", "speedscope", "kineto", "chrome_trace", "flamegraph_svg", "collapsed")


def reader(name: str) -> ModuleType:
    """The reader module called ``name`` (its ``NAME``, e.g. ``"nsys-sqlite"``)."""
    for mod in all_readers():
        if mod.NAME == name:
            return mod
    raise ConfigError(f"unknown input format {name!r}; supported: {', '.join(FORMATS)}")


def all_readers() -> tuple[ModuleType, ...]:
    return tuple(importlib.import_module(f"traceclass.ingest.readers.{m}") for m in READERS)


def _names() -> tuple[str, ...]:
    return tuple(m.replace("_", "-") for m in READERS)


FORMATS = _names()  # the reader NAMEs (each module's NAME is its file name with '-')


def load(path: str | os.PathLike[str], progress: Progress = None, fmt: str | None = None) -> Trace:
    """Read a trace file of any supported format (``fmt``: a reader name, skipping detection).

    Raises :class:`TraceFormatError` (one line, naming the file) on unreadable input.
    """
    import msgspec

    p = str(path)
    probe = Probe(p, progress)
    try:
        if fmt is not None:
            return reader(fmt).read(probe)
        from traceclass.ingest.almost import refuse_almost_right

        refuse_almost_right(p, probe.head)
        for mod in all_readers():
            if mod.sniff(probe):
                return mod.read(probe)
        raise probe.unknown()
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


__all__ = ["FORMATS", "READERS", "load", "reader", "all_readers"]
