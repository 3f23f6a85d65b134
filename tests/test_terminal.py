"""Terminal output for people (stdout a TTY), markdown for files and pipes, next steps after it."""

from __future__ import annotations

import io
import re
import sys
from pathlib import Path

import pytest

from traceclass.cli import main
from traceclass.config import load_config
from traceclass.engine import run
from traceclass.ingest import load
from traceclass.render import terminal

ROOT = Path(__file__).resolve().parents[1]
DDP = ROOT / "sample_traces" / "torch_ddp-nccl-train_a100.json.gz"


@pytest.fixture(scope="module")
def report():  # type: ignore[no-untyped-def]
    return run(load(DDP), load_config(cwd=ROOT / "tests"))[1]


@pytest.mark.parametrize("width", [80, 120])
def test_terminal_text_has_no_markdown_and_fits(report, width):
    out = terminal.render(report, 15, width=width)
    assert max(len(line) for line in out.splitlines()) <= width
    for raw in (r"\[", r"\#", r"\_", "&gt;", "&lt;", "<wbr>", "<details>", "**", "`"):
        assert raw not in out, raw
    assert "## backward ##" in out  # the stage name, unescaped
    assert "Top GPU kernels\n---------------" in out
    # a table row: the largest finding's time, severity, rule and title on one line
    assert re.search(r"^225 ms +high +TC202 launch-gap +Cut launch overhead", out, re.M)


def test_terminal_renderer_is_a_registry_module():
    assert terminal.NAME == "terminal" and terminal.EXTENSION == ".txt" and callable(terminal.render)


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_cli_renders_for_a_terminal_and_markdown_for_a_pipe(monkeypatch, capsys):
    tty = _Tty()
    monkeypatch.setattr(sys, "stdout", tty)
    assert main(["analyze", str(DDP)]) == 0
    shown = tty.getvalue()
    assert shown.startswith("traceclass report: torch_ddp-nccl-train_a100.json.gz\n====")
    assert "Next:\n  traceclass analyze" in shown and "--issue -o issue.md" in shown
    assert "traceclass explain TC202" in shown
    monkeypatch.undo()
    assert main(["analyze", str(DDP)]) == 0
    piped = capsys.readouterr().out
    assert piped.startswith("# traceclass report: `torch_ddp-nccl-train_a100.json.gz`")
    assert "Next:" not in piped and piped.endswith("</details>\n")


def test_written_report_is_followed_by_next_steps_on_stderr(tmp_path, capsys):
    out = tmp_path / "report.md"
    assert main(["analyze", str(DDP), "-o", str(out)]) == 0
    err = capsys.readouterr().err
    assert f"wrote {out}" in err
    steps = err.split("Next:\n")[1].strip().splitlines()
    assert 2 <= len(steps) <= 3
    assert steps[0].strip().startswith(f"traceclass analyze {DDP} --issue -o issue.md")
    assert out.read_text(encoding="utf-8").startswith("# traceclass report:")
