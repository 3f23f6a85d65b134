"""``traceclass record``: py-spy invocation, error messages, and one real recording."""

from __future__ import annotations

import json
import os
import stat
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import corpus
from traceclass.cli import main
from traceclass.cli import record as rec
from traceclass.errors import ConfigError, ExternalToolError


def _have_pyspy() -> bool:
    try:
        rec.find_pyspy()
        return True
    except ExternalToolError:
        return False


needs_pyspy = pytest.mark.skipif(not _have_pyspy(), reason="py-spy is not installed (pip install py-spy)")


def _fake_pyspy(tmp_path: Path, body: str) -> Path:
    p = tmp_path / "bin" / "py-spy"
    p.parent.mkdir(exist_ok=True)
    p.write_text("#!/bin/sh\n" + body)
    p.chmod(p.stat().st_mode | stat.S_IXUSR)
    return p


def test_pyspy_command_line():
    cmd = rec.pyspy_command("/x/py-spy", "out.json", ["python", "t.py", "-v"], 250, True, False)
    assert cmd == ["/x/py-spy", "record", "--format", "speedscope", "--idle", "--threads", "--rate", "250",
                   "-o", "out.json", "--subprocesses", "--", "python", "t.py", "-v"]


def test_torch_command_wraps_the_interpreter():
    wrapper = str(Path(rec.__file__).with_name("_torch_child.py"))
    assert rec.torch_command(["python3", "-u", "train.py", "--lr", "1"], "t.json") == [
        "python3", "-u", wrapper, "t.json", "train.py", "--lr", "1"]
    assert rec.torch_command(["/v/bin/python", "-m", "pkg.train", "-x"], "t.json") == [
        "/v/bin/python", wrapper, "t.json", "-m", "pkg.train", "-x"]
    with pytest.raises(ConfigError):
        rec.torch_command(["bash", "run.sh"], "t.json")
    with pytest.raises(ConfigError):
        rec.torch_command(["python", "-m"], "t.json")


def test_missing_pyspy_is_one_line_exit_2(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(rec.shutil, "which", lambda name: None)
    monkeypatch.setattr(rec.sys, "executable", str(tmp_path / "python"))
    assert main(["record", "--", "python", "x.py"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["traceclass: py-spy not found: pip install 'traceclass[pyspy]'"]


def test_permission_error_is_explained(tmp_path, monkeypatch, capsys):
    fake = _fake_pyspy(tmp_path, 'echo "Error: Failed to open process 123: Permission denied (os error 13)" >&2\nexit 1\n')
    monkeypatch.setattr(rec.shutil, "which", lambda name: str(fake))
    assert main(["record", "-o", str(tmp_path / "o.json"), "--", "python", "x.py"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("traceclass: py-spy may not read the process memory (ptrace)")
    assert "SYS_PTRACE" in err[-1] and "sudo" in err[-1]


def test_other_pyspy_failure_names_its_last_line(tmp_path, monkeypatch, capsys):
    fake = _fake_pyspy(tmp_path, 'echo "Error: Failed to spawn process: No such file" >&2\nexit 1\n')
    monkeypatch.setattr(rec.shutil, "which", lambda name: str(fake))
    assert main(["record", "-o", str(tmp_path / "o.json"), "--", "nonexistent-program"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == "traceclass: py-spy wrote no profile (Error: Failed to spawn process: No such file)"


def test_nothing_to_run(capsys):
    assert main(["record"]) == 2
    assert main(["record", "--"]) == 2
    assert "nothing to run" in capsys.readouterr().err


def test_report_falls_back_to_the_cpu_section(tmp_path, monkeypatch, capsys):
    # a stand-in py-spy that "records" by copying a corpus profile
    src = corpus("pyspy", "cpu_lock.idle_threads.speedscope.json")
    fake = _fake_pyspy(tmp_path, textwrap.dedent(f"""\
        while [ "$1" != "-o" ]; do shift; done
        cp "{src}" "$2"
        """))
    monkeypatch.setattr(rec.shutil, "which", lambda name: str(fake))
    import traceclass.cli.analyze as analyze

    monkeypatch.delattr(analyze, "render_trace")
    out = tmp_path / "p.speedscope.json"
    assert main(["record", "-o", str(out), "--", "python", "x.py"]) == 0
    text = capsys.readouterr().out
    assert text.startswith("## CPU profile")
    assert "Idle samples: included (recorded with `--idle`)" in text
    assert "whether idle samples were kept" not in text


@needs_pyspy
def test_real_recording(tmp_path, capsys):
    out = tmp_path / "run.speedscope.json"
    script = corpus("pyspy", "workloads", "cpu_lock.py")
    rc = main(["record", "-o", str(out), "--rate", "200", "--", sys.executable, str(script), "1.5"])
    assert rc == 0
    doc = json.loads(out.read_text())
    assert doc["exporter"].startswith("py-spy@")
    names = sorted(p["name"].split('"')[1] for p in doc["profiles"])
    # py-spy may name a profile before `threading` named the thread: the main one can be ""
    assert len(names) == 3 and {"lock-waiter", "sleeper-io"} <= set(names)
    # --idle was passed: the waiting threads are sampled about as often as the busy one
    n = [len(p["samples"]) for p in doc["profiles"]]
    assert min(n) > 0.7 * max(n)
    assert all(w == pytest.approx(0.005) for p in doc["profiles"] for w in p["weights"][:5])
    text = capsys.readouterr().out
    assert "## CPU profile" in text
    assert "lock or condition wait" in text and "sleep" in text
    # the recorded paths exist here, so the leaf lines were classified from their source
    assert "`lock-waiter (tid" in text


@needs_pyspy
def test_real_recording_with_torch(tmp_path, capsys):
    pytest.importorskip("torch")
    script = tmp_path / "mm.py"
    script.write_text("import torch, time\nx = torch.randn(64, 64)\nt = time.time()\n"
                      "while time.time() - t < 0.3:\n    x = (x @ x).tanh()\n")
    out = tmp_path / "t.speedscope.json"
    rc = main(["record", "--torch", "-o", str(out), "--", sys.executable, str(script)])
    assert rc == 0
    torch_trace = tmp_path / "t.torch.json"
    assert torch_trace.exists() and os.path.getsize(torch_trace) > 0
    text = capsys.readouterr().out
    assert "## CPU profile" in text  # the py-spy profile's report
    assert "aten::" in text  # and the torch trace's, which lists operators
    assert "aten::mm" in torch_trace.read_text()
