"""Corpus single ranks as per-rank cases: the reader keeps the collective args, the summary
builds the collective table from them."""

from __future__ import annotations

import shutil
from collections import Counter

import pytest

from conftest import corpus
from traceclass.cluster.engine import run_local
from traceclass.cluster.report import build
from traceclass.cluster.summary import summarize
from traceclass.engine import run
from traceclass.ingest import load
from traceclass.model.comms import KERNEL


def _summary(name: str) -> tuple:
    t = load(str(corpus("torch", "gpu", name)))
    a, r = run(t)
    return t, summarize(t, a, r)


def test_reader_keeps_nccl_args_on_ops_and_kernels():
    t = load(str(corpus("torch", "gpu", "b200_eager.json.gz")))
    c, s = t.comms, t.strings
    assert len(c) == 2 and c.kind.tolist() == [0, KERNEL]
    assert [s[int(x)] for x in c.collective] == ["_allgather_base"] * 2
    assert c.in_nelems.tolist() == [25136, 25136] and c.out_nelems.tolist() == [201088, 201088]
    assert [s[int(x)] for x in c.dtype] == ["BFloat16"] * 2
    assert [s[int(x)] for x in c.pg_name] == ["3", "3"] and c.group_size.tolist() == [8, 8]
    assert s[int(c.pg_ranks[0])] == "[0, 1, 2, 3, 4, 5, 6, 7]" and s[int(c.in_split[0])] == "[]"
    assert c.rank.tolist() == [0, -1] and c.rank_start.tolist() == [0, -1]
    assert c.external_id[0] == c.external_id[1] and c.correlation[1] >= 0


def test_a100_nccl_collectives_summary():
    t, s = _summary("a100_nccl_collectives.json.gz")
    assert len(t.comms) == 48 and int((t.comms.kind == KERNEL).sum()) == 21
    assert (s["rank"], s["rank_source"], s["world_size"]) == (0, "distributedInfo.rank", 2)
    assert s["base_time_ns"] == 1711964646000000000
    assert s["pg_config"] == [{"pg_name": "0", "pg_desc": "default_pg", "pg_size": 2, "ranks": [0, 1]}]
    c = s["collectives"]
    assert len(c["name"]) == 21 and sum(c["kernels"]) == 21
    counts = Counter(zip(c["name"], c["bytes"], c["dtype"]))
    assert counts[("all_reduce", 2049000 * 4, "Float")] == 3  # In msg nelems x 4 bytes
    assert counts[("broadcast", 424, "Long")] == 3
    assert set(c["group"]) == {"0"} and set(c["group_size"]) == {2}
    assert s["steps"]["step"] == [5, 6]


def test_a100_train_rank0_of16_without_args():
    _, s = _summary("a100_train_rank0_of16.json.gz")
    assert (s["rank"], s["world_size"], s["base_time_ns"]) == (0, 16, None)
    c = s["collectives"]
    assert len(c["name"]) == 80 and set(c["group"]) == {""}  # no args: no group, sizes from shapes
    assert Counter(c["name"])["send_recv"] == 5
    assert s["steps"]["step"] == [551, 552, 553, 554]


def test_b200_eager_summary_and_a_lone_rank_set(tmp_path):
    _, s = _summary("b200_eager.json.gz")
    c = s["collectives"]
    assert len(c["name"]) == 74 and Counter(c["name"])["all_reduce"] == 73
    k = c["name"].index("all_gather")
    assert (c["bytes"][k], c["dtype"][k], c["group"][k]) == (201088 * 2, "BFloat16", "3")
    # the same rank twice: reported as a duplicate, never renumbered; seven ranks missing
    src = corpus("torch", "gpu", "b200_eager.json.gz")
    a, b = tmp_path / "a.json.gz", tmp_path / "b.json.gz"
    shutil.copy(src, a)
    shutil.copy(src, b)
    r = build(run_local([str(a), str(b)], jobs=1))
    assert r["duplicate_ranks"] == {"0": ["a.json.gz", "b.json.gz"]}
    assert r["missing_ranks"] == [1, 2, 3, 4, 5, 6, 7] and r["verdict"]["ranks"] == 1
    assert r["rank_findings"] and all(f["of"] == 1 for f in r["rank_findings"])


@pytest.mark.parametrize("name", ["a100_nccl_collectives.json.gz", "b200_eager.json.gz"])
def test_summary_is_small(name):
    import json

    _, s = _summary(name)
    assert len(json.dumps(s)) < 40_000
