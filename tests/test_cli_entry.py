"""The ``traceclass`` command's exit (``cli.entry``): no interpreter teardown, yet everything a
normal exit does that a user could notice still happens: output flushed, exit code kept, exit
handlers run, other threads waited for, a closed pipe silent."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "sample_traces" / "torch_cuda-event-sync_a100.json.gz"


# block-buffered stdout, as a user's shell gives a pipe (this sandbox sets PYTHONUNBUFFERED)
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"} | {"PYTHONWARNINGS": "ignore"}


def _py(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=ROOT, env=ENV)


def test_report_on_stdout_is_whole_and_equal_to_main(tmp_path):
    """The report written to a pipe by the command equals the in-process main()'s file."""
    ref = tmp_path / "ref.md"
    r = _py("import sys; from traceclass.cli import main; sys.exit(main(sys.argv[1:]))",
            "analyze", str(SAMPLE), "-o", str(ref))
    assert r.returncode == 0, r.stderr
    r = subprocess.run([sys.executable, "-m", "traceclass", "analyze", str(SAMPLE)],
                       capture_output=True, cwd=ROOT, env=ENV)
    assert r.returncode == 0, r.stderr
    assert len(r.stdout) > 20_000 and r.stdout == ref.read_bytes()


def test_buffered_output_is_flushed():
    """``traceclass rules`` writes its 3.5 KB catalogue without flushing it: still in the
    buffer when the command ends, it must reach the pipe."""
    r = subprocess.run([sys.executable, "-m", "traceclass", "rules"], capture_output=True, text=True, cwd=ROOT,
                       env=ENV)
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("TC") >= 15 and r.stdout.endswith("\n")


@pytest.mark.parametrize("argv, code", [(["rules"], 0), (["analyze", "/nonexistent/trace.json"], 2)])
def test_exit_code_and_exit_handlers(tmp_path, argv, code):
    mark = tmp_path / "handler-ran"
    r = _py("import atexit, sys\n"
            f"atexit.register(lambda: open({str(mark)!r}, 'w').write('yes'))\n"
            "sys.argv = ['traceclass', *sys.argv[1:]]\n"
            "from traceclass.cli import entry\n"
            "entry()\n"
            "print('not reached')", *argv)
    assert r.returncode == code, r.stderr
    assert mark.read_text() == "yes"
    assert "not reached" not in r.stdout


def test_waits_for_other_threads(tmp_path):
    """A thread still running (a library's writer, say) is waited for, as a normal exit does."""
    mark = tmp_path / "thread-done"
    r = _py("import sys, threading, time\n"
            f"def late(): time.sleep(0.3); open({str(mark)!r}, 'w').write('done')\n"
            "threading.Thread(target=late).start()\n"
            "sys.argv = ['traceclass', 'rules']\n"
            "from traceclass.cli import entry\n"
            "entry()")
    assert r.returncode == 0, r.stderr
    assert mark.read_text() == "done"


def test_closed_pipe_is_silent():
    """``traceclass rules | head -1``: exit 0, nothing on stderr (Python's own exit would print
    'Exception ignored ... BrokenPipeError' when flushing the rest)."""
    p = subprocess.Popen([sys.executable, "-m", "traceclass", "rules"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, cwd=ROOT, env=ENV)
    p.stdout.close()  # before the command writes: its flush at exit meets a closed pipe
    err = p.stderr.read().decode()
    assert p.wait(timeout=60) == 0
    assert err == ""
