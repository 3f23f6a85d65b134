"""Host-bound: the step's thread works on the host between GPU bursts while the GPU idles.

What it finds
    The GPU idle that the shared idle attribution (:mod:`traceclass.facts.idle_causes`) gives
    to ``host-work``: stretches of at least 1 ms in which the thread that launches the next GPU
    work is busy in ops, Python or runtime calls (not in a sync, a data range, a collective or
    initialisation), whatever its ranges are called: preprocessing before the first kernel of a
    step, Python between two bursts of kernels, post-processing after the last one. Per device:
    the total, its share of the analysed time, the number of stretches, and the top functions by
    self time inside them: Python functions with ``file:line`` when the trace has stacks
    (``with_stack``), else ops, else ``record_function`` ranges.

Why it matters
    While the host works serially the GPU has nothing queued: the step takes host time plus GPU
    time instead of the larger of the two. A faster GPU does not help; a faster or overlapped host
    does. HF pipelines spend most of a step decoding and resizing the input in Python before the
    first kernel (corpus h100_timesformer_inference: ~218 ms of a 383 ms step).

How to fix
    Move the host work off the step's thread and overlap it with the GPU: a DataLoader with
    workers (or a thread/process pool) for decode and resize, the preprocessing of input N+1 while
    the GPU runs input N, vectorised or GPU preprocessing (torchvision v2 on tensors, DALI,
    ``torch.nn.functional.interpolate`` instead of ``scipy.ndimage.zoom``); the functions listed
    are where the time goes.

Example
    Corpus h100_timesformer_inference: GPU 0 idles 218 ms of the 383 ms step while the host runs
    ``video_classification.py preprocess``: ``image_transforms.py normalize`` 105 ms self time,
    ``numpy astype`` 30 ms, ``read_video_pyav`` 24 ms.

Thresholds
    Declared with their defaults, units and reasons in ``RULE.thresholds`` (``traceclass explain TC205``).

    Severity: the host-work idle against the analysed time, on the shared scale (an upper bound:
    overlapping the host work with the GPU hides at most the GPU idle it causes). No other rule
    claims this time. Location: the top function (else op or range), never a device index.
"""

from __future__ import annotations

import re
from typing import Any, Iterable, Mapping

import numpy as np

from traceclass import units
from traceclass.facts import idle_causes as ic
from traceclass.analysis.locations import device_tag
from traceclass.analysis.source_lines import parse_frame
from traceclass.rule import Context, Evidence, Family, Finding, Need, RuleInfo, Threshold, plural

RULE = RuleInfo(code="TC205", name="host-bound", family=Family.CPU,
                summary="the GPU idles while the step's thread works on the host (preprocessing, Python between bursts)",
                needs=(Need.GPU,),
                thresholds=(
                    Threshold('min_share_pct', 3.0, '%',
                              'reported from 3 % of the analysed time, the ``medium`` line of the shared severity '
                              'scale; below it host phases are the normal cost of a Python loop.'),
                ))

EVIDENCE_ROWS = 20
_ADDRESS = re.compile(r" (of|at) 0x[0-9a-fA-F]+>?")


def function_label(name: str) -> str:
    """``pkg/mod.py(12): f`` -> ``f (pkg/mod.py:12)``; builtins without their object address."""
    p = parse_frame(name)
    if p is not None:
        return f"{p[2]} ({p[0]}:{p[1]})"
    return _ADDRESS.sub(lambda m: ">" if m.group(0).endswith(">") else "", name)


def top_functions(ctx: Context, sel: np.ndarray, limit: int = 5) -> list[tuple[str, int]]:
    merged: dict[str, int] = {}
    for n, v in ic.host_frames(ctx.trace, ctx.idle, sel):
        label = function_label(n)
        merged[label] = merged.get(label, 0) + v
    return sorted(merged.items(), key=lambda kv: (-kv[1], kv[0]))[:limit]


