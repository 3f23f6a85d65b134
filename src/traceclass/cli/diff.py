"""``traceclass diff BASELINE CANDIDATE``: compare two runs, noise-aware."""

from __future__ import annotations

import argparse
import sys

from traceclass.cli._io import add_analysis_options, write_atomic
from traceclass.cli._runs import load_run
from traceclass.cli.analyze import config_from_args

COMMAND = "diff"
HELP = "compare two runs (traces, JSON reports or baselines): what got faster or slower, beyond noise"
DESCRIPTION = (
    "Compare a baseline run with a candidate run per stage, op group (matched by name, shapes and "
    "dtype), kernel family, GPU busy/idle/copy time, memory peak and finding; sampled CPU profiles "
    "(py-spy) per hot spot (function, file and line), kind and thread, in time when the sampling interval "
    "is known, else in samples, with their shares (one value per run: noise unknown). Inputs: traces of any "
    "supported format, JSON reports (traceclass analyze --format json) or baseline files, in any mix. "
    "Deltas are labelled faster / slower / within noise from the spread of the per-step samples "
    "(Mann-Whitney U, p < 0.05, and |delta| >= 2%; the rule is printed with the result). "
    "Different devices or software versions are called out first. Exit codes: 0 diff written, "
    "2 unreadable input or bad configuration."
)


def register(p: argparse.ArgumentParser) -> None:
    p.add_argument("baseline", help="baseline: trace, JSON report or baseline file")
    p.add_argument("candidate", help="candidate: trace, JSON report or baseline file")
    p.add_argument("-o", "--output", metavar="FILE", help="write the diff to FILE (atomically) instead of stdout")
    p.add_argument("--format", choices=("md", "json"), help="output format (default: from -o's extension, else md)")
    p.add_argument("--top", type=int, metavar="N", dest="top_n", help="rows in the op-group tables (default 15)")
    add_analysis_options(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from traceclass.compare.diff import build_diff, to_dict
    from traceclass.render.diff_markdown import render_json, render_markdown

    cfg = config_from_args(args)
    fmt = args.format or ("json" if (args.output or "").lower().endswith(".json") else "md")
    base, _, _ = load_run(args.baseline, cfg, args.source_root)
    cand, _, _ = load_run(args.candidate, cfg, args.source_root)
    d = to_dict(build_diff(base, cand))
    out = render_json(d) if fmt == "json" else render_markdown(d, cfg.analysis.top_n)
    if args.output:
        write_atomic(args.output, out)
    else:
        sys.stdout.write(out)
        sys.stdout.flush()
    return 0
