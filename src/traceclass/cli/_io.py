"""Output helpers for commands: atomic writes and a terminal progress bar."""

from __future__ import annotations

import argparse

import os
import sys
import tempfile
import time
from pathlib import Path

from traceclass import units
from traceclass.errors import TraceclassError

PROGRESS_MIN_BYTES = 32 << 20  # smaller files load in about a second: no bar


def write_atomic(path: str | os.PathLike[str], data: str | bytes) -> None:
    """Write via a temporary file in the same directory and rename: readers never see half a report."""
    p = Path(path)
    directory = p.parent if str(p.parent) else Path(".")
    payload = data.encode("utf-8") if isinstance(data, str) else data
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=directory)
    except OSError as exc:
        raise TraceclassError(f"{p}: cannot write ({exc.strerror or exc})") from None
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
        raise TraceclassError(f"{p}: cannot write ({exc.strerror or exc})") from None


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
