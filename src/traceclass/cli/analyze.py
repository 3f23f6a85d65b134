"""``traceclass analyze TRACE``: the bottleneck report."""

from __future__ import annotations

import argparse
import sys

from traceclass.cli import _cluster
from traceclass.cli._io import ProgressBar, add_analysis_options, whole_number, write_atomic
from traceclass.config import Config, load_config
from traceclass.errors import ConfigError
from traceclass.ingest import FORMATS
from traceclass.render.renderers import RENDERERS
from traceclass.timings import stage

COMMAND = "analyze"
HELP = "analyze a trace and print the bottleneck report"
DESCRIPTION = (
    "Analyze a torch.profiler trace (.json, .json.gz), an Nsight Systems SQLite export "
    "(.sqlite; .nsys-rep with nsys on PATH) or a py-spy profile (speedscope, raw/collapsed, "
    "chrometrace). The format is detected from the content. Two or more traces of one job (files, a "
    "directory or a glob; per-rank .tcsum.json summaries too) give a cluster report. Exit codes: 0 report written, "
    "1 a finding at or above --fail-on, 2 unreadable input or bad configuration."
)


def register(p: argparse.ArgumentParser) -> None:
    p.add_argument("trace", nargs="+", help="trace file; several files, a directory or a glob: cluster report")
    p.add_argument("-o", "--output", metavar="FILE", help="write the report to FILE (atomically) instead of stdout")
    p.add_argument("--format", choices=tuple(RENDERERS),
                   help="report format: md, json, issue (compact markdown for a GitHub issue body, fits 65,536 "
                        "characters), plot (roofline PNG); default: from -o's extension, else md")
    p.add_argument("--issue", action="store_true", help="same as --format issue")
    p.add_argument("--input-format", metavar="NAME", choices=FORMATS,
                   help=f"read the trace as this format instead of detecting it ({', '.join(FORMATS)})")
    p.add_argument("--plot", metavar="FILE.png", help="also write a roofline chart (matplotlib)")
    p.add_argument("--top", type=whole_number(1), metavar="N", dest="top_n",
                   help="rows in op and kernel tables (default 15; 8 with --issue)")
    p.add_argument("--select", metavar="CODES", help="comma-separated rule codes/prefixes to run (default: all)")
    p.add_argument("--ignore", metavar="CODES", help="comma-separated rule codes/prefixes to skip")
    p.add_argument("--fail-on", choices=("high", "medium", "low"), help="exit 1 when a finding has this severity or worse")
    p.add_argument("--graph-capture", metavar="FILE",
                   help="torch.profiler trace of the CUDA/HIP graph capture: maps replayed kernels to the ops "
                        "that captured them")
    add_analysis_options(p)
    _cluster.add_options(p)
    p.set_defaults(func=run)


def config_from_args(args: argparse.Namespace) -> Config:
    overrides = {k: getattr(args, k, None) for k in ("warmup_steps", "top_n", "device", "cpu_device", "sample_rate_hz")}
    cfg = load_config(getattr(args, "config", None), overrides=overrides)
    sel = tuple(s.strip() for s in (getattr(args, "select", None) or "").split(",") if s.strip())
    ign = tuple(s.strip() for s in (getattr(args, "ignore", None) or "").split(",") if s.strip())
    if sel or ign:
        import dataclasses

        cfg = dataclasses.replace(cfg, select=sel or cfg.select, ignore=ign or cfg.ignore)
    return cfg


def load_and_report(path: str, cfg: Config, source_roots: list[str] | None = None,  # type: ignore[no-untyped-def]
                    input_format: str | None = None):
    """Load, analyze, run rules: (trace, analysis, report)."""
    from traceclass.engine import run
    from traceclass.ingest import load

    bar = ProgressBar(path)
    try:
        with stage("read"):
            trace = load(path, progress=bar, fmt=input_format)
        if cfg.analysis.sample_rate_hz is not None:
            from traceclass.ingest.sampled import with_sample_rate

            trace = with_sample_rate(trace, cfg.analysis.sample_rate_hz)
        if source_roots and len(trace.samples):
            from traceclass.ingest.sourcelines import attach_source_lines

            trace = attach_source_lines(trace, source_roots)
        bar("analyzing", 0, 1)
        analysis, report = run(trace, cfg)
    finally:
        bar.close()
    return trace, analysis, report


