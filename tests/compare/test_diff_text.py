"""Wording and number formatting of diff and check output."""

from __future__ import annotations

import copy

from compare_helpers import BASELINE, CANDIDATE, run_of, stretch_trace

from traceclass.cli import main
from traceclass.compare.diff import build_diff, to_dict
from traceclass import units
from traceclass.render.diff_markdown import delta_text, render_markdown, value, verdict_plain


def test_signs_never_show_minus_zero():
    assert units.signed_pct(-0.04) == "±0.0%"
    assert units.signed_pct(0.04) == "±0.0%"
    assert units.signed_pct(-0.06) == "−0.1%"
    assert delta_text({"delta": -0.04, "unit": "pct"}) == "±0.0 pp"
    assert delta_text({"delta": 0.3, "unit": "ns"}) == "±0 ns"
    assert delta_text({"delta": -1, "unit": "samples"}) == "−1 sample"
    assert value(2, "samples") == "2 samples"


def test_many_times_slower_reads_as_a_factor(tmp_path):
    slow = stretch_trace(BASELINE, tmp_path / "slow.json.gz", 2.5)
    text = verdict_plain(to_dict(build_diff(run_of(BASELINE), run_of(slow))))
    assert text.startswith("Candidate is 2.5× slower per step (P50 9.6 ms → 24 ms)"), text[:120]
    assert "150% slower" not in text


def test_findings_summary_counts_rules_once():
    d = to_dict(build_diff(run_of(BASELINE), run_of(CANDIDATE)))
    one = next(f for f in d["findings"])
    fake = []
    for code, name, n in (("TC202", "launch-gap", 3), ("TC601", "low-utilization", 1), ("TC201", "storm", 1),
                          ("TC301", "copy", 1), ("TC302", "copy2", 1)):
        for k in range(n):
            f = copy.deepcopy(one)
            f.update(code=code, name=name, status="new", fingerprint=f"{code}{k}")
            fake.append(f)
    d["findings"] = fake
    d["verdict"]["findings"] = {"resolved": 0, "new": len(fake), "persisting": 0}
    text = verdict_plain(d)
    assert ("Findings: 0 resolved, 7 new (`TC202 launch-gap` ×3, `TC601 low-utilization`, `TC201 storm`, "
            "2 more rules), 0 persisting.") in text
    assert render_markdown(d)  # renders


def test_check_memory_device_label_is_plain_text(capsys):
    assert main(["check", str(CANDIDATE), "--baseline", str(BASELINE)]) == 0
    out = capsys.readouterr().out
    assert "| peak memory host | 11.6 MB | 3.18 MB |" in out
    assert "`host`" not in out
