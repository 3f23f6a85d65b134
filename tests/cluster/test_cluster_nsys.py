"""Nsight Systems exports as rank files: no collective args, so instances match by (stream,
ordinal) and the rank comes from the file name. Three hand-built exports with NCCL kernels
(nsys_fixtures.NsysExportBuilder), a planted late rank and planted clock offsets."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "ingest"))
import nsys_fixtures as fx  # noqa: E402,I001

from traceclass.cluster.engine import run_local  # noqa: E402
from traceclass.cluster.report import build  # noqa: E402

T0 = 1_000_000_000
PERIOD = 2_000_000  # one iteration: GEMM, then all-reduce, then all-gather
GEMM_NS = 1_000_000
AR_NS = 300_000  # the transfer: every rank's all-reduce ends together
AG_NS = 100_000
ITERS = 5
OFFSETS = [0, 40_000, -25_000]  # clock of rank r = true time + offset
LATE = {2: 200_000}  # rank 2 reaches the all-reduce 200 us after the others
AR = "ncclDevKernel_AllReduce_Sum_f32_RING_LL"
AG = "ncclDevKernel_AllGather_RING_LL"


def _write(path: Path, rank: int) -> None:
    off = OFFSETS[rank]
    with fx.NsysExportBuilder(path, window=(T0 + off - 10_000, T0 + off + ITERS * PERIOD + 10_000)) as b:
        b.gpu()
        b.thread("python")
        for i in range(ITERS):
            t = T0 + off + i * PERIOD
            b.launch(t - 8_000, t - 6_000, t, t + GEMM_NS, "sm90_xmma_gemm", stream=7)
            ar_end = t + GEMM_NS + 50_000 + max(LATE.values()) + AR_NS  # the same true end on every rank
            ar_start = t + GEMM_NS + 50_000 + LATE.get(rank, 0)
            b.launch(ar_start - 5_000, ar_start - 3_000, ar_start, ar_end, AR, stream=13)
            ag_start = ar_end + 10_000
            b.launch(ag_start - 5_000, ag_start - 3_000, ag_start, ag_start + AG_NS, AG, stream=13)


@pytest.fixture(scope="module")
def nsys_report(tmp_path_factory):
    d = tmp_path_factory.mktemp("nsys")
    paths = []
    for r in range(3):
        _write(d / f"node{7 - r}_rank{r}.sqlite", r)  # the last number of the name is the rank
        paths.append(str(d / f"node{7 - r}_rank{r}.sqlite"))
    sums = run_local(list(reversed(paths)), jobs=1)
    return build(sums), sums


def test_ranks_from_file_names(nsys_report):
    r, sums = nsys_report
    assert sorted((s["rank"], s["rank_source"]) for s in sums) == [(0, "file name"), (1, "file name"),
                                                                  (2, "file name")]
    assert [row["rank"] for row in r["ranks"]] == [0, 1, 2]
    assert not any("missing" in n or "duplicate" in n for n in r["notes"])


def test_collectives_matched_by_stream_order(nsys_report):
    r, _ = nsys_report
    v = r["verdict"]
    assert v["match_keys"]["stream"] == 2 * ITERS and v["instances"] == 2 * ITERS
    assert v["match_keys"]["seq"] == 0 and v["match_keys"]["comms_id"] == 0
    rows = {c["name"]: c for c in r["collectives"]}
    assert set(rows) == {"all_reduce", "all_gather"}
    ar, ag = rows["all_reduce"], rows["all_gather"]
    assert ar["count"] == ag["count"] == ITERS and ar["ranks"] == ag["ranks"] == 3
    assert ar["transfer_p50_ns"] == AR_NS and ag["transfer_p50_ns"] == AG_NS
    # no args: no bytes, so no bandwidth
    assert ar["algbw_p50_gbps"] is None and ar["busbw_p50_gbps"] is None
    assert ar["most_last_rank"] == 2 and ar["most_last_count"] == ITERS
    assert ar["start_skew_p50_ns"] == LATE[2]


def test_clock_offsets_and_waits(nsys_report):
    r, _ = nsys_report
    rows = {row["rank"]: row for row in r["ranks"]}
    assert [rows[k]["clock_offset_ns"] for k in range(3)] == OFFSETS
    assert rows[2]["times_last"] == ITERS
    # no ProfilerStep range in these exports: the whole trace is one step, so the per-step
    # clock-based wait is every all-reduce's (the all-gathers start together once corrected)
    assert all(rows[k]["steps"] == 1 for k in range(3))
    assert rows[0]["wait_ns"] == rows[1]["wait_ns"] == ITERS * LATE[2] and rows[2]["wait_ns"] == 0
