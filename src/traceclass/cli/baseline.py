"""``traceclass baseline save TRACE -o baseline.json``: record a run to guard with ``check``."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

from traceclass import units
from traceclass.cli._io import add_analysis_options, write_atomic
from traceclass.cli._runs import load_run
from traceclass.cli.analyze import config_from_args
from traceclass.errors import ConfigError

COMMAND = "baseline"
HELP = "save a baseline file (key metrics + git commit, devices, versions) for `traceclass check`"
DESCRIPTION = (
    "baseline save TRACE -o FILE: analyse TRACE (or read a JSON report) and write a baseline file "
    "with the key metrics `traceclass check` compares (step P50/P99, GPU busy share, peak memory, "
    "per-stage P50) and what makes the run reproducible: the git commit of the current directory "
    "(and whether the tree was dirty), devices, driver/runtime and library versions found in the "
    "trace, profiler settings, and the time of recording. Exit codes: 0 written, 2 bad input."
)


def register(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="action", metavar="ACTION")
    save = sub.add_parser("save", help="write a baseline file from a trace or JSON report",
                          description=DESCRIPTION)
    save.add_argument("trace", help="trace file (any supported format) or JSON report")
    save.add_argument("-o", "--output", metavar="FILE", required=True, help="baseline file to write (atomically)")
    add_analysis_options(save)
    save.set_defaults(func=run_save)
    p.set_defaults(func=_usage(p))


def _usage(p: argparse.ArgumentParser):  # type: ignore[no-untyped-def]
    def run(args: argparse.Namespace) -> int:
        p.print_usage(sys.stderr)
        print("traceclass baseline: give an action (save)", file=sys.stderr)
        return 2

    return run


def run_save(args: argparse.Namespace) -> int:
    from traceclass.compare.baseline import build_baseline, git_facts

    cfg = config_from_args(args)
    run, run_dict, doc = load_run(args.trace, cfg, args.source_root)
    if doc is not None:
        raise ConfigError(f"{args.trace} is already a baseline file")
    baseline = build_baseline(run, run_dict, git_facts(os.getcwd()), time.time_ns())
    write_atomic(args.output, json.dumps(baseline, indent=1, ensure_ascii=False, allow_nan=False) + "\n")
    m = baseline["metrics"]
    git = baseline["git"]
    commit = (git["commit"][:12] + (" (dirty)" if git.get("dirty") else "")) if git.get("commit") else "no git commit"
    p50 = m["step_p50_ns"]
    n = m["steady_steps"]
    step = f"step P50 {units.duration(p50)} over {n} steady step{'s' if n != 1 else ''}" if p50 is not None else "no steps"
    if p50 is None and run.cpu is not None:
        step += (" — a sampled CPU profile: `traceclass check` has nothing to gate in it, "
                 "`traceclass diff` compares it")
    print(f"traceclass: baseline written to {args.output} ({step}; {commit})", file=sys.stderr)
    return 0
