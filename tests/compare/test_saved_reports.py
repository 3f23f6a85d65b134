"""Saved JSON reports (``traceclass analyze --format json`` of traceclass 0.1.0 at the commit
that moved compare/ onto Report objects) still load as runs, and compare like their traces.

The files in tests/data/reports are frozen: a change to the JSON layout must keep reading them
(compare.run.report_from_dict is the one place that converts older layouts)."""

from __future__ import annotations

import json

import pytest
from compare_helpers import BASELINE
from conftest import ROOT

from traceclass.cli import main
from traceclass.compare.run import run_from_dict, run_from_report
from traceclass.engine import run
from traceclass.ingest import load

SAVED = ROOT / "tests" / "data" / "reports"
PAIRS = [
    (SAVED / "torch_cpu_diff_baseline.report.json", BASELINE),
    (SAVED / "loader_workers.report.json", ROOT / "tests" / "data" / "pyspy" / "loader_workers.raw.txt.gz"),
]


@pytest.mark.parametrize("saved, trace", PAIRS, ids=lambda p: p.name.split(".")[0])
def test_saved_report_is_the_run_of_its_trace(saved, trace):
    from_saved = run_from_dict(json.loads(saved.read_text()), str(saved))
    live = run_from_report(run(load(trace))[1])
    r, l = from_saved.report, live.report
    assert (r.stages, r.ops, r.kernel_families, r.devices, r.memory) == (l.stages, l.ops, l.kernel_families,
                                                                         l.devices, l.memory)
    assert [f.fingerprint for f in r.findings] == [f.fingerprint for f in l.findings] and r.findings
    assert (from_saved.series_steps, from_saved.ops_cover, from_saved.has_gpu) == (live.series_steps, live.ops_cover,
                                                                                 live.has_gpu)
    assert (from_saved.cpu is None) == (live.cpu is None) == ("samples" not in l.source.captured)
    if l.cpu_profile is not None:  # the typed CPU section loads too
        assert [h.location for h in r.cpu_profile.hot_spots] == [h.location for h in l.cpu_profile.hot_spots]
    # the JSON report of 63f1183 rounded CPU shares to 0.001 %; everything else is exact
    assert _rounded(from_saved.cpu) == _rounded(live.cpu)


def _rounded(obj):
    import dataclasses

    if dataclasses.is_dataclass(obj):
        return {f.name: _rounded(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, tuple):
        return [_rounded(x) for x in obj]
    return round(obj, 3) if isinstance(obj, float) else obj


def test_diff_against_a_saved_report_equals_diff_of_traces(tmp_path):
    saved, trace = PAIRS[0]
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    assert main(["diff", str(saved), str(trace), "-o", str(a)]) == 0
    assert main(["diff", str(trace), str(trace), "-o", str(b)]) == 0
    da, db = json.loads(a.read_text()), json.loads(b.read_text())
    assert da == db
    assert da["verdict"]["findings"]["persisting"] > 0


def test_saved_cpu_profile_pairs_every_hot_spot_with_its_trace(tmp_path):
    saved, trace = PAIRS[1]
    out = tmp_path / "d.json"
    assert main(["diff", str(saved), str(trace), "-o", str(out)]) == 0
    hot = json.loads(out.read_text())["cpu"]["hot_spots"]
    assert len(hot) >= 10 and {h["status"] for h in hot} == {"matched"}


def test_an_older_baseline_cpu_block_still_compares():
    """Baselines written before the typed CPU section kept only its comparable keys."""
    from traceclass.compare.run import report_dict

    saved, trace = PAIRS[1]
    live = run(load(trace))[1]
    block = report_dict(live)
    keep = {"unit", "interval_ns", "total_ns", "samples", "includes_idle", "gil_only", "source_lines_read", "kinds",
            "threads", "hot_spots"}
    old_cpu = {k: v for k, v in block["cpu_profile"].items() if k in keep}
    old_cpu["threads"] = [{k: t[k] for k in ("pid", "tid", "name", "samples", "time_ns", "share_pct", "running_pct")}
                          for t in old_cpu["threads"]]
    old_cpu["hot_spots"] = [{k: h[k] for k in ("function", "file", "line", "kind", "self_ns", "self_pct",
                                                "self_samples")} for h in old_cpu["hot_spots"]]
    old = run_from_dict(block | {"cpu_profile": old_cpu}, "old.json")
    new = run_from_dict(block, "new.json")
    assert old.report.cpu_profile is None and new.report.cpu_profile == live.cpu_profile
    assert old.cpu == new.cpu == run_from_report(live).cpu and len(old.cpu.hot_spots) >= 10
