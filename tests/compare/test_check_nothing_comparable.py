"""``traceclass check`` on runs with nothing in common must not pass: exit 2, "nothing comparable"."""

from __future__ import annotations

import json

from compare_helpers import BASELINE
from pyspy_builder import MAIN, PARSE, WORK, write_collapsed

from traceclass.cli import main

PROFILE = {"MainThread": {(MAIN, WORK): 60, (MAIN, PARSE): 40}}


def test_two_sampled_profiles_are_nothing_comparable(tmp_path, capsys):
    a = write_collapsed(tmp_path / "a.raw.txt", PROFILE)
    b = write_collapsed(tmp_path / "b.raw.txt", {"MainThread": {(MAIN, WORK): 90, (MAIN, PARSE): 10}})
    rc = main(["check", str(b), "--baseline", str(a)])
    out, err = capsys.readouterr()
    assert rc == 2
    head = out.splitlines()[0]
    assert head.startswith("## traceclass check: nothing comparable: ")
    assert "no steps or ranges in either run" in head and "PASS" not in out
    assert "Exit code 2." in out
    # one line naming both files (issue 15: the designed outcome named none)
    assert err.startswith(f"traceclass: {b} (baseline {a}): nothing comparable: ") and err.count("\n") == 1
    rc = main(["check", str(b), "--baseline", str(a), "--format", "json"])
    d = json.loads(capsys.readouterr().out)
    assert rc == 2 and d["exit_code"] == 2
    assert d["passed"] is False and d["outcome"] == "nothing comparable"
    assert "no steps or ranges in either run" in d["nothing_comparable"]


def test_a_budget_is_something_checked(tmp_path, capsys):
    a = write_collapsed(tmp_path / "a.raw.txt", PROFILE)
    cfg = tmp_path / "tc.toml"
    cfg.write_text('[budgets]\npreprocess = "10ms"\n')
    # the budget names a stage the candidate does not have: a failure, not "nothing comparable"
    assert main(["check", str(a), "--baseline", str(a), "--config", str(cfg)]) == 1
    out = capsys.readouterr().out
    assert "FAIL: 1 metric beyond threshold or budget" in out and "**MISSING**" in out


def test_one_comparable_metric_is_enough(capsys):
    assert main(["check", str(BASELINE), "--baseline", str(BASELINE)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("## traceclass check: PASS")
    rc = main(["check", str(BASELINE), "--baseline", str(BASELINE), "--format", "json"])
    d = json.loads(capsys.readouterr().out)
    assert rc == 0 and d["outcome"] == "pass" and d["nothing_comparable"] is None


def test_trace_against_sampled_profile_is_nothing_comparable(tmp_path, capsys):
    a = write_collapsed(tmp_path / "a.raw.txt", PROFILE)
    assert main(["check", str(a), "--baseline", str(BASELINE)]) == 2
    out = capsys.readouterr().out
    assert "nothing comparable: no steps or ranges in the candidate; " in out
    assert "no memory events in the candidate |" in out  # the baseline sample has host memory events; no torch hint for py-spy


def test_check_help_documents_exit_2_for_nothing_comparable(capsys):
    import pytest

    with pytest.raises(SystemExit):
        main(["check", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "2 bad input or configuration, or nothing comparable" in text


def test_baseline_of_a_sampled_profile_says_check_cannot_gate_it(tmp_path, capsys):
    a = write_collapsed(tmp_path / "a.raw.txt", PROFILE)
    assert main(["baseline", "save", str(a), "-o", str(tmp_path / "bl.json")]) == 0
    err = capsys.readouterr().err
    assert "no steps — a sampled CPU profile: `traceclass check` has nothing to gate in it" in err
    assert main(["check", str(a), "--baseline", str(tmp_path / "bl.json")]) == 2


def test_memory_note_suggests_profile_memory_only_for_torch_traces(tmp_path, capsys):
    from kineto_builder import KinetoBuilder

    kb = KinetoBuilder(gpu_name=None)
    for n in range(3):
        kb.step(n, n * 1_000_000, 900_000)
        kb.op("aten::mm", n * 1_000_000 + 10_000, 500_000)
    trace = kb.write(tmp_path / "t.json")
    assert main(["check", str(trace), "--baseline", str(trace)]) == 0
    out = capsys.readouterr().out
    assert "no memory events in either run (record with profile_memory=True)" in out
