"""traceclass baseline save and traceclass check: exit codes, thresholds, budgets, bad input."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from compare_helpers import BASELINE, CANDIDATE, assert_tables_intact, run_of, stretched  # noqa: F401 (fixture)

from traceclass.cli import main
from traceclass.compare import gate
from traceclass.compare.baseline import build_baseline, git_facts
from traceclass.compare.run import report_dict


@pytest.fixture(scope="module")
def baseline_file(tmp_path_factory):
    p = tmp_path_factory.mktemp("bl") / "baseline.json"
    assert main(["baseline", "save", str(BASELINE), "-o", str(p)]) == 0
    return p


def test_baseline_file_contents(baseline_file):
    d = json.loads(baseline_file.read_text())
    assert (d["kind"], d["schema_version"]) == ("traceclass-baseline", 1)
    assert d["recorded_at"].startswith("2026-12-02T17:01:")  # README: recorded 2026-12-02
    assert d["recorded_at_basis"] == "baseTimeNanoseconds + first event"
    assert d["saved_at"].endswith("Z")
    assert d["source"]["file"] == BASELINE.name and d["source"]["format"] == "kineto"
    assert d["environment"]["profiler"]["record_shapes"] == 1
    m = d["metrics"]
    assert m["step_p50_ns"] == pytest.approx(9.597e6, rel=1e-3) and m["steady_steps"] == 5
    assert m["gpu_busy_pct"] is None  # CPU-only trace
    assert m["peak_memory"]["device"] == "host" and m["peak_memory"]["bytes"] > 8 * 2**20
    assert set(m["stages"]) == {"ProfilerStep", "stage:forward", "stage:postprocess"}
    assert d["run"]["stages"][0]["wall_ns"]  # samples kept for the noise test of check
    # the test runs from the repository: a commit is recorded
    assert "commit" in d["git"]


def test_git_facts_in_and_outside_a_repository(tmp_path):
    if subprocess.run(["git", "--version"], capture_output=True).returncode != 0:
        pytest.skip("git not installed")
    outside = git_facts(str(tmp_path))
    assert outside["commit"] is None and "not a git repository" in outside["reason"]
    repo = tmp_path / "r"
    repo.mkdir()
    env_cmds = [["git", "init", "-q"], ["git", "-c", "user.email=a@b", "-c", "user.name=t", "commit", "-q",
                                         "--allow-empty", "-m", "x"]]
    for cmd in env_cmds:
        subprocess.run(cmd, cwd=repo, check=True, capture_output=True)
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True).stdout.strip()
    facts = git_facts(str(repo))
    assert facts == {"commit": head, "dirty": False}
    (repo / "f").write_text("x")
    subprocess.run(["git", "add", "f"], cwd=repo, check=True)
    assert git_facts(str(repo))["dirty"] is True


def test_git_missing_is_not_an_error():
    def boom(*a, **k):
        raise FileNotFoundError("git")

    assert git_facts(runner=boom)["commit"] is None


def test_recording_time_unknown_is_said():
    run = run_of(BASELINE)
    import dataclasses

    from traceclass.compare.run import Run

    r = Run(dataclasses.replace(run.report, source=dataclasses.replace(run.report.source, start_epoch_ns=None)))
    b = build_baseline(r, {}, {"commit": None}, 0)
    assert b["recorded_at"] is None and b["recorded_at_basis"].startswith("unknown")


def test_check_self_passes_and_candidate_improves(baseline_file, capsys):
    assert main(["check", str(BASELINE), "--baseline", str(baseline_file)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("## traceclass check: PASS")
    assert "REGRESSED" not in out
    assert main(["check", str(CANDIDATE), "--baseline", str(baseline_file)]) == 0
    out = capsys.readouterr().out
    assert "| step P50 | 9.6 ms | 4.9 ms |" in out and "improved" in out


def test_check_stretched_trace_fails(baseline_file, stretched, capsys):
    assert main(["check", str(stretched), "--baseline", str(baseline_file)]) == 1
    out = capsys.readouterr().out
    assert out.startswith("## traceclass check: FAIL")
    assert "| step P50 | 9.6 ms | 12.5 ms | +2.88 ms (+30.0%) | +5% (step_p50_pct) | **REGRESSED** | MW p = 0.008 |" in out
    assert "Exit code 1." in out
    assert_tables_intact(out)


def test_check_json_output(baseline_file, stretched, tmp_path, capsys):
    out = tmp_path / "check.json"
    assert main(["check", str(stretched), "--baseline", str(baseline_file), "-o", str(out)]) == 1
    capsys.readouterr()
    d = json.loads(out.read_text())
    assert d["passed"] is False and d["exit_code"] == 1
    statuses = {(r["metric"], r["name"]): r["status"] for r in d["rows"]}
    assert statuses[("step P50", "")] == "regressed"
    assert statuses[("step P99", "")] == "regressed"
    assert statuses[("stage P50", "stage:forward")] == "regressed"
    assert statuses[("peak memory", "host")] == "ok"  # stretching time does not change memory
    assert statuses[("GPU busy share", "")] == "n/a"
    assert d["baseline"]["git"] is not None


def test_thresholds_are_configurable(baseline_file, stretched, tmp_path, capsys):
    cfg = tmp_path / "tc.toml"
    cfg.write_text("[check]\nstep_p50_pct = 40\nstep_p99_pct = 40\nstage_p50_pct = 40\n")
    assert main(["check", str(stretched), "--baseline", str(baseline_file), "--config", str(cfg)]) == 0
    out = capsys.readouterr().out
    assert "+40% (step_p50_pct)" in out and "PASS" in out


def test_budgets(baseline_file, tmp_path, capsys):
    cfg = tmp_path / "tc.toml"
    cfg.write_text('[budgets]\nforward = "5ms"\n"stage:postprocess" = "1ms"\n')
    assert main(["check", str(BASELINE), "--baseline", str(baseline_file), "--config", str(cfg)]) == 1
    out = capsys.readouterr().out
    assert "| `stage:forward` | 5 ms | 9.42 ms | 9.42 ms | **OVER BUDGET** |" in out
    assert "| `stage:postprocess` | 1 ms |" in out
    cfg.write_text('[budgets]\nforward = "20ms"\nstep = "12ms"\n')
    assert main(["check", str(BASELINE), "--baseline", str(baseline_file), "--config", str(cfg)]) == 0
    capsys.readouterr()
    cfg.write_text('[budgets]\npreprocess = "10ms"\n')  # no such stage: must not pass silently
    assert main(["check", str(BASELINE), "--baseline", str(baseline_file), "--config", str(cfg)]) == 1
    out = capsys.readouterr().out
    assert "**MISSING**" in out and "no stage named 'preprocess'" in out


def test_check_accepts_a_baseline_in_pyproject(baseline_file, tmp_path, monkeypatch, capsys):
    (tmp_path / "pyproject.toml").write_text('[tool.traceclass.budgets]\nforward = "5ms"\n')
    monkeypatch.chdir(tmp_path)
    assert main(["check", str(BASELINE), "--baseline", str(baseline_file)]) == 1
    assert "OVER BUDGET" in capsys.readouterr().out


def _step(run, wall, busy):
    """The run's step row with these steady-step wall and GPU busy times (P50, P99 = max)."""
    import dataclasses

    return dataclasses.replace(run.step, name="ProfilerStep", kind="step", count=len(wall), warmup_count=1,
                               p50_ns=float(sorted(wall)[len(wall) // 2]), p99_ns=float(max(wall)),
                               wall_ns=tuple(wall), gpu_busy_each_ns=tuple(busy), gpu_share_pct=None)


def test_gpu_busy_share_rule():
    """Busy share falls: a regression unless the step got faster (then GPU work just shrank)."""
    import dataclasses

    from traceclass.compare.run import Run

    base_run = run_of(BASELINE)
    src = base_run.report.source  # a CPU trace: give it GPU activity so the busy share is compared
    gpu_src = dataclasses.replace(src, counts={**src.counts, "gpu_activities": 1})

    def with_step(wall, busy):
        st = _step(base_run, wall, busy)
        run = Run(dataclasses.replace(base_run.report, source=gpu_src, stages=(st,), memory=()))
        assert run.has_gpu
        return run

    th = {"step_p50_pct": 5, "step_p99_pct": 5, "gpu_busy_pct_points": 5, "peak_memory_pct": 5, "stage_p50_pct": 5}
    b = with_step([100, 101, 99, 100, 102], [90, 91, 89, 90, 92])
    idle = with_step([100, 101, 99, 100, 102], [60, 61, 59, 60, 62])  # same step time, GPU idles more
    faster = with_step([70, 71, 69, 70, 72], [50, 51, 49, 50, 52])  # step faster, share 71%
    rows = {r.metric: r for r in gate.check(b, idle, th, {}).rows}
    assert rows["GPU busy share"].status == gate.REGRESSED
    assert rows["GPU busy share"].delta == pytest.approx(-30.0, abs=0.5)
    rows = {r.metric: r for r in gate.check(b, faster, th, {}).rows}
    assert rows["GPU busy share"].status == gate.OK
    assert "step got faster" in rows["GPU busy share"].note
    assert rows["step P50"].status == gate.IMPROVED


def test_single_step_runs_use_the_threshold_alone():
    import dataclasses

    from traceclass.compare.run import Run

    base_run = run_of(BASELINE)

    def one(wall):
        st = dataclasses.replace(_step(base_run, [wall], []), warmup_count=0)
        return Run(dataclasses.replace(base_run.report, stages=(st,)))

    th = {"step_p50_pct": 5, "step_p99_pct": 5, "gpu_busy_pct_points": 5, "peak_memory_pct": 5, "stage_p50_pct": 5}
    r = gate.check(one(100), one(106), th, {})
    row = next(x for x in r.rows if x.metric == "step P50")
    assert row.status == gate.REGRESSED and "threshold alone" in row.note and r.exit_code == 1
    assert gate.check(one(100), one(104), th, {}).exit_code == 0


# ------------------------------------------------------------------------- bad input -> exit 2


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "traceclass", *args], capture_output=True, text=True)


