"""torch.profiler / Kineto Chrome-trace JSON (``.json``, ``.json.gz``)."""

from __future__ import annotations

from traceclass.ingest.probe import Probe
from traceclass.model import Trace

NAME = "kineto"
DESCRIPTION = "torch.profiler (Kineto) trace JSON (.json, .json.gz)"


def sniff(probe: Probe) -> bool:
    if not probe.is_json:
        return False
    from traceclass.ingest.kineto import looks_like_kineto

    return looks_like_kineto(probe.container)


def read(probe: Probe) -> Trace:
    from traceclass.ingest.jsonstream import StreamUnsupported
    from traceclass.ingest.kineto import read_kineto

    try:
        return read_kineto(probe.path, probe.size, probe.container, progress=probe.progress)
    except StreamUnsupported:  # damaged JSON met mid-stream: the whole-file path repairs or reports
        return read_kineto(probe.path, probe.size, probe.whole_container(), progress=probe.progress)
