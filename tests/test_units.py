"""units.py is the only place a number becomes text (issue 9): one rounding, "µs", "4.7%"."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from traceclass import units

ROOT = Path(__file__).resolve().parents[1]
SOURCES = sorted((ROOT / "src" / "traceclass").rglob("*.py")) + sorted((ROOT / "rules").glob("*.py"))

# an f-string field formatting a float, followed by a unit: "{x:.1f} us", "{p:.0f}%", "{t / 1e6:g} ms",
# "{b / 1e9:.1f} GB/s", "{n / 2**30:.1f} GiB", "{hz:g} Hz", "{f / 1e12:.3g} TFLOP/s"
STRAY = re.compile(r"\{[^{}]*:[^{}]*\d*[fg]\} ?(?:us|µs|ms|ns|s|%|[kMGTP]?i?B(?:/s)?|[kMGT]?Hz|[kMGTP]?FLOP(?:/s)?)(?![\w])")
# a duration spelled "us" in text a user reads
ASCII_US = re.compile(r"[\d}] us\b")


def _code_lines(path: Path):
    """(line number, line) outside docstrings and comments: those document, they do not format."""
    in_doc = False
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        s = line.strip()
        quotes = s.count('"""')
        if in_doc:
            if quotes % 2:
                in_doc = False
            continue
        if s.startswith('"""') or s.startswith('r"""'):
            in_doc = quotes % 2 == 1
            continue
        if s.startswith("#"):
            continue
        yield n, line.split("  #")[0]


def test_no_stray_number_formatting_outside_units():
    stray = [f"{p.relative_to(ROOT)}:{n}: {line.strip()}" for p in SOURCES if p.name != "units.py"
             for n, line in _code_lines(p) if STRAY.search(line)]
    assert stray == [], "format numbers with traceclass.units:\n" + "\n".join(stray)


def test_no_ascii_microseconds_in_messages():
    found = [f"{p.relative_to(ROOT)}:{n}: {line.strip()}" for p in SOURCES
             for n, line in _code_lines(p) if ASCII_US.search(line) and '"' in line]
    assert found == [], "write µs, not us:\n" + "\n".join(found)


def test_the_detector_catches_what_it_should():
    assert STRAY.search('f"{ns / 1e3:.1f} us"') and STRAY.search('f"{p:.0f}%"') and STRAY.search('f"{t / 1e6:g} ms"')
    assert STRAY.search('f"{achieved / 1e9:.1f} GB/s achieved"') and STRAY.search('f"{n / 2**30:.1f} GiB"')
    assert STRAY.search('f"at {1e9 / ns:.4g} Hz"') and STRAY.search('f"{c / 1e9:g} GHz"')
    assert STRAY.search('f"{p / 1e12:.3g} TFLOP/s"') and STRAY.search('f"{n / 2**20:.0f} MiB"')
    assert not STRAY.search('f"{n:,} samples"') and not STRAY.search('f"{units.pct(x)}"')
    assert not STRAY.search('f"{units.byte_rate(x)} achieved"') and not STRAY.search('f"{n:,} bytes"')


@pytest.mark.parametrize("ns, text", [
    (None, "—"), (0, "0 ns"), (999.4, "999 ns"), (999.6, "1 µs"), (794_000, "794 µs"), (99_940, "99.9 µs"),
    (99_960, "100 µs"), (1_234_567, "1.23 ms"), (262_000_000, "262 ms"), (3_100_000_000, "3.1 s"),
])
def test_duration(ns, text):
    assert units.duration(ns) == text


def test_percent_one_definition():
    assert units.percent(47, 1000) == pytest.approx(4.7)
    assert units.percent(1, 3, 1) == 33.3 and units.percent(5, 0) == 0.0
    assert units.share(47, 1000) == "4.7%" and units.pct(55.46) == "55.5%" and units.pct(5.0, None) == "5%"
    assert units.signed_pct(-3.2, 0) == "−3%" and units.fraction(2.5) == "2.5×"


def test_signed_changes_one_definition():
    assert units.signed_pct(30) == "+30.0%" and units.signed_pct(-0.04) == "±0.0%"
    assert units.signed_pct(1.25, 1, " pp") == "+1.2 pp" and units.signed_pct(None) == "—"
    assert units.signed_duration(-340_000) == "−340 µs" and units.signed_duration(0.3) == "±0 ns"
    assert units.signed_duration(1_234_567) == "+1.23 ms" and units.sign(0) == "±"


def test_rates_and_binary_sizes():
    assert units.byte_rate(8.388608e9) == "8.39 GB/s" and units.byte_rate(3.35e12) == "3.35 TB/s"
    assert units.frequency(100.0) == "100 Hz" and units.frequency(1.41e9) == "1.41 GHz"
    assert units.frequency(1e9 / 3_000_000) == "333 Hz" and units.frequency(None) == "—"
    assert units.binary_size(64 << 20) == "64 MiB" and units.binary_size(1.5 * 2**30) == "1.5 GiB"
    assert units.binary_size(85520809984) == "79.6 GiB" and units.binary_size(512) == "512 B"


def test_nonbreaking_joins_number_and_unit_only():
    assert units.nonbreaking("262 ms, 3.1 GB/s, 12 TFLOP/s, 3 steps") == \
        "262\u00a0ms, 3.1\u00a0GB/s, 12\u00a0TFLOP/s, 3 steps"
