"""``traceclass export --to speedscope INPUT -o OUT.speedscope.json``."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from traceclass.cli._io import ProgressBar, _same_file, add_rate_option, write_atomic
from traceclass.errors import ConfigError

COMMAND = "export"
HELP = "convert a trace to another tool's format (speedscope)"
DESCRIPTION = (
    "Convert any supported trace to speedscope JSON (open it at https://www.speedscope.app). "
    "torch.profiler and Nsight Systems traces become one evented profile per host thread and "
    "per GPU stream; sampled profiles (py-spy, collapsed stacks, nsys CPU samples) become "
    "sampled profiles per thread."
)
TARGETS = ("speedscope",)


def register(p: argparse.ArgumentParser) -> None:
    p.add_argument("input", help="trace file (any format `traceclass analyze` reads)")
    p.add_argument("--to", choices=TARGETS, default="speedscope", help="output format (default: speedscope)")
    p.add_argument(
        "-o",
        "--output",
        metavar="FILE",
        help="output file (default: INPUT's name with .speedscope.json, in the current directory)",
    )
    add_rate_option(p)
    p.set_defaults(func=run)


def default_output(input_path: str) -> str:
    name = Path(input_path).name
    for ext in (".gz", ".json", ".sqlite", ".txt", ".speedscope"):
        if name.lower().endswith(ext):
            name = name[: -len(ext)]
    return f"{name or 'trace'}.speedscope.json"


def run(args: argparse.Namespace) -> int:
    import msgspec

    from traceclass.export.speedscope import build
    from traceclass.ingest import load

    out = args.output or default_output(args.input)
    if os.path.exists(out) and _same_file(out, args.input):
        raise ConfigError(f"{out}: refusing to overwrite the input file")
    bar = ProgressBar(args.input)
    try:
        trace = load(args.input, progress=bar)
    finally:
        bar.close()
    if getattr(args, "sample_rate_hz", None) is not None:
        from traceclass.ingest.sampled import with_sample_rate

        if not args.sample_rate_hz > 0 or args.sample_rate_hz == float("inf"):
            raise ConfigError(f"--rate must be a finite number > 0, got {args.sample_rate_hz:g}")
        trace = with_sample_rate(trace, args.sample_rate_hz)
    doc, clipped = build(trace)
    if not doc["profiles"]:
        raise ConfigError(f"{args.input}: the trace has no timed intervals or samples to export")
    write_atomic(out, msgspec.json.encode(doc))
    n_events = sum(len(p.get("events", ())) for p in doc["profiles"])
    n_samples = sum(len(p.get("samples", ())) for p in doc["profiles"])
    print(
        f"wrote {out}: {len(doc['profiles'])} profiles, {len(doc['shared']['frames'])} frames, "
        f"{n_events} events, {n_samples} samples"
        + (f"; {clipped} intervals clipped to their enclosing one" if clipped else ""),
        file=sys.stderr,
    )
    return 0
