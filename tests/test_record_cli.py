"""``traceclass record``: py-spy invocation, error messages, and one real recording."""

from __future__ import annotations

import collections
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
from traceclass.ingest import load
from traceclass.model import Trace


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
    cmd = rec.pyspy_command("/x/py-spy", "out.json", ["python", "t.py"], 100, False, False, gil=True)
    assert cmd == ["/x/py-spy", "record", "--format", "speedscope", "--idle", "--threads", "--rate", "100",
                   "-o", "out.json", "--gil", "--", "python", "t.py"]


WRAPPER = str(Path(rec.__file__).with_name("_torch_child.py"))


def test_torch_command_wraps_the_interpreter():
    assert rec.torch_command(["python3", "-u", "train.py", "--lr", "1"], "t.json", "s.json") == [
        "python3", "-u", WRAPPER, "s.json", "t.json", "train.py", "--lr", "1"]
    assert rec.torch_command(["/v/bin/python", "-m", "pkg.train", "-x"], "t.json", "s.json") == [
        "/v/bin/python", WRAPPER, "s.json", "t.json", "-m", "pkg.train", "-x"]
    with pytest.raises(ConfigError):
        rec.torch_command(["bash", "run.sh"], "t.json")
    with pytest.raises(ConfigError):
        rec.torch_command(["python", "-m"], "t.json")


@pytest.mark.parametrize("command, wrapped", [
    (["python", "t.py", "-v"], ["python", WRAPPER, "S", "-", "t.py", "-v"]),
    (["python3.11", "-X", "dev", "-W", "error", "-O", "t.py"],
     ["python3.11", "-X", "dev", "-W", "error", "-O", WRAPPER, "S", "-", "t.py"]),
    (["python", "-c", "print(1)", "a"], ["python", WRAPPER, "S", "-", "-c", "print(1)", "a"]),
    (["python", "-m", "pkg"], ["python", WRAPPER, "S", "-", "-m", "pkg"]),
    (["python", "-"], None),  # the program comes on stdin
    (["python", "-u"], None),  # nothing to run
    (["train-cli", "--epochs", "1"], None),  # a console script: run as it is, status unknown
    (["bash", "run.sh"], None),
])
def test_wrap_command(command, wrapped):
    assert rec.wrap_command(command, "S") == wrapped


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
    captured = capsys.readouterr()
    text = captured.out
    assert "## CPU profile" in text  # the py-spy profile's report
    assert "aten::" in text  # and the torch trace's, which lists operators
    assert "aten::mm" in torch_trace.read_text()
    # the wrapper (its import of torch, prof.start()'s imports, the export) is not blamed
    # (the note listing the rules not run for lack of data names TC505 for the torch trace)
    blamed = "\n".join(ln for ln in text.splitlines() if not ln.startswith("- rules not run"))
    assert "_torch_child" not in text and "TC505" not in blamed
    assert "of its wrapper's own work (importing torch, starting and stopping torch.profiler, writing files) " \
           "left out as tool overhead" in text
    assert captured.err.strip().splitlines()[-2:] == [
        f"traceclass: profile kept in {out} and {torch_trace}", "traceclass: the program exited with status 0"]


@needs_pyspy
def test_real_recording_passes_the_exit_status_on(tmp_path, capsys):
    script = tmp_path / "fails.py"
    script.write_text("import time\nt = time.time()\nwhile time.time() - t < 0.3:\n    pass\nraise SystemExit(3)\n")
    rc = main(["record", "-o", str(tmp_path / "f.speedscope.json"), "--", sys.executable, str(script)])
    assert rc == 3
    assert capsys.readouterr().err.strip().splitlines()[-1] == "traceclass: the program exited with status 3"


@needs_pyspy
def test_real_gil_only_recording(tmp_path, capsys):
    out = tmp_path / "g.speedscope.json"
    script = corpus("pyspy", "workloads", "cpu_lock.py")
    assert main(["record", "--gil", "-o", str(out), "--", sys.executable, str(script), "1"]) == 0
    text = capsys.readouterr().out
    assert "CPU profile of sampled thread time (GIL-only profile, py-spy --gil): " in text
    assert "- GIL-only profile: only samples of threads holding the GIL were recorded (py-spy `--gil`)" in text
    # the blocked threads hold no GIL: py-spy --gil keeps (nearly) none of their samples
    doc = json.loads(out.read_text())
    by_name = {p["name"].split('"')[1]: len(p["samples"]) for p in doc["profiles"]}
    assert by_name.get("lock-waiter", 0) <= 2 and max(by_name.values()) >= 50


