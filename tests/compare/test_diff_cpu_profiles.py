"""``traceclass diff`` on sampled CPU profiles (py-spy): hot spots matched by function, file and
line, kinds and threads, in time when the interval is known, else in samples; every figure is
one value per run ("single run, noise unknown")."""

from __future__ import annotations

import json

import pytest
from compare_helpers import assert_tables_intact
from pyspy_builder import MAIN, PARSE, RUN, SLEEP, WORK, write_collapsed, write_speedscope

from traceclass.cli import main
from traceclass.cli._runs import load_run
from traceclass.compare import noise
from traceclass.compare.diff import build_diff, to_dict
from traceclass.config import load_config
from traceclass.render.diff_markdown import render_markdown, verdict_plain

BASE = {"MainThread": {(MAIN, WORK): 60, (MAIN, PARSE): 40}, "loader": {(RUN, SLEEP): 100}}
# the candidate moves time from parse to work; the loader thread is unchanged. Threads are
# written in another order, so their ids differ from the baseline's: they pair by name
CAND = {"loader": {(RUN, SLEEP): 100}, "MainThread": {(MAIN, WORK): 90, (MAIN, PARSE): 10}}
NEW = ("compress", "app.py", 50)


def _diff(a, b, roots=()):
    cfg = load_config()
    return to_dict(build_diff(load_run(str(a), cfg, roots)[0], load_run(str(b), cfg, roots)[0]))


def _row(rows, name, location=None):
    hits = [r for r in rows if r["name"] == name and (location is None or r["location"] == location)]
    assert len(hits) == 1, (name, [r["name"] for r in rows])
    return hits[0]


@pytest.fixture
def speedscope_pair(tmp_path):
    return write_speedscope(tmp_path / "base.speedscope.json", BASE), \
        write_speedscope(tmp_path / "cand.speedscope.json", CAND)


def test_hot_spots_kinds_and_threads_in_time(speedscope_pair):
    d = _diff(*speedscope_pair)
    cpu = d["cpu"]
    assert cpu["unit"] == "ns"
    assert (cpu["total"]["baseline"], cpu["total"]["candidate"]) == (2_000_000_000, 2_000_000_000)
    work = _row(cpu["hot_spots"], "work")
    assert work["location"] == "app.py:12" and work["status"] == "matched"
    assert (work["value"]["baseline"], work["value"]["candidate"]) == (600_000_000, 900_000_000)
    assert work["value"]["delta_pct"] == pytest.approx(50.0)
    assert (work["share"]["baseline"], work["share"]["candidate"]) == (pytest.approx(30.0), pytest.approx(45.0))
    assert work["share"]["delta"] == pytest.approx(15.0) and work["share"]["label"] == noise.HIGHER
    assert work["value"]["noise"]["reason"] == noise.SINGLE_RUN == "single run, noise unknown"
    assert work["value"]["noise"]["noise_known"] is False
    parse = _row(cpu["hot_spots"], "parse")
    assert parse["value"]["delta"] == -300_000_000 and parse["value"]["label"] == noise.LOWER
    sleep = _row(cpu["hot_spots"], "sleep_loop")
    assert sleep["value"]["label"] == sleep["share"]["label"] == noise.WITHIN
    # threads pair by name although their ids differ
    assert {r["name"]: r["status"] for r in cpu["threads"]} == {"MainThread": "matched", "loader": "matched"}
    assert all(r["value"]["delta"] == 0 for r in cpu["threads"])
    assert cpu["kinds"] and all(r["status"] == "matched" for r in cpu["kinds"])
    # the verdict names the two lines that moved, largest share change first
    movers = d["verdict"]["cpu_movers"]
    assert [m["name"] for m in movers[:2]] in (["work", "parse"], ["parse", "work"])
    assert "sleep_loop" not in [m["name"] for m in movers]


def test_verdict_and_markdown(speedscope_pair):
    d = _diff(*speedscope_pair)
    text = verdict_plain(d)
    assert text.startswith("Sampled CPU profiles, compared by hot spot (function, file and line), kind and "
                           "thread in sampled time: all sampled thread time 2 s → 2 s (±0.0%). A profile has no "
                           "repeated steps: single run each, noise unknown, so a change counts from 10%")
    assert "hot spot `work` (`app.py:12`) 600 ms → 900 ms (+50.0%; share 30.0% → 45.0%)" in text
    assert "No step times to compare" not in text
    md = render_markdown(d)
    assert_tables_intact(md)
    assert "## CPU profile" in md and "### Hot spots (self time)" in md and "### Threads" in md
    assert "| `work` | `app.py:12` |" in md
    assert "## Stages" not in md and "## Op groups" not in md  # none in a sampled profile
    assert "older traceclass" not in md and "no steps or ranges" not in md
    assert "| sampled CPU profile | 2 s (200 samples every 10 ms) | 2 s (200 samples every 10 ms) |" in md
    assert "−0.0" not in md


def test_sample_counts_when_the_interval_is_unknown(tmp_path):
    a = write_collapsed(tmp_path / "a.raw.txt", BASE)
    b = write_collapsed(tmp_path / "b.raw.txt", CAND)
    d = _diff(a, b)
    cpu = d["cpu"]
    assert cpu["unit"] == "samples" and "sample counts" in cpu["basis"]
    work = _row(cpu["hot_spots"], "work")
    assert (work["value"]["baseline"], work["value"]["candidate"], work["value"]["unit"]) == (60, 90, "samples")
    # without --threads the collapsed file has no thread names: one unnamed row per run
    assert len(cpu["threads"]) == 1
    md = render_markdown(d)
    assert "| 60 samples | 90 samples | +30 samples | +50.0% |" in md
    assert "sample count 200 samples → 200 samples" in verdict_plain(d)
    # a speedscope file (time) against a collapsed one (counts): compared in samples
    mixed = _diff(write_speedscope(tmp_path / "a.speedscope.json", BASE), b)
    assert mixed["cpu"]["unit"] == "samples"
    assert _row(mixed["cpu"]["hot_spots"], "work")["value"]["baseline"] == 60


