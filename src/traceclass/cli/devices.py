"""``traceclass devices``: the hardware table the roofline uses, with sources."""

from __future__ import annotations

import argparse
import sys

COMMAND = "devices"
HELP = "list known devices (names for --device) with their peaks and sources"


def register(p: argparse.ArgumentParser) -> None:
    p.add_argument("name", nargs="?", help="show one device in full (name or alias)")
    p.set_defaults(func=run)


def _rate(x: float) -> str:
    for prefix, scale in (("P", 1e15), ("T", 1e12), ("G", 1e9)):
        if x >= scale:
            return f"{x / scale:.3g} {prefix}"
    return f"{x:.3g} "


def run(args: argparse.Namespace) -> int:
    from traceclass import hardware

    if args.name:
        spec = hardware.get(args.name)
        out = [f"{spec.name}: {spec.label} ({spec.vendor})",
               f"  memory bandwidth: {spec.memory_bandwidth_bps / 1e9:.4g} GB/s"]
        if spec.host_link_bps:
            out.append(f"  host link: {spec.host_link_bps / 1e9:.4g} GB/s per direction")
        for key, val in sorted(spec.peaks.items()):
            out.append(f"  {key}: {_rate(val)}FLOP/s")
        if spec.aliases:
            out.append(f"  aliases: {', '.join(spec.aliases)}")
        out.append("  sources:")
        out += [f"    {k}: {v}" for k, v in spec.sources.items()]
        out += [f"  note: {n}" for n in spec.notes]
        sys.stdout.write("\n".join(out) + "\n")
        return 0
    specs = hardware.load_specs()
    width = max(len(n) for n in specs)
    for name, spec in specs.items():
        peaks = ", ".join(f"{k} {_rate(v)}" for k, v in sorted(spec.peaks.items(), key=lambda kv: -kv[1])[:3])
        sys.stdout.write(f"{name:<{width}}  {spec.memory_bandwidth_bps / 1e9:7.0f} GB/s  {peaks}  ({spec.label})\n")
    sys.stdout.write("\n`traceclass devices NAME` shows one device with the source of every figure.\n")
    return 0
