"""Returning the C heap's free pages to the operating system.

Columns are built from many chunk arrays of ~10,000 rows (tens of kB each: glibc serves them
from its heap, not from their own mappings). Once a table's chunks are joined into one array
they are free, but the heap keeps their pages resident, so peak RSS would hold every table
twice. ``malloc_trim`` hands those pages back; where the C library has none (musl, macOS,
Windows) this does nothing.
"""

from __future__ import annotations

import ctypes
import functools
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
