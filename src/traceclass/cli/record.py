"""``traceclass record [options] -- python script.py args``: profile a run with py-spy, report it.

Exit status. py-spy exits with 0 whatever the program did, so a Python program (``python
script.py``, ``python -m module``, ``python -c code``) runs through a small wrapper
(:mod:`traceclass.cli._torch_child`) that writes its exit status to a file: ``record`` prints
it in one line on stderr and exits with it when it is not 0 (``sys.exit(3)`` -> 3, an uncaught
exception -> 1). Otherwise ``record`` exits with 0 after the report, with 2 when there is
nothing to report (py-spy failed, or collected no sample) or on its own errors. Other commands
(a shell script, a console-script entry point) run under py-spy directly: their exit status is
unknown and ``record`` says so.

The wrapper's frames (and runpy's, which runs the program) are removed from the profile's
stacks, and samples of the wrapper's own work (with ``--torch``: importing torch, starting and
stopping the profiler, writing the trace) are left out as tool overhead; the report's notes
say how much.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

from traceclass.errors import ConfigError, ExternalToolError

if TYPE_CHECKING:  # numpy and the model load when a recording is processed, not for --help
    from traceclass.model import Trace

COMMAND = "record"
HELP = "run a program under py-spy (idle samples, per thread) and print the report"
DESCRIPTION = (
    "Run COMMAND under `py-spy record --format speedscope --idle --threads`, keep the profile, "
    "then analyze it like `traceclass analyze` does. With --torch the program (a Python script or "
    "`-m module`) also runs under torch.profiler and that trace is reported too. Exit status: the "
    "program's when it fails (Python programs run through a small wrapper that reports it: py-spy "
    "itself always exits with 0), 2 when nothing could be recorded, else 0. Example: "
    "traceclass record -o run.speedscope.json -- python train.py --epochs 1"
)
PERMISSION_HINT = (
    "py-spy may not read the process memory (ptrace): run as root (sudo traceclass record ...), "
    "or in Docker add --cap-add SYS_PTRACE"
)
_PERMISSION_WORDS = ("permission denied", "operation not permitted", "ptrace", "os error 1)", "os error 13)")
#: py-spy's errors when the program ended before it could look at it
_TOO_SHORT_WORDS = ("failed to get process executable name", "check that the process is running",
                    "no such process")
ZERO_SAMPLES = "py-spy collected 0 samples (program ran < 1 sample interval)"
WRAPPER = Path(__file__).with_name("_torch_child.py")
_RUNPY_FILES = ("runpy.py", "<frozen runpy>")


def register(p: argparse.ArgumentParser) -> None:
    p.add_argument("-o", "--output", metavar="FILE",
                   help="where to keep the py-spy profile (default: traceclass-record-TIME.speedscope.json)")
    p.add_argument("--rate", type=int, default=100, metavar="N", help="samples per second (default 100)")
    p.add_argument("--subprocesses", action="store_true", help="also profile child processes (py-spy --subprocesses)")
    p.add_argument("--native", action="store_true", help="also sample native frames (py-spy --native)")
    p.add_argument("--gil", action="store_true",
                   help="only sample threads holding the GIL (py-spy --gil): a GIL-only profile")
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


def pyspy_command(pyspy: str, out: str, command: list[str], rate: int, subprocesses: bool, native: bool,
                  gil: bool = False) -> list[str]:
    cmd = [pyspy, "record", "--format", "speedscope", "--idle", "--threads", "--rate", str(rate), "-o", out]
    if subprocesses:
        cmd.append("--subprocesses")
    if native:
        cmd.append("--native")
    if gil:
        cmd.append("--gil")
    return cmd + ["--"] + command


def wrap_command(command: list[str], status_out: str, trace_out: str = "-") -> list[str] | None:
    """``python [opts] script.py args`` -> the same interpreter running the wrapper, which
    reports the exit status to ``status_out`` (and with ``trace_out`` records torch.profiler);
    None when the command is not a Python program the wrapper can run."""
    exe = os.path.basename(command[0]).lower()
    if not exe.startswith("python"):
        return None
    rest = command[1:]
    i = 0
    while i < len(rest) and rest[i].startswith("-") and rest[i] not in ("-m", "-c", "-", "--"):
        i += 2 if rest[i] in ("-W", "-X") else 1  # interpreter flags: -u, -O, -X dev, -W error
    if i >= len(rest) or rest[i] in ("-", "--") or (rest[i] in ("-m", "-c") and i + 1 >= len(rest)):
        return None
    return [command[0], *rest[:i], str(WRAPPER), status_out, trace_out, *rest[i:]]


def torch_command(command: list[str], trace_out: str, status_out: str = os.devnull) -> list[str]:
    """The command for ``--torch``: the Python program under the wrapper with torch.profiler."""
    if not os.path.basename(command[0]).lower().startswith("python"):
        raise ConfigError("--torch needs a Python command: traceclass record --torch -- python script.py ...")
    wrapped = wrap_command(command, status_out, trace_out)
    if wrapped is None:
        raise ConfigError("--torch needs a script, -m module or -c code to run")
    return wrapped


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
    fd, status_path = tempfile.mkstemp(prefix="traceclass-record-", suffix=".status.json")
    os.close(fd)
    os.unlink(status_path)  # the wrapper creates it; absent afterwards = no status reported
    try:
        if getattr(args, "torch", False):
            torch_out = str(Path(out).with_name(Path(out).name.replace(".speedscope.json", "") + ".torch.json"))
            wrapped: list[str] | None = torch_command(command, torch_out, status_path)
        else:
            wrapped = wrap_command(command, status_path)
        cmd = pyspy_command(pyspy, out, wrapped or command, args.rate, args.subprocesses, args.native,
                            getattr(args, "gil", False))
        rc, tail = _run_forwarding_stderr(cmd)
        status = _read_status(status_path) if wrapped else None
    finally:
        if os.path.exists(status_path):
            os.unlink(status_path)
    program_rc = status.get("exit") if status else None
    if status is not None and status.get("ran") is False:
        raise ExternalToolError(f"the program did not run: {status.get('error', 'the wrapper failed')}")
    state = _profile_state(out)
    if state != "ok":
        if status is not None:  # the program ran: say how it ended
            _say_status(status, True)
        text = " ".join(tail).lower()
        if any(w in text for w in _PERMISSION_WORDS):
            raise ExternalToolError(PERMISSION_HINT)
        if state == "empty" or any(w in text for w in _TOO_SHORT_WORDS):
            if program_rc:
                print(f"traceclass: {ZERO_SAMPLES}", file=sys.stderr)
                return int(program_rc)
            raise ExternalToolError(ZERO_SAMPLES)
        last = tail[-1].strip() if tail else f"exit status {rc}"
        raise ExternalToolError(f"py-spy wrote no profile ({last[:200]})")

    from traceclass.ingest import load

    trace = _mark_recorded(load(out), args)
    if wrapped is not None:
        trace = strip_wrapper(trace, torch=torch_out is not None)
    print(_render(trace, args), end="")
    kept = [out]
    if torch_out is not None:
        if os.path.exists(torch_out):
            print()
            print(_render(load(torch_out), args), end="")
            kept.append(torch_out)
        else:
            print(f"traceclass: --torch: no torch trace was written ({torch_out})", file=sys.stderr)
    print("traceclass: profile kept in " + " and ".join(kept), file=sys.stderr)
    _say_status(status, wrapped is not None)
    if program_rc:
        return int(program_rc)
    if rc != 0:
        print(f"traceclass: py-spy exited with status {rc}; the report covers what it sampled", file=sys.stderr)
        return 2
    return 0


def _read_status(path: str) -> dict | None:
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _profile_state(out: str) -> str:
    """``ok``; ``empty`` for a speedscope file without profiles (py-spy writes
    ``"profiles":[]`` when it took no sample); ``missing`` for no file or an empty one."""
    if not os.path.exists(out) or os.path.getsize(out) == 0:
        return "missing"
    if os.path.getsize(out) > 1 << 16:
        return "ok"
    try:
        with open(out, encoding="utf-8") as fh:
            doc = json.load(fh)
    except (OSError, ValueError):
        return "ok"  # not ours to judge: the reader says what is wrong with it
    return "empty" if isinstance(doc, dict) and doc.get("profiles") == [] else "ok"


def _say_status(status: dict | None, wrapped: bool) -> None:
    """One line on stderr with the program's exit status, or why it is unknown."""
    if status is not None and isinstance(status.get("exit"), int):
        how = f" ({status['exception']})" if status.get("exception") else ""
        print(f"traceclass: the program exited with status {status['exit']}{how}", file=sys.stderr)
    elif wrapped:
        print("traceclass: the program's exit status is unknown: it ended without reporting one "
              "(killed by a signal, or os._exit)", file=sys.stderr)
    else:
        print("traceclass: the program's exit status is unknown: py-spy does not pass it on (run a Python "
              "program as `python script.py`, `-m module` or `-c code` to get it)", file=sys.stderr)


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
    """What `record` knows and the file does not: idle samples kept, the GIL filter, the rate."""
    gil = bool(getattr(args, "gil", False))
    sampling = trace.sampling
    if sampling is not None:
        sampling = dataclasses.replace(sampling, includes_idle=True, gil_only=gil)
    notes = tuple(n for n in trace.notes if not n.startswith("whether idle samples were kept"))
    notes += (f"recorded by traceclass record: py-spy --idle --threads{' --gil' if gil else ''} at {args.rate} Hz",)
    if gil:
        notes += ("GIL-only profile (py-spy --gil): only threads holding the GIL were sampled; waits that release "
                  "it (sleep, locks, I/O) and threads blocked on it are missing",)
    return trace.replace(sampling=sampling, notes=notes)


