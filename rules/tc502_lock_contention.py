"""Lock contention: threads of the program wait to acquire a lock another thread holds.

What it finds
    In a sampled CPU profile, the time threads spend blocked *acquiring* a lock: ``with lock:``
    and ``lock.acquire()`` lines, ``Lock``/``RLock``/``Semaphore`` acquire frames, and with
    ``py-spy --native`` mutex and futex waits and the GIL (``take_gil``). Lock-kind waits that
    hand off to another thread or process are not contention and are left out: ``join``,
    ``queue.get``/``put``, ``Event``/``Condition.wait``, ``future.result``, ``Popen.wait``,
    ``Connection.recv`` (a frame with such a name anywhere on the stack, or a leaf line calling
    one). Such waits are the other side's work: its hot spots (TC501) are the place to look.

    Waits are grouped by the function of the program that waits (the innermost frame outside
    the standard library and installed packages; the leaf when there is none), so a lock taken
    inside ``queue.py`` is charged to the caller. One finding per function, with each line and
    thread as evidence. The share is the summed wait against the run's length: the sampled time
    of the critical thread of the processes involved (see
    :mod:`traceclass.analysis.cpu_sites`).

    py-spy sees waits only in samples of idle threads, which it drops unless recorded with
    ``--idle``: without it the wait is under-counted and the message says so.

Why it matters
    A blocked thread does nothing: the parallelism the threads were meant to give is lost, and
    when the critical thread waits, the whole run waits. A lock held across I/O or heavy
    compute serialises every thread that needs it.

How to fix
    Hold locks briefly: copy what is needed inside the critical section and do the I/O or
    compute outside it. Split one coarse lock into finer ones, or hand work over through
    ``queue.Queue`` or per-thread buffers instead of sharing state. GIL waits (``take_gil``):
    CPU-bound Python threads take turns on one interpreter lock; move that work to processes
    (``multiprocessing``, DataLoader workers) or into native code that releases the GIL.

Example
    ``cpu_lock.py``: thread ``lock-waiter`` waits 3.06 s on ``with lock:`` at
    ``waiter (cpu_lock.py:19)``, 98.7 % of the run (306 of the main thread's 310 samples in
    ``cpu_lock.idle_threads.raw.txt``), because the main thread holds the lock for the whole
    loop. The main thread never waits for it except in its final ``join`` (4 samples), so 40 ms
    is recoverable and the finding is low: the lock costs the waiter its work, not the run its
    time.

Thresholds
    Declared with their defaults, units and reasons in ``RULE.thresholds`` (``traceclass explain TC502``).

    Recoverable time and severity: the critical thread's own wait there, plus the other threads'
    wait up to the time the critical thread spent waiting for other threads (``join``,
    ``queue.get``, ``future.result``): a blocked thread delays the run only where someone waits
    for its work. Severity is that time against the run's length (10 % / 3 % steps), so a
    worker blocked all run long behind a lock nobody waits on is reported, but low.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

import numpy as np

from traceclass.analysis import cpu_findings as cpuf
from traceclass.analysis import cpu_sites as cpus
from traceclass.analysis.frame_kinds import PRIORITY
from traceclass.rule import Context, Evidence, Family, Finding, Need, RuleInfo, Threshold, severity_for

RULE = RuleInfo(code="TC502", name="lock-contention", family=Family.CPU,
                summary="threads blocked acquiring a lock (or the GIL) that another thread holds (sampled profiles)",
                needs=(Need.SAMPLES,),
                thresholds=(
                    Threshold('min_wait_pct', 5.0, '%',
                              "the share of the run at which TensorBoard's profiler starts recommending a fix for "
                              'DataLoader time (its "> 5 % of the step" rule); the same bar for a wait. Corpus: '
                              '``lock-waiter`` 97-99 % with ``--idle``, 6.4-9 % without it (20-27 samples kept of '
                              "~300); the main thread's final ``Thread.join`` (1.3 %) is a hand-off, not counted."),
                    Threshold('min_time_ms', 200.0, 'ms',
                              "20 samples at py-spy's default 100 Hz; shorter waits are not worth a finding (applies "
                              "when the profile's time is known)."),
                    Threshold('min_samples_count', 20, 'count',
                              'fewer samples give a share with more than ~22 % relative error (1/sqrt(n)); the floor '
                              '``cpu_profile`` uses to infer idle sampling. Applies to sampled profiles.'),
                ))

FIX = ("Hold the lock briefly: copy what is needed inside the critical section and do I/O or compute outside "
       "it; split a coarse lock into finer ones, or hand work over through queue.Queue / per-thread buffers "
       "instead of shared state.")
FIX_GIL = ("GIL contention: CPU-bound Python threads take turns on the interpreter lock; move that work to "
           "processes (multiprocessing, DataLoader num_workers > 0) or to native code that releases the GIL.")


def check(ctx: Context, th: Mapping[str, Any]) -> Iterable[Finding]:
    cs = ctx.facts.cpu_sites
    if cs is None:
        return
    rows = np.flatnonzero((cs.kind == PRIORITY["lock"]) & ~cs.handoff)
    if len(rows) == 0:
        return
    keys = cpuf.function_keys(cs, cpuf.site_frames(cs, rows))
    for _, sel in cpuf.by_key(keys, rows, cs):
        value, count = int(cs.value[sel].sum()), int(cs.count[sel].sum())
        run = cpuf.run_value(cs, sel)
        share = cpuf.pct(value, run)
        if share < th["min_wait_pct"] or not cpuf.passes_floor(cs, value, count, th["min_time_ms"],
                                                                th["min_samples_count"]):
            continue
        yield _finding(cs, th, sel, value, run, share)


def _finding(cs: cpus.CpuSites, th: Mapping[str, Any], sel: np.ndarray, value: int, run: int,
             share: float) -> Finding:
    lines = cpuf.lines(cs, sel, 20)
    f0, g0, v0, _ = lines[0]
    site = cpuf.site_frames(cs, sel[:1])[0]
    function, file = cpuf.enclosing(cs.function(int(site))), cs.file(int(site))
    crit = int(cs.value[sel][cs.critical[sel]].sum())
    gil = int(cs.value[sel][cpuf.gil_mask(cs, sel)].sum())
    threads = sorted({g for _, g, _, _ in lines}, key=lambda g: -int(cs.value[sel][cs.group[sel] == g].sum()))
    who = ", ".join(cs.groups[g].label for g in threads[:3])
    who += f" and {len(threads) - 3} more" if len(threads) > 3 else ""
    inside = cpuf.where_phrase(cs, sel, lines, more=False)
    g = cs.groups[threads[0]]
    one = len(threads) == 1 and not (g.merged and (not g.main or g.label == "all threads"))
    message = (f"{who} wait{'s' if one else ''} {cs.amount(value)} to acquire a lock at "
               f"{cs.location(f0)}{inside}, {share:.1f}% of the run's {cs.amount(run)} (threshold "
               f"{th['min_wait_pct']:g}%)"
               + (f"; the critical thread waits {cs.amount(crit)} of it" if crit else
                  "; the critical thread does not wait here")
               + (f"; {cpuf.pct(gil, value):.0f}% is GIL waiting" if gil else "") + cpuf.idle_note(cs))
    evidence = tuple(
        Evidence(what=f"{cs.groups[g].label} waits at {cs.frame_label(f)}"
                      + (" (critical thread)" if cs.groups[g].critical else ""),
                 duration_ns=cs.ns(v), count=cs.samples(v), source=cs.location(f),
                 values={"wait_value": v, "wait_pct_of_thread": round(cpuf.pct(v, cs.groups[g].value), 2),
                         "critical_thread": cs.groups[g].critical})
        for f, g, v, _ in lines
    )
    # other threads' waits shorten the run only where the critical thread waits for them
    handoff = sum(g.handoff for g in cs.groups if g.critical and g.pid in {cs.groups[x].pid for x in threads})
    recoverable = crit + min(value - crit, handoff)
    ns = cs.ns(value)
    rec_ns = cs.ns(recoverable)
    return Finding(
        severity=severity_for(recoverable, run), message=message,
        recoverable_ns=rec_ns or 0,
        estimate=(f"upper bound: the critical thread's wait on this lock ({cs.amount(crit)}) plus the other threads' "
                  f"wait ({cs.amount(value - crit)}) up to the time the critical thread waited for other threads "
                  f"(join, queue.get, future.result: {cs.amount(handoff)}); blocked threads off the critical path do "
                  "not make the run longer. Time: " + cs.time_basis
                  + ("" if ns is not None else "; no time, so recoverable_ns is 0")),
        fix=FIX_GIL if gil * 2 > value else FIX,
        location=f"{function} ({file})" if file else function,
        evidence=evidence,
        values={"function": function, "file": file, "line": cs.line(f0), "wait_ns": ns, "wait_value": value,
                "unit": cs.unit, "samples_count": cs.samples(value), "wait_pct_of_run": round(share, 2),
                "critical_wait_ns": cs.ns(crit), "critical_handoff_ns": cs.ns(handoff), "gil_wait_ns": cs.ns(gil),
                "threads_count": len(threads), "includes_idle": cs.includes_idle,
                "threshold_pct": th["min_wait_pct"], "time_basis": cs.time_basis},
    )
