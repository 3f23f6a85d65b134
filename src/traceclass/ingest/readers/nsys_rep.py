"""Binary Nsight Systems report (``.nsys-rep``, ``.qdrep``), exported with ``nsys`` first.

The only format recognised by its extension: the binary layout is not public.
"""

from __future__ import annotations

from traceclass.ingest.probe import Probe
from traceclass.model import Trace

NAME = "nsys-rep"
DESCRIPTION = "binary Nsight Systems report (.nsys-rep, .qdrep; needs nsys on PATH)"


def sniff(probe: Probe) -> bool:
    return probe.name.endswith((".nsys-rep", ".qdrep")) and not probe.is_sqlite


def read(probe: Probe) -> Trace:
    from traceclass.ingest.nsys import read_nsys_report

    return read_nsys_report(probe.path, progress=probe.progress)