def strip_wrapper(trace: Trace, torch: bool = False) -> Trace:
    """The profile as if the program had run without the wrapper: its frames and runpy's
    removed from the root of the stacks, samples of its own work left out (tool overhead)."""
    import numpy as np

    st, fr, s = trace.stacks, trace.frames, trace.samples
    if len(st) == 0 or len(s) == 0:
        return trace
    strings = trace.strings
    wrapper_f = strings.mask(fr.file, _is_wrapper_file) & (fr.file >= 0)
    runpy_f = strings.mask(fr.file, lambda t: os.path.basename(t) in _RUNPY_FILES) & (fr.file >= 0)
    if not wrapper_f.any():
        return trace
    parent = st.parent.tolist()
    frame = st.frame.tolist()
    memo: dict[int, tuple[int, ...]] = {}

    def path(n: int) -> tuple[int, ...]:
        chain = []
        while n >= 0 and n not in memo:
            chain.append(n)
            n = parent[n]
        prefix = memo.get(n, ()) if n >= 0 else ()
        for m in reversed(chain):
            prefix = prefix + (frame[m],)
            memo[m] = prefix
        return memo[chain[0]] if chain else prefix

    new_paths: dict[int, tuple[int, ...] | None] = {}  # old leaf node -> new path (None: overhead)
    for n in np.unique(s.node[s.node >= 0]).tolist():
        p = path(n)
        if not wrapper_f[p[0]]:
            new_paths[n] = p
            continue
        i = 0
        while i < len(p) and wrapper_f[p[i]]:
            i += 1
        j = i
        while j < len(p) and runpy_f[p[j]]:
            j += 1
        if j == i:
            new_paths[n] = None  # the wrapper's own work (or a leaf in the wrapper)
        else:
            new_paths[n] = p[j:] if j < len(p) else p[i:]  # runpy alone: reading the program's code
    from traceclass.ingest.stacks import TrieBuilder, insert_stacks

    keep_nodes = [n for n, p in new_paths.items() if p is not None]
    trie = TrieBuilder()
    flat = np.fromiter((f for n in keep_nodes for f in new_paths[n]), dtype=np.int64)  # type: ignore[union-attr]
    lengths = np.fromiter((len(new_paths[n]) for n in keep_nodes), dtype=np.int64, count=len(keep_nodes))  # type: ignore[arg-type]
    leaf = insert_stacks(trie, flat, lengths)
    remap = np.full(len(st), -2, dtype=np.int64)  # -2: overhead
    remap[np.asarray(keep_nodes, dtype=np.int64)] = leaf
    node = s.node.astype(np.int64)
    new_node = np.where(node >= 0, remap[np.maximum(node, 0)], -1)
    overhead = new_node == -2
    rows = np.flatnonzero(~overhead)
    samples = type(s).build(len(rows), **{c: getattr(s, c)[rows] for c in type(s).columns() if c != "node"},
                            node=new_node[rows])
    notes = list(trace.notes)
    n_over = int(s.count[overhead].sum())
    if n_over:
        what = "importing torch, starting and stopping torch.profiler, writing files" if torch else "writing its status"
        amount = f"{n_over} sample{'s' if n_over != 1 else ''}"
        if int(s.weight_ns[overhead].sum()) > 0 and not trace.meta.get("weight_unit"):
            amount += f", {int(s.weight_ns[overhead].sum()) / 1e9:.3g} s"
        notes.append(f"traceclass record: {amount} of its wrapper's own work ({what}) left out as tool overhead")
    notes.append("traceclass record: the wrapper's frames and runpy's are removed from the program's stacks")
    if torch:
        notes.append("traceclass record --torch: the wrapper imports torch before the program starts, so the "
                     "program's own `import torch` looks free here; record without --torch to judge start-up")
    return trace.replace(stacks=trie.table(), samples=samples, notes=tuple(dict.fromkeys(notes)))


def _is_wrapper_file(path: str) -> bool:
    p = path.replace("\\", "/")
    return p.endswith("traceclass/cli/_torch_child.py") or p == str(WRAPPER)


def _render(trace: Trace, args: argparse.Namespace) -> str:
    try:
        from traceclass.cli.analyze import render_trace
    except ImportError:
        render_trace = None
    if render_trace is not None:
        return render_trace(trace, args)
    from traceclass.analysis.cpu_profile import profile_samples
    from traceclass.render.cpu_markdown import cpu_profile_markdown
    from traceclass.report.cpu import cpu_section

    return cpu_profile_markdown(cpu_section(profile_samples(trace)), args.top_n or 15)