def test_bad_inputs_exit_2_with_one_line(tmp_path, baseline_file):
    garbage = tmp_path / "garbage.json"
    garbage.write_text("{not json")
    diff_doc = tmp_path / "diff.json"
    assert main(["diff", str(BASELINE), str(BASELINE), "-o", str(diff_doc)]) == 0
    future = tmp_path / "future.json"
    d = json.loads(baseline_file.read_text())
    d["schema_version"] = 99
    future.write_text(json.dumps(d))
    broken = tmp_path / "broken.json"
    d = json.loads(baseline_file.read_text())
    d["run"]["stages"] = [{"kind": "step"}]  # no name
    broken.write_text(json.dumps(d))
    bad_cfg = tmp_path / "bad.toml"
    bad_cfg.write_text("[check]\nstep_p50 = 5\n")
    cases = [
        ("diff", str(tmp_path / "missing.json"), str(BASELINE)),
        ("diff", str(garbage), str(BASELINE)),
        ("diff", str(diff_doc), str(BASELINE)),
        ("check", str(BASELINE), "--baseline", str(future)),
        ("check", str(BASELINE), "--baseline", str(broken)),
        ("check", str(BASELINE), "--baseline", str(baseline_file), "--config", str(bad_cfg)),
        ("check", str(garbage), "--baseline", str(baseline_file)),
        ("baseline", "save", str(baseline_file), "-o", str(tmp_path / "again.json")),
        ("baseline",),
    ]
    for args in cases:
        p = _cli(*args)
        assert p.returncode == 2, (args, p.stdout, p.stderr)
        assert "Traceback" not in p.stderr, (args, p.stderr)
        assert p.stderr.strip(), args
    p = _cli("diff", str(diff_doc), str(BASELINE))
    assert "traceclass-diff document is not a run" in p.stderr
    p = _cli("check", str(BASELINE), "--baseline", str(future))
    assert "schema_version 99" in p.stderr


def test_report_dict_roundtrip_keeps_fingerprints():
    """Findings are matched by fingerprint: the plain form must carry it."""
    from traceclass.engine import run
    from traceclass.ingest import load

    report = run(load(BASELINE))[1]
    d = report_dict(report)
    assert [f["fingerprint"] for f in d["findings"]] == [f.fingerprint for f in report.findings]
