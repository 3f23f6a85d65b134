"""``traceclass analyze TRACE``: the bottleneck report."""

from __future__ import annotations

import argparse
import os
import sys

from traceclass.cli._io import ProgressBar, add_analysis_options, write_atomic
from traceclass.config import Config, load_config
from traceclass.errors import ConfigError

COMMAND = "analyze"
HELP = "analyze a trace and print the bottleneck report"
DESCRIPTION = (
    "Analyze a torch.profiler trace (.json, .json.gz), an Nsight Systems SQLite export "
    "(.sqlite; .nsys-rep with nsys on PATH) or a py-spy profile (speedscope, raw/collapsed, "
    "chrometrace). The format is detected from the content. Exit codes: 0 report written, "
    "1 a finding at or above --fail-on, 2 unreadable input or bad configuration."
)


def register(p: argparse.ArgumentParser) -> None:
    p.add_argument("trace", help="trace file")
    p.add_argument("-o", "--output", metavar="FILE", help="write the report to FILE (atomically) instead of stdout")
    p.add_argument("--format", choices=("md", "json"), help="report format (default: from -o's extension, else md)")
    p.add_argument("--issue", action="store_true",
                   help="compact markdown for a GitHub issue body (fits 65,536 characters; details folded)")
    p.add_argument("--plot", metavar="FILE.png", help="also write a roofline chart (matplotlib)")
    p.add_argument("--top", type=int, metavar="N", dest="top_n", help="rows in op and kernel tables (default 15)")
    p.add_argument("--select", metavar="CODES", help="comma-separated rule codes/prefixes to run (default: all)")
    p.add_argument("--ignore", metavar="CODES", help="comma-separated rule codes/prefixes to skip")
    p.add_argument("--fail-on", choices=("high", "medium", "low"), help="exit 1 when a finding has this severity or worse")
    p.add_argument("--graph-capture", metavar="FILE",
                   help="torch.profiler trace of the CUDA/HIP graph capture: maps replayed kernels to the ops "
                        "that captured them")
    add_analysis_options(p)
    p.set_defaults(func=run)


def config_from_args(args: argparse.Namespace) -> Config:
    overrides = {k: getattr(args, k, None) for k in ("warmup_steps", "top_n", "device", "cpu_device")}
    cfg = load_config(getattr(args, "config", None), overrides=overrides)
    sel = tuple(s.strip() for s in (getattr(args, "select", None) or "").split(",") if s.strip())
    ign = tuple(s.strip() for s in (getattr(args, "ignore", None) or "").split(",") if s.strip())
    if sel or ign:
        import dataclasses

        cfg = dataclasses.replace(cfg, select=sel or cfg.select, ignore=ign or cfg.ignore)
    return cfg


def load_and_report(path: str, cfg: Config, source_roots: list[str] | None = None):  # type: ignore[no-untyped-def]
    """Load, analyze, run rules: (trace, analysis, report)."""
    from traceclass.engine import run
    from traceclass.ingest import load

    bar = ProgressBar(path)
    try:
        trace = load(path, progress=bar)
        if source_roots and len(trace.samples):
            from traceclass.ingest.sourcelines import attach_source_lines

            trace = attach_source_lines(trace, source_roots)
        bar("analyzing", 0, 1)
        analysis, report = run(trace, cfg)
    finally:
        bar.close()
    return trace, analysis, report


def run(args: argparse.Namespace) -> int:
    cfg = config_from_args(args)
    fmt = args.format
    if fmt is None:
        fmt = "json" if (args.output or "").lower().endswith(".json") else "md"
    if args.issue and fmt == "json":
        raise ConfigError("--issue produces markdown; drop --format json")
    trace, analysis, report = load_and_report(args.trace, cfg, args.source_root)
    if getattr(args, "graph_capture", None):
        report = _with_capture(trace, report, args.graph_capture)
    if fmt == "json":
        from traceclass.render.json_report import render as render_json

        out = render_json(report)
    elif args.issue:
        from traceclass.render.issue import render_issue

        out = render_issue(report)
    else:
        from traceclass.render.markdown import render as render_md

        out = render_md(report, cfg.analysis.top_n)
    if args.plot:
        from traceclass.render.plot import roofline_png

        write_atomic(args.plot, roofline_png(report))
    if args.output:
        write_atomic(args.output, out)
    else:
        sys.stdout.write(out)
        sys.stdout.flush()
    if args.fail_on:
        order = ("high", "medium", "low")
        worst = order.index(args.fail_on)
        if any(f.severity in order[: worst + 1] for f in report.findings):
            return 1
    return 0


def _with_capture(trace, report, path: str):  # type: ignore[no-untyped-def]
    """The report with the capture mapping of its graph replays in the notes."""
    import dataclasses

    from traceclass import units
    from traceclass.analysis.graph_capture_map import notes
    from traceclass.ingest.graph_capture import read_capture

    return dataclasses.replace(report, notes=report.notes + tuple(notes(trace, read_capture(path), units.duration)))


def render_trace(trace, args: argparse.Namespace) -> str:  # type: ignore[no-untyped-def]
    """Markdown report for an already loaded trace (used by `record`)."""
    from traceclass.engine import run as run_pipeline
    from traceclass.render.markdown import render as render_md

    cfg = config_from_args(args)
    _analysis, report = run_pipeline(trace, cfg)
    return render_md(report, cfg.analysis.top_n)


__all__ = ["register", "run", "render_trace", "load_and_report", "config_from_args", "os"]
