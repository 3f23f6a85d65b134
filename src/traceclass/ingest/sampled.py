"""Assembly of a sampled-profile :class:`Trace` and the thread identities readers collect."""

from __future__ import annotations

from typing import Any

import numpy as np

from traceclass.ingest.sourcelines import attach_source_lines
from traceclass.ingest.stacks import FrameInterner, TrieBuilder
from traceclass.model import (
    Captured,
    InputsTable,
    PythonFrames,
    Samples,
    SamplingInfo,
    SourceInfo,
    StringTable,
    Threads,
    Trace,
)


class ThreadRegistry:
    """Threads keyed by (pid, tid); a name seen later fills an empty one.

    py-spy names a thread ``thread (TID)`` until Python's ``threading`` module names it, then
    ``thread (TID): Name``: both spellings are one thread.
    """

    def __init__(self, strings: StringTable) -> None:
        self.strings = strings
        self._index: dict[tuple[int, int, str], int] = {}
        self.pid: list[int] = []
        self.tid: list[int] = []
        self.name: list[str] = []

    def get(self, pid: int, tid: int, name: str = "", key: str = "") -> int:
        """Row for the thread; ``key`` separates threads that share unknown ids (-1)."""
        k = (pid, tid, key)
        row = self._index.get(k)
        if row is None:
            row = len(self.pid)
            self._index[k] = row
            self.pid.append(pid)
            self.tid.append(tid)
            self.name.append(name)
        elif name and not self.name[row]:
            self.name[row] = name
        return row

    def __len__(self) -> int:
        return len(self.pid)

    def table(self) -> Threads:
        return Threads.build(
            len(self.pid),
            pid=self.pid,
            tid=self.tid,
            name=self.strings.intern_many(self.name),
        )


def assemble(
    *,
    path: str,
    fmt: str,
    producer: str,
    size: int,
    strings: StringTable,
    frames: FrameInterner,
    trie: TrieBuilder,
    threads: ThreadRegistry,
    samples: Samples,
    sampling: SamplingInfo,
    notes: list[str],
    python: PythonFrames | None = None,
    meta: dict[str, Any] | None = None,
    format_version: str = "",
) -> Trace:
    captured = {Captured.SAMPLES}
    if python is not None and len(python):
        captured.add(Captured.PYTHON)
    trace = Trace(
        source=SourceInfo(path=path, format=fmt, producer=producer, format_version=format_version, size_bytes=size),
        strings=strings,
        inputs=InputsTable(),
        threads=threads.table(),
        frames=frames.table(),
        stacks=trie.table(),
        samples=samples,
        python=python if python is not None else PythonFrames.empty(),
        sampling=sampling,
        captured=frozenset(captured),
        meta=dict(meta or {}),
        notes=tuple(dict.fromkeys(notes)),
    )
    return attach_source_lines(trace)


def has_line_numbers(frames: FrameInterner) -> bool:
    line = np.asarray(frames.line, dtype=np.int64)
    return bool((line > 0).any())
