"""Frame text of sampled profiles: ``func (file.py:LINE)`` and py-spy's thread/process roots.

py-spy writes ``funcname (file.py:LINE)``, ``funcname (file.py)`` with ``--nolineno``, native
frames as ``symbol (libname.so)`` or ``0x7f… (libc.so.6)``. Other collapsed-stack producers
(perf, async-profiler, dtrace) write bare symbols, so text without that suffix is a function
name with no file. With ``--threads``/``--subprocesses`` py-spy adds root pseudo-frames
``thread (TID): name``, ``thread (TID)`` and ``process PID:"command line"``; they say which
thread a stack belongs to and are not calls, so readers strip them from the stacks.
"""

from __future__ import annotations

import re
from typing import NamedTuple

# a space before "(" keeps C++ signatures such as "foo(int)" whole
_FRAME = re.compile(r"^(?P<func>.*?) \((?P<file>[^()]+?)(?::(?P<line>\d+))?\)$", re.S)
_THREAD = re.compile(r"^thread \((?P<tid>\d+)\)(?:: (?P<name>.*))?$", re.S)
_PROCESS = re.compile(r'^process (?P<pid>\d+):"(?P<cmd>.*)"$', re.S)


class FrameText(NamedTuple):
    function: str
    file: str | None
    line: int | None


class Pseudo(NamedTuple):
    kind: str  # "thread" or "process"
    ident: int  # OS tid or pid
    name: str  # thread name ("" while unknown) or command line


def parse_frame(text: str) -> FrameText:
    """Split one frame's text into function, file and line (file/line None when absent)."""
    m = _FRAME.match(text)
    if m is None:
        return FrameText(text, None, None)
    line = m.group("line")
    return FrameText(m.group("func"), m.group("file"), int(line) if line is not None else None)


def parse_pseudo(text: str) -> Pseudo | None:
    """py-spy's ``thread (TID): name`` / ``process PID:"cmd"`` root frames, else None."""
    if text.startswith("thread ("):
        m = _THREAD.match(text)
        if m is not None:
            return Pseudo("thread", int(m.group("tid")), m.group("name") or "")
    elif text.startswith("process "):
        m = _PROCESS.match(text)
        if m is not None:
            return Pseudo("process", int(m.group("pid")), m.group("cmd"))
    return None


def torch_style(function: str, file: str | None, line: int | None) -> str:
    """The name torch.profiler gives a Python frame: ``file.py(LINE): function``.

    Timed Python frames from every reader use it, so analyses and writers parse one form.
    """
    if not file:
        return function
    return f"{file}({line if line is not None and line >= 0 else 0}): {function}"


_TORCH = re.compile(r"^(?P<file>.+?)\((?P<line>\d+)\): (?P<func>.+)$", re.S)


def parse_torch_style(name: str) -> FrameText:
    """Inverse of :func:`torch_style`; names in other forms are a bare function name."""
    m = _TORCH.match(name)
    if m is None:
        return FrameText(name, None, None)
    line = int(m.group("line"))
    return FrameText(m.group("func"), m.group("file"), line if line > 0 else None)
