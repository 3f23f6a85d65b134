"""Start-up dominated: importing modules takes a large share of a short run.

What it finds
    In a sampled CPU profile, the share of the critical threads' sampled time spent under the
    import machinery (``importlib._bootstrap``, ``_find_and_load``, ``exec_module``, ``site``,
    ``pkg_resources``; kinds from :mod:`traceclass.analysis.frame_kinds`), including imports
    that run lazily later in the run (``torch.optim.SGD`` importing ``torch._dynamo`` on first
    use). One finding per run. Evidence: the program's lines that trigger the imports (the
    innermost frame outside the standard library and installed packages: ``import torch`` at
    ``train.py:3``), the module each pulls in (the outermost library ``<module>`` frame below
    that line: ``torch``, ``torch._dynamo``), and the share spent compiling bytecode (no usable
    ``.pyc``).

Why it matters
    Imports are paid on every start: in short runs (tests, CLIs, serverless handlers,
    benchmarks, every spawned worker process) they can cost more than the work, and they make
    a short profile say more about imports than about the loop. ``import torch`` alone takes
    about 1-2 s.

How to fix
    See where it goes with ``python -X importtime script.py 2> imports.log`` (``tuna``
    visualises it). Import heavy packages inside the functions that need them (or with
    ``importlib.util.LazyLoader``), keep them out of CLI entry points and of worker processes
    that do not use them; keep ``.pyc`` caches writable or precompile them (``python -m
    compileall``; no ``PYTHONDONTWRITEBYTECODE`` in containers); for repeated short runs keep
    one process warm (a server or a long-running worker) instead of restarting Python.

Example
    ``torch_train.py`` (3 s of training): 47.8 % of the samples of ``torch_train.default.raw.txt``
    (380 of 795) are imports: ``import torch`` at ``torch_train.py:3`` (194 samples) and
    ``torch._dynamo``, imported on first use by ``torch.optim.SGD`` at ``torch_train.py:8``
    (184); 73 samples compile bytecode.

Thresholds
    Declared with their defaults, units and reasons in ``RULE.thresholds`` (``traceclass explain TC505``).

    Severity: the import time against the critical threads' sampled time (10 % / 3 % steps).
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

import numpy as np

from traceclass.analysis import cpu_findings as cpuf
from traceclass.analysis import cpu_sites as cpus
from traceclass.analysis.frame_kinds import PRIORITY
from traceclass.rule import Context, Evidence, Family, Finding, Need, RuleInfo, Threshold, severity_for

RULE = RuleInfo(code="TC505", name="startup-dominated", family=Family.CPU,
                summary="imports take a large share of a short run (sampled profiles)", needs=(Need.SAMPLES,),
                thresholds=(
                    Threshold('min_startup_pct', 20.0, '%',
                              'when a fifth of the run is imports, start-up is a cost worth cutting and the other '
                              'shares of the profile are diluted by it. Corpus: torch_train 43-48 % (``import torch`` '
                              'and ``torch._dynamo``), cpu_lock 0-0.1 %, sleep_io 0.3-1.3 %, parent_spawns 1.4-2.8 %.'),
                    Threshold('min_time_ms', 500.0, 'ms',
                              'below half a second a restructuring of imports is rarely worth it (``import numpy`` '
                              'takes about 80 ms on the machine the corpus was checked on, ``import torch`` 1-2 s); '
                              "applies when the profile's time is known."),
                    Threshold('min_samples_count', 20, 'count',
                              'fewer samples give a share with more than ~22 % relative error (1/sqrt(n)); the floor '
                              '``cpu_profile`` uses to infer idle sampling. Applies to sampled profiles.'),
                ))

FIX = ("Import heavy packages inside the functions that need them (or importlib.util.LazyLoader), keep them out of "
       "entry points and worker processes that do not use them, keep .pyc caches writable or precompile them "
       "(python -m compileall), and keep one process warm for repeated short runs; python -X importtime shows "
       "each module's cost.")


def check(ctx: Context, th: Mapping[str, Any]) -> Iterable[Finding]:
    cs = ctx.facts.cpu_sites
    if cs is None:
        return
    crit_rows = np.flatnonzero(cs.critical)
    sel = crit_rows[cs.kind[crit_rows] == PRIORITY["import"]]
    if len(sel) == 0:
        return
    value, count = int(cs.value[sel].sum()), int(cs.count[sel].sum())
    run = int(cs.value[crit_rows].sum())
    share = cpuf.pct(value, run)
    if share < th["min_startup_pct"] or not cpuf.passes_floor(cs, value, count, th["min_time_ms"],
                                                               th["min_samples_count"]):
        return
    yield _finding(cs, th, sel, value, run, share)


def _finding(cs: cpus.CpuSites, th: Mapping[str, Any], sel: np.ndarray, value: int, run: int,
             share: float) -> Finding:
    mods = cpuf.import_packages(cs, sel)
    compiling = int(cs.value[sel][cpuf.bytecode_mask(cs, sel)].sum())
    user = cs.user[sel]
    evidence = []
    top_lines = []
    t = cpuf.tally(user, cs.value[sel], cs.count[sel])
    for f, v in zip(t.keys[:10].tolist(), t.value[:10].tolist()):
        here = user == f
        names = _modules(cs, mods[here], cs.value[sel][here])
        where = cs.frame_label(f) if f >= 0 else "no frame of the program (interpreter or library start-up)"
        if f >= 0:
            top_lines.append(f"{', '.join(names[:2]) or 'modules without a Python frame'} from {cs.location(f)}, "
                             f"{cs.amount(v)}")
        evidence.append(Evidence(
            what=f"{where} imports {', '.join(names[:3]) or 'modules'}: {cpuf.pct(v, value):.0f}% of start-up",
            duration_ns=cs.ns(v), count=cs.samples(v), source=cs.location(f) if f >= 0 else None,
            values={"value": v, "modules": names[:5]}))
    message = (f"imports take {cs.amount(value)}, {share:.1f}% of the critical thread's {cs.amount(run)} "
               f"(threshold {th['min_startup_pct']:g}%)"
               + (f": {'; '.join(top_lines[:3])}" if top_lines else "")
               + (f"; {cpuf.pct(compiling, value):.0f}% of it compiles bytecode (no usable .pyc)" if compiling else "")
               + cpuf.timed_note(cs))
    ns = cs.ns(value)
    return Finding(
        severity=severity_for(value, run), message=message, recoverable_ns=ns or 0,
        estimate=("upper bound: the import time on the critical threads; lazy imports defer what the run uses "
                  "(they save only what it never uses), a warm .pyc cache saves the bytecode compilation "
                  f"({cs.amount(compiling)}). Time: " + cs.time_basis
                  + ("" if ns is not None else "; no time, so recoverable_ns is 0")),
        fix=FIX, location="import start-up", evidence=tuple(evidence),
        values={"startup_ns": ns, "startup_value": value, "unit": cs.unit, "samples_count": cs.samples(value),
                "startup_pct": round(share, 2), "run_value": run, "bytecode_compile_ns": cs.ns(compiling),
                "bytecode_compile_value": compiling, "threshold_pct": th["min_startup_pct"],
                "time_basis": cs.time_basis},
    )


def _modules(cs: cpus.CpuSites, mods: np.ndarray, values: np.ndarray) -> list[str]:
    """Module names by import time, largest first (frames of one module merged)."""
    by_name: dict[str, int] = {}
    t = cpuf.tally(mods, values, np.ones(len(values), dtype=np.int64))
    for f, v in zip(t.keys.tolist(), t.value.tolist()):
        if f >= 0:
            name = cpuf.module_name(cs.file(f))
            by_name[name] = by_name.get(name, 0) + v
    return [n for n, _ in sorted(by_name.items(), key=lambda kv: (-kv[1], kv[0]))]
