"""Facts computed in blocks or per table (to bound their temporaries on traces of GBs) equal
the same facts computed whole: block sizes forced down to a few rows must change nothing."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from conftest import corpus
from traceclass import timeline as tl
from traceclass.analysis import stages
from traceclass.facts import idle_causes as ic
from traceclass.facts.core import Facts
from traceclass.ingest import load
from traceclass.model import nesting

SAMPLES = Path(__file__).resolve().parent.parent / "sample_traces"
TRACES = [
    ("sample", "torch_ddp-nccl-train_a100.json.gz"),
    ("sample", "torch_cuda-event-sync_a100.json.gz"),  # (with the next) one range, one batch; idle in blocks
    ("corpus", "a100_train_rank0_of16.json.gz"),
    ("corpus", "cuda_event_sync_multistream.json.gz"),
    ("corpus", "v100_ns_resolution.json.gz"),
]


def _path(where: str, name: str) -> Path:
    return SAMPLES / name if where == "sample" else corpus("torch", "gpu", name)


def _same(a, b, what: str) -> None:
    """Field-by-field equality of two fact objects (arrays exactly, lists of arrays per item)."""
    for f in dataclasses.fields(a):
        x, y = getattr(a, f.name), getattr(b, f.name)
        if isinstance(x, np.ndarray):
            assert x.dtype == y.dtype and np.array_equal(x, y), f"{what}.{f.name}"
        elif isinstance(x, list) and x and isinstance(x[0], np.ndarray):
            assert len(x) == len(y) and all(np.array_equal(p, q) for p, q in zip(x, y)), f"{what}.{f.name}"
        elif isinstance(x, (int, float, str, bool, dict)):
            assert x == y, f"{what}.{f.name}"


@pytest.mark.parametrize("where,name", TRACES)
def test_blocks_of_a_few_rows_give_the_same_facts(where, name, monkeypatch):
    trace = load(str(_path(where, name)))
    whole = Facts(trace)
    idle, occ = whole.idle_causes, whole.occurrences
    assert len(idle.start_ns) > 7  # the blocks below really cut
    if "event" not in name:
        assert sum(len(r) > 0 for r in occ.gpu_rows) > 3
    monkeypatch.setattr(ic, "IDLE_BLOCK", 7)
    monkeypatch.setattr(stages, "PROJECTION_BATCH", 3)
    blocked = Facts(trace)
    _same(idle, blocked.idle_causes, "idle_causes")
    _same(occ, blocked.occurrences, "occurrences")


@pytest.mark.parametrize("where,name", TRACES)
def test_host_view_per_table_equals_merging_all_rows_of_a_thread(where, name):
    trace = load(str(_path(where, name)))
    f = Facts(trace)
    hv = f.host_view
    ops, py, api = trace.ops, trace.python, trace.api
    for k, (p, t) in enumerate(zip(hv.pid.tolist(), hv.tid.tolist())):
        s, e = [], []
        for tab in (ops, py, api):
            m = (tab.pid == p) & (tab.tid == t)
            s.append(tab.start_ns[m])
            e.append(tab.end_ns[m])
        want = tl.merge(np.concatenate(s), np.concatenate(e))
        assert np.array_equal(hv.busy[k][0], want[0]) and np.array_equal(hv.busy[k][1], want[1])
    assert (np.diff(hv.pid) >= 0).all()  # threads numbered in (pid, tid) order


def test_nest_containment_check_in_blocks(monkeypatch):
    rng = np.random.default_rng(7)
    n = 2000
    s = np.sort(rng.integers(0, 10**6, n))
    e = s + rng.integers(0, 5000, n)
    pid = rng.integers(0, 3, n)
    tid = rng.integers(0, 2, n)
    want = nesting.nest(pid, tid, s, e)
    monkeypatch.setattr(nesting, "_BLOCK", 5)
    got = nesting.nest(pid, tid, s, e)
    assert np.array_equal(want[0], got[0]) and np.array_equal(want[1], got[1]) and want[2] == got[2]
    assert want[2] > 0  # random intervals overlap: the repaired path ran too


def test_containment_queries_in_blocks(monkeypatch):
    rng = np.random.default_rng(11)
    n, q = 3000, 500
    pid, tid = rng.integers(0, 2, n), rng.integers(0, 3, n)
    s = rng.integers(0, 10**5, n)
    e = s + rng.integers(0, 2000, n)
    parent, depth, _ = nesting.nest(pid, tid, s, e)
    qp, qt, qx = rng.integers(0, 3, q), rng.integers(0, 3, q), rng.integers(0, 10**5, q)
    want = nesting.innermost_containing(pid, tid, s, e, depth, qp, qt, qx)
    monkeypatch.setattr(nesting, "_BLOCK", 7)
    got = nesting.innermost_containing(pid, tid, s, e, depth, qp, qt, qx)
    assert np.array_equal(want, got) and (want >= 0).sum() > 50 and (want < 0).sum() > 50


def test_ancestor_walk_in_blocks_with_deep_chains(monkeypatch):
    rng = np.random.default_rng(5)
    n = 4000
    parent = np.full(n, -1, dtype=np.int32)
    parent[1:] = rng.integers(-1, 1, n - 1) + np.arange(n - 1)  # mostly one long chain: depth ~2000
    accept = rng.random(n) < 0.002
    rows = rng.permutation(n)
    want = nesting.ancestors_until(parent, rows, accept)
    monkeypatch.setattr(nesting, "_BLOCK", 37)
    monkeypatch.setattr(nesting, "FRONTIER_ROUNDS", 3)  # most chains finish by pointer jumping
    got = nesting.ancestors_until(parent, rows, accept)
    assert np.array_equal(want, got) and (want >= 0).sum() > 100 and (want < 0).sum() > 10


@pytest.mark.parametrize("where,name", TRACES)
def test_step_series_in_blocks_equals_whole(where, name, monkeypatch):
    from traceclass.facts import step_series as ss

    trace = load(str(_path(where, name)))
    whole = Facts(trace).step_series
    monkeypatch.setattr(ss, "SERIES_BLOCK", 5)
    blocked = Facts(trace).step_series
    assert np.array_equal(whole.steps, blocked.steps)
    assert whole.per_group == blocked.per_group
    assert list(whole.per_family) == list(blocked.per_family)
    assert all(np.array_equal(whole.per_family[k], blocked.per_family[k]) for k in whole.per_family)
    if "event" not in name:
        assert whole.steps_count > 1 and sum(map(sum, whole.per_group)) > 0 and whole.per_family


@pytest.mark.parametrize("where,name", TRACES)
def test_longest_idle_host_in_blocks_equals_whole(where, name, monkeypatch):
    from traceclass.facts import idle_host

    trace = load(str(_path(where, name)))
    whole = Facts(trace).longest_idle_host
    monkeypatch.setattr(idle_host, "_BLOCK", 3)
    assert Facts(trace).longest_idle_host == whole
    assert any(text for text, _ in whole.values())
