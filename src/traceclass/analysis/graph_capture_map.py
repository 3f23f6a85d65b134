"""Replayed graph kernels mapped back to the ops that captured them.

A replay runs the captured kernels in capture order. Each replay's kernels (by start time) are
aligned with the capture's launches (by time, per thread) on the kernel name: a two-pointer walk
that, on a mismatch, looks up to ``LOOKAHEAD`` launches ahead (kernels the capture launched but
the replay did not run, such as warm-up fills) before leaving a replayed kernel unmatched. A
matched kernel takes the op of its launch. The result says how many kernels matched; when too
few did (another model, batch size or graph), it says so instead of mapping.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from traceclass.model.captured import CapturedLaunches
from traceclass.model import Trace

LOOKAHEAD = 16
MIN_MATCHED = 0.8  # share of a replay's kernels that must match for the mapping to stand


@dataclasses.dataclass(frozen=True)
class ReplayOps:
    launch_row: int
    kernels: int
    matched: int
    by_op: tuple[tuple[str, int, int], ...]  # (op [shapes], kernels, kernel ns), by time
    reason: str  # why the mapping does not stand ("" when it does)


def map_replays(trace: Trace, capture: CapturedLaunches) -> list[ReplayOps]:
    gpu = trace.gpu
    rows = np.flatnonzero(gpu.graph & (gpu.api >= 0)) if len(gpu) else np.zeros(0, np.int64)
    out: list[ReplayOps] = []
    if not len(rows):
        return out
    order = rows[np.lexsort((gpu.start_ns[rows], gpu.api[rows]))]
    cut = np.r_[0, np.flatnonzero(np.diff(gpu.api[order])) + 1, len(order)]
    cap_kernels = capture.kernel
    for lo, hi in zip(cut[:-1], cut[1:]):
        sel = order[lo:hi]
        codes = np.where(gpu.full_name[sel] >= 0, gpu.full_name[sel], gpu.name[sel])
        names = [trace.strings[int(c)] for c in codes.tolist()]
        dur = (gpu.end_ns[sel] - gpu.start_ns[sel]).astype(np.int64)
        match = _align(names, cap_kernels)
        matched = sum(1 for m in match if m >= 0)
        by: dict[str, list[int]] = {}
        for k, m in enumerate(match):
            label = "(unmatched)" if m < 0 else (capture.op[m] or "(no op)") + (
                f" {capture.shapes[m]}" if capture.shapes[m] else "")
            acc = by.setdefault(label, [0, 0])
            acc[0] += 1
            acc[1] += int(dur[k])
        reason = ""
        if matched < MIN_MATCHED * len(names):
            reason = (f"only {matched} of {len(names)} replayed kernels match the capture's launches by name "
                      f"(another model, batch size or graph?): not mapped")
        out.append(ReplayOps(int(gpu.api[sel[0]]), len(names), matched,
                             tuple(sorted(((k, v[0], v[1]) for k, v in by.items()), key=lambda t: -t[2])),
                             reason))
    return out


def _align(replayed: list[str], captured: tuple[str, ...]) -> list[int]:
    """Index into ``captured`` per replayed kernel (-1 unmatched), order-preserving."""
    out = []
    j = 0
    n = len(captured)
    for name in replayed:
        hit = -1
        for k in range(j, min(n, j + LOOKAHEAD)):
            if captured[k] == name:
                hit = k
                break
        out.append(hit)
        if hit >= 0:
            j = hit + 1
    return out


def notes(trace: Trace, capture: CapturedLaunches, duration, show: int = 6) -> list[str]:  # type: ignore[no-untyped-def]
    """Report lines: per replay, the ops holding most of its kernel time, or why not mapped."""
    lines = []
    for r in map_replays(trace, capture):
        launch = trace.strings[int(trace.api.name[r.launch_row])]
        if r.reason:
            lines.append(f"{launch} replay vs capture {capture.path.rsplit('/', 1)[-1]}: {r.reason}")
            continue
        top = ", ".join(f"{op} {duration(ns)} ({k})" for op, k, ns in r.by_op[:show])
        lines.append(f"{launch} replay mapped to the capture's ops ({r.matched} of {r.kernels} kernels matched); "
                     f"ops by kernel time: {top}")
    if not lines:
        lines.append(f"--graph-capture {capture.path.rsplit('/', 1)[-1]}: the trace has no graph replay to map")
    return lines
