"""Free heap pages go back to the OS after a table's chunks are joined (glibc only)."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from traceclass.heap import _malloc_trim, release_free_heap


def _rss_kb() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * 4


@pytest.mark.skipif(not sys.platform.startswith("linux") or _malloc_trim() is None, reason="needs glibc malloc_trim")
def test_freed_chunks_leave_resident_memory_once_trimmed() -> None:
    # 4,000 chunk arrays of 80 kB each (what the Kineto reader builds per column), joined, freed
    chunks = [np.ones(10_000, dtype=np.int64) for _ in range(4_000)]
    keep = [np.ones(16, dtype=np.int64) for _ in range(4_000)]  # small live blocks pin the heap
    joined = np.concatenate(chunks)
    del chunks
    before = _rss_kb()
    release_free_heap()
    after = _rss_kb()
    assert before - after > 200_000  # most of the 320 MB of freed chunks left the process
    assert int(joined.sum()) == 40_000_000 and len(keep) == 4_000


def test_release_is_harmless_without_glibc(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "platform", "darwin")
    _malloc_trim.cache_clear()
    try:
        assert _malloc_trim() is None
        release_free_heap()
    finally:
        monkeypatch.undo()
        _malloc_trim.cache_clear()
