"""Human-readable numbers with units, fixed rounding (so snapshots are stable).

The only place a number becomes text: renderers, rule messages, verdicts and CLI output all
call these (tests/test_units.py greps the sources for stray ``:.1f} us``-style formatting).
Conventions: "µs" (never "us"), a space between a number and its unit ("1.2 ms", "3 MB"),
none before "%" ("4.7%").
"""

from __future__ import annotations

import math
import re

_NUM_UNIT = re.compile(r"(\d) (?=(?:ns|µs|ms|s|B|kB|MB|GB|TB|PB|[kMGTP]?FLOP(?:/s)?|[kMGTP]?B/s|FLOP/B)\b)")


def _finite(x: float | None) -> bool:
    return x is not None and not (isinstance(x, float) and (math.isnan(x) or math.isinf(x)))


def duration(ns: float | None) -> str:
    """``1234567`` -> ``1.23 ms``; picks ns/µs/ms/s."""
    if not _finite(ns):
        return "—"
    assert ns is not None
    a = abs(ns)
    us = "µs"
    # thresholds sit where rounding would print "1000": 999.6 ns is "1 us", not "1000 ns"
    if a < 999.5:
        return f"{ns:.0f} ns"
    if a < 999_500:
        return f"{ns / 1e3:.3g} {us}" if a < 99_950 else f"{ns / 1e3:.0f} {us}"
    if a < 999_500_000:
        return f"{ns / 1e6:.3g} ms" if a < 99_950_000 else f"{ns / 1e6:.0f} ms"
    return f"{ns / 1e9:.3g} s"


def distinct_durations(a_ns: float, b_ns: float) -> tuple[str, str]:
    """Two times in one unit with enough digits that they differ when the times do
    (``1.2345 ms → 1.2351 ms`` where :func:`duration` would print "1.23 ms" twice)."""
    m = max(abs(a_ns), abs(b_ns))
    scale, unit = next((s, u) for s, u in ((1e9, "s"), (1e6, "ms"), (1e3, "µs"), (1.0, "ns")) if m >= s)
    a = b = ""
    for digits in range(4, 13):
        a, b = f"{a_ns / scale:.{digits}g} {unit}", f"{b_ns / scale:.{digits}g} {unit}"
        if a != b:
            break
    return a, b


def size(nbytes: float | None) -> str:
    if not _finite(nbytes):
        return "—"
    assert nbytes is not None
    for unit, scale in (("PB", 1e15), ("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(nbytes) >= scale:
            return f"{nbytes / scale:.3g} {unit}"
    return f"{nbytes:.0f} B"


def binary_size(nbytes: float | None) -> str:
    """Sizes that are powers of two by nature (memory capacities, read limits): ``1.5 GiB``,
    ``64 MiB``."""
    if not _finite(nbytes):
        return "—"
    assert nbytes is not None
    for unit, scale in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
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


def frequency(hz: float | None) -> str:
    """Clock and sampling rates: ``100 Hz``, ``1.41 GHz``."""
    return count(hz, "Hz")


def flops(x: float | None) -> str:
    return count(x, "FLOP")


def flop_rate(x: float | None) -> str:
    return count(x, "FLOP/s")


def byte_rate(x: float | None) -> str:
    if not _finite(x):
        return "—"
    return size(x) + "/s"


def pct(x: float | None, digits: int | None = 1) -> str:
    """``4.66`` -> ``4.7%``; ``digits=None`` prints the shortest form (thresholds: ``5%``)."""
    if not _finite(x):
        return "—"
    assert x is not None
    return f"{x:g}%" if digits is None else f"{x:.{digits}f}%"


def percent(part: float, whole: float, digits: int | None = None) -> float:
    """``100 * part / whole`` (0 when ``whole`` is 0), rounded to ``digits`` when given: the one
    definition of a share, for values as well as text."""
    x = float(100.0 * part / whole) if whole and whole > 0 else 0.0
    return round(x, digits) if digits is not None else x


def share(part: float, whole: float, digits: int = 1) -> str:
    """``part`` as a percentage of ``whole``, as text: ``share(47, 1000)`` -> ``4.7%``."""
    return pct(percent(part, whole), digits)


def sign(x: float) -> str:
    """``+`` / ``−`` (U+2212) / ``±`` for zero: the sign of a change."""
    return "+" if x > 0 else "−" if x < 0 else "±"


def signed_pct(x: float | None, digits: int = 1, suffix: str = "%") -> str:
    """A change: ``+30.0%``, ``−3%`` (``digits=0``), ``+1.5 pp`` (``suffix=" pp"``); one that
    rounds to zero is ``±0.0%``, never ``−0.0%``."""
    if not _finite(x):
        return "—"
    assert x is not None
    r = round(x, digits)
    return sign(r) + f"{abs(r):.{digits}f}{suffix}"


def signed_duration(ns: float | None) -> str:
    """A change of time: ``+1.2 ms``, ``−340 µs``; under half a nanosecond is ``±0 ns``."""
    if not _finite(ns):
        return "—"
    assert ns is not None
    if abs(ns) < 0.5:
        ns = 0.0
    return sign(ns) + duration(abs(ns))


def fraction(x: float | None) -> str:
    """A bare ratio or multiplier: ``1.71×``."""
    if not _finite(x):
        return "—"
    assert x is not None
    return f"{x:.3g}×"


NBSP = "\u00a0"


def nonbreaking(s: str) -> str:
    """Join numbers to their units with a non-breaking space (table cells must not wrap
    "262 ms" into "262 / ms")."""
    return _NUM_UNIT.sub("\\1" + NBSP, s)


def ratio(x: float | None) -> str:
    """Arithmetic intensity and the like (FLOP/byte): 3 significant digits, no exponent."""
    if not _finite(x):
        return "—"
    assert x is not None
    return f"{x:.3g}" if abs(x) < 1000 else f"{x:,.0f}"
