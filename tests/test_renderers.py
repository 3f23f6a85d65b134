"""The renderer registry and how `analyze` picks a renderer (--format, -o's extension)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from traceclass.render.renderers import RENDERERS, for_path, renderer

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "sample_traces" / "torch_minitoy-train_mi250.json.gz"


def tc(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "traceclass", *args], capture_output=True, text=True,
                          cwd=ROOT, env={**os.environ, "PYTHONWARNINGS": "ignore"})


def test_every_renderer_declares_name_extension_and_render():
    for name in RENDERERS:
        mod = renderer(name)
        assert mod.NAME == name and mod.EXTENSION.startswith(".") and callable(mod.render)
    assert for_path("r.json").NAME == "json" and for_path("R.MD").NAME == "md"
    assert for_path("roof.png").NAME == "plot" and for_path("report.txt") is None


def test_markdown_sections_are_public_and_issue_uses_them():
    issue = (ROOT / "src" / "traceclass" / "render" / "issue.py").read_text()
    assert "md._" not in issue and "markdown import _" not in issue


@pytest.fixture(scope="module")
def outputs(tmp_path_factory):
    d = tmp_path_factory.mktemp("out")
    runs = {
        "md": tc("analyze", str(SAMPLE)),
        "issue": tc("analyze", str(SAMPLE), "--format", "issue"),
        "issue_flag": tc("analyze", str(SAMPLE), "--issue"),
        "png": tc("analyze", str(SAMPLE), "-o", str(d / "roof.png")),
        "json_flag": tc("analyze", str(SAMPLE), "--format", "json"),
    }
    return d, runs


def test_format_and_extension_pick_the_renderer(outputs):
    d, runs = outputs
    assert all(r.returncode == 0 for r in runs.values()), {k: r.stderr for k, r in runs.items()}
    assert runs["md"].stdout.startswith("# traceclass report: ")
    assert runs["issue"].stdout == runs["issue_flag"].stdout and "<details><summary>" in runs["issue"].stdout
    assert runs["issue"].stdout != runs["md"].stdout
    assert runs["json_flag"].stdout.startswith('{\n "schema_version": ')
    assert (d / "roof.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_binary_format_needs_an_output_file_and_help_lists_the_registry():
    r = tc("analyze", str(SAMPLE), "--format", "plot")
    assert r.returncode == 2 and r.stderr.strip() == "traceclass: --format plot writes binary PNG; give -o FILE.png"
    h = tc("analyze", "--help").stdout
    assert "{md,json,issue,plot}" in h and "--input-format NAME" in h
    bad = tc("analyze", str(SAMPLE), "--issue", "--format", "json")
    assert bad.returncode == 2 and "--issue produces markdown" in bad.stderr


def test_input_format_option(tmp_path):
    r = tc("analyze", str(SAMPLE), "--input-format", "chrome-trace", "--format", "json")
    assert r.returncode == 0, r.stderr
    assert '"format": "chrome-trace"' in r.stdout
