"""The command line as a user meets it: help, exit codes, one-line errors, outputs."""

from __future__ import annotations

import gzip
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from kineto_builder import KinetoBuilder

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "sample_traces" / "torch_minitoy-train_mi250.json.gz"


def tc(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "traceclass", *args], capture_output=True, text=True,
                          cwd=cwd or ROOT, env={**os.environ, "PYTHONWARNINGS": "ignore"})


def test_help():
    for args in ([["--help"], ["analyze", "--help"], ["diff", "--help"], ["check", "--help"]]):
        r = tc(*args)
        assert r.returncode == 0 and "usage: traceclass" in r.stdout


@pytest.mark.parametrize("content", [b"", b"\x00\x01garbage", b'{"traceEvents": [', b"[1, 2, 3]",
                                     gzip.compress(b'{"traceEvents": [')[:20]])
def test_bad_input_exit_2_one_line_naming_the_file(tmp_path, content):
    p = tmp_path / "bad.json"
    p.write_bytes(content)
    r = tc("analyze", str(p))
    assert r.returncode == 2
    assert r.stdout == ""
    err = r.stderr.strip()
    assert "\n" not in err and "Traceback" not in err and str(p) in err and err.startswith("traceclass: ")


def test_missing_file_and_directory(tmp_path):
    for target in (tmp_path / "nope.json", tmp_path):
        r = tc("analyze", str(target))
        assert r.returncode == 2 and "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_output_file_json_by_extension_and_plot(tmp_path):
    out = tmp_path / "report.json"
    png = tmp_path / "roof.png"
    r = tc("analyze", str(SAMPLE), "-o", str(out), "--plot", str(png))
    assert r.returncode == 0, r.stderr
    d = json.loads(out.read_text())
    assert d["source"]["file"] == SAMPLE.name and d["devices"][0]["kernels"] == 14
    # the MI250 sample's GPU reports itself as "AMD Radeon Graphics"; its deviceProperties identify
    # the roof (MI210 / one MI250 GCD), so its modeled ops are plotted
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and "no plot written" not in r.stderr
    png.unlink()
    # a trace without shapes has nothing to plot: no file, and why
    sync = ROOT / "sample_traces" / "torch_cuda-event-sync_a100.json.gz"
    r = tc("analyze", str(sync), "-o", str(tmp_path / "sync.md"), "--plot", str(png))
    assert r.returncode == 0, r.stderr
    assert not png.exists() and "no plot written" in r.stderr and "recorded without shapes" in r.stderr
    cpu = ROOT / "sample_traces" / "torch_cpu_transformer_block.json.gz"
    r = tc("analyze", str(cpu), "-o", str(tmp_path / "cpu.md"), "--plot", str(png))
    assert r.returncode == 0, r.stderr
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temp file left behind


def _hostile_trace(path: Path) -> Path:
    b = KinetoBuilder()
    b.step(1, 0, 100_000)
    names = ["evil|op `tick` <script>alert(1)</script> @everyone", "**bold** [link](http://x)"]
    for i, n in enumerate(names):
        ext = b.op(n, 1_000 + i * 20_000, 10_000)
        b.launch(ext, n.replace("op", "kernel"), cpu_ts=2_000 + i * 20_000, gpu_ts=30_000 + i * 20_000,
                 gpu_dur=8_000)
    return b.write(path)


def test_hostile_names_are_neutralised_in_markdown(tmp_path):
    r = tc("analyze", str(_hostile_trace(tmp_path / "h.json")))
    assert r.returncode == 0, r.stderr
    md = r.stdout
    assert "evil" in md
    # HTML and mentions only ever appear inside code spans (rendered literally by GitHub) or
    # defused (escaped HTML, a zero-width joiner after "@")
    for line in md.splitlines():
        outside = re.sub(r"(`+).*?\1", "", line)
        assert "@everyone" not in outside, line
        assert "<script>" not in outside, line
    # tables keep their shape: a pipe inside a name never splits a cell
    for block in re.findall(r"(?:^\|.*\n)+", md, flags=re.M):
        rows = block.strip().splitlines()
        counts = {len(re.findall(r"(?<!\\)\|", row)) for row in rows}
        assert len(counts) == 1, rows[:3]


