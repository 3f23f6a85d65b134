"""Dominant hot spot: one source line holds a large share of a thread's on-CPU time.

What it finds
    In a sampled CPU profile (py-spy, speedscope, collapsed stacks, nsys CPU samples), the lines
    whose *self* time (samples where the line is the innermost frame) makes up at least
    ``min_self_pct`` of one thread's on-CPU time after start-up. On-CPU time is every sample
    with a stack that is not a lock, sleep or I/O wait (kinds from
    :mod:`traceclass.analysis.frame_kinds`); import and start-up samples are left out of both
    sides (TC505 reports them), so a short run's imports do not hide the loop's hot line. A
    sample whose innermost frame waits (a queue read under the DataLoader) is not on-CPU either.

    Compute kinds count as hot spots: Python compute, native/extension compute, native/other code
    (frames that are not Python), allocation and copying, garbage collection; and on threads that
    are not critical (DataLoader workers, writer threads) also data loading and serialization,
    which TC504/TC506 report only on the critical threads. Waits are TC502/TC503.

    Lines without source. A Python line whose text was not found (kind ``unverified``: blocked or
    computing) is neither on-CPU nor waiting; a thread with such time is measured against its
    on-CPU time *plus* that time, and a finding at such a line says "time at this line, on-CPU or
    blocked" and asks for ``--source-root``, never "on-CPU time". Lines the profile shows to be
    waits (``blocked``, see :mod:`traceclass.analysis.cpu_profile`) are not hot spots. Each finding is one line (``function (file:line)``), with the threads where it
    dominates and, when the line is library code (``torch/nn/modules/linear.py``), the line of
    the program that calls it.

Why it matters
    A line with a third of a thread's time caps what optimising everything else can give
    (Amdahl: at most 1.5x) and is usually the cheapest place to win: a pure-Python loop
    vectorised with numpy or torch runs 10-100x faster. With the GIL, Python compute in any
    thread also delays every other Python thread.

How to fix
    Python compute: vectorise (numpy/torch over whole arrays), move the loop to compiled code
    (``torch.compile``, numba, Cython), cache results, call it less often. Native compute (time
    in torch/numpy's C code called from the line): check the work is needed (shapes, batch,
    dtype), ``torch.get_num_threads()`` against physical cores (``torch.set_num_threads``;
    oversubscription with DataLoader workers), use ``py-spy record --native`` to see the C
    functions. Allocation and copying: preallocate and reuse buffers, in-place ops, no
    ``.tolist()``/``.numpy()``/``.clone()`` per item. Garbage collection: fewer container
    objects, ``gc.freeze()`` after start-up, higher ``gc.set_threshold``.

Example
    ``cpu_lock.py``: ``fib (cpu_lock.py:8)`` holds 76 % of MainThread's on-CPU samples
    (234 of 306 in ``cpu_lock.idle_threads.raw.txt``): recursive Python, the fix is an
    iterative or cached ``fib``. ``torch_train.py``: ``_engine_run_backward
    (torch/autograd/graph.py:979)`` holds 56 % after start-up (181 of 326 samples in
    ``torch_train.default.raw.txt``), called from ``train_step (torch_train.py:20)``
    (``loss.backward()``): native compute, the thread count and batch decide it.

Thresholds
    Declared with their defaults, units and reasons in ``RULE.thresholds`` (``traceclass explain TC501``).

    Recoverable time: the line's self time on the critical threads where it dominates, and on
    other threads of their processes when it runs under the GIL (Python compute, GC): native
    code and copies on a background thread, and anything in a multiprocessing worker, run in
    parallel with the critical thread and lengthen the run only through the waits they cause
    (TC506 counts the main thread's wait for DataLoader workers).

    Severity: that time against the run's length (the critical thread's sampled
    time, see :mod:`traceclass.analysis.cpu_sites`), with the usual 10 % / 3 % steps; at most
    medium for a Python line whose text was not found (or ``py-spy --function`` def lines): it
    may be a wait inside a C call, not compute, and off the critical thread it counts no
    recoverable time (a wait there costs the run nothing directly).
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

import numpy as np

from traceclass.analysis import cpu_findings as cpuf
from traceclass.analysis import cpu_sites as cpus
from traceclass.analysis.frame_kinds import PRIORITY, label
from traceclass.rule import Context, Evidence, Family, Finding, Need, RuleInfo, Threshold, severity_for

RULE = RuleInfo(code="TC501", name="dominant-hot-spot", family=Family.CPU,
                summary="one source line holds a large share of a thread's on-CPU time (sampled profiles)",
                needs=(Need.SAMPLES,),
                thresholds=(
                    Threshold('min_self_pct', 30.0, '%',
                              'a line at 30 % caps the speed-up from all other code at 1.43x (Amdahl), which makes it '
                              'the first thing to look at; below that the time is spread over several lines and the '
                              "report's hot-spot table is the better view. Corpus: ``fib`` line 8 71-90 % of MainThread "
                              "(cpu_lock, every flag set), ``parent_busy`` line 11 96-100 % (parent_spawns), torch's "
                              'backward 49-63 % of torch_train after start-up, ``Linear.forward`` 20-30 % (below).'),
                    Threshold('min_time_ms', 200.0, 'ms',
                              "20 samples at py-spy's default 100 Hz; less is not worth a finding in a profile of a run "
                              "(applies when the profile's time is known)."),
                    Threshold('min_samples_count', 20, 'count',
                              'a share read from fewer samples is too noisy to act on (the relative error of a count n '
                              'is about 1/sqrt(n): 22 % at 20); the same floor ``cpu_profile`` uses to infer idle '
                              'sampling. Applies to sampled profiles (not to timed frames, which carry no counts).'),
                ))

KINDS = ("python", "native", "alloc", "gc", "other", "unverified")
GIL_KINDS = ("python", "gc")
OFF_CRITICAL_KINDS = ("data", "serialization")
UNVERIFIED = "time at this line, on-CPU or blocked (the source was not found: pass --source-root DIR)"
UNVERIFIED_WHY = ("without its text (or with only def lines recorded) a line blocked in a C call such as time.sleep, "
                  "lock.acquire or sock.recv looks the same as one that computes")
FIXES = {
    "python": "Pure-Python work: vectorise it (numpy/torch over whole arrays), compile it (torch.compile, numba, "
              "Cython), cache results or call it less often; with the GIL it also stalls every other Python thread.",
    "native": "Time in compiled code (torch/numpy) called from this line: check the work is needed (shapes, batch "
              "size, dtype), compare torch.get_num_threads() with the physical cores (torch.set_num_threads; "
              "DataLoader workers oversubscribe), and record py-spy --native to see the C/C++ functions.",
    "alloc": "Allocation and copying: preallocate and reuse buffers, use in-place ops, avoid per-item "
             ".tolist()/.numpy()/.clone()/deepcopy.",
    "other": "Make this function cheaper or call it less often; a profiler for its language (perf, py-spy --native "
             "for extensions) shows what it does inside.",
    "unverified": "Find out what the line does first: pass --source-root DIR (where the program's files are) to "
                  "traceclass analyze, or record with traceclass record where they are. If it computes, vectorise or "
                  "compile it; if it waits (sleep, lock, socket), TC502/TC503 report it with the source.",
    "data": "Per-item cost of the input pipeline (here off the critical thread, e.g. in a DataLoader worker): "
            "faster decoding (Pillow-SIMD, torchvision.io.decode_jpeg on the GPU, DALI), cheaper transforms, "
            "pre-processed or cached data; more workers only help while cores are free.",
    "serialization": "Encoding off the critical thread: a compiled codec (orjson, msgspec, libyaml), less data or "
                     "less often; pickle protocol 5 for large buffers.",
    "gc": "Garbage collection: create fewer container objects in the loop, gc.freeze() after start-up, raise "
          "gc.set_threshold for allocation-heavy phases.",
}


def check(ctx: Context, th: Mapping[str, Any]) -> Iterable[Finding]:
    cs = ctx.facts.cpu_sites
    if cs is None:
        return
    kinds = np.array([PRIORITY[k] for k in KINDS])
    elsewhere = np.array([PRIORITY[k] for k in OFF_CRITICAL_KINDS])  # TC504/TC506 cover the critical threads
    eligible = np.isin(cs.kind, kinds) | (np.isin(cs.kind, elsewhere) & ~cs.critical & ~cs.leaf_waits)
    rows = np.flatnonzero(eligible & (cs.leaf >= 0))
    if len(rows) == 0:
        return
    n_g = len(cs.groups)
    base = np.array([_base(g) for g in cs.groups], dtype=np.int64)
    pair = cs.leaf[rows] * n_g + cs.group[rows]
    t = cpuf.tally(pair, cs.value[rows], cs.count[rows])
    hits: dict[int, list[tuple[int, int, int, float]]] = {}
    for k, v, c in zip(t.keys.tolist(), t.value.tolist(), t.count.tolist()):
        f, g = divmod(k, n_g)
        share = cpuf.pct(v, base[g])
        if share >= th["min_self_pct"] and cpuf.passes_floor(cs, v, c, th["min_time_ms"], th["min_samples_count"]):
            hits.setdefault(f, []).append((g, v, c, share))
    for f, per_group in hits.items():
        yield _finding(cs, th, rows, f, per_group)


def _base(g: cpus.Group) -> int:
    """What a line's share is of: the thread's on-CPU time after start-up, plus its time at
    lines without source (they may be on-CPU)."""
    return g.steady_on_cpu + g.steady_unverified


def _scope(g: cpus.Group) -> str:
    return "on-CPU time" if not g.steady_unverified else "time on-CPU or at lines without source"


def _finding(cs: cpus.CpuSites, th: Mapping[str, Any], rows: np.ndarray, f: int,
             per_group: list[tuple[int, int, int, float]]) -> Finding:
    groups = [g for g, _, _, _ in per_group]
    mine = rows[(cs.leaf[rows] == f) & np.isin(cs.group[rows], groups)]
    value = int(cs.value[mine].sum())
    kind = _kind(cs, mine)
    run = cpuf.run_value(cs, mine)
    g0, v0, _, s0 = per_group[0]
    grp0 = cs.groups[g0]
    where = cs.frame_label(f)
    caller = _caller(cs, mine, f)
    others = len(per_group) - 1
    unverified = kind == "unverified"
    more = f", and dominates {others} more thread{'s' if others > 1 else ''}" if others else ""
    amounts = f"({cs.amount(v0)} of {cs.amount(_base(grp0))}; threshold {th['min_self_pct']:g}%)"
    if unverified:
        message = (f"{where}: {UNVERIFIED}, {s0:.0f}% of the {_scope(grp0)} after start-up on {grp0.phrase} "
                   f"{amounts}{more}" + (f", called from {caller}" if caller else "") + f"; {UNVERIFIED_WHY}")
    else:
        message = (f"{where} holds {s0:.0f}% of the {_scope(grp0)} after start-up on {grp0.phrase} {amounts}{more}"
                   f": {label(kind)}" + (f", called from {caller}" if caller else ""))
    message += cpuf.timed_note(cs)
    evidence = [
        Evidence(what=f"{cs.groups[g].label}: {share:.1f}% of its {_scope(cs.groups[g])} after start-up",
                 duration_ns=cs.ns(v), count=cs.samples(v), source=cs.location(f),
                 values={"self_pct": round(share, 2), "self_value": v, "thread_on_cpu_value":
                         cs.groups[g].steady_on_cpu, "thread_unverified_value": cs.groups[g].steady_unverified,
                         "critical_thread": cs.groups[g].critical})
        for g, v, _, share in per_group[:20]
    ]
    for cf, cv, cc in _callers(cs, mine, f):
        evidence.append(Evidence(what=f"called from {cs.frame_label(cf)}: {cpuf.pct(cv, value):.0f}% of the line's "
                                      "self time", duration_ns=cs.ns(cv), count=cs.samples(cv),
                                 source=cs.location(cf)))
    # off the critical thread a line delays the run only while it holds the GIL (Python, GC) of
    # the critical thread's process; a multiprocessing worker has its own GIL
    # (a Python line whose text is unknown may be a wait in C that released the GIL)
    gil = kind in GIL_KINDS
    counted = sum(v for g, v, _, _ in per_group
                  if cs.groups[g].critical or (gil and not cs.groups[g].worker_process))
    ns = cs.ns(value)
    rec_ns = cs.ns(counted)
    return Finding(
        severity=_cap(severity_for(counted, run), unverified), message=message,
        recoverable_ns=rec_ns or 0,
        estimate=("upper bound: the line's self time on the critical threads where it dominates, and on other "
                  "threads when it holds the GIL (Python compute, GC: no other Python thread of the process runs "
                  "meanwhile); how much a faster implementation saves cannot be read from samples"
                  + ("; the line may be a wait (its source was not found): then waiting less recovers it, not faster code"
                     if unverified else "")
                  + ". Time: " + cs.time_basis + ("" if ns is not None else "; no time, so recoverable_ns is 0")
                  + f"; severity against the run's length ({cs.amount(run)} on the critical thread)"),
        fix=FIXES[kind], location=where, evidence=tuple(evidence),
        values={"function": cs.function(f), "file": cs.file(f), "line": cs.line(f), "kind": kind,
                "self_pct": round(s0, 2), "self_ns": ns, "self_value": value, "counted_value": counted,
                "unit": cs.unit,
                "samples_count": cs.samples(value), "threads_count": len(per_group),
                "caller": caller, "source_verified": not unverified, "threshold_pct": th["min_self_pct"],
                "time_basis": cs.time_basis},
    )


def _cap(severity: str, unverified: bool) -> str:
    return "medium" if unverified and severity == "high" else severity


def _kind(cs: cpus.CpuSites, rows: np.ndarray) -> str:
    t = cpuf.tally(cs.kind[rows], cs.value[rows], cs.count[rows])
    return cpus.KIND_CODES[int(t.keys[0])]


def _callers(cs: cpus.CpuSites, rows: np.ndarray, f: int, limit: int = 3) -> list[tuple[int, int, int]]:
    """User lines calling a library hot line (none when the line is the program's own)."""
    u = cs.user[rows]
    keep = (u >= 0) & (u != f)
    t = cpuf.tally(u[keep], cs.value[rows][keep], cs.count[rows][keep])
    return list(zip(t.keys[:limit].tolist(), t.value[:limit].tolist(), t.count[:limit].tolist()))


def _caller(cs: cpus.CpuSites, rows: np.ndarray, f: int) -> str:
    top = _callers(cs, rows, f, 1)
    return cs.frame_label(top[0][0]) if top else ""
