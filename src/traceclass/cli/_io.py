"""Output helpers for commands: atomic writes and a terminal progress bar."""

from __future__ import annotations

import argparse
import errno
import os
import stat
import sys
import tempfile
import time
from pathlib import Path

from traceclass import units
from traceclass.errors import ConfigError, TraceclassError

PROGRESS_MIN_BYTES = 32 << 20  # smaller files load in about a second: no bar


def write_atomic(path: str | os.PathLike[str], data: str | bytes) -> None:
    """Write via a temporary file in the same directory and rename: readers never see half a report.

    A symlink is followed: its target is replaced and the link stays. A FIFO or a character
    device (``/dev/stdout``, ``>(cmd)``) cannot be renamed over; it is written directly, and a
    FIFO nobody reads from is refused rather than waited on. Other non-regular paths (a
    folder, a socket) are refused.
    """
    p = Path(os.path.realpath(path)) if os.path.islink(path) else Path(path)
    payload = data.encode("utf-8") if isinstance(data, str) else data
    try:
        mode = os.stat(p).st_mode
    except FileNotFoundError:
        mode = None
    except OSError as exc:
        raise TraceclassError(f"{path}: cannot write ({exc.strerror or exc})") from None
    if mode is not None and not stat.S_ISREG(mode):
        if stat.S_ISFIFO(mode) or stat.S_ISCHR(mode):
            _write_stream(path, p, payload, fifo=stat.S_ISFIFO(mode))
            return
        kind = "a folder" if stat.S_ISDIR(mode) else "not a regular file"
        raise TraceclassError(f"{path}: cannot write the output there ({kind})")
    directory = p.parent if str(p.parent) else Path(".")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=directory)
    except OSError as exc:
        raise TraceclassError(f"{path}: cannot write ({exc.strerror or exc})") from None
    try:
        # mkstemp makes the file 0600; a report should get the permissions any new file gets
        umask = os.umask(0)
        os.umask(umask)
        os.fchmod(fd, 0o666 & ~umask)
        with os.fdopen(fd, "wb") as fh:
            fh.write(payload)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, p)
    except OSError as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise TraceclassError(f"{path}: cannot write ({exc.strerror or exc})") from None


def _write_stream(shown: str | os.PathLike[str], p: Path, payload: bytes, fifo: bool) -> None:
    try:
        if fifo:
            # opening a FIFO for writing blocks until a reader comes; non-blocking, it fails
            # at once (ENXIO) when there is none
            fd = os.open(p, os.O_WRONLY | os.O_NONBLOCK)
            os.set_blocking(fd, True)
        else:
            fd = os.open(p, os.O_WRONLY)
        with os.fdopen(fd, "wb") as fh:
            fh.write(payload)
    except OSError as exc:
        if exc.errno == errno.ENXIO:
            raise TraceclassError(f"{shown}: a FIFO with no reader; refusing to wait on it") from None
        raise TraceclassError(f"{shown}: cannot write ({exc.strerror or exc})") from None


def _same_file(a: str, b: str) -> bool:
    if os.path.realpath(a) == os.path.realpath(b):
        return True
    try:
        return os.path.samefile(a, b)  # hard links, bind mounts
    except OSError:
        return False


#: commands that print their result unless ``-o`` names a file: for them ``-o -`` is that
#: standard output, as for most Unix tools
STDOUT_COMMANDS = frozenset({"analyze", "diff", "check"})


def dash_output(args: argparse.Namespace) -> None:
    """``-o -``: standard output where the command prints by default; refused where it writes
    a file, instead of creating one named "-" in the working directory."""
    if getattr(args, "output", None) != "-":
        return
    if getattr(args, "command", None) in STDOUT_COMMANDS:
        args.output = None
    else:
        raise ConfigError(f"-o -: traceclass {args.command} writes a file, not standard output; give its name")


def refuse_overwriting_inputs(args: argparse.Namespace) -> None:
    """An output (-o, --plot) that is one of the command's inputs would destroy it: refuse."""
    inputs: list[str] = []
    for k in ("trace", "input", "baseline", "candidate", "config"):
        v = getattr(args, k, None)
        inputs += [v] if isinstance(v, str) else [x for x in v if isinstance(x, str)] if isinstance(v, list) else []
    inputs = [i for i in inputs if i and os.path.isfile(i)]
    for key in ("output", "plot"):
        out = getattr(args, key, None)
        if not isinstance(out, str) or not out or not os.path.exists(out):
            continue
        for inp in inputs:
            if _same_file(out, inp):
                raise ConfigError(f"{out}: is the input file {inp}; refusing to overwrite it "
                                  "(choose another output path)")


class ProgressBar:
    """A one-line bar on stderr, only when stderr is a terminal and the input is large."""

    def __init__(self, path: str, enabled: bool | None = None) -> None:
        try:
            size = os.path.getsize(path)
        except OSError:
            size = 0
        if enabled is None:
            enabled = sys.stderr.isatty() and size >= PROGRESS_MIN_BYTES
        self.enabled = enabled
        self._last = 0.0
        self._phase = ""

    def __call__(self, phase: str, done: int, total: int) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if phase == self._phase and now - self._last < 0.1 and done < total:
            return
        self._phase, self._last = phase, now
        frac = done / total if total else 1.0
        width = 30
        fill = int(frac * width)
        sys.stderr.write(f"\r{phase:>13} [{'#' * fill}{'.' * (width - fill)}] {units.pct(frac * 100):>6}")
        sys.stderr.flush()

    def close(self) -> None:
        if self.enabled:
            sys.stderr.write("\r" + " " * 60 + "\r")
            sys.stderr.flush()


def whole_number(minimum: int):  # type: ignore[no-untyped-def]
    """An argparse type for counts: "--top 0" fails as "argument --top: must be a whole number >= 1,
    got '0'", naming the flag and the value."""
    def parse(text: str) -> int:
        try:
            n = int(text)
        except ValueError:
            n = None
        if n is None or n < minimum:
            raise argparse.ArgumentTypeError(f"must be a whole number >= {minimum}, got {text!r}")
        return n
    parse.__name__ = f"whole number >= {minimum}"
    return parse


def add_rate_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--rate", type=float, metavar="HZ", dest="sample_rate_hz",
                   help="sampling rate of a sampled profile whose file does not record it (collapsed "
                        "stacks, flamegraph SVG; py-spy's default is 100): values become times")


def add_analysis_options(p: argparse.ArgumentParser) -> None:
    """Options that decide how a trace is analysed, shared by analyze, diff, check and baseline."""
    p.add_argument("--config", metavar="FILE", help="TOML settings (same layout as [tool.traceclass])")
    p.add_argument("--warmup", type=whole_number(0), metavar="N", dest="warmup_steps",
                   help="steps set apart as warm-up (default 1)")
    p.add_argument("--device", metavar="NAME",
                   help="judge GPU work against this device spec (see `traceclass devices`)")
    p.add_argument("--cpu", metavar="NAME[:CORES]", dest="cpu_device",
                   help="host CPU spec for CPU-only traces, e.g. cpu-generic-avx512:16 (default: one AVX2 core)")
    add_rate_option(p)
    p.add_argument("--source-root", metavar="DIR", action="append", default=[], dest="source_root",
                   help="where the profiled program's source files are (repeatable): sampled profiles read "
                        "the calling line to tell a blocking call (sleep, lock, recv) from compute")
