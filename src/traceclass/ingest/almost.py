"""Inputs that look like a profile but are not one traceclass can read, told apart from junk so
the message says what the file is and what to record instead.

* ``py-spy dump`` output (text, or ``--json``): one snapshot of each thread's stack (``Process PID: cmd``,
  ``Python vX.Y``, ``Thread TID (active): "name"`` then indented frames). One instant is not a
  profile: there is nothing to add up.
* XLA/JAX ``*.xplane.pb`` (``jax.profiler``, TensorBoard's profile plugin): a protobuf of
  XPlanes, a format traceclass does not read yet.
"""

from __future__ import annotations

import re
from pathlib import Path

from traceclass.errors import TraceFormatError

_DUMP = re.compile(
    rb"\A(?:\xef\xbb\xbf)?\s*Process \d+: [^\n]*\r?\nPython v\d[^\n]*\r?\n(?:\s*\r?\n)*"
    rb"(?:Thread (?:0x[0-9A-Fa-f]+|\d+) \([^)\n]*\)[^\n]*)?"
)
# py-spy dump --json: an array of threads, each with its frames
_DUMP_JSON = re.compile(rb'\A(?:\xef\xbb\xbf)?\s*\[\s*\{\s*"pid"\s*:\s*\d+\s*,\s*"thread_id"\s*:')
_DUMP_THREAD = re.compile(rb"^Thread (?:0x[0-9A-Fa-f]+|\d+) \((?:active|idle)[^)\n]*\)", re.M)


def is_pyspy_dump(head: bytes) -> bool:
    """py-spy dump's header, or at least its thread lines over indented frames."""
    if _DUMP_JSON.match(head) is not None:
        return b'"owns_gil"' in head and b'"frames"' in head
    return _DUMP.match(head) is not None and (
        _DUMP_THREAD.search(head) is not None or b"\nThread " not in head
    )


def refuse_almost_right(path: str | Path, head: bytes) -> None:
    """Raise a TraceFormatError saying what the file is when it is a known non-profile."""
    name = Path(path).name.lower()
    if name.endswith((".xplane.pb", ".xplane.pb.gz")):
        raise TraceFormatError(
            path,
            "a JAX/XLA profile (XPlane protobuf from jax.profiler or TensorBoard's profile plugin): "
            "not supported yet; traceclass reads torch.profiler JSON, Nsight Systems exports and "
            "py-spy profiles",
        )
    if is_pyspy_dump(head):
        raise TraceFormatError(
            path,
            "a `py-spy dump` snapshot (each thread's stack at one instant), not a profile: record "
            "samples over time with `py-spy record --format speedscope -o profile.json -- python "
            "your_script.py` (or `--pid PID --duration 30`) and analyze that file",
        )


__all__ = ["is_pyspy_dump", "refuse_almost_right"]
