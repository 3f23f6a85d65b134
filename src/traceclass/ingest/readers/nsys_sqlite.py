"""Nsight Systems SQLite export (``nsys export --type sqlite``)."""

from __future__ import annotations

from traceclass.ingest.probe import Probe
from traceclass.model import Trace

NAME = "nsys-sqlite"
DESCRIPTION = "Nsight Systems SQLite export (.sqlite)"


def sniff(probe: Probe) -> bool:
    if not probe.is_sqlite:
        return False
    from traceclass.ingest.nsys_schema import is_nsys_export

    tables = probe.sqlite_tables
    # a database that cannot be opened is still read here, so the reader says exactly why
    return tables is None or is_nsys_export(tables)


def read(probe: Probe) -> Trace:
    from traceclass.ingest.nsys import read_nsys_sqlite

    return read_nsys_sqlite(probe.path, progress=probe.progress)
