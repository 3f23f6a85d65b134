"""traceclass diff on the recorded sample pair, a trace against itself, and a stretched copy.

sample_traces/README.md: baseline steps 9.49 (warm-up), 9.42, 9.52, 9.60, 9.69, 10.08 ms;
candidate 5.27 (warm-up), 5.43, 4.99, 4.90, 4.81, 4.76 ms; the candidate drops one 8 MiB
transposing `aten::copy_` (3.55-3.73 ms per step) and `aten::bmm` gets ~0.6 ms faster.
"""

from __future__ import annotations

import json

import pytest
from compare_helpers import BASELINE, CANDIDATE, assert_tables_intact, run_of, stretched  # noqa: F401 (fixture)

from traceclass.cli import main
from traceclass.compare import noise
from traceclass.compare.diff import build_diff, to_dict
from traceclass.render.diff_markdown import render_markdown, verdict_plain


@pytest.fixture(scope="module")
def pair_diff():
    return to_dict(build_diff(run_of(BASELINE), run_of(CANDIDATE)))


def _all_deltas(d):
    for s in d["stages"]:
        yield "stage " + s["name"], s["p50"]
    for key in ("ops", "ops_appeared", "ops_vanished"):
        for o in d[key]:
            yield f"op {o['name']} {o['shapes']}", o["per_step"]
    for f in d["families"]:
        yield "family " + f["family"], f["per_step"]
    for m in d["memory"]:
        yield "memory", m["peak_allocated"]
    if d["gpu_step"]:
        for k in ("busy", "idle", "copy"):
            yield "gpu " + k, d["gpu_step"][k]
    for dv in d["devices"]:
        for k in ("busy_pct", "idle_pct", "copy_pct"):
            yield "device " + k, dv[k]
    for f in d["findings"]:
        yield "finding " + f["code"], f["recoverable"]


def test_step_verdict_on_the_sample_pair(pair_diff):
    step = pair_diff["verdict"]["step"]["p50"]
    assert step["label"] == noise.FASTER
    assert step["baseline"] == pytest.approx(9.597e6, rel=1e-3)  # P50 of the 5 steady steps
    assert step["candidate"] == pytest.approx(4.902e6, rel=1e-3)
    assert -52 < step["delta_pct"] < -45
    n = step["noise"]
    assert (n["test"], n["n_baseline"], n["n_candidate"]) == (noise.MANN_WHITNEY, 5, 5)
    assert n["p_value"] == pytest.approx(2 / 252)  # the two runs' steps do not overlap


def test_gain_is_attributed_to_the_removed_copy(pair_diff):
    contributors = pair_diff["verdict"]["contributors"]
    first = contributors[0]
    assert first["op"]["name"] == "aten::copy_"
    assert first["op"]["shapes"].startswith("[8x512x512] fp32, [8x512x512] fp32")
    assert first["op"]["status"] == "vanished"
    assert -3.8e6 < first["op"]["per_step"]["delta"] < -3.5e6  # README: 3.55-3.73 ms per step
    assert first["share_pct"] > 60
    bmm = next(o for o in pair_diff["ops"] if o["name"] == "aten::bmm")
    assert bmm["per_step"]["label"] == noise.FASTER
    assert -1.0e6 < bmm["per_step"]["delta"] < -0.3e6  # README: ~0.6 ms per step
    assert pair_diff["verdict"]["regressions"] == []
    # the ops that only existed for the copy vanish with it; the candidate adds none
    vanished = {o["name"] for o in pair_diff["ops_vanished"]}
    assert {"aten::copy_", "aten::contiguous", "aten::clone", "aten::empty_like"} <= vanished
    assert pair_diff["ops_appeared"] == []


def test_verdict_text_names_the_copy_and_states_the_test(pair_diff):
    text = verdict_plain(pair_diff)
    assert text.startswith("Candidate is 49% faster per step (P50 9.6 ms → 4.9 ms), beyond noise "
                           "(Mann-Whitney U, p = 0.008, 5 vs 5 steps); most of the gain comes from `aten::copy_`")
    assert "No regression beyond noise." in text
    md = render_markdown(pair_diff)
    lines = md.splitlines()
    assert lines[0].startswith("# traceclass diff:")
    assert lines[2] == "## Verdict" and lines[4].startswith("Candidate is 49% faster per step")
    assert "Mann-Whitney U" in md and "95% confidence" in md
    assert_tables_intact(md)


def test_memory_peak_drops_with_the_copy(pair_diff):
    (m,) = pair_diff["memory"]
    assert m["peak_allocated"]["label"] == noise.LOWER
    assert m["peak_allocated"]["delta"] < -8 * 2**20 * 0.9  # the 8 MiB copy buffer


def test_a_trace_against_itself_is_within_noise_everywhere():
    d = to_dict(build_diff(run_of(BASELINE), run_of(BASELINE)))
    labels = {what: dd["label"] for what, dd in _all_deltas(d)}
    assert labels and set(labels.values()) == {noise.WITHIN}, {k: v for k, v in labels.items() if v != noise.WITHIN}
    assert d["ops_appeared"] == [] and d["ops_vanished"] == [] and d["callouts"] == []
    assert verdict_plain(d).startswith("No step-time change beyond noise (P50 9.6 ms → 9.6 ms, ±0.0%)")


