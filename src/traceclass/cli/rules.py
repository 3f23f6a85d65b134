"""``traceclass rules``: the rule catalogue."""

from __future__ import annotations

import argparse
import sys

COMMAND = "rules"
HELP = "list the bottleneck rules"


def register(p: argparse.ArgumentParser) -> None:
    p.add_argument("--format", choices=("md", "text"), default="text")
    p.set_defaults(func=run)


def catalogue(fmt: str = "text") -> str:
    from traceclass.registry import all_rules

    rules = all_rules()
    if fmt == "md":
        lines = ["| code | name | family | summary |", "| --- | --- | --- | --- |"]
        lines += [f"| {r.info.code} | `{r.info.name}` | {r.info.family} | {r.info.summary} |" for r in rules]
        return "\n".join(lines) + "\n"
    width = max((len(r.info.name) for r in rules), default=10)
    return "".join(f"{r.info.code}  {r.info.name:<{width}}  {r.info.family:<12} {r.info.summary}\n" for r in rules)


def run(args: argparse.Namespace) -> int:
    sys.stdout.write(catalogue(args.format))
    return 0