EMPTY_PROFILE = ('{"$schema":"https://www.speedscope.app/file-format-schema.json","profiles":[],'
                 '"shared":{"frames":[]},"activeProfileIndex":null,"exporter":"py-spy@0.4.3","name":"py-spy profile"}')


def _running_pyspy(tmp_path: Path, profile: str | None) -> Path:
    """A stand-in py-spy that runs the command it is given (as py-spy does), then writes
    ``profile`` (a corpus file to copy, or the empty profile py-spy writes after 0 samples)."""
    write = f'cp "{profile}" "$out"' if profile else f"printf '%s' '{EMPTY_PROFILE}' > \"$out\""
    return _fake_pyspy(tmp_path, textwrap.dedent(f"""\
        out=""
        while [ "$1" != "--" ]; do
          if [ "$1" = "-o" ]; then out="$2"; shift; fi
          shift
        done
        shift
        "$@"
        {write}
        exit 0
        """))


def _record(tmp_path, monkeypatch, capsys, fake, *command):
    monkeypatch.setattr(rec.shutil, "which", lambda name: str(fake))
    rc = main(["record", "-o", str(tmp_path / "p.speedscope.json"), "--", *command])
    out, err = capsys.readouterr()
    return rc, out, [line for line in err.splitlines() if line.startswith("traceclass")], err


def test_program_exit_status_is_passed_on(tmp_path, monkeypatch, capsys):
    fake = _running_pyspy(tmp_path, corpus("pyspy", "cpu_lock.idle_threads.speedscope.json"))
    rc, out, lines, _ = _record(tmp_path, monkeypatch, capsys, fake, sys.executable, "-c", "raise SystemExit(3)")
    assert rc == 3 and "## CPU profile" in out
    assert lines[-1] == "traceclass: the program exited with status 3"
    rc, out, lines, err = _record(tmp_path, monkeypatch, capsys, fake, sys.executable, "-c", "1/0")
    assert rc == 1 and lines[-1] == "traceclass: the program exited with status 1 (ZeroDivisionError)"
    # Python's own traceback, without the wrapper's or runpy's frames
    assert "ZeroDivisionError: division by zero" in err and "_torch_child" not in err and "runpy" not in err
    rc, out, lines, _ = _record(tmp_path, monkeypatch, capsys, fake, sys.executable, "-c", "pass")
    assert rc == 0 and lines[-1] == "traceclass: the program exited with status 0"


def test_exit_status_of_other_commands_is_unknown(tmp_path, monkeypatch, capsys):
    fake = _running_pyspy(tmp_path, corpus("pyspy", "cpu_lock.idle_threads.speedscope.json"))
    rc, out, lines, _ = _record(tmp_path, monkeypatch, capsys, fake, "sh", "-c", "exit 4")
    assert rc == 0 and "## CPU profile" in out
    assert lines[-1].startswith("traceclass: the program's exit status is unknown: py-spy does not pass it on")


def test_zero_samples_is_said_plainly(tmp_path, monkeypatch, capsys):
    fake = _running_pyspy(tmp_path, None)
    rc, out, lines, _ = _record(tmp_path, monkeypatch, capsys, fake, sys.executable, "-c", "pass")
    assert rc == 2 and out == ""
    assert lines == ["traceclass: the program exited with status 0",
                     "traceclass: py-spy collected 0 samples (program ran < 1 sample interval)"]
    rc, out, lines, _ = _record(tmp_path, monkeypatch, capsys, fake, sys.executable, "-c", "raise SystemExit(5)")
    assert rc == 5
    assert lines == ["traceclass: the program exited with status 5",
                     "traceclass: py-spy collected 0 samples (program ran < 1 sample interval)"]


def test_program_gone_before_pyspy_looked(tmp_path, monkeypatch, capsys):
    fake = _fake_pyspy(tmp_path, 'echo "Error: Failed to get process executable name. Check that the process is '
                                 'running." >&2\nexit 1\n')
    rc, out, lines, _ = _record(tmp_path, monkeypatch, capsys, fake, sys.executable, "-c", "pass")
    assert rc == 2 and lines == ["traceclass: py-spy collected 0 samples (program ran < 1 sample interval)"]


def test_torch_missing_is_not_a_kept_trace(tmp_path, monkeypatch, capsys):
    fake = _running_pyspy(tmp_path, corpus("pyspy", "cpu_lock.idle_threads.speedscope.json"))
    stub = tmp_path / "stub"
    stub.mkdir()
    (stub / "torch.py").write_text('raise ImportError("no torch here")\n')
    monkeypatch.setenv("PYTHONPATH", str(stub))
    monkeypatch.setattr(rec.shutil, "which", lambda name: str(fake))
    rc = main(["record", "--torch", "-o", str(tmp_path / "p.speedscope.json"), "--", sys.executable, "-c", "pass"])
    out, err = capsys.readouterr()
    assert rc == 2 and out == ""
    assert err.strip().splitlines()[-1] == (
        f"traceclass: the program did not run: torch is not importable in {sys.executable} (no torch here)")
    assert "kept" not in err and not (tmp_path / "p.torch.json").exists()


