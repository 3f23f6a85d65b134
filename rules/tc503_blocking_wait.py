"""Blocking wait: the critical thread sleeps or waits on file or socket I/O.

What it finds
    In a sampled CPU profile, the time the *critical thread* of each process spends in
    ``time.sleep`` (and ``nanosleep``, ``asyncio.sleep``) or in blocking file and socket I/O
    (``open``/``read``/``write``/``fsync``, ``recv``/``send``/``select``, ``requests``,
    ``np.load``...; kinds from :mod:`traceclass.analysis.frame_kinds`). The critical thread is
    the main thread (named ``MainThread``, tid = pid, or the stacks not started by
    ``threading.Thread``): AI programs run their loop there and feed it from DataLoader
    workers, pin-memory and logging threads, whose sleeping and I/O is what they are for and
    costs the run nothing. When the main thread mostly hands off (``join``, ``queue.get``,
    ``future.result``) the thread with the most on-CPU time is critical instead (see
    :mod:`traceclass.analysis.cpu_sites`).

    Waits are grouped by the program's function that waits (innermost frame outside the
    standard library and installed packages) and by kind (sleep or I/O): one finding each, with
    the lines as evidence. I/O under a DataLoader or decoding stack is data loading (TC506);
    waits for another thread (``queue.get``, ``join``) are hand-offs and not counted here.

    py-spy records waiting threads only with ``--idle``; without it most of the wait is missing
    and the message says so.

Why it matters
    While the critical thread sleeps or waits for a disk or the network, nothing else moves the
    run forward: the wait adds to the run's time one for one. Sleeps used for polling or pacing
    are often pure waste; I/O can usually overlap with compute.

How to fix
    Sleep: wait on what you need (``threading.Event``, ``Condition``, a queue, a future) instead
    of polling with ``time.sleep``; keep retry back-off short and bounded; move pacing loops to
    a background thread. I/O: take it off the critical thread: DataLoader ``num_workers > 0``
    with ``pin_memory=True``, a prefetching thread or ``asyncio``; read and write in large
    batches, buffer writes and ``fsync`` less often (checkpoints: save asynchronously), cache
    remote data locally, pipeline network requests.

Example
    ``sleep_io.py`` (one thread, recorded with ``--idle``): ``do_sleep (sleep_io.py:6)``
    sleeps 58 % of the run (161 of 276 samples in ``sleep_io.idle.raw.txt``) and
    ``do_socket_wait (sleep_io.py:17)`` waits on a socket 34 % (95 samples). In ``cpu_lock.py``
    the thread ``sleeper-io`` sleeps and does I/O all the time, but it is not the critical
    thread (the main thread computes), so nothing is reported.

Thresholds
    Declared with their defaults, units and reasons in ``RULE.thresholds`` (``traceclass explain TC503``).

    Severity: the wait against the critical thread's sampled time (10 % / 3 % steps).
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

import numpy as np

from traceclass.analysis import cpu_findings as cpuf
from traceclass.analysis import cpu_sites as cpus
from traceclass.rule import Context, Evidence, Family, Finding, Need, RuleInfo, Threshold, severity_for

RULE = RuleInfo(code="TC503", name="blocking-wait", family=Family.CPU,
                summary="the critical thread sleeps or waits on file/socket I/O (sampled profiles)",
                needs=(Need.SAMPLES,),
                thresholds=(
                    Threshold('min_wait_pct', 5.0, '%',
                              "the share of the run at which TensorBoard's profiler starts recommending a fix for "
                              'DataLoader time (its "> 5 % of the step" rule); the same bar for a wait on the critical '
                              "thread. Corpus (``--idle`` recordings): sleep_io's sleep 58-66 %, its socket wait 26-34 "
                              '%, its disk I/O function 7-8 %.'),
                    Threshold('min_time_ms', 200.0, 'ms',
                              "20 samples at py-spy's default 100 Hz (applies when the profile's time is known)."),
                    Threshold('min_samples_count', 20, 'count',
                              'fewer samples give a share with more than ~22 % relative error (1/sqrt(n)); the floor '
                              '``cpu_profile`` uses to infer idle sampling. It keeps ``sleep_io.default`` (12 samples '
                              'kept of a 3 s run without ``--idle``) silent.'),
                ))

KINDS = ("sleep", "io")
VERB = {"sleep": "sleeps", "io": "waits on file or socket I/O"}
NOUN = {"sleep": "Sleeping", "io": "Waiting on file or socket I/O"}
FIXES = {
    "sleep": "Do not poll with time.sleep on the critical thread: wait on what is needed (threading.Event, "
             "Condition, a queue or future), keep retry back-off short and bounded, move pacing loops to a "
             "background thread.",
    "io": "Take the I/O off the critical thread: DataLoader num_workers > 0 with pin_memory=True, a prefetching "
          "thread or asyncio; read/write in large batches, buffer writes and fsync less often (save checkpoints "
          "asynchronously), cache remote data locally, pipeline network requests.",
}


def check(ctx: Context, th: Mapping[str, Any]) -> Iterable[Finding]:
    cs = ctx.facts.cpu_sites
    if cs is None:
        return
    for sel, value, run, share in cpuf.critical_sites(cs, KINDS, th["min_wait_pct"], th["min_time_ms"],
                                                      th["min_samples_count"]):
        yield _finding(cs, th, sel, value, run, share)


def _finding(cs: cpus.CpuSites, th: Mapping[str, Any], sel: np.ndarray, value: int, run: int,
             share: float) -> Finding:
    kind = cpus.KIND_CODES[int(cs.kind[sel[0]])]
    lines = cpuf.lines(cs, sel, 20)
    f0, g0, _, _ = lines[0]
    site = int(cpuf.site_frames(cs, sel[:1])[0])
    function, file = cpuf.enclosing(cs.function(site)), cs.file(site)
    where = cpuf.where_phrase(cs, sel, lines)
    message = (f"{NOUN[kind]} on {cpuf.critical_phrase(cs.groups[g0])}: {cs.amount(value)} in {function} at "
               f"{cs.location(f0)}{where}, {share:.1f}% of its {cs.amount(run)} (threshold "
               f"{th['min_wait_pct']:g}%)" + cpuf.idle_note(cs))
    evidence = tuple(
        Evidence(what=f"{cs.groups[g].label} {VERB[kind]} at {cs.frame_label(f)}", duration_ns=cs.ns(v),
                 count=cs.samples(v), source=cs.location(f),
                 values={"wait_value": v, "wait_pct_of_thread": round(cpuf.pct(v, cs.groups[g].value), 2)})
        for f, g, v, _ in lines
    )
    ns = cs.ns(value)
    return Finding(
        severity=severity_for(value, run), message=message, recoverable_ns=ns or 0,
        estimate=("upper bound: the critical thread's time in these waits; a sleep can go entirely, I/O moved off "
                  "the critical thread overlaps with compute only as far as the disk or network keeps up. Time: "
                  + cs.time_basis + ("" if ns is not None else "; no time, so recoverable_ns is 0")),
        fix=FIXES[kind], location=f"{function} ({file}) {kind}" if file else f"{function} {kind}",
        evidence=evidence,
        values={"function": function, "file": file, "line": cs.line(f0), "kind": kind, "wait_ns": ns,
                "wait_value": value, "unit": cs.unit, "samples_count": cs.samples(value),
                "wait_pct_of_run": round(share, 2), "includes_idle": cs.includes_idle,
                "threshold_pct": th["min_wait_pct"], "time_basis": cs.time_basis},
    )
