"""Free heap pages go back to the OS after a table's chunks are joined (glibc only)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from traceclass.heap import _malloc_trim, release_free_heap

SAMPLES = Path(__file__).resolve().parent.parent / "sample_traces"


_CHILD = """
import numpy as np
from traceclass.heap import release_free_heap

def rss_kb():
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * 4

# 4,000 chunk arrays of 80 kB each (what the Kineto reader builds per column), joined, freed;
# small live blocks between them pin the heap, as the reader's other objects do
chunks, keep = [], []
for _ in range(4_000):
    chunks.append(np.ones(10_000, dtype=np.int64))
    keep.append(np.ones(16, dtype=np.int64))
joined = np.concatenate(chunks)
del chunks
before = rss_kb()
after_nothing = rss_kb()
release_free_heap()
after = rss_kb()
print(before - after_nothing, before - after, int(joined.sum()))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux") or _malloc_trim() is None, reason="needs glibc malloc_trim")
def test_freed_chunks_leave_resident_memory_once_trimmed() -> None:
    # in a fresh process: the heap of a long test session holds other tests' leftovers
    out = subprocess.run([sys.executable, "-c", _CHILD], capture_output=True, text=True, check=True).stdout.split()
    untrimmed, trimmed, total = (int(x) for x in out)
    assert untrimmed < 10_000  # the freed chunks stay resident on their own
    assert trimmed > 200_000  # most of the 320 MB left the process once trimmed
    assert total == 40_000_000


def test_release_is_harmless_without_glibc(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "platform", "darwin")
    _malloc_trim.cache_clear()
    try:
        assert _malloc_trim() is None
        release_free_heap()
    finally:
        monkeypatch.undo()
        _malloc_trim.cache_clear()


_HUGEPAGE_CHILD = """
import sys
import numpy as np
from traceclass.heap import avoid_compaction_stalls
try:
    from numpy._core.multiarray import _get_madvise_hugepage
except ImportError:
    from numpy.core.multiarray import _get_madvise_hugepage
print(avoid_compaction_stalls(sys.argv[1]), _get_madvise_hugepage())
"""


def _thp(tmp_path, enabled: str, defrag: str) -> str:
    (tmp_path / "enabled").write_text(enabled + "\n")
    (tmp_path / "defrag").write_text(defrag + "\n")
    return str(tmp_path)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux sysfs settings")
@pytest.mark.parametrize(("enabled", "defrag", "env", "expected"), [
    ("always [madvise] never", "always defer defer+madvise [madvise] never", None, "True False"),
    ("always [madvise] never", "always defer [defer+madvise] madvise never", None, "True False"),
    ("always [madvise] never", "always [defer] defer+madvise madvise never", None, "False True"),  # no stall
    ("[always] madvise never", "always defer defer+madvise [madvise] never", None, "False True"),  # THP anyway
    ("always madvise [never]", "always defer defer+madvise [madvise] never", None, "False True"),
    ("always [madvise] never", "always defer defer+madvise [madvise] never", "1", "False True"),  # user's choice
])
def test_numpy_huge_pages_are_turned_off_only_where_they_stall(tmp_path, monkeypatch, enabled, defrag, env,
                                                               expected) -> None:
    monkeypatch.delenv("NUMPY_MADVISE_HUGEPAGE", raising=False)
    if env is not None:
        monkeypatch.setenv("NUMPY_MADVISE_HUGEPAGE", env)
    out = subprocess.run([sys.executable, "-c", _HUGEPAGE_CHILD, _thp(tmp_path, enabled, defrag)],
                         capture_output=True, text=True, check=True).stdout.strip()
    assert out == expected


def test_unreadable_settings_leave_numpy_alone(tmp_path) -> None:
    from traceclass.heap import avoid_compaction_stalls

    assert avoid_compaction_stalls(str(tmp_path / "missing")) is False


_FAULTS_CHILD = """
import resource, sys
from traceclass.heap import steady_heap_thresholds
print(steady_heap_thresholds() if sys.argv[1] == "1" else "-")
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for i in range(40):  # buffers of 1-12 MB, each freed before the next, as streamed runs are
    block = bytearray((1 + i % 12) << 20)
    del block
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def _glibc() -> bool:
    from traceclass.heap import _mallopt

    return _mallopt() is not None


@pytest.mark.skipif(not sys.platform.startswith("linux") or not _glibc(), reason="glibc's mallopt")
def test_steady_heap_thresholds_stop_buffers_faulting_in_again(monkeypatch) -> None:
    # glibc's sliding thresholds map a buffer above the current threshold afresh and trim the
    # heap top behind smaller ones: 23,051 minor faults here (glibc 2.36); with the fixed
    # thresholds the heap keeps its pages and reuses them: 3,071
    for k in ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_"):
        monkeypatch.delenv(k, raising=False)
    runs = {}
    for mode in ("0", "1"):
        runs[mode] = subprocess.run([sys.executable, "-c", _FAULTS_CHILD, mode],
                                    capture_output=True, text=True, check=True).stdout.split()
    assert runs["1"][0] == "True"
    assert int(runs["1"][1]) < 0.3 * int(runs["0"][1]), runs


def test_the_users_malloc_settings_win(monkeypatch) -> None:
    from traceclass.heap import steady_heap_thresholds

    monkeypatch.setenv("MALLOC_TRIM_THRESHOLD_", "131072")
    assert steady_heap_thresholds() is False


def test_the_command_line_sets_the_thresholds(monkeypatch, tmp_path) -> None:
    import traceclass.heap as heap
    from traceclass.cli import main

    calls = []
    monkeypatch.setattr(heap, "steady_heap_thresholds", lambda: calls.append(1) or True)
    assert main(["analyze", str(SAMPLES / "torch_cpu_tiny_ops_loop.json.gz"), "-o", str(tmp_path / "r.md")]) == 0
    assert calls == [1]
