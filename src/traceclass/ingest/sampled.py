"""Assembly of a sampled-profile :class:`Trace` and the thread identities readers collect."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from traceclass import units
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

    def truncate(self, n: int) -> None:
        """Forget the threads registered after the first ``n`` (a profile that was skipped)."""
        if n >= len(self.pid):
            return
        self._index = {k: v for k, v in self._index.items() if v < n}
        del self.pid[n:], self.tid[n:], self.name[n:]

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


def with_sample_rate(trace: Trace, hz: float | None) -> Trace:
    """The profile with ``--rate HZ`` as its sampling rate, when the file does not record one.

    Collapsed stacks and flamegraph SVGs count samples without saying how often they were
    taken; given the rate, each sample stands for one interval, as py-spy's own speedscope
    output has it. A file that records its rate (or weights its samples) keeps what it says.
    """
    if hz is None or not len(trace.samples):
        return trace
    interval = int(round(1e9 / hz))
    s = trace.sampling if trace.sampling is not None else SamplingInfo()
    if s.interval_ns or bool((trace.samples.weight_ns != 0).any()):
        note = f"--rate {hz:g} ignored: the file records its own sampling interval or sample weights"
        return trace.replace(notes=trace.notes + (note,))
    samples = trace.samples.replace(weight_ns=trace.samples.count.astype(np.int64) * interval)
    note = f"sampling rate {units.frequency(hz)} from --rate: each sample stands for {interval:,} ns"
    return trace.replace(
        samples=samples,
        sampling=dataclasses.replace(s, interval_ns=interval),
        notes=tuple(n for n in trace.notes if "sampling rate" not in n) + (note,),
    )


def has_line_numbers(frames: FrameInterner) -> bool:
    line = np.asarray(frames.line, dtype=np.int64)
    return bool((line > 0).any())
