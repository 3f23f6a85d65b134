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
        f.write_bytes(b" " * 10_000_000)  # 10 MB: 70 MB estimated per worker
        files.append(str(f))
    assert engine.estimated_rss_mb(files[0]) == pytest.approx(engine.RSS_BASE_MB + engine.RSS_PER_TRACE_MB * 10)
    assert engine.local_workers(files, jobs=3) == 3 and engine.local_workers(files[:2], jobs=8) == 2
    monkeypatch.setattr(engine, "available_memory_mb", lambda: 150.0)
    monkeypatch.setattr(engine, "usable_cores", lambda: 16)
    assert engine.local_workers(files) == 2  # 150 MB // 70 MB


def _summary(rank: int, rows: list[dict]) -> dict:
    cols = {k: [r.get(k, d) for r in rows] for k, d in (
        ("group", "0"), ("group_desc", ""), ("group_ranks", "[0, 1, 2]"), ("group_size", 3), ("seq", -1),
        ("comms_id", ""), ("name", ""), ("raw_name", ""), ("dtype", "Float"), ("in_nelems", -1), ("out_nelems", -1),
        ("in_split", ""), ("out_split", ""), ("bytes", -1), ("src", -1), ("dst", -1), ("stream", 0), ("start_ns", 0),
        ("end_ns", 0), ("kernels", 1), ("launch_ns", -1), ("step", -1))}
    return {"rank": rank, "base_time_ns": None, "pg_config": [], "steps_synthetic": True, "collectives": cols,
            "steps": {"step": [0], "wall_ns": [1_000_000], "compute_ns": [0], "data_ns": [0], "other_ns": [0]}}


def test_all_to_allv_imbalance_and_p2p_pairs():
    from traceclass.cluster.clocks import align
    from traceclass.cluster.collectives import instance_stats
    from traceclass.cluster.match import match

    # all-to-allv (Seq 0): ranks send 100, 100, 400 bytes; send/recv 0 -> 1 paired by Src/Dst
    sums = [
        _summary(0, [dict(name="all_to_allv", seq=0, in_nelems=25, bytes=100, start_ns=1_000, end_ns=2_000),
                     dict(name="send", src=0, dst=1, group="", bytes=64, start_ns=3_000, end_ns=3_500)]),
        _summary(1, [dict(name="all_to_allv", seq=0, in_nelems=25, bytes=100, start_ns=1_200, end_ns=2_000),
                     dict(name="recv", src=0, dst=1, group="", bytes=64, start_ns=3_100, end_ns=3_500)]),
        _summary(2, [dict(name="all_to_allv", seq=0, in_nelems=100, bytes=400, start_ns=1_600, end_ns=2_000)]),
    ]
    m = match(sums, [0, 1, 2])
    assert m.counts["seq"] == 1 and m.counts["p2p"] == 1 and m.complete.tolist() == [True, True]
    st = instance_stats(sums, m, align(sums, m))
    i = m.name.index("all_to_allv")
    assert st.imbalance[i] == pytest.approx(400 / 200)
    assert st.transfer_ns[i] == 400 and st.bytes[i] == 400 and st.last[i] == 2 and st.blame_ns[i] == 400
    assert st.busbw_gbps[i] == pytest.approx(400 / 400 * 2 / 3)
    j = 1 - i
    assert st.transfer_ns[j] == 400 and st.participants[j] == 2
