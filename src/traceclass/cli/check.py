"""``traceclass check CANDIDATE --baseline baseline.json``: the regression gate for CI."""

from __future__ import annotations

import argparse
import sys

from traceclass.cli._io import add_analysis_options, write_atomic
from traceclass.cli._runs import load_run
from traceclass.cli.analyze import config_from_args

COMMAND = "check"
HELP = ("regression gate: compare a run with a baseline file; exit 1 on a regression or exceeded budget, "
        "2 when nothing could be compared")
DESCRIPTION = (
    "Compare CANDIDATE (trace or JSON report) with a baseline (traceclass baseline save; a trace or "
    "JSON report also works) on step P50 and P99, GPU busy share, peak memory and per-stage P50, "
    "against thresholds in [tool.traceclass.check] (step_p50_pct, step_p99_pct, gpu_busy_pct_points, "
    "peak_memory_pct, stage_p50_pct; default 5), and per-stage budgets in [tool.traceclass.budgets] "
    "(preprocess = \"10ms\"). P50 regressions must also be beyond noise (Mann-Whitney U / Welch, "
    "p < 0.05) when both runs have several steps. Prints a short markdown summary for a CI log or a "
    "pull-request comment. Exit codes: 0 within thresholds and budgets, 1 regression or budget "
    "exceeded, 2 bad input or configuration, or nothing comparable: no metric was measured in both "
    "runs (no steps or ranges, GPU activity or memory events in common, and no budget; e.g. two "
    "sampled CPU profiles, which `traceclass diff` compares) — a gate that checked nothing does not pass."
)


def register(p: argparse.ArgumentParser) -> None:
    p.add_argument("candidate", help="candidate trace or JSON report")
    p.add_argument("--baseline", required=True, metavar="FILE", help="baseline file (or a trace / JSON report)")
    p.add_argument("-o", "--output", metavar="FILE", help="also write the summary to FILE (atomically)")
    p.add_argument("--format", choices=("md", "json"), help="summary format (default: md)")
    add_analysis_options(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import json

    from traceclass.compare.gate import check, to_dict
    from traceclass.render.check_markdown import render_check_markdown

    cfg = config_from_args(args)
    base, _, doc = load_run(args.baseline, cfg, args.source_root)
    cand, _, _ = load_run(args.candidate, cfg, args.source_root)
    result = check(base, cand, cfg.check, cfg.budgets)
    facts = {"file": base.file, "recorded_at_epoch_ns": base.start_epoch_ns}
    if doc is not None:
        facts |= {"baseline_file": args.baseline, "git": doc.get("git"), "saved_at": doc.get("saved_at")}
    d = to_dict(result, facts, cand.file)
    d["config_sources"] = list(cfg.sources)
    fmt = args.format or ("json" if (args.output or "").lower().endswith(".json") else "md")
    out = (json.dumps(d, indent=1, ensure_ascii=False, allow_nan=False) + "\n") if fmt == "json" \
        else render_check_markdown(d)
    if args.output:
        write_atomic(args.output, out)
    sys.stdout.write(out)
    sys.stdout.flush()
    if result.nothing_comparable:
        print(f"traceclass: {args.candidate} (baseline {args.baseline}): nothing comparable: "
              f"{result.nothing_comparable}", file=sys.stderr)
    return result.exit_code
