"""speedscope JSON (py-spy ``--format speedscope`` and other profilers)."""

from __future__ import annotations

from traceclass.ingest.probe import Probe
from traceclass.model import Trace

NAME = "speedscope"
DESCRIPTION = "speedscope JSON (py-spy --format speedscope)"


def sniff(probe: Probe) -> bool:
    if not probe.is_json or probe.text_head[:1] != b"{":
        return False
    data = probe.first_mib  # not the whole file: a 10 GB Kineto trace must not be read to sniff it
    head = data[:4096]
    if b"speedscope.app/file-format-schema" in head:
        return True
    # unpretty files may put "shared" before "profiles"; both keys mark the format
    return b'"profiles"' in data[:1 << 20] and b'"shared"' in data[:1 << 20] and b'"traceEvents"' not in head


def read(probe: Probe) -> Trace:
    from traceclass.ingest.speedscope import read_speedscope

    return read_speedscope(probe.path, probe.data, progress=probe.progress)
