"""``[tool.traceclass.check]`` and ``[tool.traceclass.budgets]`` validation, through the CLI:
every bad value is one ``traceclass: ...`` line on stderr naming the key, exit 2, no traceback
and never the "internal error" line."""

from __future__ import annotations

import subprocess
import sys

import pytest
from compare_helpers import BASELINE

from traceclass.cli import main


def _check_in(tmp_path, monkeypatch, capsys, toml: str, *extra: str) -> tuple[int, str, str]:
    (tmp_path / "pyproject.toml").write_text(toml, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    rc = main(["check", str(BASELINE), "--baseline", str(BASELINE), *extra])
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.mark.parametrize("value, words", [
    ('"abc"', "must be a number"),
    ("true", "must be a number"),
    ("[5]", "must be a number"),
    ("nan", "must be a finite number"),
    ("inf", "must be a finite number"),
    ("-inf", "must be a finite number"),
    ("-1", "must be >= 0"),
    ("-0.5", "must be >= 0"),
])
def test_bad_check_thresholds_are_one_line_config_errors(tmp_path, monkeypatch, capsys, value, words):
    rc, out, err = _check_in(tmp_path, monkeypatch, capsys, f"[tool.traceclass.check]\nstep_p50_pct = {value}\n")
    assert rc == 2
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("traceclass: ") and "internal error" not in lines[0]
    assert "check.step_p50_pct" in lines[0] and words in lines[0]
    assert "pyproject.toml" in lines[0]


@pytest.mark.parametrize("value, words", [
    ('"0ms"', "positive duration"),
    ("0", "positive duration"),
    ("-5", "positive duration"),
    ('"-3ms"', "positive duration"),
    ('"0.0001ns"', "positive duration"),
    ("nan", "not a finite duration"),
    ("inf", "not a finite duration"),
    ("1e300", "too large"),
    ("true", "not a duration"),
    ('"10 parsecs"', "not a duration"),
])
def test_bad_budgets_are_one_line_config_errors(tmp_path, monkeypatch, capsys, value, words):
    rc, out, err = _check_in(tmp_path, monkeypatch, capsys, f'[tool.traceclass.budgets]\n"stage:forward" = {value}\n')
    assert rc == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "internal error" not in lines[0]
    assert "budgets.stage:forward" in lines[0] and words in lines[0]


def test_check_and_budgets_must_be_tables(tmp_path, monkeypatch, capsys):
    for key in ("check", "budgets"):
        rc, _out, err = _check_in(tmp_path, monkeypatch, capsys, f"[tool.traceclass]\n{key} = 5\n")
        assert rc == 2 and f"{key} must be a table" in err and "unknown setting" not in err


def test_zero_threshold_and_fractional_budget_are_valid(tmp_path, monkeypatch, capsys):
    # 0 = no worsening allowed; the trace against itself passes it (no change at all)
    rc, out, err = _check_in(tmp_path, monkeypatch, capsys,
                             '[tool.traceclass.check]\nstep_p50_pct = 0\n[tool.traceclass.budgets]\nstep = 0.5\n')
    assert err == ""
    assert "+0% (step_p50_pct)" in out
    assert "| `ProfilerStep` | 500 µs |" in out and rc == 1  # a 9.6 ms step is over a 0.5 ms budget


def test_the_same_errors_in_a_config_file_for_diff_and_baseline(tmp_path):
    cfg = tmp_path / "tc.toml"
    cfg.write_text("[check]\nstage_p50_pct = nan\n", encoding="utf-8")
    for args in (["diff", str(BASELINE), str(BASELINE)],
                 ["baseline", "save", str(BASELINE), "-o", str(tmp_path / "b.json")],
                 ["check", str(BASELINE), "--baseline", str(BASELINE)]):
        p = subprocess.run([sys.executable, "-m", "traceclass", *args, "--config", str(cfg)],
                           capture_output=True, text=True)
        assert p.returncode == 2, (args, p.stderr)
        assert p.stderr.count("\n") == 1 and "Traceback" not in p.stderr
        assert "check.stage_p50_pct: must be a finite number, got nan" in p.stderr
    assert not (tmp_path / "b.json").exists()
