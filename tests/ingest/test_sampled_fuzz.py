"""Damaged py-spy / speedscope / trace-event files: a clean TraceFormatError or a trace, never a crash."""

from __future__ import annotations

import random

import pytest

from conftest import CORPUS
from traceclass.analysis.cpu_profile import profile_samples
from traceclass.errors import TraceFormatError
from traceclass.ingest import load

SOURCES = [
    "pyspy/cpu_lock.idle_threads.raw.txt",
    "pyspy/parent.subprocesses.raw.txt",
    "pyspy/cpu_lock.idle_threads.speedscope.json",
    "pyspy/sleep_io.default.chrometrace.json",
    "speedscope/speedscope/0.0.1/simple.speedscope.json",
    "speedscope/stackcollapse/simple-utf16-le.txt",
    "speedscope/trace-event/simple-with-samples.json",
    "speedscope/trace-event/bex-interaction.json",
]
_BYTES = b'[]{},:"0123456789-.eE;() \n\x00abc'


def _mutate(rng: random.Random, data: bytes) -> bytes:
    b = bytearray(data)
    op = rng.randrange(3)
    if op == 0:
        return bytes(b[: rng.randint(0, len(b))])
    if op == 1:
        for _ in range(rng.randint(1, 6)):
            b[rng.randrange(len(b))] = rng.choice(_BYTES)
        return bytes(b)
    i, j = sorted(rng.randrange(len(b)) for _ in range(2))
    return bytes(b[:i] + b[j:])


@pytest.mark.parametrize("rel", SOURCES)
def test_mutations_never_crash(tmp_path, rel):
    src = CORPUS / rel
    if not src.exists():
        pytest.skip("corpus not available")
    data = src.read_bytes()
    rng = random.Random(rel)
    outcomes = {"loaded": 0, "rejected": 0}
    for k in range(60):
        p = tmp_path / f"m{k}{src.suffix}"
        p.write_bytes(_mutate(rng, data))
        try:
            trace = load(p)
        except TraceFormatError as exc:
            assert "\n" not in str(exc)
            outcomes["rejected"] += 1
            continue
        outcomes["loaded"] += 1
        if len(trace.samples):
            profile_samples(trace)
    assert sum(outcomes.values()) == 60
