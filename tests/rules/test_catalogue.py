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
    doc = rule.doc
    positions = [doc.find(s) for s in SECTIONS]
    assert all(p >= 0 for p in positions), f"{rule.info.code} lacks {[s for s, p in zip(SECTIONS, positions) if p < 0]}"
    assert positions == sorted(positions), f"{rule.info.code}: sections out of order"


@pytest.mark.parametrize("rule", all_rules(), ids=lambda r: r.info.code)
def test_rule_thresholds_are_documented(rule):
    th = default_thresholds().get(rule.info.code)
    assert th is not None, f"rules/thresholds.toml has no [{rule.info.code}] table"
    thresholds_section = rule.doc[rule.doc.find("Thresholds"):]
    for key in th:
        assert key in thresholds_section, f"{rule.info.code}: threshold {key} not explained in the docstring"
        assert re.search(r"_(us|ms|ns|pct|bytes|count|x|ratio|per_step|gb_s|kb|mb|regex)$|^(min|max)_", key), \
            f"{rule.info.code}.{key}: put the unit in the key name"


def test_thresholds_file_has_no_orphan_tables():
    codes = {r.info.code for r in all_rules()}
    assert set(default_thresholds()) <= codes


def test_rules_readme_is_generated_from_the_rules():
    from pathlib import Path

    from traceclass.cli.rules import catalogue

    readme = Path(__file__).resolve().parents[2] / "rules" / "README.md"
    assert readme.read_text(encoding="utf-8") == catalogue("md"), \
        "regenerate with: traceclass rules --format md > rules/README.md"
