"""What the host did during a stretch of GPU idle (the report's longest idle gap per device)."""

from __future__ import annotations

import numpy as np

from traceclass.analysis.source_lines import source_for_points
from traceclass.model import Trace
from traceclass.model.table import BLOCK_ROWS


def host_during(trace: Trace, g0: int | None, g1: int | None) -> tuple[str, str | None]:
    """The host activity that covers most of ``[g0, g1)``: the API call, else the deepest op
    covering at least half of it. Plain text and a source line."""
    if g0 is None or g1 is None or g1 <= g0:
        return "", None
    half = (g1 - g0) / 2
    for table, label in ((trace.api, "API call"), (trace.ops, "op")):
        if not len(table):
            continue
        cand, ov = _covering(table.start_ns, table.end_ns, g0, g1, half)
        if not len(cand):
            continue
        depth = table.depth[cand] if hasattr(table, "depth") else np.zeros(len(cand))
        r = int(cand[np.lexsort((-ov, -depth))[0]])
        text = f"{label} {trace.strings[int(table.name[r])]}"
        if label == "API call" and table.op[r] >= 0:
            text += f" in {trace.strings[int(trace.ops.name[int(table.op[r])])]}"
        src = source_for_points(trace, table.pid[r:r + 1], table.tid[r:r + 1], table.start_ns[r:r + 1])[0]
        return text, src
    return "no recorded host activity", None


_BLOCK = BLOCK_ROWS  # the overlap of every op with the gap was GBs at 10 GB of trace


def _covering(start: np.ndarray, end: np.ndarray, g0: int, g1: int, half: float) -> tuple[np.ndarray, np.ndarray]:
    """Rows overlapping ``[g0, g1)`` by at least ``half``, and their overlaps."""
    rows, ovs = [], []
    for lo in range(0, len(start), _BLOCK):
        ov = np.minimum(end[lo:lo + _BLOCK], g1)
        ov -= np.maximum(start[lo:lo + _BLOCK], g0)
        c = np.flatnonzero(ov >= half)
        rows.append(c + lo)
        ovs.append(ov[c])
    return np.concatenate(rows), np.concatenate(ovs)
