"""The cluster reduce step on hand-built NCCL rank sets: every answer is known exactly."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from nccl_ranks import AG_IN_NELEMS, AR_NELEMS, STEP_NS, Plan, write_set
from traceclass.cluster.engine import run_local
from traceclass.cluster.report import build
from traceclass.cluster.stragglers import binomial_tail, modified_z

OFFSETS = [0, 5_000, -3_000, 12_000, 0, -7_000, 2_500, 0]  # median 0


def _plan(**kw) -> Plan:
    host = [10_000] * 8
    host[2] = 2_000_000  # rank 2: 2 ms of host work before each all-reduce
    compute = [3_000_000 + 1_000 * r for r in range(8)]
    compute[5] = 4_000_000  # rank 5: 1 ms more compute
    return Plan(world=8, steps=10, compute_ns=compute, host_ns=host, offset_ns=OFFSETS, **kw)


def _report(tmp_path, plan: Plan, **kw):
    paths = [str(p) for p in write_set(plan, tmp_path, **kw)]
    return build(run_local(paths, jobs=1)), plan


@pytest.fixture(scope="module")
def seq_report(tmp_path_factory):
    return _report(tmp_path_factory.mktemp("seq"), _plan())


def test_match_by_group_and_seq(seq_report):
    r, _ = seq_report
    v = r["verdict"]
    assert v["match_keys"]["seq"] == 20 and v["instances"] == 20
    assert v["matched_collectives"] == 18  # step 0 is warm-up
    assert not any("dropped" in n for n in r["notes"])


def test_clock_offsets_recovered_exactly(seq_report):
    r, _ = seq_report
    assert [row["clock_offset_ns"] for row in r["ranks"]] == OFFSETS


def test_transfer_algbw_busbw(seq_report):
    r, plan = seq_report
    rows = {c["name"]: c for c in r["collectives"]}
    ar, ag = rows["all_reduce"], rows["all_gather"]
    assert ar["bytes"] == AR_NELEMS * 4 and ar["dtype"] == "Float" and ar["count"] == 9 and ar["ranks"] == 8
    assert ar["transfer_p50_ns"] == plan.transfer_ns
    assert ar["algbw_p50_gbps"] == pytest.approx(16e6 / 400_000)  # 40 GB/s
    assert ar["busbw_p50_gbps"] == pytest.approx(40.0 * 2 * 7 / 8)  # 70 GB/s
    assert ag["bytes"] == AG_IN_NELEMS * 8 * 2  # output, bf16
    assert ag["algbw_p50_gbps"] == pytest.approx(16e6 / 250_000)
    assert ag["busbw_p50_gbps"] == pytest.approx(64.0 * 7 / 8)
    # skew (clock-corrected): latest - earliest arrival
    arrivals = [plan.ar_arrival(1, k) - plan.step_start(1) for k in range(8)]
    assert ar["start_skew_p50_ns"] == max(arrivals) - min(arrivals)
    assert ar["most_last_rank"] == 2 and ar["most_last_count"] == 9
    assert ag["most_last_rank"] == 7


def test_blame_straggler_and_cause(seq_report):
    r, plan = seq_report
    ranks = {row["rank"]: row for row in r["ranks"]}
    arrivals = sorted(plan.ar_arrival(1, k) for k in range(8))
    blame = arrivals[-1] - arrivals[-2]  # rank 2 over rank 5
    assert blame == 992_000
    assert ranks[2]["times_last"] == 9 and ranks[2]["collectives"] == 18
    assert ranks[2]["blame_pct"] == pytest.approx(round(100 * blame / (STEP_NS - 1_000), 3))
    assert ranks[2]["straggler"] and ranks[2]["cause"] == "host work"
    assert ranks[2]["p_value"] == pytest.approx(binomial_tail(9, 18, 1 / 8))
    # rank 7 is last in every all-gather (significant) but blamed 100 ns a step: not a straggler
    assert ranks[7]["times_last"] == 9 and ranks[7]["p_value"] < 0.01 / 8 and not ranks[7]["straggler"]
    assert [s["rank"] for s in r["verdict"]["stragglers"]] == [2]
    # clock-based wait of rank 0 in the all-reduce: latest arrival - its arrival, per step
    w0 = (plan.ar_arrival(1, 2) - plan.ar_arrival(1, 0)) + (plan.ag_arrival(1, 7) - plan.ag_arrival(1, 0))
    assert ranks[0]["wait_ns"] == w0


def test_compute_imbalance(seq_report):
    r, _ = seq_report
    assert r["verdict"]["imbalanced_ranks"] == [5]
    f = {x["code"]: x for x in r["findings"]}
    assert f["TC803"]["values"]["rank"] == 5
    assert f["TC803"]["values"]["z"] == pytest.approx(996_500 / (1.4826 * 2_500))
    assert f["TC801"]["values"]["rank"] == 2
    # busbw 70 GB/s (all-reduce) and 56 GB/s (all-gather) of the H100's 450 GB/s NVLink
    low = sorted(x["values"]["busbw_pct"] for x in r["findings"] if x["code"] == "TC802")
    assert low == [round(100 * 56 / 450, 3), round(100 * 70 / 450, 3)]


def test_comms_id_matching(tmp_path):
    r, _ = _report(tmp_path, _plan(comms_id=True))
    assert r["verdict"]["match_keys"]["comms_id"] == 20
    assert [row["clock_offset_ns"] for row in r["ranks"]] == OFFSETS


def test_ordinal_matching_aligns_a_late_profiling_window(tmp_path):
    """No Seq, and rank 3's profile starts after the first all-reduce and all-gather."""
    r, plan = _report(tmp_path, _plan(seq=False, skip_first=[3]))
    v = r["verdict"]
    assert v["match_keys"]["ordinal"] == 20 and v["matched_collectives"] == 18
    assert any("fewer ranks than their group" in n and n.startswith("2 ") for n in r["notes"])
    assert [row["clock_offset_ns"] for row in r["ranks"]] == OFFSETS
    assert [s["rank"] for s in v["stragglers"]] == [2]


