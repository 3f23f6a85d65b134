"""``traceclass analyze DIR | GLOB | FILE FILE ...``: the cluster report (multi-input logic; the
single-trace path stays in :mod:`traceclass.cli.analyze`)."""

from __future__ import annotations

import argparse
import glob
import os
import sys

from traceclass.cli._io import write_atomic
from traceclass.errors import ConfigError, TraceclassError, TraceFormatError

#: what counts as a rank file inside a directory
TRACE_SUFFIXES = (".json", ".json.gz", ".sqlite", ".tcsum.json")


def add_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("many ranks (two or more traces, a directory or a glob)")
    g.add_argument("--jobs", type=int, metavar="N", help="local worker processes (default: from cores and free memory)")
    g.add_argument("--scheduler", metavar="ADDR", help="run the per-rank step on a Dask cluster (tcp://host:8786)")
    g.add_argument("--scheduler-file", metavar="FILE", help="Dask scheduler file (dask scheduler --scheduler-file)")
    g.add_argument("--per-rank-dir", metavar="OUT", help="also write each rank's own report (markdown) into OUT")
    g.add_argument("--link-gbps", type=float, metavar="GBPS",
                   help="link peak per GPU and direction for busbw (default: the GPU's NVLink datasheet figure)")


def expand(inputs: list[str]) -> tuple[list[str], bool]:
    """(files, asked for many): directories list their trace files, globs expand, files stay."""
    files: list[str] = []
    many = len(inputs) > 1
    for item in inputs:
        if os.path.isdir(item):
            many = True
            found = sorted(os.path.join(item, f) for f in os.listdir(item)
                           if f.endswith(TRACE_SUFFIXES) and os.path.isfile(os.path.join(item, f)))
            if not found:
                raise TraceFormatError(item, "directory holds no trace files (.json, .json.gz, .sqlite, .tcsum.json)")
            files += found
        elif not os.path.exists(item) and any(c in item for c in "*?["):
            many = True
            found = sorted(f for f in glob.glob(item) if os.path.isfile(f))
            if not found:
                raise TraceFormatError(item, "no file matches this pattern")
            files += found
        else:
            files.append(item)
    return files, many


def is_cluster(args: argparse.Namespace) -> bool:
    files, many = expand(list(args.trace))
    args.trace_files = files
    return many and len(files) >= 2 or any(f.endswith(".tcsum.json") for f in files)


def run(args: argparse.Namespace) -> int:
    from traceclass.cli.analyze import config_from_args
    from traceclass.cluster import engine
    from traceclass.cluster.render import render_json, render_markdown
    from traceclass.cluster.report import build
    from traceclass.registry import check_selection

    files = args.trace_files
    for f in files:
        if not os.path.isfile(f):
            raise TraceFormatError(f, "no such file")
    cfg = config_from_args(args)
    check_selection(cfg.select, cfg.ignore, one_trace=False)  # before any rank is read
    fmt = "issue" if args.issue else (args.format or ("json" if (args.output or "").lower().endswith(".json") else "md"))
    if args.issue and args.format not in (None, "issue"):
        raise ConfigError(f"--issue produces markdown; drop --format {args.format}")
    if fmt == "plot" or getattr(args, "plot", None):
        raise ConfigError("the roofline plot is drawn per trace; use --per-rank-dir for per-rank reports")
    if args.per_rank_dir:
        os.makedirs(args.per_rank_dir, exist_ok=True)
    notes: list[str] = []
    if args.scheduler or args.scheduler_file:
        summaries, notes = engine.run_dask(files, cfg, args.scheduler, args.scheduler_file, args.per_rank_dir)
    else:
        tty = sys.stderr.isatty()

        def progress(done: int, total: int) -> None:
            if tty:
                sys.stderr.write(f"\rtraceclass: {done}/{total} ranks summarized")
                sys.stderr.flush()

        summaries = engine.run_local(files, cfg, args.jobs, args.per_rank_dir, progress)
        if tty:
            sys.stderr.write("\r\033[K")
    errors = [s["error"] for s in summaries if "error" in s]
    if errors:
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        raise TraceclassError(f"{errors[0]}{more}")
    report = build(summaries, link_gbps=args.link_gbps, select=cfg.select, ignore=cfg.ignore, thresholds=cfg.rules)
    report["notes"] = notes + report["notes"]
    out = render_json(report) if fmt == "json" else render_markdown(report, issue=fmt == "issue")
    if args.output:
        write_atomic(args.output, out)
    else:
        sys.stdout.write(out)
        sys.stdout.flush()
    if args.fail_on:
        order = ("high", "medium", "low")
        worst = order[: order.index(args.fail_on) + 1]
        sev = [f["severity"] for f in report["findings"]] + [f["severity"] for f in report["rank_findings"]]
        if any(s in worst for s in sev):
            return 1
    return 0
