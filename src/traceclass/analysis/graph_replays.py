"""CUDA/HIP graph replays broken down: by kernel family, and by their repeating layer pattern.

A graph launch (``cudaGraphLaunch``/``hipGraphLaunch``) replays hundreds of kernels that no op
launched, so the trace cannot say which op each one belongs to. What it does say:

* each replayed kernel's family and precision, from its name
  (:mod:`traceclass.analysis.kernel_families`, :mod:`traceclass.analysis.kernel_precision`);
* the layer structure: a transformer replays the same kernel sequence once per layer. The
  period is the smallest ``p >= 2`` whose first run of ``p`` kernel names that repeats verbatim
  (at least twice, back to back) covers at least ``MIN_COVER`` of the replay; its positions are summarised by family, precision and mean duration over the
  repeats ("36 x [gemm bf16 65.1 µs, norm 7.9 µs, ...]"). Kernels before the first and after
  the last repeat (embedding, final norm, lm_head, sampling) are counted apart.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from traceclass.analysis.kernel_families import FAMILY_ORDER
from traceclass.analysis.kernel_precision import kernel_path
from traceclass.model import Trace

MIN_COVER = 0.5  # share of the replay's kernels the verbatim repeats must cover
MAX_PERIOD = 2_000  # kernels per layer considered


@dataclasses.dataclass(frozen=True)
class Replay:
    launch: str  # API name
    launch_row: int  # row in trace.api
    device: int
    kernels: int
    busy_ns: int  # sum of kernel durations
    by_family: tuple[tuple[str, int, int], ...]  # (family, kernels, ns), by time
    period: int  # kernels per repeating layer, 0 when none found
    repeats: int
    layer: tuple[tuple[str, float], ...]  # (family [precision], mean ns) per position of the layer
    before: int  # kernels before the first repeat
    after: int  # kernels after the last repeat


def replays(trace: Trace, family_codes: np.ndarray) -> list[Replay]:
    """One summary per graph launch that replayed kernels in the trace, in time order."""
    gpu = trace.gpu
    rows = np.flatnonzero(gpu.graph & (gpu.api >= 0)) if len(gpu) else np.zeros(0, np.int64)
    if not len(rows):
        return []
    order = rows[np.lexsort((gpu.start_ns[rows], gpu.api[rows]))]
    launches = gpu.api[order]
    cut = np.r_[0, np.flatnonzero(np.diff(launches)) + 1, len(order)]
    paths: dict[int, str] = {}
    out = []
    for lo, hi in zip(cut[:-1], cut[1:]):
        sel = order[lo:hi]
        out.append(_one(trace, family_codes, sel, int(launches[lo]), paths))
    out.sort(key=lambda r: int(trace.api.start_ns[r.launch_row]))
    return out


def _label(trace: Trace, family_codes: np.ndarray, row: int, paths: dict[int, str]) -> str:
    code = int(trace.gpu.name[row])
    if code not in paths:
        p = kernel_path(trace.strings[code])
        paths[code] = p[0] if p else ""
    fam = FAMILY_ORDER[int(family_codes[row])]
    return f"{fam} {paths[code]}".strip()


def _one(trace: Trace, family_codes: np.ndarray, sel: np.ndarray, launch_row: int, paths: dict[int, str]) -> Replay:
    gpu = trace.gpu
    dur = (gpu.end_ns[sel] - gpu.start_ns[sel]).astype(np.int64)
    fam = family_codes[sel].astype(np.int64)
    by = []
    for f in np.unique(fam).tolist():
        m = fam == f
        by.append((FAMILY_ORDER[f], int(m.sum()), int(dur[m].sum())))
    by.sort(key=lambda t: -t[2])
    names = gpu.name[sel].astype(np.int64)
    period, start, repeats = _period(names)
    layer: tuple[tuple[str, float], ...] = ()
    if period:
        block = dur[start:start + period * repeats].reshape(repeats, period).astype(np.float64).mean(axis=0)
        layer = tuple((_label(trace, family_codes, int(sel[start + j]), paths), float(block[j]))
                      for j in range(period))
    n = len(sel)
    return Replay(
        launch=trace.strings[int(trace.api.name[launch_row])], launch_row=launch_row,
        device=int(np.bincount(gpu.device[sel]).argmax()), kernels=n, busy_ns=int(dur.sum()),
        by_family=tuple(by), period=period, repeats=repeats, layer=layer,
        before=start if period else 0, after=(n - start - period * repeats) if period else 0)


def _period(names: np.ndarray) -> tuple[int, int, int]:
    """(period, start of the first repeat, number of verbatim repeats); (0, 0, 0) when none."""
    n = len(names)
    for p in range(2, min(n // 2, MAX_PERIOD) + 1):
        same = names[:-p] == names[p:]
        if float(same.mean()) < MIN_COVER / 2:  # cheap filter: too few positions repeat at p
            continue
        # first index from which p consecutive positions repeat one period later
        run = np.convolve(same.astype(np.int64), np.ones(p, dtype=np.int64), mode="valid")
        starts = np.flatnonzero(run == p)
        if not len(starts):
            continue
        s = int(starts[0])
        block = names[s:s + p]
        k = 1
        while s + (k + 1) * p <= n and np.array_equal(names[s + k * p:s + (k + 1) * p], block):
            k += 1
        if k >= 2 and k * p >= MIN_COVER * n:
            return p, s, k
    return 0, 0, 0


def describe(r: Replay, duration, max_items: int = 6) -> str:  # type: ignore[no-untyped-def]
    """One line: what the replay ran, by family and as layers, the layer's costliest positions
    first (``duration`` formats ns)."""
    fam = ", ".join(f"{f} {100.0 * ns / r.busy_ns:.0f}%" for f, _, ns in r.by_family[:4]) if r.busy_ns else ""
    text = f"{r.launch} replay, GPU {r.device}: {r.kernels} kernels, {duration(r.busy_ns)}: {fam}"
    if r.period:
        top = sorted(r.layer, key=lambda t: -t[1])[:max_items]  # the positions that cost most
        items = ", ".join(f"{lab} {duration(ns)}" for lab, ns in top)
        more = f", ... {r.period - max_items} more" if r.period > max_items else ""
        text += (f"; {r.repeats} x [{items}{more}] ({r.period} kernels per layer"
                 f"{f', {r.before} before' if r.before else ''}{f', {r.after} after' if r.after else ''})")
    else:
        text += "; no repeating layer"
    return text


def notes(trace: Trace, family_codes: np.ndarray, duration, show: int = 3) -> list[str]:  # type: ignore[no-untyped-def]
    """Report lines for the ``show`` replays with most kernel time, and a count of the rest."""
    rs = replays(trace, family_codes)
    if not rs:
        return []
    top = sorted(rs, key=lambda r: -r.busy_ns)
    out = [describe(r, duration) for r in top[:show]]
    if len(rs) > show:
        rest = top[show:]
        out.append(f"{len(rest)} more graph replays ({sum(r.kernels for r in rest)} kernels, "
                   f"{duration(sum(r.busy_ns for r in rest))} of kernel time)")
    return out
