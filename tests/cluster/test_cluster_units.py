"""Small pieces of the cluster package: names, identity, worker sizing, busbw factors."""

from __future__ import annotations

import pytest

from traceclass.cluster import engine
from traceclass.cluster.collectives import bus_factor
from traceclass.cluster.identity import Identity, rank_from_file_name, rank_set
from traceclass.cluster.match import _best_offset
from traceclass.cluster.names import normalize

import numpy as np


@pytest.mark.parametrize("raw, name", [
    ("c10d::allreduce_", "all_reduce"), ("gloo:all_reduce", "all_reduce"), ("nccl:all_reduce", "all_reduce"),
    ("allreduce", "all_reduce"), ("ncclDevKernel_AllReduce_Sum_f32_RING_LL", "all_reduce"),
    ("multimem_all_reduce_kernel", "all_reduce"), ("_allgather_base", "all_gather"),
    ("ncclDevKernel_AllGather_RING_LL", "all_gather"), ("_reduce_scatter_base", "reduce_scatter"),
    ("reduce_scatter_tensor_coalesced", "reduce_scatter"), ("alltoall_base", "all_to_all"),
    ("ncclKernel_SendRecv_RING", "send_recv"), ("gloo:send", "send"), ("broadcast", "broadcast"),
    ("c10d::barrier", "barrier"), ("ncclDevKernel_Generic", "generic"),
])
def test_normalize(raw, name):
    assert normalize(raw) == name


def test_bus_factors_are_nccl_tests():
    assert bus_factor("all_reduce", 8) == 2 * 7 / 8
    assert bus_factor("all_gather", 8) == bus_factor("reduce_scatter", 8) == bus_factor("all_to_all", 8) == 7 / 8
    assert bus_factor("broadcast", 8) == bus_factor("reduce", 8) == bus_factor("send", 2) == 1.0


def test_rank_from_file_name():
    assert rank_from_file_name("/x/job3/rank7.json.gz") == 7
    assert rank_from_file_name("worker_12.pt.trace.json") == 12
    assert rank_from_file_name("trace.json") is None


def test_rank_set_reports_mixed_jobs_and_unknown():
    ids = [Identity(0, "distributedInfo.rank", 2, "nccl|2"), Identity(1, "distributedInfo.rank", 2, "nccl|2"),
           Identity(0, "file name", 4, "nccl|4"), Identity(None, "", None, "|")]
    rs = rank_set(["a.json", "b.json", "c.json", "d.json"], ids)
    assert rs.duplicates == {0: ["a.json", "c.json"]} and rs.unknown == ["d.json"]
    assert rs.missing == [2, 3] and len(rs.jobs) == 3
    assert any(n.startswith("the traces come from 3 different jobs") for n in rs.notes)


def test_best_offset_aligns_shifted_windows():
    ref = np.array([1, 2, 3, 4, 5, 6, 7, 8, 9])  # codes include the step: not periodic
    assert _best_offset(ref, ref[2:]) == 2
    assert _best_offset(ref[3:], ref) == -3
    assert _best_offset(ref, ref) == 0
    # a periodic pattern is ambiguous: the smallest offset wins
    per = np.array([1, 2, 1, 2, 1, 2])
    assert _best_offset(per, per[2:]) == 0


def test_local_worker_sizing(tmp_path, monkeypatch):
    files = []
    for k in range(4):
        f = tmp_path / f"rank{k}.json"
        f.write_bytes(b" " * 10_000_000)  # 10 MB: ~110 MB estimated per worker
        files.append(str(f))
    assert engine.estimated_rss_mb(files[0]) == pytest.approx(engine.RSS_BASE_MB + engine.RSS_PER_TRACE_MB * 10)
    assert engine.local_workers(files, jobs=3) == 3 and engine.local_workers(files[:2], jobs=8) == 2
    monkeypatch.setattr(engine, "available_memory_mb", lambda: 250.0)
    monkeypatch.setattr(engine.os, "sched_getaffinity", lambda _: set(range(16)), raising=False)
    assert engine.local_workers(files) == 2  # 250 MB // 110 MB