def check(ctx: Context, th: Mapping[str, Any]) -> Iterable[Finding]:
    seg = ctx.idle
    if len(seg) == 0 or ctx.analysed_ns <= 0:
        return
    devices = seg.devices
    for dev in devices:
        sel = np.flatnonzero(seg.mask(ic.HOST_WORK, dev))
        total = int(seg.length_ns[sel].sum())
        share = 100.0 * total / ctx.analysed_ns
        if total <= 0 or share < th["min_share_pct"]:
            continue
        yield _finding(ctx, th, dev, device_tag(dev, devices), sel, total, share)


def _finding(ctx: Context, th: Mapping[str, Any], dev: int, tag: str, sel: np.ndarray, total: int,
             share: float) -> Finding:
    seg = ctx.idle
    top = top_functions(ctx, sel)
    idle = seg.idle_ns(dev)
    where = ic.covering_label(ctx.trace, seg, sel)
    lengths = seg.length_ns[sel]
    by_where: dict[str, int] = {}
    where = [function_label(w) if w else "" for w in where]
    for w, n in zip(where, lengths.tolist()):
        by_where[w or "(no range)"] = by_where.get(w or "(no range)", 0) + n
    first = sorted(by_where.items(), key=lambda kv: -kv[1])[0][0]
    fn = ", ".join(f"{n} {units.duration(v)}" for n, v in top[:3]) or "no op, range or Python frame recorded"
    n_steps = max(ctx.analysed.steps_count, 1)
    per = "" if ctx.analysed.synthetic else f", {units.duration(total / n_steps)} per step"
    message = (f"GPU {dev} idles {units.duration(total)} ({units.pct(share)} of {ctx.time_word}, threshold "
               f"{units.pct(th['min_share_pct'], None)}; {units.share(total, idle)} of its idle{per}) in {plural(len(sel), 'stretch', 'stretches')} while the "
               f"step's thread works on the host, mostly in {first}; top functions by self time: {fn}")
    order = np.argsort(-lengths, kind="stable")[:EVIDENCE_ROWS]
    evidence = []
    for i in order.tolist():
        r = int(sel[i])
        evidence.append(Evidence(
            what=f"{units.duration(lengths[i])} of host work before the next GPU work, in {where[i] or '(no range)'}",
            start_ns=int(seg.start_ns[r]), end_ns=int(seg.end_ns[r]), duration_ns=int(lengths[i]),
            values={"range": where[i], "next_kernel": ctx.trace.strings[int(ctx.trace.gpu.name[seg.next_row[r]])]
                    if seg.next_row[r] >= 0 else None}))
    site = top[0][0] if top else first
    location = f"host work in {site}{tag}"
    return Finding(
        # the title names where the host work happens (the covering range or frame); the top
        # self-time functions are the detail inside it, listed in the message
        title=f"Overlap the host work in {first if first != '(no range)' else site} with the GPU",
        severity=ctx.severity(total), message=message, recoverable_ns=total,
        estimate=("GPU idle attributed to host work in the shared idle attribution (the launching thread busy for "
                  "most of a stretch of at least 1 ms, no sync, data range, collective or initialisation): what "
                  "overlapping that work with the GPU would hide at most; no other rule claims it. Severity: share "
                  "of the analysed time."),
        fix=("Overlap host work with the GPU: preprocess input N+1 in a DataLoader worker / thread pool while the GPU "
             "runs input N; vectorise or move decode/resize to the GPU; start with the functions listed."),
        location=location, evidence=tuple(evidence),
        values={"idle_cause": "host-work", "host_work_idle_ns": total, "share_pct": round(share, 3),
                "idle_ns": idle, "stretches_count": int(len(sel)), "threshold_pct": th["min_share_pct"],
                "top_functions_ns": dict(top), "ranges_ns": dict(sorted(by_where.items(), key=lambda kv: -kv[1])[:10]),
                "analysed_ns": ctx.analysed_ns},
    )
