"""Stage timings for benchmarks: ``TRACECLASS_TIMINGS=1 traceclass analyze ...``.

With the variable set, each :func:`stage` (read, link, analyses, each rule, report, render)
prints ``timing <stage> <seconds> peak_rss_mb <MB>`` to stderr when it ends, so ``benchmarks/bench_kineto.py``
can show where the time goes. Unset, a stage costs one context-manager call.
"""

from __future__ import annotations

import os
import sys
import time
from contextlib import contextmanager
from typing import Iterator

ENABLED = bool(os.environ.get("TRACECLASS_TIMINGS"))


@contextmanager
def stage(name: str) -> Iterator[None]:
    if not ENABLED:
        yield
        return
    t = time.perf_counter()
    try:
        yield
    finally:
        print(f"timing {name} {time.perf_counter() - t:.6f} peak_rss_mb {_peak_mb():.0f}", file=sys.stderr, flush=True)


def _peak_mb() -> float:
    """Peak resident memory so far (VmHWM), MB; 0 where /proc is not available."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0
