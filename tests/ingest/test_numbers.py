"""Exact decimal text -> integer conversion (ingest/numbers.py), against Python's Decimal."""

from __future__ import annotations

from decimal import Decimal, InvalidOperation, ROUND_HALF_UP

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from traceclass.ingest.numbers import decimal_text_to_int

LIMIT = 1 << 62


def _reference(text: bytes, scale: int) -> int | None:
    try:
        d = Decimal(text.decode())
    except (InvalidOperation, UnicodeDecodeError):
        return None
    if not d.is_finite() or abs(d.adjusted()) > 40:  # far beyond int64 either way
        return None
    v = int((d * 10**scale).to_integral_value(ROUND_HALF_UP))
    return v if -LIMIT < v < LIMIT else None


def _check(texts: list[bytes], scale: int = 3) -> None:
    values, ok = decimal_text_to_int(texts, scale)
    for text, v, good in zip(texts, values.tolist(), ok.tolist()):
        want = _reference(text, scale)
        assert good == (want is not None), text
        if want is not None:
            assert v == want, text


def test_epoch_microseconds_keep_every_nanosecond_digit() -> None:
    values, ok = decimal_text_to_int([b"1700000000000000.123", b"1700000000000000.124", b"1700000000000001"], 3)
    assert ok.all()
    assert values.tolist() == [1700000000000000123, 1700000000000000124, 1700000000000001000]


def test_rounding_on_the_first_dropped_digit_and_odd_forms() -> None:
    values, ok = decimal_text_to_int([b"12.0005", b"12.0004", b"999.9995", b".5", b"5.", b".", b""], 3)
    assert values.tolist() == [12001, 12000, 1000000, 500, 5000, 0, 0]
    assert ok.tolist() == [True, True, True, True, True, False, False]


def test_values_beyond_int64_nanoseconds_are_not_timestamps() -> None:
    values, ok = decimal_text_to_int([b"9300000000000000.5", b"4611686018427387.904", b"4611686018427387.903"], 3)
    assert ok.tolist() == [False, False, True]
    assert values.tolist() == [0, 0, 4611686018427387903]


def test_signs_exponents_and_garbage_take_the_general_path() -> None:
    _check([b"-1.5", b"1e3", b"1.2.3", b"abc", b"2.25", b"1700000000000000.123"])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 10**16), st.text("0123456789", max_size=7), st.booleans()),
                min_size=1, max_size=40))
def test_plain_decimals_match_decimal(parts: list[tuple[int, str, bool]]) -> None:
    texts = [(f"{i}.{f}" if (f or dot) else str(i)).encode() for i, f, dot in parts]
    _check(texts)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.text("0123456789.-e+x", min_size=0, max_size=12), min_size=1, max_size=30))
def test_any_mix_matches_decimal_or_is_refused(texts: list[str]) -> None:
    raws = [t.encode() for t in texts]
    values, ok = decimal_text_to_int(raws, 3)
    assert values.dtype == np.int64 and len(values) == len(raws)
    for text, v, good in zip(raws, values.tolist(), ok.tolist()):
        want = _reference(text, 3)
        if good and want is not None:
            assert v == want, text


def test_equal_width_texts_read_as_a_matrix_match_decimal() -> None:
    # one width, the point in one column: the matrix path; each case against Decimal
    _check([b"1712195495519689.047", b"1712195495519695.812", b"0000000000000000.000"])
    _check([b"12.0005", b"99.9995", b"00.0004"])  # rounding on the first dropped digit
    _check([b"1.5", b"2.2"])  # fewer fraction digits than the scale
    _check([b"15", b"22", b"07"])  # no point at all
    _check([b"9223372036854775.807", b"8999999999999999.999", b"4611686018427387.904"])  # int64's edge
    _check([b"9999999999999999.999", b"1000000000000000.000"])  # 19 places: a leading 9 may wrap int64


def test_equal_width_texts_that_are_not_plain_numbers_take_the_general_path() -> None:
    _check([b"1.5", b"-1."])  # a sign
    _check([b"1e3", b"1.5"])  # an exponent
    _check([b"1.5", b"12."])  # the point in another column
    _check([b"5.", b"6."])  # a trailing point
    _check([b"..", b".."])
    _check([b"", b""])


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 17), st.integers(0, 6), st.lists(st.integers(0, 10**23 - 1), min_size=1, max_size=30))
def test_equal_width_matches_decimal(int_width: int, frac_width: int, seeds: list[int]) -> None:
    digits = [str(x).zfill(23)[-(int_width + frac_width):] for x in seeds]
    texts = [(d[:int_width] + ("." + d[int_width:] if frac_width else "")).encode() for d in digits]
    _check(texts)
