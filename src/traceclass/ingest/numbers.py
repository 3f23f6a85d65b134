"""Exact conversion of JSON number text to integer nanoseconds.

Kineto writes ``ts`` in microseconds with three decimals. Epoch-microsecond values
(~1.7e15) do not survive a float64 parse (they keep 0.25 us steps), so ``ts`` is decoded
from its text: the numbers are laid out as a fixed-width byte matrix and their digits are
weighted by their place relative to the decimal point, all vectorized.
"""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from typing import Sequence

import numpy as np

_POW10 = 10 ** np.arange(19, dtype=np.int64)


def decimal_text_to_int(raws: Sequence[bytes], scale_exp: int = 3) -> tuple[np.ndarray, np.ndarray]:
    """``round(value * 10**scale_exp)`` for each JSON number text, exactly.

    ``raws`` are bytes-like (``bytes`` or ``msgspec.Raw``). Returns ``(values, ok)``; ``ok`` is
    False where the text was empty or not a number. Texts with an exponent or a sign go
    through Python's float/int parsing, one by one (they are rare in traces).
    """
    n = len(raws)
    if n == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=bool)
    buf = b",".join(raws) + b","
    if buf.count(b",") != n:
        # a text holding a comma (a list, an object or a string where a number belongs) is
        # not a number: blank it so it comes out not ok instead of shifting every later value
        raws = [b"" if b"," in bytes(r) else r for r in raws]
        buf = b",".join(raws) + b","
    return joined_decimal_to_int(buf, n, raws, scale_exp)


def joined_decimal_to_int(buf: bytes, n: int, raws: Sequence[bytes] | None = None,
                          scale_exp: int = 3) -> tuple[np.ndarray, np.ndarray]:
    """Like :func:`decimal_text_to_int` for ``n`` texts already joined as ``t0,t1,...,tn-1,``."""
    a = np.frombuffer(buf, dtype=np.uint8)
    sep = np.flatnonzero(a == 44)
    if len(sep) != n:
        raise ValueError("separator count does not match the number count")
    starts = np.empty(n, dtype=np.int64)
    starts[0] = 0
    starts[1:] = sep[:-1] + 1
    lengths = sep - starts
    fast = _fixed_width_decimals(a, n, scale_exp)
    if fast is None:
        fast = _plain_decimals(a, sep, starts, lengths, scale_exp)
    if fast is not None:
        return fast
    width = int(lengths.max()) if n else 0
    values = np.zeros(n, dtype=np.int64)
    ok = lengths > 0
    if width == 0:
        return values, ok
    cols = np.arange(width, dtype=np.int64)
    inside = cols[None, :] < lengths[:, None]
    idx = np.minimum(starts[:, None] + cols[None, :], len(a) - 1)
    mat = np.where(inside, a[idx], 0).astype(np.uint8)
    digit = mat - np.uint8(48)  # wraps for non-digits
    is_digit = digit < 10
    is_dot = mat == 46
    # anything but digits and one dot (a sign, an exponent, garbage) takes the slow path
    odd = inside & ~is_digit & ~is_dot
    slow = odd.any(axis=1) | (is_dot.sum(axis=1) > 1)
    has_dot = is_dot.any(axis=1)
    dot = np.where(has_dot, is_dot.argmax(axis=1), lengths)
    slow |= dot - 1 + scale_exp >= 18  # digits at 10**18 and up may not fit int64: checked one by one
    e10 = np.where(cols[None, :] < dot[:, None], dot[:, None] - cols[None, :] - 1,
                   dot[:, None] - cols[None, :]) + scale_exp
    use = is_digit & (e10 >= 0) & (e10 < 19)
    weights = np.where(use, _POW10[np.clip(e10, 0, 18)], 0)
    values = (digit.astype(np.int64) * weights).sum(axis=1)
    # round half up on the first dropped digit
    first_dropped = is_digit & (e10 == -1)
    values += (first_dropped & (digit >= 5)).any(axis=1)
    ok &= is_digit.any(axis=1)
    for i in np.flatnonzero(slow & ok).tolist():
        text = bytes(raws[i]) if raws is not None else bytes(a[starts[i]: starts[i] + lengths[i]])
        v = _parse_one(text, scale_exp)
        if v is None:
            ok[i] = False
            values[i] = 0
        else:
            values[i] = v
    return values, ok