def test_issue_body_fits_and_says_what_was_cut():
    from traceclass.config import load_config
    from traceclass.engine import run
    from traceclass.ingest import load
    from traceclass.render.issue import GITHUB_BODY_LIMIT, render_issue

    _, report = run(load(ROOT / "sample_traces" / "torch_ddp-nccl-train_a100.json.gz"), load_config(cwd=ROOT / "tests"))
    body = render_issue(report)
    assert len(body) <= GITHUB_BODY_LIMIT and body.index("## Verdict") < body.index("<details>")
    small = render_issue(report, limit=6_000)
    assert len(small) <= 6_000 and "Cut to fit" in small


def test_config_from_pyproject_and_file(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[tool.traceclass]\nwarmup_steps = 0\n")
    r = tc("analyze", str(ROOT / "sample_traces" / "torch_cpu_diff_baseline.json.gz"), "--format", "json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    step = next(s for s in json.loads(r.stdout)["stages"] if s["kind"] == "step")
    assert step["warmup_count"] == 0 and step["count"] == 6
    bad = tmp_path / "bad.toml"
    bad.write_text("[tool.traceclass]\nwarmup_stepz = 1\n")
    r = tc("analyze", str(SAMPLE), "--config", str(bad))
    assert r.returncode == 2 and "warmup_stepz" in r.stderr and "Traceback" not in r.stderr
    bad.write_text("[tool.traceclass]\nlatency_floor_us = -1\n")
    r = tc("analyze", str(SAMPLE), "--config", str(bad))
    assert r.returncode == 2


def test_device_override_and_unknown_device():
    r = tc("analyze", str(SAMPLE), "--device", "mi250", "--format", "json")
    hw = [h for h in json.loads(r.stdout)["hardware"] if h["device"] >= 0]
    assert hw[0]["spec"] == "mi250" and hw[0]["how"] == "--device override"
    r = tc("analyze", str(SAMPLE), "--format", "json")
    hw = [h for h in json.loads(r.stdout)["hardware"] if h["device"] >= 0]
    # "AMD Radeon Graphics" says nothing; gfx90a, 104 CUs and 64 GB fit an MI210 or one MI250 GCD,
    # whose roofs agree within 1 %: judged as the first, both candidates stated
    assert hw[0]["spec"] == "mi210"
    assert "AMD Instinct MI210 or AMD Instinct MI250 (one GCD)" in hw[0]["how"]
    r = tc("analyze", str(SAMPLE), "--device", "no-such-gpu")
    assert r.returncode == 2 and "no-such-gpu" in r.stderr


def test_fail_on(tmp_path):
    r = tc("analyze", str(ROOT / "sample_traces" / "torch_ddp-nccl-train_a100.json.gz"), "--fail-on", "low",
           "-o", str(tmp_path / "r.md"))
    assert r.returncode == 1


def test_program_source_lines_never_reach_the_report():
    from conftest import corpus

    f = corpus("pyspy", "cpu_lock.idle.speedscope.json")
    roots = corpus("pyspy", "workloads")
    r = tc("analyze", str(f), "--source-root", str(roots), "--format", "json")
    assert r.returncode == 0, r.stderr
    assert "lock.acquire" not in r.stdout and "time.sleep(" not in r.stdout  # texts of cpu_lock.py lines
    assert json.loads(r.stdout)["source"]["meta"] == {}


def test_dash_output_is_stdout_or_refused(tmp_path):
    """``-o -`` prints where the command prints by default, and is refused (exit 2, one line)
    where it writes a file; a file named "-" is never created."""
    r = tc("analyze", str(SAMPLE), "-o", "-", "--format", "json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["source"]["file"] == SAMPLE.name
    r = tc("baseline", "save", str(SAMPLE), "-o", "-", cwd=tmp_path)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.strip() == "traceclass: -o -: traceclass baseline writes a file, not standard output; give its name"
    assert list(tmp_path.iterdir()) == []