def test_stretched_trace_is_slower_beyond_noise(stretched):
    d = to_dict(build_diff(run_of(BASELINE), run_of(stretched)))
    step = d["verdict"]["step"]["p50"]
    assert step["label"] == noise.SLOWER
    assert step["delta_pct"] == pytest.approx(30.0, abs=0.1)
    assert verdict_plain(d).startswith("Candidate is 30% slower per step")
    assert "beyond noise" in verdict_plain(d)
    # every op group present in both got slower by ~30%, none is reported faster
    big = [o for o in d["ops"] if (o["per_step"]["baseline"] or 0) > 200_000]
    assert big and all(o["per_step"]["label"] == noise.SLOWER for o in big)
    assert all(o["per_step"]["delta_pct"] == pytest.approx(30.0, abs=0.5) for o in big)
    assert not any(o["per_step"]["label"] == noise.FASTER for o in d["ops"])
    regressed = {r["name"] for r in d["verdict"]["regressions"]}
    assert {"aten::bmm", "aten::copy_"} <= regressed


def test_cli_diff_markdown_and_json_carry_the_same_verdict(tmp_path, capsys):
    out = tmp_path / "d.json"
    assert main(["diff", str(BASELINE), str(CANDIDATE), "-o", str(out)]) == 0
    d = json.loads(out.read_text())
    assert d["kind"] == "traceclass-diff"
    assert main(["diff", str(BASELINE), str(CANDIDATE)]) == 0
    md = capsys.readouterr().out
    # the JSON summary is the markdown verdict without the markdown
    summary = d["verdict"]["summary"]
    first_md = md.split("## Verdict\n\n", 1)[1].split("\n\n")[0]
    assert summary.startswith(first_md)  # names without markdown specials render the same
    assert d["method"] == noise.RULE


def test_diff_of_saved_json_reports_equals_diff_of_traces(tmp_path):
    paths = []
    for src in (BASELINE, CANDIDATE):
        p = tmp_path / (src.name.split(".")[0] + ".report.json")
        assert main(["analyze", str(src), "--format", "json", "-o", str(p)]) == 0
        paths.append(p)
    from_traces, from_reports = tmp_path / "a.json", tmp_path / "b.json"
    assert main(["diff", str(BASELINE), str(CANDIDATE), "-o", str(from_traces)]) == 0
    assert main(["diff", str(paths[0]), str(paths[1]), "-o", str(from_reports)]) == 0
    assert json.loads(from_traces.read_text()) == json.loads(from_reports.read_text())
    # mixed: a trace against a saved report
    mixed = tmp_path / "c.json"
    assert main(["diff", str(BASELINE), str(paths[1]), "-o", str(mixed)]) == 0
    assert json.loads(mixed.read_text()) == json.loads(from_traces.read_text())


def test_reports_without_per_step_series_still_compare(tmp_path):
    """Reports from before per-step series: totals ÷ steps, noise unknown, and it says so."""
    docs = []
    for src in (BASELINE, CANDIDATE):
        p = tmp_path / (src.name.split(".")[0] + ".json")
        assert main(["analyze", str(src), "--format", "json", "-o", str(p)]) == 0
        d = json.loads(p.read_text())
        for o in d["ops"]:
            o.pop("step_ns")
        for k in ("kernel_families", "memory", "step_series_steps"):
            d.pop(k)
        p.write_text(json.dumps(d))
        docs.append(p)
    out = tmp_path / "diff.json"
    assert main(["diff", str(docs[0]), str(docs[1]), "-o", str(out)]) == 0
    d = json.loads(out.read_text())
    copy = next(o for o in d["ops_vanished"] if o["name"] == "aten::copy_")
    assert copy["basis"] == "total / steps"
    # op totals cover the 5 steady steps (ops_cover): the 5 steady copies of 3.55-3.73 ms each
    assert copy["per_step"]["baseline"] == pytest.approx(18.18e6 / 5, rel=1e-3)
    assert copy["per_step"]["noise"]["noise_known"] is False
    assert any("older traceclass" in n for n in d["notes"])
    assert d["verdict"]["step"]["p50"]["label"] == noise.FASTER  # stage samples are still there


def test_findings_pair_by_fingerprint():
    import dataclasses

    from traceclass.compare.run import Run
    from traceclass.rule import Finding, Severity

    def f(code, location, ns):
        return Finding(code=code, name="x", severity=Severity.HIGH, message="m", recoverable_ns=ns, estimate="",
                       fix="", location=location)

    def run(*findings):
        return Run(dataclasses.replace(run_of(BASELINE).report, findings=findings))

    b = run(f("TC401", "a", 3_000_000), f("TC201", "b", 1_000))
    c = run(f("TC201", "b", 2_000), f("TC303", "c", 500))
    d = to_dict(build_diff(b, c))
    status = {x["code"]: (x["status"], x["recoverable"]["baseline"], x["recoverable"]["candidate"]) for x in d["findings"]}
    assert status == {"TC401": ("resolved", 3_000_000, 0), "TC201": ("persisting", 1_000, 2_000),
                      "TC303": ("new", 0, 500)}
    assert d["verdict"]["findings"] == {"resolved": 1, "new": 1, "persisting": 1}
    assert "Findings: 1 resolved (`TC401 x`), 1 new (`TC303 x`), 1 persisting." in verdict_plain(d)