def _fixed_width_decimals(a: np.ndarray, n: int, scale_exp: int) -> tuple[np.ndarray, np.ndarray] | None:
    """The commonest case, fastest: every text has the same length and its point in the same
    column (Kineto's epoch-microsecond ``ts``, written ``%.3f``), so the joined texts are an
    ``n x (width + 1)`` matrix as they lie, read without gathering. None otherwise."""
    if len(a) % n:
        return None
    mat = a.reshape(n, len(a) // n)[:, :-1]  # the last column is the separators
    width = mat.shape[1]
    dots = np.flatnonzero(mat[0] == 46)
    if width == 0 or len(dots) > 1 or (len(dots) and dots[0] == width - 1):
        return None  # a lone point or "5.": the general paths decide
    point = int(dots[0]) if len(dots) else width
    int_cols, frac_cols = mat[:, :point], mat[:, point + 1:]
    if point and (int_cols - np.uint8(48) > 9).any():
        return None
    if frac_cols.shape[1] and (frac_cols - np.uint8(48) > 9).any():
        return None
    if len(dots) and (mat[:, point] != 46).any():
        return None
    if point + scale_exp > 19:
        return None  # beyond int64 after scaling: the general paths decide
    kept = min(frac_cols.shape[1], scale_exp)
    digits = mat[:, list(range(point)) + list(range(point + 1, point + 1 + kept))] - np.uint8(48)
    weights = _POW10[np.arange(point + kept - 1, -1, -1) + (scale_exp - kept)]
    values = digits.astype(np.int64) @ weights
    if frac_cols.shape[1] > scale_exp:
        values += frac_cols[:, scale_exp] >= 48 + 5  # round half up on the first dropped digit
    ok = values < (1 << 62)  # beyond int64 ns after arithmetic: not a timestamp (as _parse_one)
    if point + scale_exp == 19:
        ok &= mat[:, 0] < 48 + 9  # >= 9e18 may have wrapped around int64, and is no timestamp anyway
    return np.where(ok, values, 0), ok


def _plain_decimals(a: np.ndarray, sep: np.ndarray, starts: np.ndarray, lengths: np.ndarray,
                    scale_exp: int) -> tuple[np.ndarray, np.ndarray] | None:
    """The common case, fast: every text is digits with at most one dot (no sign, no exponent).

    Digits are gathered by their place relative to the decimal point (one column per power of
    ten, right-aligned on the point) and weighted by one matrix-vector product, so the matrix
    is as wide as the longest integer part plus ``scale_exp + 1`` fraction digits, not as wide
    as the longest text. None when some text needs the general path.
    """
    odd = (a != 44) & (a != 46) & ((a < 48) | (a > 57))
    if odd.any():
        return None
    dots = np.flatnonzero(a == 46)
    point = sep.copy()  # where the decimal point is; the end of the text when it has none
    if len(dots):
        row = np.searchsorted(sep, dots)
        if len(row) > 1 and not (np.diff(row) > 0).all():
            return None  # a text with two dots
        point[row] = dots
    int_places = int((point - starts).max())
    if int_places + scale_exp > 19:
        return None  # beyond int64 after scaling: the general path decides
    # offsets from the point: -int_places..-1 integer digits, 1..scale_exp+1 fraction digits
    # (the last one only rounds)
    offs = np.concatenate([np.arange(-int_places, 0), np.arange(1, scale_exp + 2)]).astype(np.int64)
    idx = point[:, None] + offs[None, :]
    inside = (idx >= starts[:, None]) & (idx < sep[:, None])
    digits = np.where(inside, a[np.clip(idx, 0, len(a) - 1)], np.uint8(48)) - np.uint8(48)
    weights = _POW10[np.concatenate([np.arange(int_places - 1 + scale_exp, scale_exp - 1, -1),
                                     np.arange(scale_exp - 1, -1, -1)])]
    values = digits[:, :-1].astype(np.int64) @ weights
    values += digits[:, -1] >= 5  # round half up on the first dropped digit
    has_dot = point < sep
    ok = lengths > has_dot  # a lone "." or an empty text is not a number
    if int_places + scale_exp == 19:
        ok &= digits[:, 0] < 9  # >= 9e18 may have wrapped around int64, and is no timestamp anyway
    ok &= values < (1 << 62)  # beyond int64 ns after arithmetic: not a timestamp (as _parse_one)
    return np.where(ok, values, 0), ok


def _parse_one(text: bytes, scale_exp: int) -> int | None:
    """One text the vectorized paths leave out (sign, exponent, huge), exactly: Decimal, not float."""
    try:
        d = Decimal(text.strip().decode("ascii"))
    except (InvalidOperation, UnicodeDecodeError, ValueError):
        return None
    if not d.is_finite() or d.adjusted() > 40:
        return None
    if d.adjusted() < -40:
        return 0  # rounds to zero at any scale we use
    v = int((d.scaleb(scale_exp)).to_integral_value(ROUND_HALF_UP))
    return v if -(1 << 62) < v < (1 << 62) else None  # beyond int64 ns: not a timestamp