def run(args: argparse.Namespace) -> int:
    if isinstance(args.trace, list):
        if _cluster.is_cluster(args):
            return _cluster.run(args)
        args.trace = args.trace_files[0]
    from traceclass.registry import check_selection
    from traceclass.render.renderers import for_path, renderer

    cfg = config_from_args(args)
    check_selection(cfg.select, cfg.ignore, one_trace=True)  # before the trace is read
    if args.issue and args.format not in (None, "issue"):
        raise ConfigError(f"--issue produces markdown; drop --format {args.format}")
    if args.issue or args.format:
        chosen = renderer("issue" if args.issue else args.format)
    else:
        chosen = for_path(args.output or "") or renderer("md")
    if not args.output and chosen.EXTENSION == ".png":
        raise ConfigError(f"--format {chosen.NAME} writes binary PNG; give -o FILE{chosen.EXTENSION}")
    trace, analysis, report = load_and_report(args.trace, cfg, args.source_root, args.input_format)
    if getattr(args, "graph_capture", None):
        report = _with_capture(trace, report, args.graph_capture)
    # --top when given; else the issue form's own default, or the configured table length
    top = args.top_n if args.top_n is not None else (None if chosen.NAME == "issue" else cfg.analysis.top_n)
    with stage("render"):
        out = chosen.render(report, top)
    if args.plot:
        from traceclass.render.plot import roofline_png, why_no_plot

        png = roofline_png(report)
        if png is None:
            sys.stderr.write(f"traceclass: no plot written to {args.plot}: {why_no_plot(report)}\n")
        else:
            write_atomic(args.plot, png)
    if args.output:
        write_atomic(args.output, out)
        sys.stderr.write(f"traceclass: wrote {args.output}\n" + next_steps(report, args))
    elif chosen.NAME in ("md", "issue") and sys.stdout.isatty():
        from traceclass.render.terminal import render as render_terminal

        sys.stdout.write(render_terminal(report, top, issue=chosen.NAME == "issue") + "\n" + next_steps(report, args))
    else:
        # files and pipes get the markdown unchanged
        sys.stdout.write(out)
        sys.stdout.flush()
    if args.fail_on:
        order = ("high", "medium", "low")
        worst = order.index(args.fail_on)
        if any(f.severity in order[: worst + 1] for f in report.findings):
            return 1
    return 0


def next_steps(report, args: argparse.Namespace) -> str:  # type: ignore[no-untyped-def]
    """Two or three commands worth trying next, for a person reading the output."""
    trace = _quote(args.trace)
    steps = []
    if not args.issue:
        steps.append((f"traceclass analyze {trace} --issue -o issue.md", "the short form, to paste into a GitHub issue"))
    real = [f for f in report.findings if f.severity != "info"]
    if real:
        steps.append((f"traceclass explain {real[0].code}", f"what {real[0].code} {real[0].name} measures and how to fix it"))
    if not args.plot and any(o.flops is not None and o.bound in ("compute-bound", "memory-bound") for o in report.ops):
        steps.append((f"traceclass analyze {trace} --plot roofline.png", "the roofline chart"))
    steps.append((f"traceclass diff {trace} AFTER.json.gz", "after a fix: what changed, beyond noise"))
    return "Next:\n" + "".join(f"  {cmd}    # {why}\n" for cmd, why in steps[:3])


def _quote(path: str) -> str:
    import shlex

    return shlex.quote(path)


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


__all__ = ["register", "run", "render_trace", "load_and_report", "config_from_args", "next_steps"]
