"""``traceclass explain CODE``: one rule's documentation and default thresholds."""

from __future__ import annotations

import argparse
import sys

COMMAND = "explain"
HELP = "print a rule's documentation (e.g. traceclass explain TC201)"


def register(p: argparse.ArgumentParser) -> None:
    p.add_argument("code", help="rule code (TC201) or name (small-kernel-storm)")
    p.set_defaults(func=run)


def explain(code: str) -> str:
    """A rule's documentation followed by its declared thresholds (default, unit, reason)."""
    import textwrap

    from traceclass.registry import find

    rule = find(code)
    info = rule.info
    out = [f"{info.code} {info.name} ({info.family})", "", rule.doc, ""]
    if info.thresholds:
        out.append(f"Default thresholds (override in [tool.traceclass.rules.{info.code}]):")
        for t in info.thresholds:
            out.append(f"  {t.name} = {t.default!r} ({t.unit})")
            out += textwrap.wrap(t.reason, 96, initial_indent="      ", subsequent_indent="      ")
    return "\n".join(out).rstrip() + "\n"


def run(args: argparse.Namespace) -> int:
    sys.stdout.write(explain(args.code))
    return 0