def test_mismatched_instance_is_dropped(tmp_path):
    r, _ = _report(tmp_path, _plan(ag_size_override={(4, 3): 999}))
    assert "1 collective instances dropped: their ranks disagree on the collective or its size" in r["notes"]
    assert r["verdict"]["matched_collectives"] == 17


def test_rank_from_collective_args(tmp_path):
    r, _ = _report(tmp_path, _plan(), distributed_info=False)
    assert [row["rank"] for row in r["ranks"]] == list(range(8))
    assert "rank identity from collective Rank arg (8)" in r["notes"]


def test_duplicate_and_missing_ranks_are_reported(tmp_path):
    paths = write_set(_plan(), tmp_path / "set")
    keep = [str(p) for p in paths if p.name not in ("rank6.json",)]
    dup = tmp_path / "set" / "copy_of_rank1.json"
    shutil.copy(paths[1], dup)
    r = build(run_local(keep + [str(dup)], jobs=1))
    assert r["missing_ranks"] == [6]
    assert r["duplicate_ranks"] == {"1": ["rank1.json", "copy_of_rank1.json"]}
    assert any(n.startswith("1 of 8 ranks have no trace: 6") for n in r["notes"])


def test_modified_z_and_binomial():
    assert binomial_tail(0, 5, 0.5) == 1.0
    assert binomial_tail(5, 5, 0.5) == pytest.approx(1 / 32)
    assert binomial_tail(2, 3, 0.5) == pytest.approx(0.5)
    z = modified_z(np.array([1.0, 2.0, 3.0, 4.0, 100.0]))
    assert z[-1] == pytest.approx((100 - 3) / (1.4826 * 1.0))
    assert modified_z(np.array([5.0, 5.0, 5.0])).tolist() == [0.0, 0.0, 0.0]