def test_lines_that_appear_and_vanish(tmp_path):
    a = write_speedscope(tmp_path / "a.json", BASE)
    cand = {"MainThread": {(MAIN, WORK): 60, (MAIN, NEW): 40}, "loader": {(RUN, SLEEP): 100}}
    b = write_speedscope(tmp_path / "b.json", cand)
    cpu = _diff(a, b)["cpu"]
    new = _row(cpu["hot_spots"], "compress")
    gone = _row(cpu["hot_spots"], "parse")
    assert (new["status"], new["value"]["baseline"], new["value"]["candidate"]) == ("appeared", 0, 400_000_000)
    assert (gone["status"], gone["value"]["baseline"], gone["value"]["candidate"]) == ("vanished", 400_000_000, 0)


def test_a_longer_recording_is_said_and_shares_lead(tmp_path):
    a = write_speedscope(tmp_path / "a.json", BASE)
    twice = {t: {s: 2 * n for s, n in stacks.items()} for t, stacks in BASE.items()}
    b = write_speedscope(tmp_path / "b.json", twice)
    d = _diff(a, b)
    assert d["cpu"]["lengths_differ"] is True
    assert any("differ in length" in n for n in d["cpu"]["notes"])
    assert "the recordings differ in length, so the shares tell more than the times" in verdict_plain(d)
    # every share is unchanged: no row moved although every time doubled beyond the 10% rule
    assert all(r["share"]["label"] == noise.WITHIN for r in d["cpu"]["hot_spots"])


def test_saved_json_reports_give_the_same_cpu_diff(speedscope_pair, tmp_path):
    docs = []
    for src in speedscope_pair:
        p = tmp_path / (src.name.split(".")[0] + ".report.json")
        assert main(["analyze", str(src), "--format", "json", "-o", str(p)]) == 0
        docs.append(p)
    from_traces = _diff(*speedscope_pair)
    from_reports = _diff(*docs)
    assert from_reports["cpu"] == from_traces["cpu"]
    assert from_reports["verdict"] == from_traces["verdict"]


def test_source_root_reaches_the_diff(tmp_path, capsys, monkeypatch):
    src = tmp_path / "src"
    src.mkdir()
    lines = [""] * 60
    lines[11] = "    total += sum(x * x for x in data)"  # line 12: work
    lines[19] = "    rows = [r.split(',') for r in text]"  # line 20: parse
    lines[29] = "        time.sleep(0.5)"  # line 30: sleep_loop
    (src / "app.py").write_text("\n".join(lines) + "\n", encoding="utf-8")
    prof = tmp_path / "prof"
    prof.mkdir()
    a = write_speedscope(prof / "a.json", BASE)
    monkeypatch.chdir(prof)  # relative names are also tried against the current directory: not here
    without = _diff(a, a)
    with_roots = _diff(a, a, [str(src)])
    kinds_without = {r["kind"] for r in without["cpu"]["kinds"]}
    kinds_with = {r["kind"] for r in with_roots["cpu"]["kinds"]}
    assert "sleep" not in kinds_without and "sleep" in kinds_with
    assert main(["diff", str(a), str(a), "--source-root", str(src), "--format", "json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert "sleep" in {r["kind"] for r in d["cpu"]["kinds"]}
    # one run with source lines, the other without: called out
    out = tmp_path / "base.json"
    assert main(["baseline", "save", str(a), "-o", str(out), "--source-root", str(src)]) == 0
    capsys.readouterr()
    assert json.loads(out.read_text())["run"]["cpu_profile"]["source_lines_read"] > 0
    assert main(["diff", str(out), str(a), "--format", "json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert any(c["what"] == "source lines read (--source-root)" for c in d["callouts"])
    rc = main(["check", str(a), "--baseline", str(out), "--source-root", str(src)])
    assert rc == 2  # still nothing the gate compares, but the option is accepted
    assert "`traceclass diff` compares their hot spots" in capsys.readouterr().out


def test_a_line_below_the_listed_top_is_unlisted_not_new(tmp_path):
    lines = [("f%02d" % k, "big.py", k + 1) for k in range(60)]
    base = {"MainThread": {(MAIN, f): 100 - k for k, f in enumerate(lines)}}
    cand = {"MainThread": dict(base["MainThread"])}
    cand["MainThread"][(MAIN, lines[55])] = 200  # ranks 56th in the baseline, first in the candidate
    d = _diff(write_speedscope(tmp_path / "a.json", base), write_speedscope(tmp_path / "b.json", cand))
    row = _row(d["cpu"]["hot_spots"], "f55")
    assert row["status"] == "unlisted"
    assert row["value"]["baseline"] is None and row["value"]["candidate"] == 2_000_000_000
    assert "f55" not in [m["name"] for m in d["verdict"]["cpu_movers"]]
    assert any("top 50 lines only" in n for n in d["cpu"]["notes"])
    # lines listed in both still compare
    assert _row(d["cpu"]["hot_spots"], "f00")["status"] == "matched"
    assert_tables_intact(render_markdown(d))