def _wrapped_profile(tmp_path: Path) -> Trace:
    """A py-spy speedscope profile of a program run by the wrapper, by hand."""
    w = str(rec.WRAPPER)
    frames = [
        {"name": "<module>", "file": w, "line": 117}, {"name": "main", "file": w, "line": 93},    # 0, 1
        {"name": "run_path", "file": "<frozen runpy>", "line": 291},                              # 2
        {"name": "_run_module_code", "file": "<frozen runpy>", "line": 98},                       # 3
        {"name": "_run_code", "file": "<frozen runpy>", "line": 88},                              # 4
        {"name": "<module>", "file": str(tmp_path / "app.py"), "line": 3},                        # 5
        {"name": "work", "file": str(tmp_path / "app.py"), "line": 7},                            # 6
        {"name": "main", "file": w, "line": 80},                                                  # 7 prof.start()
        {"name": "_find_and_load", "file": "<frozen importlib._bootstrap>", "line": 1176},        # 8
        {"name": "Thread._bootstrap", "file": "/usr/lib/python3.11/threading.py", "line": 1002},  # 9
        {"name": "helper", "file": str(tmp_path / "app.py"), "line": 12},                         # 10
        {"name": "_get_code_from_file", "file": "<frozen runpy>", "line": 254},                   # 11
    ]
    main_samples = [[0, 1, 2, 3, 4, 5, 6]] * 30 + [[0, 1, 2, 3, 4, 5]] * 5 + [[0, 7, 8]] * 12 + [[0, 1]] * 2 \
        + [[0, 1, 2, 11]] * 1
    doc = {"$schema": "https://www.speedscope.app/file-format-schema.json", "exporter": "py-spy@0.4.3",
           "shared": {"frames": frames}, "profiles": [
               {"type": "sampled", "name": 'Thread 10 "MainThread"', "unit": "seconds", "startValue": 0,
                "endValue": 0.5, "samples": main_samples, "weights": [0.01] * len(main_samples)},
               {"type": "sampled", "name": 'Thread 11 "helper"', "unit": "seconds", "startValue": 0,
                "endValue": 0.2, "samples": [[9, 10]] * 20, "weights": [0.01] * 20}]}
    (tmp_path / "app.py").write_text("import time\n\nwork()\n\n\n\nx = sum(range(10))\n")
    p = tmp_path / "w.speedscope.json"
    p.write_text(json.dumps(doc))
    return load(p)


def test_strip_wrapper(tmp_path):
    trace = _wrapped_profile(tmp_path)
    out = rec.strip_wrapper(trace, torch=True)
    names = out.strings

    def stacks(t):
        got = collections.Counter()
        for node, cnt in zip(t.samples.node.tolist(), t.samples.count.tolist()):
            path = []
            while node >= 0:
                f = int(t.stacks.frame[node])
                path.append(f"{names[int(t.frames.function[f])]}:{int(t.frames.line[f])}")
                node = int(t.stacks.parent[node])
            got[";".join(reversed(path))] += cnt
        return got

    assert stacks(out) == {
        "<module>:3;work:7": 30,                  # the program, as if run by python app.py
        "<module>:3": 5,
        "run_path:291;_get_code_from_file:254": 1,  # runpy reading the program: kept, it is the program's start
        "Thread._bootstrap:1002;helper:12": 20,   # other threads untouched
    }
    assert int(out.samples.count.sum()) == 56  # 12 samples in prof.start()'s import and 2 in main left out
    assert ("traceclass record: 14 samples, 0.14 s of its wrapper's own work (importing torch, starting and "
            "stopping torch.profiler, writing files) left out as tool overhead") in out.notes
    assert any(n.startswith("traceclass record --torch: the wrapper imports torch") for n in out.notes)
    # nothing in the program's frames names the wrapper any more, so no rule can blame it
    from traceclass.analysis.cpu_profile import profile_samples

    prof = profile_samples(out)
    assert not any("_torch_child" in h.file for h in prof.hot_spots + prof.top_total)
    plain = load(corpus("pyspy", "cpu_lock.idle_threads.speedscope.json"))
    assert rec.strip_wrapper(plain) is plain  # no wrapper frames: left as it is
