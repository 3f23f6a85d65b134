"""``traceclass record [options] -- python script.py args``: profile a run with py-spy, report it."""

from __future__ import annotations

import argparse
import collections
import dataclasses
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from traceclass.errors import ConfigError, ExternalToolError
from traceclass.model import Trace

COMMAND = "record"
HELP = "run a program under py-spy (idle samples, per thread) and print the report"
DESCRIPTION = (
    "Run COMMAND under `py-spy record --format speedscope --idle --threads`, keep the profile, "
    "then analyze it like `traceclass analyze` does. With --torch the program (a Python script or "
    "`-m module`) also runs under torch.profiler and that trace is reported too. Example: "
    "traceclass record -o run.speedscope.json -- python train.py --epochs 1"
)
PERMISSION_HINT = (
    "py-spy may not read the process memory (ptrace): run as root (sudo traceclass record ...), "
    "or in Docker add --cap-add SYS_PTRACE"
)
_PERMISSION_WORDS = ("permission denied", "operation not permitted", "ptrace", "os error 1)", "os error 13)")


def register(p: argparse.ArgumentParser) -> None:
    p.add_argument("-o", "--output", metavar="FILE",
                   help="where to keep the py-spy profile (default: traceclass-record-TIME.speedscope.json)")
    p.add_argument("--rate", type=int, default=100, metavar="N", help="samples per second (default 100)")
    p.add_argument("--subprocesses", action="store_true", help="also profile child processes (py-spy --subprocesses)")
    p.add_argument("--native", action="store_true", help="also sample native frames (py-spy --native)")
    p.add_argument("--torch", action="store_true",
                   help="also run the Python program under torch.profiler and report that trace")
    p.add_argument("--top", type=int, metavar="N", dest="top_n", help="rows in the report tables (default 15)")
    p.add_argument("--config", metavar="FILE", help="TOML settings (same layout as [tool.traceclass])")
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- program and its arguments")
    p.set_defaults(func=run)


def find_pyspy() -> str:
    found = shutil.which("py-spy")
    if found:
        return found
    # installed into this interpreter's environment but that bin/ is not on PATH
    here = Path(sys.executable).parent / ("py-spy.exe" if os.name == "nt" else "py-spy")
    if here.exists():
        return str(here)
    raise ExternalToolError("py-spy not found: pip install 'traceclass[pyspy]'")


def pyspy_command(pyspy: str, out: str, command: list[str], rate: int, subprocesses: bool, native: bool) -> list[str]:
    cmd = [pyspy, "record", "--format", "speedscope", "--idle", "--threads", "--rate", str(rate), "-o", out]
    if subprocesses:
        cmd.append("--subprocesses")
    if native:
        cmd.append("--native")
    return cmd + ["--"] + command


def torch_command(command: list[str], trace_out: str) -> list[str]:
    """``python [opts] script.py args`` -> the same interpreter running the torch wrapper."""
    exe = os.path.basename(command[0]).lower()
    if not exe.startswith("python"):
        raise ConfigError("--torch needs a Python command: traceclass record --torch -- python script.py ...")
    rest = command[1:]
    i = 0
    while i < len(rest) and rest[i].startswith("-") and rest[i] != "-m":
        i += 1  # interpreter flags such as -u or -X dev
    if i >= len(rest) or (rest[i] == "-m" and i + 1 >= len(rest)):
        raise ConfigError("--torch needs a script or -m module to run")
    wrapper = str(Path(__file__).with_name("_torch_child.py"))
    return [command[0], *rest[:i], wrapper, trace_out, *rest[i:]]


def run(args: argparse.Namespace) -> int:
    command = list(args.command or [])
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        raise ConfigError("nothing to run: traceclass record [options] -- python script.py [args]")
    if args.rate <= 0:
        raise ConfigError("--rate must be a positive number of samples per second")
    pyspy = find_pyspy()
    stamp = time.strftime("%Y%m%d-%H%M%S")
    out = args.output or f"traceclass-record-{stamp}.speedscope.json"
    torch_out = None
    if args.torch:
        torch_out = str(Path(out).with_name(Path(out).name.replace(".speedscope.json", "") + ".torch.json"))
        command = torch_command(command, torch_out)
    cmd = pyspy_command(pyspy, out, command, args.rate, args.subprocesses, args.native)
    rc, tail = _run_forwarding_stderr(cmd)
    if not os.path.exists(out) or os.path.getsize(out) == 0:
        text = " ".join(tail).lower()
        if any(w in text for w in _PERMISSION_WORDS):
            raise ExternalToolError(PERMISSION_HINT)
        last = tail[-1].strip() if tail else f"exit status {rc}"
        raise ExternalToolError(f"py-spy wrote no profile ({last[:200]})")
    if rc != 0:
        print(f"traceclass: the recorded program or py-spy exited with status {rc}; reporting what was sampled",
              file=sys.stderr)

    from traceclass.ingest import load

    trace = _mark_recorded(load(out), args)
    print(_render(trace, args), end="")
    if torch_out is not None:
        if os.path.exists(torch_out):
            print()
            print(_render(load(torch_out), args), end="")
        else:
            print(f"traceclass: --torch: no torch trace was written ({torch_out})", file=sys.stderr)
    print(f"traceclass: profile kept in {out}" + (f" and {torch_out}" if torch_out else ""), file=sys.stderr)
    return 0


def _run_forwarding_stderr(cmd: list[str]) -> tuple[int, list[str]]:
    """Run ``cmd``; its stderr (py-spy's and the program's) goes on to ours, the tail is kept."""
    tail: collections.deque[str] = collections.deque(maxlen=40)
    sys.stdout.flush()  # the program writes to the same stdout; keep the order
    try:
        proc = subprocess.Popen(cmd, stderr=subprocess.PIPE)
    except OSError as exc:
        raise ExternalToolError(f"cannot start py-spy ({exc.strerror or exc})") from None
    assert proc.stderr is not None
    interrupted = False
    while True:
        try:
            for raw in proc.stderr:
                line = raw.decode("utf-8", errors="replace")
                tail.append(line)
                sys.stderr.write(line)
                sys.stderr.flush()
            break
        except KeyboardInterrupt:
            # Ctrl-C reached py-spy too: it stops sampling and writes the profile; wait for that
            if interrupted:
                proc.kill()
                raise
            interrupted = True
    return proc.wait(), list(tail)


def _mark_recorded(trace: Trace, args: argparse.Namespace) -> Trace:
    """What `record` knows and the file does not: idle samples kept, no GIL filter, the rate."""
    sampling = trace.sampling
    if sampling is not None:
        sampling = dataclasses.replace(sampling, includes_idle=True, gil_only=False)
    notes = tuple(n for n in trace.notes if not n.startswith("whether idle samples were kept"))
    notes += (f"recorded by traceclass record: py-spy --idle --threads at {args.rate} Hz",)
    return trace.replace(sampling=sampling, notes=notes)


def _render(trace: Trace, args: argparse.Namespace) -> str:
    try:
        from traceclass.cli.analyze import render_trace
    except ImportError:
        render_trace = None
    if render_trace is not None:
        return render_trace(trace, args)
    from traceclass.analysis.cpu_profile import profile_samples
    from traceclass.render.cpu_markdown import cpu_profile_markdown

    return cpu_profile_markdown(profile_samples(trace), args.top_n or 15)
