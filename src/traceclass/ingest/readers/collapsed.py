"""Collapsed stacks (``py-spy record --format raw``, Brendan Gregg's ``stack;frames count``).

Sniffed last: any text that is not JSON.
"""

from __future__ import annotations

from traceclass.ingest.probe import Probe
from traceclass.model import Trace

NAME = "collapsed"
DESCRIPTION = "collapsed stacks text (py-spy --format raw)"


def sniff(probe: Probe) -> bool:
    if probe.is_utf16:
        return True  # UTF-16 text: only collapsed stacks come that way
    if probe.is_sqlite or not probe.text_head or probe.is_json:
        return False
    return b"\x00" not in probe.head


def read(probe: Probe) -> Trace:
    from traceclass.ingest.collapsed import read_collapsed

    return read_collapsed(probe.path, progress=probe.progress)
