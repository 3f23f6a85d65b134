"""Stage timings for benchmarks: ``TRACECLASS_TIMINGS=1 traceclass analyze ...``.

With the variable set, each :func:`stage` (read, link, analyses, each rule, report, render)
prints ``timing <stage> <seconds> peak_rss_mb <MB> rss_mb <MB>`` to stderr when it ends (peak
resident memory so far, and resident memory now: what the stage left cached), so
``benchmarks/bench_kineto.py`` can show where the time and memory go. Unset, a stage costs one
context-manager call.
"""

from __future__ import annotations

import os
import re
import sys
import time
from contextlib import contextmanager
from typing import Iterator

ENABLED = bool(os.environ.get("TRACECLASS_TIMINGS"))

#: one stage's line: name (may hold spaces), seconds, peak and current resident MiB
LINE = re.compile(r"^timing (.+) ([0-9.]+) peak_rss_mb ([0-9]+) rss_mb ([0-9]+)$")


@contextmanager
def stage(name: str) -> Iterator[None]:
    if not ENABLED:
        yield
        return
    t = time.perf_counter()
    try:
        yield
    finally:
        peak, now = _rss_mb()
        print(f"timing {name} {time.perf_counter() - t:.6f} peak_rss_mb {peak:.0f} rss_mb {now:.0f}",
              file=sys.stderr, flush=True)


def _rss_mb() -> tuple[float, float]:
    """Peak resident memory so far (VmHWM) and resident memory now (VmRSS), MiB; 0 where
    /proc is not available."""
    got = {"VmHWM:": 0.0, "VmRSS:": 0.0}
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                key = line[:6]
                if key in got:
                    got[key] = int(line.split()[1]) / 1024
    except OSError:
        pass
    return got["VmHWM:"], got["VmRSS:"]
