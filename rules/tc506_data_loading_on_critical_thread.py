"""Data loading on the critical thread: the loop decodes, transforms or waits for its input.

What it finds
    In a sampled CPU profile, the time the critical thread of each process spends in data
    loading and decoding: stacks through ``torch/utils/data`` (DataLoader, datasets, samplers,
    collate), PIL, OpenCV, imageio, decord, av, tokenizers, ``transformers`` tokenizers,
    webdataset, torchdata, ``torchvision.io``/``datasets``/``transforms``, Hugging Face
    ``datasets``, and leaf lines calling ``Image.open``, ``cv2.imread``, a tokenizer, ``decode_jpeg``
    (kinds from :mod:`traceclass.analysis.frame_kinds`). The critical thread is the main thread
    unless it mostly hands off to another thread (see :mod:`traceclass.analysis.cpu_sites`).

    Each finding splits the time in two by the innermost frame: *waiting* (the leaf is a lock,
    queue, sleep or I/O wait: the DataLoader's ``_data_queue.get``, a file read) means the
    workers or the storage do not keep up; the rest is *work on this thread* (decoding,
    augmenting, tokenizing, collating: ``num_workers=0``, or transforms applied in the loop).
    Grouped by the program's function that loads (innermost frame outside the standard library
    and installed packages: the ``for batch in loader`` line), one finding each.

Why it matters
    Every millisecond the training or inference loop spends getting its next batch is a
    millisecond the model (and the GPU) waits. TensorBoard's PyTorch profiler plugin flagged
    DataLoader time above 5 % of the step for exactly this reason.

How to fix
    Work on this thread: set DataLoader ``num_workers > 0`` so decoding and augmentation run in
    worker processes, with ``persistent_workers=True`` and ``pin_memory=True``; pre-tokenize or
    pre-decode the dataset offline; use faster decoders (``torchvision.io.decode_jpeg`` on the
    GPU, Pillow-SIMD, DALI). Waiting for workers: more ``num_workers`` (up to the free cores),
    a larger ``prefetch_factor``, cheaper per-item work, faster or cached storage, and
    ``torch.set_num_threads(1)`` inside workers so they do not oversubscribe the cores.

Example
    ``tests/data/pyspy/loader_json.py``, a loop over ``DataLoader(Items(), num_workers=0)``
    whose dataset builds each item in Python: 24.8 % of the main thread's samples (212 of 856)
    in ``Items.__getitem__ (loader_json.py:12-13)``, all of it work on the thread, none waiting:
    ``num_workers > 0`` moves it to worker processes.

Thresholds
    Declared with their defaults, units and reasons in ``RULE.thresholds`` (``traceclass explain TC506``).

    Severity: the time against the critical thread's sampled time (10 % / 3 % steps).
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

import numpy as np

from traceclass.analysis import cpu_findings as cpuf
from traceclass.analysis import cpu_sites as cpus
from traceclass.rule import Context, Evidence, Family, Finding, Need, RuleInfo, Threshold, severity_for

RULE = RuleInfo(code="TC506", name="data-loading-on-critical-thread", family=Family.CPU,
                summary="the critical thread decodes, transforms or waits for its input data (sampled profiles)",
                needs=(Need.SAMPLES,),
                thresholds=(
                    Threshold('min_share_pct', 5.0, '%',
                              "TensorBoard's PyTorch profiler recommended more DataLoader workers when DataLoader time "
                              'exceeded 5 % of the step (``reference/peers.md`` section 4). None of the shared corpus '
                              'workloads load data (0 % in every file); the recording in ``tests/data/pyspy`` 24.8 %.'),
                    Threshold('min_time_ms', 200.0, 'ms',
                              "20 samples at py-spy's default 100 Hz (applies when the profile's time is known)."),
                    Threshold('min_samples_count', 20, 'count',
                              'fewer samples give a share with more than ~22 % relative error (1/sqrt(n)); the floor '
                              '``cpu_profile`` uses to infer idle sampling. Applies to sampled profiles.'),
                ))

FIX_WORK = ("Decode and augment in worker processes: DataLoader num_workers > 0 with persistent_workers=True and "
            "pin_memory=True; pre-tokenize or pre-decode offline; faster decoders (torchvision.io.decode_jpeg on the "
            "GPU, Pillow-SIMD, DALI).")
FIX_WAIT = ("The input pipeline does not keep up: more DataLoader num_workers (up to the free cores), a larger "
            "prefetch_factor, cheaper per-item work, faster or cached storage, torch.set_num_threads(1) in workers "
            "so they do not oversubscribe the cores.")


def check(ctx: Context, th: Mapping[str, Any]) -> Iterable[Finding]:
    cs = ctx.facts.cpu_sites
    if cs is None:
        return
    for sel, value, run, share in cpuf.critical_sites(cs, ("data",), th["min_share_pct"], th["min_time_ms"],
                                                      th["min_samples_count"]):
        yield _finding(cs, th, sel, value, run, share)


def _finding(cs: cpus.CpuSites, th: Mapping[str, Any], sel: np.ndarray, value: int, run: int,
             share: float) -> Finding:
    lines = cpuf.lines(cs, sel, 20)
    f0, g0, _, _ = lines[0]
    site = int(cpuf.site_frames(cs, sel[:1])[0])
    function, file = cpuf.enclosing(cs.function(site)), cs.file(site)
    waiting = int(cs.value[sel][cs.leaf_waits[sel]].sum())
    work = value - waiting
    where = cpuf.where_phrase(cs, sel, lines, prefix="mostly in")
    message = (f"Data loading on {cpuf.critical_phrase(cs.groups[g0])}: {cs.amount(value)} in {function} at "
               f"{cs.location(f0)}{where}, {share:.1f}% of its {cs.amount(run)} (threshold "
               f"{th['min_share_pct']:g}%); {cs.amount(work)} decoding/transforming on this thread, "
               f"{cs.amount(waiting)} waiting for workers or storage"
               + (cpuf.idle_note(cs) if waiting else cpuf.timed_note(cs)))
    evidence = tuple(
        Evidence(what=f"{cs.groups[g].label} loads data at {cs.frame_label(f)}", duration_ns=cs.ns(v),
                 count=cs.samples(v), source=cs.location(f),
                 values={"value": v, "pct_of_thread": round(cpuf.pct(v, cs.groups[g].value), 2)})
        for f, g, v, _ in lines
    )
    ns = cs.ns(value)
    return Finding(
        severity=severity_for(value, run), message=message, recoverable_ns=ns or 0,
        estimate=("upper bound: the critical thread's time loading data here; worker processes remove it from the "
                  "critical path only as far as they keep up with the loop. Time: " + cs.time_basis
                  + ("" if ns is not None else "; no time, so recoverable_ns is 0")),
        fix=FIX_WAIT if waiting > work else FIX_WORK,
        location=f"{function} ({file})" if file else function, evidence=evidence,
        values={"function": function, "file": file, "line": cs.line(f0), "time_ns": ns, "value": value,
                "work_ns": cs.ns(work), "waiting_ns": cs.ns(waiting), "unit": cs.unit,
                "samples_count": cs.samples(value), "pct_of_run": round(share, 2),
                "threshold_pct": th["min_share_pct"], "time_basis": cs.time_basis},
    )
