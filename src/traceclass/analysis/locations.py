"""Pieces of finding locations (the text a fingerprint is made of).

A location names the site of a problem (op, kernel, stage or source-line names and the pattern),
never device indices, ranks or times: the same program's finding on rank 0 and on rank 7 (GPU 0
and GPU 7) must fingerprint alike, a later run of it too, and two different sites must differ.
"""

from __future__ import annotations

from typing import Iterable, Sequence

import numpy as np


def device_tag(device: int, devices: Iterable[int]) -> str:
    """``""`` when ``device`` is the trace's only active device, else ``" (GPU 2 of 3)"``: its
    1-based position among the trace's active devices, the same on every rank of a job, so a
    process that drives two GPUs gets two locations without naming device indices."""
    devs = sorted(set(int(d) for d in devices))
    if len(devs) <= 1 or device not in devs:
        return ""
    return f" (GPU {devs.index(device) + 1} of {len(devs)})"


def heaviest(labels: Sequence[str], weights: Sequence[float] | np.ndarray) -> str | None:
    """The label with the largest total weight (ties: the alphabetically first), None when there
    is none; empty labels never win."""
    totals: dict[str, float] = {}
    for label, w in zip(labels, np.asarray(weights, dtype=np.float64).tolist()):
        if label:
            totals[label] = totals.get(label, 0.0) + w
    if not totals:
        return None
    return min(totals, key=lambda k: (-totals[k], k))
