"""Returning the C heap's free pages to the operating system, and not stalling on huge pages.

Columns are built from many chunk arrays of ~10,000 rows (tens of kB each: glibc serves them
from its heap, not from their own mappings). Once a table's chunks are joined into one array
they are free, but the heap keeps their pages resident, so peak RSS would hold every table
twice. ``malloc_trim`` hands those pages back; where the C library has none (musl, macOS,
Windows) this does nothing.
"""

from __future__ import annotations

import ctypes
import functools
import os
import sys
from typing import Any, Callable


def release_free_heap() -> None:
    """Give the heap's free pages back to the OS (glibc ``malloc_trim(0)``), where possible."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


@functools.cache
def _malloc_trim() -> Callable[[int], Any] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None).malloc_trim  # the C library this process already uses
    except (OSError, AttributeError):
        return None


#: glibc ``mallopt`` parameters and the values :func:`steady_heap_thresholds` sets
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
MMAP_THRESHOLD = 16 << 20
TRIM_THRESHOLD = 32 << 20


def steady_heap_thresholds() -> bool:
    """Keep blocks under 16 MB in the heap and up to 32 MB of its free top resident (glibc
    ``mallopt``), instead of glibc's sliding thresholds. Reading streams ~1 MB blocks and
    builds ~1 MB runs one after another; with the sliding ones each can land in fresh pages
    (a new mapping, or heap top trimmed and grown again), so every byte of the file is
    faulted in about twice. Measured on the 503 MB V100 replica (2-core VM, 3 alternating
    runs): minor faults 382,000 -> 262,000, system time 0.94-1.00 s -> 0.63-0.69 s, analyze
    7.1-8.4 s -> 6.2-7.3 s wall, peak RSS unchanged (257 MB); the explicit
    :func:`release_free_heap` calls still hand large free space back. The user's own
    ``MALLOC_*`` settings win. For the command line: a library leaves the process's
    allocator alone. Returns whether the thresholds were set."""
    if any(k in os.environ for k in ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_")):
        return False
    mallopt = _mallopt()
    if mallopt is None:
        return False
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD))


@functools.cache
def _mallopt() -> Callable[[int, int], int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        fn = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return None
    try:  # glibc only: musl has no tunable thresholds (and may not export mallopt at all)
        ctypes.CDLL(None).gnu_get_libc_version
    except AttributeError:
        return None
    fn.argtypes, fn.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return fn


#: where the kernel says which transparent-huge-page modes are selected (``[madvise]``)
THP_DIR = "/sys/kernel/mm/transparent_hugepage"


def avoid_compaction_stalls(thp_dir: str = THP_DIR) -> bool:
    """Stop numpy asking for huge pages (``madvise(MADV_HUGEPAGE)`` on every array of 4 MB or
    more) where the kernel answers such a request by compacting memory synchronously: huge
    pages only on request (``enabled`` is ``madvise``) with a ``defrag`` mode that stalls the
    faulting process (``madvise``, ``defer+madvise``, ``always``). There every large temporary
    array waits for compaction at its first touch (numpy/numpy#31590); measured on this
    project's 2-core VM on a 513 MB H100 trace: 2.3-2.6 s of system time -> 1.1 s, analyze
    9.1-9.8 s -> 7.1-8.0 s, same peak RSS. The user's ``NUMPY_MADVISE_HUGEPAGE`` wins.
    Returns whether it turned them off. For the command line: a library does not change
    numpy's process-wide settings."""
    if "NUMPY_MADVISE_HUGEPAGE" in os.environ or not sys.platform.startswith("linux"):
        return False
    enabled, defrag = _selected(f"{thp_dir}/enabled"), _selected(f"{thp_dir}/defrag")
    if enabled != "madvise" or defrag not in ("madvise", "defer+madvise", "always"):
        return False
    try:
        from numpy._core.multiarray import _set_madvise_hugepage  # numpy >= 2
    except ImportError:
        try:
            from numpy.core.multiarray import _set_madvise_hugepage  # type: ignore[no-redef]
        except ImportError:
            return False
    _set_madvise_hugepage(False)
    return True


def _selected(path: str) -> str | None:
    """The bracketed choice of a sysfs setting (``always [madvise] never`` -> ``madvise``)."""
    try:
        with open(path) as fh:
            text = fh.read()
    except OSError:
        return None
    start, end = text.find("["), text.find("]")
    return text[start + 1:end] if 0 <= start < end else None
