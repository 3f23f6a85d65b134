"""Flamegraph SVGs: py-spy ``record``'s default output (inferno) and ``flamegraph.pl``.

Sniffed before the catch-all text reader: an SVG drawn by a flamegraph generator, whatever
the file's name.
"""

from __future__ import annotations

from traceclass.ingest.probe import Probe
from traceclass.model import Trace

NAME = "flamegraph-svg"
DESCRIPTION = "flamegraph SVG (py-spy --format flamegraph, inferno, flamegraph.pl)"


def sniff(probe: Probe) -> bool:
    from traceclass.ingest.flamegraph_svg import sniff as looks_like_flamegraph

    if probe.is_sqlite or probe.is_json or probe.is_utf16:
        return False
    return looks_like_flamegraph(probe.head)


def read(probe: Probe) -> Trace:
    from traceclass.ingest.flamegraph_svg import read_flamegraph_svg

    return read_flamegraph_svg(probe.path, probe.data)
