"""Exact conversion of JSON number text to integer nanoseconds.

Kineto writes ``ts`` in microseconds with three decimals. Epoch-microsecond values
(~1.7e15) do not survive a float64 parse (they keep 0.25 us steps), so ``ts`` is decoded
from its text: integer and fraction digits are accumulated as integers, vectorized.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

_POW10 = 10 ** np.arange(19, dtype=np.int64)


def decimal_text_to_int(raws: Sequence[bytes], scale_exp: int = 3) -> tuple[np.ndarray, np.ndarray]:
    """``round(value * 10**scale_exp)`` for each JSON number text, exactly.

    Returns ``(values, ok)``; ``ok`` is False where the text was empty or not a number.
    Texts with an exponent (``1e+06``) go through float, which is exact enough there.
    """
    n = len(raws)
    values = np.zeros(n, dtype=np.int64)
    ok = np.zeros(n, dtype=bool)
    if n == 0:
        return values, ok
    buf = b",".join(raws) + b","
    a = np.frombuffer(buf, dtype=np.uint8)
    is_sep = a == 44
    sep = np.flatnonzero(is_sep)
    num_id = np.cumsum(is_sep) - is_sep
    starts = np.r_[0, sep[:-1] + 1]
    lengths = sep - starts
    is_digit = (a >= 48) & (a <= 57)
    is_dot = a == 46
    is_exp = (a == 101) | (a == 69)
    is_neg = a == 45
    dot_of = sep.copy()
    dots = np.flatnonzero(is_dot)
    dot_of[num_id[dots]] = dots
    digit_pos = np.flatnonzero(is_digit)
    nid = num_id[digit_pos]
    d = dot_of[nid]
    e10 = np.where(digit_pos < d, d - digit_pos - 1, d - digit_pos) + scale_exp
    digits = a[digit_pos].astype(np.int64) - 48
    keep = (e10 >= 0) & (e10 < 19)
    contrib = digits[keep] * _POW10[e10[keep]]
    nid_keep = nid[keep]
    has_digit = np.zeros(n, dtype=bool)
    has_digit[nid_keep] = True
    if len(nid_keep):
        first = np.searchsorted(nid_keep, np.arange(n))
        sums = np.add.reduceat(contrib, np.minimum(first, len(contrib) - 1))
        values = np.where(has_digit, sums, 0)
    # round half up on the first dropped digit
    dropped = e10 == -1
    if dropped.any():
        up = digits[dropped] >= 5
        np.add.at(values, nid[dropped][up], 1)
    neg = np.zeros(n, dtype=bool)
    neg_pos = np.flatnonzero(is_neg)
    neg[num_id[neg_pos[neg_pos == starts[num_id[neg_pos]]]]] = True
    values = np.where(neg, -values, values)
    ok = has_digit & (lengths > 0)
    # anything but digits, one dot and a leading minus makes the text suspect
    other = ~(is_digit | is_dot | is_sep | is_neg)
    bad = np.zeros(n, dtype=bool)
    bad[num_id[np.flatnonzero(other)]] = True
    with_exp = np.zeros(n, dtype=bool)
    with_exp[num_id[np.flatnonzero(is_exp)]] = True
    for i in np.flatnonzero(bad):
        try:
            x = float(raws[i])
        except ValueError:
            ok[i] = False
            continue
        if x != x or x in (float("inf"), float("-inf")):
            ok[i] = False
            continue
        values[i] = int(round(x * 10**scale_exp))
        ok[i] = True
    return values, ok
