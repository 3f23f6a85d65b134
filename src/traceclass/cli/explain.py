"""``traceclass explain CODE``: one rule's documentation and default thresholds."""

from __future__ import annotations

import argparse
import sys

COMMAND = "explain"
HELP = "print a rule's documentation (e.g. traceclass explain TC201)"


def register(p: argparse.ArgumentParser) -> None:
    p.add_argument("code", help="rule code (TC201) or name (small-kernel-storm)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from traceclass.config import default_thresholds
    from traceclass.registry import find

    rule = find(args.code)
    th = default_thresholds().get(rule.info.code, {})
    out = [f"{rule.info.code} {rule.info.name} ({rule.info.family})", "", rule.doc, ""]
    if th:
        out.append("Default thresholds (override in [tool.traceclass.rules." + rule.info.code + "]):")
        out += [f"  {k} = {v!r}" for k, v in th.items()]
    sys.stdout.write("\n".join(out).rstrip() + "\n")
    return 0
