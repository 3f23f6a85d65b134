"""README examples are produced by the code: every block quote marked
``<!-- output of: traceclass ... -->`` must appear in that command's output ("[...]" skips text)."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
MARKED = re.compile(r"<!-- output of: (traceclass [^>]*?) -->\n((?:>.*\n)+)")


def _squash(s: str) -> str:
    return " ".join(s.split())


def test_readme_has_checked_examples():
    commands = [m.group(1) for m in MARKED.finditer(README)]
    assert any(c.startswith("traceclass analyze sample_traces/torch_ddp") for c in commands)
    assert any(c.startswith("traceclass diff ") for c in commands)
    # the first command a newcomer runs analyzes a bundled GPU sample into report.md
    first = re.search(r"```sh\n(.*?)\n```", README).group(1)
    assert "traceclass analyze sample_traces/torch_ddp-nccl-train_a100.json.gz -o report.md" in first


@pytest.mark.parametrize("command, quote", [(m.group(1), m.group(2)) for m in MARKED.finditer(README)])
def test_readme_example_matches_the_output(command, quote):
    args = shlex.split(command)[1:]
    r = subprocess.run([sys.executable, "-m", "traceclass", *args], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    out = _squash(r.stdout)
    text = "\n".join(line[1:].removeprefix(" ") for line in quote.splitlines())
    pos = 0
    for piece in text.split("[...]"):
        piece = _squash(piece)
        if not piece:
            continue
        at = out.find(piece, pos)
        assert at >= 0, f"README says {piece!r}; `{command}` prints otherwise"
        pos = at + len(piece)
