"""Human-readable numbers with units, fixed rounding (so snapshots are stable).

Shared by renderers and rule messages (rules write plain ASCII: ``ascii=True`` gives "us").
"""

from __future__ import annotations

import math


def _finite(x: float | None) -> bool:
    return x is not None and not (isinstance(x, float) and (math.isnan(x) or math.isinf(x)))


def duration(ns: float | None, ascii: bool = False) -> str:
    """``1234567`` -> ``1.23 ms``; picks ns/µs/ms/s."""
    if not _finite(ns):
        return "-" if ascii else "—"
    assert ns is not None
    a = abs(ns)
    us = "us" if ascii else "µs"
    # thresholds sit where rounding would print "1000": 999.6 ns is "1 us", not "1000 ns"
    if a < 999.5:
        return f"{ns:.0f} ns"
    if a < 999_500:
        return f"{ns / 1e3:.3g} {us}" if a < 99_950 else f"{ns / 1e3:.0f} {us}"
    if a < 999_500_000:
        return f"{ns / 1e6:.3g} ms" if a < 99_950_000 else f"{ns / 1e6:.0f} ms"
    return f"{ns / 1e9:.3g} s"


def size(nbytes: float | None) -> str:
    if not _finite(nbytes):
        return "—"
    assert nbytes is not None
    for unit, scale in (("PB", 1e15), ("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(nbytes) >= scale:
            return f"{nbytes / scale:.3g} {unit}"
    return f"{nbytes:.0f} B"


def count(x: float | None, unit: str = "") -> str:
    """Large counts with SI prefixes: ``2.1e12`` FLOP -> ``2.1 TFLOP``."""
    if not _finite(x):
        return "—"
    assert x is not None
    for prefix, scale in (("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(x) >= scale:
            return f"{x / scale:.3g} {prefix}{unit}"
    return f"{x:.3g} {unit}".rstrip()


def flops(x: float | None) -> str:
    return count(x, "FLOP")


def flop_rate(x: float | None) -> str:
    return count(x, "FLOP/s")


def byte_rate(x: float | None) -> str:
    if not _finite(x):
        return "—"
    return size(x) + "/s"


def pct(x: float | None, digits: int = 1) -> str:
    if not _finite(x):
        return "—"
    assert x is not None
    return f"{x:.{digits}f}%"


def ratio(x: float | None) -> str:
    """Arithmetic intensity and the like (FLOP/byte): 3 significant digits, no exponent."""
    if not _finite(x):
        return "—"
    assert x is not None
    return f"{x:.3g}" if abs(x) < 1000 else f"{x:,.0f}"
