"""The CLI contract every input must meet, checked in-process.

``traceclass`` on any file: exit 0 or 1 with a parseable report, or exit 2 with exactly one
line on stderr that names the file at fault and says what is wrong (never "internal error",
never a traceback); the inputs are byte-for-byte unchanged and nothing appears beside them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import io
import json
import os
from pathlib import Path
from typing import Sequence


@dataclasses.dataclass
class Outcome:
    argv: list[str]
    rc: int
    out: str
    err: str

    @property
    def kind(self) -> str:
        """Outcome class for the campaign's totals."""
        if self.rc in (0, 1):
            return f"exit {self.rc} (report)"
        if self.rc == 2:
            return "exit 2 (" + _reason(self.err) + ")"
        return f"exit {self.rc}"


def _reason(err: str) -> str:
    low = err.lower()
    for word in ("bomb", "nul bytes", "gzip", "truncated", "nested", "sqlite", "empty", "json", "utf",
                 "out of range", "nothing comparable", "not a", "no line", "refusing"):
        if word in low:
            return word
    return "other"


def _digest(p: Path) -> str:
    h = hashlib.sha256()
    with open(p, "rb") as fh:
        while chunk := fh.read(1 << 20):  # in pieces: the harness must not be what holds a 2 GB input
            h.update(chunk)
    return h.hexdigest()


def run_cli(argv: Sequence[str]) -> Outcome:
    from traceclass.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = main(list(argv))
        except SystemExit as exc:  # argparse: not expected for the argv we build
            rc = int(exc.code or 0) + 100
    return Outcome(list(argv), rc, out.getvalue(), err.getvalue())


def check(argv: Sequence[str], inputs: Sequence[Path], fmt: str = "md", output: Path | None = None) -> Outcome:
    """Run ``argv`` and assert the contract; returns the outcome for tallies."""
    folders = {p.parent for p in inputs}
    before = {p: _digest(p) for p in inputs}
    listing = {d: sorted(os.listdir(d)) for d in folders}
    got = run_cli(argv)
    assert "Traceback" not in got.err, got.err
    assert got.rc in (0, 1, 2), (got.rc, got.err)
    if got.rc == 2:
        lines = got.err.strip().splitlines()
        assert len(lines) == 1, got.err
        line = lines[0]
        assert line.startswith("traceclass: "), line
        assert "internal error" not in line, line
        assert any(str(p) in line for p in inputs), line
    else:
        report = output.read_text("utf-8") if output is not None else got.out
        if fmt == "json":
            json.loads(report)
        else:
            assert report.lstrip().startswith(("# ", "## ")), report[:200]
    for p, h in before.items():
        assert _digest(p) == h, f"{p} was modified"
    for d, names in listing.items():
        now = sorted(os.listdir(d))
        assert now == names, f"{d} gained or lost files: {sorted(set(now) ^ set(names))}"
    return got


def commands(kind: str, path: Path, seeds: dict[str, Path], out_dir: Path) -> list[tuple[list[str], list[Path], str, Path | None]]:
    """The commands a mutated input of ``kind`` goes through: (argv, inputs, format, output file)."""
    p = str(path)
    if kind == "trace":
        ss = out_dir / "out.speedscope.json"
        return [
            (["analyze", p, "--format", "json"], [path], "json", None),
            (["export", p, "-o", str(ss)], [path], "json", ss),
        ]
    if kind == "report":
        return [(["diff", str(seeds["report.json"]), p, "--format", "json"], [path, seeds["report.json"]], "json", None)]
    return [(["check", str(seeds["report.json"]), "--baseline", p, "--format", "json"],
             [path, seeds["report.json"]], "json", None)]
