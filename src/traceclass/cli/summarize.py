"""``traceclass summarize TRACE -o rankN.tcsum.json``: only the per-rank step, for running where
the traces are (a SLURM array); ``traceclass analyze`` accepts the summaries."""

from __future__ import annotations

import argparse
import json

from traceclass.cli._io import add_analysis_options, write_atomic
from traceclass.errors import ConfigError, TraceclassError

COMMAND = "summarize"
HELP = "summarize one rank's trace for a later cluster report (traceclass analyze *.tcsum.json)"


def register(p: argparse.ArgumentParser) -> None:
    p.add_argument("trace", help="trace file of one rank")
    p.add_argument("-o", "--output", metavar="FILE.tcsum.json", required=True, help="summary file (written atomically)")
    add_analysis_options(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from traceclass.cli.analyze import config_from_args
    from traceclass.cluster.engine import SUMMARY_SUFFIX, summarize_path

    if not args.output.endswith(SUMMARY_SUFFIX):
        raise ConfigError(f"{args.output}: summary files end in {SUMMARY_SUFFIX} (analyze recognises them by it)")
    out = summarize_path(args.trace, config_from_args(args))
    if "error" in out:
        raise TraceclassError(out["error"])
    write_atomic(args.output, json.dumps(out, separators=(",", ":")) + "\n")
    return 0
