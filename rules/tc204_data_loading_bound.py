"""TC204 data-loading-bound: the training loop waits for its next batch.

What it finds
    The share of the steady-state step time that the thread running the steps spends in data
    loading: DataLoader ranges (torch.profiler's ``enumerate(DataLoader)#..._DataLoaderIter.__next__``)
    and user ranges (``record_function``, NVTX) whose names say data, load, batch, prefetch,
    collate, input or preprocess (``data_stage_regex``), nested ranges counted once
    (``analysis/data_loading.py``). Ranges on other threads (a prefetch thread) overlap the step
    instead of delaying it and are left out. Works on CPU-only and GPU traces; on GPU traces it
    also measures how long each GPU sat idle inside those ranges. One finding per trace; the
    evidence lists each data site (DataLoader, each named stage) with its count, time, time per
    step and the source line that opens it; ``per_step`` in the values has every steady step.

Why it matters
    While the loop waits for data, nothing else of the step runs: with a GPU the device idles
    (TC202 sees the same time as ``data-loading`` gaps), on a CPU the model waits. A DataLoader
    with ``num_workers=0`` decodes, augments and collates every batch on the training thread; with
    too few workers the loop still waits for them. TensorBoard's profiler advises more workers
    when the DataLoader takes more than 5 % of the step.

How to fix
    Move the work off the training thread: ``DataLoader(num_workers=N)`` (start near the number
    of free cores), ``persistent_workers=True`` (no worker start-up per epoch),
    ``prefetch_factor`` 2-4 batches per worker, ``pin_memory=True`` on GPU runs (then
    ``.to(device, non_blocking=True)``); move decode and augmentation into the Dataset (run by the
    workers) or onto the GPU (DALI, torchvision v2 on tensors); cache decoded samples; for
    pipelines named like TorchRec's ``sparse_data_dist``, overlap the input distribution with
    the previous batch's compute.

Example
    sample_traces/torch_cpu_dataloader.json.gz: ``DataLoader(num_workers=0)`` whose
    ``__getitem__`` decompresses each sample and converts it in Python: ``stage:data`` (with the
    DataLoader's ``__next__`` inside) takes 40.68 ms of the two steady steps' 61.58 ms, 66.1 %,
    more than forward, backward and optimizer together. Corpus mixed_stack (2 workers on 2 cores):
    ``stage:dataload`` 24.67 ms and ``stage:preprocess`` 13.39 ms of 1.82 s, 2.09 % together.

Thresholds
    Declared with their defaults, units and reasons in ``RULE.thresholds`` (``traceclass explain TC204``).

    Recoverable time: on GPU traces the idle the shared idle attribution
    (:mod:`traceclass.facts.idle_causes`) gives to ``data-loading`` (the launching thread in a
    data range for most of the host window before the next launch), on the most affected
    device; on CPU-only traces the data time itself. An upper bound: workers still hand over
    each batch (unpickling, ``pin_memory``), typically well under a millisecond per batch. No
    other rule claims that idle (TC202 names it). The GPU idle inside the data ranges is shown
    as well, but much of it can be the GPU waiting inside a graph replay or on a collective:
    corpus a100_train_rank0_of16 spends 74 % of the step in data ranges (TorchRec's input
    all-to-all in ``sparse_data_dist``, which TC701 reports) with 388 ms of GPU idle in them, of
    which 6.68 ms is data loading by the attribution.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

import numpy as np

from traceclass import timeline as tl
from traceclass.facts import idle_causes as ic
from traceclass.analysis.data_loading import data_ranges
from traceclass.analysis.sites import duration_text
from traceclass.analysis.source_lines import source_for_points
from traceclass.model import AnnotationKind, GpuKind
from traceclass.rule import Context, Evidence, Family, Finding, RuleInfo, Threshold, plural

RULE = RuleInfo(code="TC204", name="data-loading-bound", family=Family.DATA,
                summary="the step loop waits for data: DataLoader and data/preprocess ranges, share of step time",
                thresholds=(
                    Threshold('min_share_pct', 1.0, '%',
                              'reported from 1 % of the steady step time, the spread between steady steps in the corpus '
                              'training traces (0.4-2.3 %), below which a change cannot be told from noise. TensorBoard '
                              'advises more workers from 5 %; the fix here is a line of configuration, so the rule '
                              'speaks earlier and leaves the weight to severity (``medium`` from 3 %, ``high`` from 10 '
                              '% and 1 ms, on the shared scale).'),
                    Threshold('data_stage_regex', '(?i)(^|[^a-z])(data|load|batch|prefetch|collate|input|preprocess)', 'regex',
                              'the words TC202 already treats as data loading in range names (data, load, batch, '
                              'prefetch, collate, input) plus preprocess, each at the start of the name or after a '
                              'non-letter, so ``stage:dataload`` and ``## load_batch ##`` match and '
                              '``DistributedDataParallel.forward`` or ``offload`` do not; set it to match your own '
                              'stage names (Python ``re`` syntax).'),
                ))

FIX = ("Load data off the step's thread: DataLoader(num_workers=N, persistent_workers=True, prefetch_factor=2-4, "
       "pin_memory=True on GPU runs) with .to(device, non_blocking=True); move decode and augmentation into the "
       "Dataset (run by the workers) or onto the GPU; cache decoded samples.")


def check(ctx: Context, th: Mapping[str, Any]) -> Iterable[Finding]:
    trace = ctx.trace
    analysed = ctx.analysed_ns
    if analysed <= 0 or len(trace.annotations) == 0:
        return
    dr = data_ranges(trace, th["data_stage_regex"])
    if len(dr.rows) == 0:
        return
    data = ctx.analysed.clip(dr.union)
    total = tl.total(data)
    share = 100.0 * total / analysed
    if total <= 0 or share < th["min_share_pct"]:
        return
    yield _finding(ctx, th, dr, data, total, share)


def _finding(ctx: Context, th: Mapping[str, Any], dr: Any, data: tl.Intervals, total: int, share: float) -> Finding:
    analysed = ctx.analysed_ns
    idle = _gpu_idle(ctx, data)
    steps = _per_step(ctx, data)
    n_steps = max(len(steps), 1)
    sites, outer = _sites(ctx, dr)
    # on GPU traces: the data-loading part of the shared idle attribution (the idle no other
    # rule claims), on the most affected device; on CPU traces the data time itself
    claimed = {d: ctx.idle.total(ic.DATA_LOADING, d) for d in idle}
    recoverable = max(claimed.values()) if claimed else total
    gpu_text = "".join(f"; GPU {d} idle {duration_text(ns)} of it ({100.0 * ns / total:.1f}%)"
                       for d, ns in idle.items())
    top = ", ".join(f"{e.values['site']} {duration_text(e.duration_ns)}" for e in sites[:3])
    steps_text = "whole trace, no steps" if ctx.analysed.synthetic else \
        f"{plural(len(steps), 'step')}, {duration_text(total / n_steps)} per step"
    message = (f"data loading on the main thread took {duration_text(total)} of the {duration_text(analysed)} "
               f"{ctx.time_word} ({share:.1f}%, threshold {th['min_share_pct']}%; {steps_text}): {top}{gpu_text}")
    if idle:
        estimate = ("GPU idle attributed to data loading in the shared idle attribution (the host thread that "
                    "launches the next work was in a data range for most of the idle), on the most affected device: "
                    "what the loop's wait cost the GPU; an upper bound, a worker still hands each batch over. No other "
                    "rule claims this time (TC202 points here); TC701 reports the collectives that run inside data "
                    "ranges (an input all-to-all). Severity: share of the analysed time.")
    else:
        estimate = ("time in the data ranges of the steady steps (no GPU in the trace: the loop waited this long); an "
                    "upper bound, a worker still hands each batch over. Severity: share of the analysed time.")
    return Finding(
        severity=ctx.severity(recoverable), message=message,
        recoverable_ns=int(recoverable), estimate=estimate, fix=FIX,
        location="data loading: " + " + ".join(outer), evidence=tuple(sites),
        values={"data_ns": total, "analysed_ns": analysed, "share_pct": round(share, 3),
                "threshold_pct": th["min_share_pct"], "steps_count": len(steps),
                "data_per_step_ns": total // n_steps, "idle_cause": "data-loading" if idle else None,
                "claimed_idle_ns": {str(d): ns for d, ns in claimed.items()}, "gpu_idle_in_data_ns": {str(d): ns for d, ns in idle.items()},
                "threads": [f"{p}/{t}" for p, t in dr.threads], "per_step": steps[:50]},
    )


def _gpu_idle(ctx: Context, data: tl.Intervals) -> dict[int, int]:
    """Per GPU active in the analysed time: its idle time inside the data ranges."""
    gpu = ctx.trace.gpu
    if not len(gpu):
        return {}
    out = {}
    in_time = ctx.gpu_analysed
    for dev in np.unique(gpu.device[in_time]).tolist():
        on = (gpu.device == dev) & (gpu.kind != GpuKind.SYNC)
        busy = tl.merge(gpu.start_ns[on], gpu.end_ns[on])
        out[int(dev)] = tl.total(data) - tl.total(tl.intersect(data, busy))
    return out


def _per_step(ctx: Context, data: tl.Intervals) -> list[dict[str, Any]]:
    at = ctx.analysed
    ann = ctx.trace.annotations
    is_step = np.flatnonzero(ann.kind == AnnotationKind.STEP)
    names = {int(ann.start_ns[r]): ctx.trace.strings[int(ann.name[r])] for r in is_step.tolist()}
    s, e = at.step_start_ns, at.step_end_ns
    inside = tl.overlap_each(s, e, data)
    return [{"step": names.get(int(a), "(whole trace)"), "wall_ns": int(b - a), "data_ns": int(d),
             "share_pct": round(100.0 * d / (b - a), 2) if b > a else 0.0}
            for a, b, d in zip(s.tolist(), e.tolist(), inside.tolist())]


def _sites(ctx: Context, dr: Any) -> tuple[list[Evidence], list[str]]:
    """Evidence per site, most time first, and the names for the location: the (up to) three
    outermost sites with the most time, alphabetically."""
    trace = ctx.trace
    ann = trace.annotations
    at = ctx.analysed
    out = []
    for name in sorted(set(dr.site.tolist())):
        rows = dr.rows[dr.site == name]
        steady = rows[at.holds(ann.start_ns[rows])] if not at.synthetic else rows
        if not len(steady):
            continue
        iv = at.clip(tl.merge(ann.start_ns[rows], ann.end_ns[rows]))
        time = tl.total(iv)
        src = source_for_points(trace, ann.pid[steady[:1]], ann.tid[steady[:1]], ann.start_ns[steady[:1]])[0] \
            if len(trace.python) else None
        full = sorted({trace.strings[int(c)] for c in ann.name[rows].tolist()})
        out.append(Evidence(
            what=f"{name}: {plural(len(steady), 'range')} in the steady steps, {duration_text(time)}"
                 + (f" ({', '.join(full)[:120]})" if name == "DataLoader" else ""),
            start_ns=int(ann.start_ns[steady].min()), end_ns=int(ann.end_ns[steady].max()), duration_ns=time,
            count=len(steady), source=src,
            values={"site": name, "ranges_count": len(steady), "time_ns": time, "names": full[:10],
                    "outermost": bool(dr.outermost[dr.site == name].any())}))
    out.sort(key=lambda e: (-(e.duration_ns or 0), e.values["site"]))
    outer = sorted(e.values["site"] for e in out if e.values["outermost"])
    ranked = [e.values["site"] for e in out if e.values["outermost"]][:3]
    return out, [n for n in outer if n in ranked]
