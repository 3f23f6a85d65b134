"""TC504/TC505/TC506 on a real py-spy recording of a training-like loop (tests/data/pyspy)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ruletest import findings_for
from traceclass.ingest import load
from traceclass.ingest.sourcelines import attach_source_lines

DATA = Path(__file__).resolve().parents[1] / "data" / "pyspy"
SCRIPT = "/tmp/rec/loader_json.py"  # the path the profile names; the file is in DATA


@pytest.fixture(scope="module")
def trace():
    return attach_source_lines(load(DATA / "loader_json.speedscope.json.gz"), [DATA])


def test_json_history_dump_every_step(trace):
    (f,) = findings_for(trace, "TC504")
    assert f.location == f"main ({SCRIPT})" and f.values["serializer"] == "json"
    assert f.evidence[0].source == f"{SCRIPT}:25"  # line = json.dumps(history)
    assert f.recoverable_ns == 2_060_000_000 and round(f.values["pct_of_run"], 2) == 24.07  # 206 of 856 samples
    assert "orjson" in f.fix


def test_dataset_built_in_python_on_the_main_thread(trace):
    (f,) = findings_for(trace, "TC506")
    assert f.location == f"Items.__getitem__ ({SCRIPT})"  # its list comprehension included
    assert f.values["value"] == 2_120_000_000 and f.values["waiting_ns"] == 0  # num_workers=0: all work, no wait
    assert {e.source for e in f.evidence} == {f"{SCRIPT}:12", f"{SCRIPT}:13"}
    assert "num_workers > 0" in f.fix


def test_torch_and_lazy_dynamo_imports(trace):
    (f,) = findings_for(trace, "TC505")
    assert [(e.source, e.values["modules"][0]) for e in f.evidence] == [
        (f"{SCRIPT}:4", "torch"), (f"{SCRIPT}:18", "torch._dynamo")]  # SGD(...) imports torch._dynamo
    assert round(f.values["startup_pct"], 1) == 33.2


def test_no_locks_waits_or_dominant_line(trace):
    for code in ("TC501", "TC502", "TC503"):
        assert findings_for(trace, code) == [], code


@pytest.fixture(scope="module")
def workers():
    return attach_source_lines(load(DATA / "loader_workers.raw.txt.gz"), [DATA])


def test_workers_are_not_critical_and_the_parent_waits_for_them(workers):
    (f,) = findings_for(workers, "TC506")  # only the parent: the workers' loading is their job
    assert f.location == "main (loader_workers.py)" and f.evidence[0].source == "loader_workers.py:21"
    assert f.values["value"] == 276 and f.values["waiting_ns"] == 2_110_000_000  # 211 samples receiving batches
    assert round(f.values["pct_of_run"], 1) == 28.5  # of the parent MainThread's 969 samples
    assert "prefetch_factor" in f.fix  # waiting dominates: the workers do not keep up


def test_the_workers_hot_lines_cost_the_run_nothing_directly(workers):
    hot = findings_for(workers, "TC501")
    assert {f.location for f in hot} == {"Items.__getitem__ (loader_workers.py:13)",
                                         "Items.__getitem__.<locals>.<listcomp> (loader_workers.py:12)"}
    assert all(f.values["kind"] == "data" and f.recoverable_ns == 0 for f in hot)
    assert all(e.values["critical_thread"] is False for f in hot for e in f.evidence[:f.values["threads_count"]])
