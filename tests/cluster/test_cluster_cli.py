"""`traceclass analyze DIR | GLOB | FILE FILE ...`, `traceclass summarize`, exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nccl_ranks import Plan, write_set
from traceclass.cli import main

SAMPLES = Path(__file__).resolve().parents[2] / "sample_traces"


def _plan() -> Plan:
    host = [10_000] * 4
    host[1] = 2_000_000
    return Plan(world=4, steps=6, host_ns=host, ag_delay_ns=[5_000, 9_000, 5_200, 5_300])  # rank 1 last in all


@pytest.fixture(scope="module")
def rank_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("ranks")
    write_set(_plan(), d)
    return d


def _json(capsys, argv) -> tuple[int, dict]:
    code = main(argv)
    return code, json.loads(capsys.readouterr().out)


def test_directory_glob_and_files_give_the_same_report(rank_dir, capsys):
    _, by_dir = _json(capsys, ["analyze", str(rank_dir), "--format", "json", "--jobs", "1"])
    _, by_glob = _json(capsys, ["analyze", str(rank_dir / "rank*.json"), "--format", "json", "--jobs", "1"])
    files = sorted(str(p) for p in rank_dir.glob("rank*.json"))
    _, by_files = _json(capsys, ["analyze", *files, "--format", "json", "--jobs", "2"])
    assert by_dir == by_glob == by_files
    assert by_dir["kind"] == "cluster" and [r["rank"] for r in by_dir["ranks"]] == [0, 1, 2, 3]
    assert [s["rank"] for s in by_dir["verdict"]["stragglers"]] == [1]


def test_summaries_round_trip(rank_dir, tmp_path, capsys):
    sums = []
    for r in range(4):
        out = tmp_path / f"rank{r}.tcsum.json"
        assert main(["summarize", str(rank_dir / f"rank{r}.json"), "-o", str(out)]) == 0
        sums.append(str(out))
    _, from_sums = _json(capsys, ["analyze", *sums, "--format", "json"])
    _, from_traces = _json(capsys, ["analyze", str(rank_dir), "--format", "json", "--jobs", "1"])
    for k in ("verdict", "collectives", "findings", "rank_findings"):
        assert from_sums[k] == from_traces[k]
    assert [r["rank"] for r in from_sums["ranks"]] == [0, 1, 2, 3]


def test_markdown_fail_on_and_per_rank_dir(rank_dir, tmp_path, capsys):
    out = tmp_path / "per_rank"
    code = main(["analyze", str(rank_dir), "--per-rank-dir", str(out), "--fail-on", "high", "--jobs", "1"])
    md = capsys.readouterr().out
    assert code == 1  # TC801 on rank 1 is high: 2 ms of a 10 ms step
    assert md.startswith("# traceclass cluster report")
    assert "| 1 **straggler** |" in md and "TC801 collective-straggler" in md
    assert sorted(p.name for p in out.iterdir()) == [f"rank{r}.md" for r in range(4)]
    assert main(["analyze", str(rank_dir), "--issue", "--jobs", "1"]) == 0
    issue = capsys.readouterr().out
    assert len(issue) < 65_536 and issue.startswith("# traceclass cluster report")
    assert main(["analyze", str(rank_dir), "--format", "issue", "--jobs", "1"]) == 0
    assert capsys.readouterr().out == issue
    assert main(["analyze", str(rank_dir), "--format", "plot", "-o", str(tmp_path / "x.png")]) == 2
    assert "per trace" in capsys.readouterr().err


def test_bad_inputs_exit_2(tmp_path, rank_dir, capsys):
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "rank0.json").write_text("{not json")
    (bad / "rank1.json").write_text((rank_dir / "rank1.json").read_text())
    assert main(["analyze", str(bad), "--jobs", "1"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("traceclass: ") and "rank0.json" in err and err.count("\n") == 1
    assert main(["analyze", str(tmp_path / "nothing*.json")]) == 2
    assert "no file matches" in capsys.readouterr().err
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["analyze", str(empty)]) == 2
    assert main(["summarize", str(rank_dir / "rank0.json"), "-o", str(tmp_path / "x.json")]) == 2
    fake = tmp_path / "fake.tcsum.json"
    fake.write_text('{"schema": "other"}')
    assert main(["analyze", str(fake), str(rank_dir / "rank0.json")]) == 2
    assert "not a traceclass summary" in capsys.readouterr().err


def test_single_file_is_still_the_single_trace_report(rank_dir, capsys):
    assert main(["analyze", str(rank_dir / "rank0.json")]) == 0
    assert "cluster report" not in capsys.readouterr().out


def test_recorded_gloo_set_verdict(capsys):
    """The bundled gloo recording: rank 1 sleeps 15 ms between its two all-reduces, rank 2 runs
    three times the matmul work."""
    code, r = _json(capsys, ["analyze", str(SAMPLES / "gloo_4ranks"), "--format", "json", "--jobs", "1"])
    assert code == 0
    v = r["verdict"]
    assert v["ranks"] == 4 and v["matched_collectives"] == 30  # 15 steady steps x 2 all-reduces
    assert [(s["rank"], s["cause"]) for s in v["stragglers"]] == [(1, "host work")]
    assert v["imbalanced_ranks"] == [2]
    ranks = {x["rank"]: x for x in r["ranks"]}
    assert ranks[1]["times_last"] == 18 and ranks[2]["compute_ns"] > 3 * ranks[0]["compute_ns"]
    assert {f["code"] for f in r["findings"]} == {"TC801", "TC803"}


def test_config_overrides_reach_cluster_rules(rank_dir, tmp_path, capsys):
    _, base = _json(capsys, ["analyze", str(rank_dir), "--format", "json", "--jobs", "1"])
    assert "TC801" in {f["code"] for f in base["findings"]}
    blame = next(r["blame_pct"] for r in base["ranks"] if r["rank"] == 1)
    cfg = tmp_path / "tc.toml"
    cfg.write_text(f"[tool.traceclass.rules.TC801]\nmin_blame_pct = {blame + 0.5}\n", encoding="utf-8")
    _, off = _json(capsys, ["analyze", str(rank_dir), "--format", "json", "--jobs", "1", "--config", str(cfg)])
    assert off["verdict"]["stragglers"] == [] and "TC801" not in {f["code"] for f in off["findings"]}
    bad = tmp_path / "bad.toml"
    bad.write_text("[tool.traceclass.rules.TC801]\nalpha = 0.05\n", encoding="utf-8")
    assert main(["analyze", str(rank_dir), "--format", "json", "--jobs", "1", "--config", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "unknown threshold TC801.alpha; known: max_p_value, min_blame_pct" in err and "Traceback" not in err


def test_rules_and_explain_list_the_cluster_rules(capsys):
    assert main(["rules"]) == 0
    out = capsys.readouterr().out
    line = next(ln for ln in out.splitlines() if ln.startswith("TC801"))
    assert "collective-straggler" in line and "[cluster: 2+ ranks]" in line
    assert main(["explain", "TC803"]) == 0
    out = capsys.readouterr().out
    assert "compute-imbalance" in out and "min_modified_z = 3.5 (ratio)" in out


def test_select_and_ignore_cluster_rules_in_a_cluster_run(rank_dir, capsys):
    """--select/--ignore take the cluster rules (code, lower-case code, prefix or name) where
    they run, with the same matching as the per-trace rules; both steps of the run obey them."""
    _, base = _json(capsys, ["analyze", str(rank_dir), "--format", "json", "--jobs", "1"])
    base_codes = sorted({f["code"] for f in base["findings"]})
    assert base_codes == ["TC801", "TC802"] and base["rank_findings"]
    for sel in ("TC801", "tc801", "collective-straggler"):
        code, r = _json(capsys, ["analyze", str(rank_dir), "--format", "json", "--jobs", "1", "--select", sel])
        assert code == 0 and [f["code"] for f in r["findings"]] == ["TC801"]
        assert r["rank_findings"] == []  # no per-trace rule selected
    _, ign = _json(capsys, ["analyze", str(rank_dir), "--format", "json", "--jobs", "1", "--ignore", "TC801"])
    assert sorted({f["code"] for f in ign["findings"]}) == ["TC802"]
    assert ign["rank_findings"] == base["rank_findings"]
    _, tc8 = _json(capsys, ["analyze", str(rank_dir), "--format", "json", "--jobs", "1", "--select", "TC8"])
    assert sorted({f["code"] for f in tc8["findings"]}) == base_codes and tc8["rank_findings"] == []
    assert main(["analyze", str(rank_dir), "--jobs", "1", "--select", "TC899"]) == 2
    err = capsys.readouterr().err
    assert err == "traceclass: no rule matches TC899 (see `traceclass rules`)\n"


def test_select_of_cluster_rules_on_one_trace_says_where_they_run(rank_dir, capsys):
    one = str(rank_dir / "rank1.json")
    assert main(["analyze", one, "--select", "TC801"]) == 2
    err = capsys.readouterr().err
    assert err == ("traceclass: TC801 is a cluster rule: it needs two or more ranks (`traceclass analyze DIR`, "
                   "a glob or FILE FILE ...); select a per-trace rule for one trace\n")
    assert main(["analyze", one, "--select", "TC802,TC803"]) == 2
    assert capsys.readouterr().err.startswith("traceclass: TC802, TC803 are cluster rules: they need two or more")
    # ignoring a cluster rule on one trace changes nothing: it does not run there
    code, plain = _json(capsys, ["analyze", one, "--format", "json"])
    code2, ignored = _json(capsys, ["analyze", one, "--format", "json", "--ignore", "TC801"])
    assert code == code2 == 0 and ignored["findings"] == plain["findings"] and plain["findings"]
    # a mixed selection runs its per-trace rules
    _, mixed = _json(capsys, ["analyze", one, "--format", "json", "--select", "TC202,TC801"])
    assert {f["code"] for f in mixed["findings"]} == {"TC202"}
