"""Generic Chrome-trace JSON (py-spy ``--format chrometrace`` and other producers).

Sniffed after Kineto: any JSON trace with events that has no Kineto markers.
"""

from __future__ import annotations

from traceclass.ingest.probe import Probe
from traceclass.model import Trace

NAME = "chrome-trace"
DESCRIPTION = "Chrome-trace JSON without Kineto markers (py-spy --format chrometrace)"


def sniff(probe: Probe) -> bool:
    return probe.is_json and bool(probe.container.events)


def read(probe: Probe) -> Trace:
    from traceclass.ingest.chrome import read_chrome_trace

    container = probe.whole_container()
    return read_chrome_trace(probe.path, probe.size, container, progress=probe.progress)
