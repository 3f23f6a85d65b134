"""``traceclass devices``: the hardware table the roofline uses, with sources."""

from __future__ import annotations

import argparse
import sys

COMMAND = "devices"
HELP = "list known devices (names for --device) with their peaks and sources"


def register(p: argparse.ArgumentParser) -> None:
    p.add_argument("name", nargs="?", help="show one device in full (name or alias)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from traceclass import hardware, units

    if args.name:
        spec = hardware.get(args.name, option=None)
        out = [f"{spec.name}: {spec.label} ({spec.vendor})",
               f"  memory bandwidth: {units.byte_rate(spec.memory_bandwidth_bps)}"]
        if spec.host_link_bps:
            out.append(f"  host link: {units.byte_rate(spec.host_link_bps)} per direction")
        for key, val in sorted(spec.peaks.items()):
            out.append(f"  {key}: {units.flop_rate(val)}")
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
        peaks = ", ".join(f"{k} {units.flop_rate(v)}" for k, v in sorted(spec.peaks.items(), key=lambda kv: -kv[1])[:3])
        sys.stdout.write(f"{name:<{width}}  {units.byte_rate(spec.memory_bandwidth_bps):>11}  {peaks}  ({spec.label})\n")
    sys.stdout.write("\n`traceclass devices NAME` shows one device with the source of every figure.\n")
    return 0
