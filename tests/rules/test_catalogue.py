"""Every rule is documented, coded, and configured the same way."""

from __future__ import annotations

import re

import pytest

from traceclass.config import default_thresholds
from traceclass.registry import all_rules

SECTIONS = ("What it finds", "Why it matters", "How to fix", "Example", "Thresholds")


def test_rules_exist_and_codes_are_unique():
    rules = all_rules()
    codes = [r.info.code for r in rules]
    assert len(codes) == len(set(codes))
    names = [r.info.name for r in rules]
    assert len(names) == len(set(names))


@pytest.mark.parametrize("rule", all_rules(), ids=lambda r: r.info.code)
def test_rule_docstring_has_every_section(rule):
    """One layout: a summary line, then each section as an unindented header line (no underline)
    in this order, its text indented by four spaces."""
    lines = rule.doc.splitlines()
    assert lines and lines[0].strip() and lines[0] not in SECTIONS, f"{rule.info.code}: no summary line"
    headers = [ln for ln in lines if ln and not ln.startswith(" ")][1:]
    assert headers == list(SECTIONS), f"{rule.info.code}: section headers {headers}, want {list(SECTIONS)}"
    body = [ln for ln in lines[1:] if ln and ln not in SECTIONS]
    assert all(ln.startswith("    ") for ln in body), f"{rule.info.code}: section text must be indented"


@pytest.mark.parametrize("rule", all_rules(), ids=lambda r: r.info.code)
def test_rule_thresholds_are_documented(rule):
    th = rule.info.thresholds
    assert th, f"{rule.info.code} declares no thresholds"
    assert rule.info.code in default_thresholds()
    for t in th:
        assert t.reason.strip() and t.unit.strip(), f"{rule.info.code}.{t.name}: state its unit and reason"
        assert re.search(r"_(us|ms|ns|pct|bytes|count|x|ratio|per_step|gb_s|kb|mb|regex)$|^(min|max)_", t.name), \
            f"{rule.info.code}.{t.name}: put the unit in the key name"
    assert len({t.name for t in th}) == len(th), f"{rule.info.code}: a threshold is declared twice"


def test_thresholds_file_is_generated_from_the_rules():
    import tomllib
    from pathlib import Path

    from traceclass.registry import thresholds_toml

    path = Path(__file__).resolve().parents[2] / "rules" / "thresholds.toml"
    assert path.read_text(encoding="utf-8") == thresholds_toml(), \
        "regenerate with: traceclass rules --format toml > rules/thresholds.toml"
    assert tomllib.loads(thresholds_toml()) == default_thresholds()


def test_rules_readme_is_generated_from_the_rules():
    from pathlib import Path

    from traceclass.cli.rules import catalogue

    readme = Path(__file__).resolve().parents[2] / "rules" / "README.md"
    assert readme.read_text(encoding="utf-8") == catalogue("md"), \
        "regenerate with: traceclass rules --format md > rules/README.md"
