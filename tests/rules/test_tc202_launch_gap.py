"""TC202 launch-gap: exact gaps and causes per step on hand-built Kineto and nsys traces."""

from __future__ import annotations

from ingest.nsys_fixtures import launch_gap_with_sync_export, small_kernel_storm_export
from kineto_builder import KinetoBuilder
from launch_traces import DATALOADER, gap_causes_trace, gpu_base_ns
from ruletest import findings_for
from traceclass import units
from traceclass.ingest import load


def test_one_finding_per_cause_with_exact_totals(tmp_path):
    t = gap_causes_trace(tmp_path)
    found = findings_for(t, "TC202")
    # no user stage around the launches: the location names the op whose work ends most gap time
    assert {f.location for f in found} == {"launch-overhead gaps before aten::relu", "host-sync gaps before aten::mul",
                                           "data-loading gaps before aten::copy_", "unknown gaps before aten::mm"}
    fs = {f.values["cause"]: f for f in found}
    expect = {  # cause: (steady gaps, steady gap ns, recoverable, warm-up gaps, warm-up ns, severity)
        "launch-overhead": (2, 102_000, 2 * 49_000, 1, 51_000, "low"),  # 4.9 % but 98 us (< 0.1 ms)
        "host-sync": (2, 154_000, 2 * 75_000, 1, 77_000, "medium"),
        "data-loading": (2, 440_000, 2 * 218_000, 1, 220_000, "medium"),  # 21.8 % but 436 us (< 1 ms)
        "unknown": (4, 710_000, 0, 1, 100_000, "info"),  # reported, not claimed
    }
    for cause, (n, total, rec, wn, wns, sev) in expect.items():
        f = fs[cause]
        assert (f.values["gaps_count"], f.values["gap_ns"], f.recoverable_ns) == (n, total, rec), cause
        assert (f.values["warmup_gaps_count"], f.values["warmup_gap_ns"]) == (wn, wns), cause
        assert f.severity == sev, cause
        assert f.values["gap_per_step_ns"] == total // 2 and f.values["steady_steps_count"] == 2
        assert f"GPU 0 idle {units.duration(total)} in {n} gaps >= 30 µs (threshold), cause {cause}" in f.message
    hs = fs["host-sync"]
    assert hs.values["per_step"] == [
        {"step": "ProfilerStep#1", "warmup": True, "gaps_count": 1, "gap_ns": 77_000},
        {"step": "ProfilerStep#2", "warmup": False, "gaps_count": 1, "gap_ns": 77_000},
        {"step": "ProfilerStep#3", "warmup": False, "gaps_count": 1, "gap_ns": 77_000},
    ]
    assert "77 µs per step, 7.7% of steady step time" in hs.message
    base = gpu_base_ns(t)
    e = hs.evidence[0]
    assert (e.start_ns, e.end_ns, e.duration_ns) == (base + 1_209_000, base + 1_286_000, 77_000)
    assert e.kernels == ("Memcpy DtoH (Device -> Pinned)", "mul_kernel") and e.ops == ("aten::mul",)
    assert e.source == "train.py:60"
    assert e.values["host_wait_ns"] == 6_000 and e.values["host_window_ns"] == 72_000
    assert e.values["step"] == "ProfilerStep#2"
    assert hs.evidence[-1].what.endswith("(warm-up step)")
    lo = fs["launch-overhead"].evidence[0]
    assert lo.values["host_busy_ns"] == lo.values["host_window_ns"] == 46_000 and lo.ops == ("aten::relu",)
    dl = fs["data-loading"].evidence[0]
    assert dl.values["data_loading_ns"] == 200_000 and dl.values["host_window_ns"] == 215_000
    unk = {e.duration_ns: e for e in fs["unknown"].evidence if "warm-up" not in e.what}
    assert set(unk) == {100_000, 255_000}
    assert unk[100_000].values["after_launch_ns"] == 96_000  # launched at 601-604 us, started at 700 us
    assert unk[255_000].values["host_busy_ns"] == 1_000


def test_min_gap_threshold(tmp_path):
    t = gap_causes_trace(tmp_path)
    fs = {f.values["cause"]: f for f in findings_for(t, "TC202", min_gap_us=60.0)}
    assert set(fs) == {"host-sync", "data-loading", "unknown"}  # 51 us launch gaps drop out
    fs = {f.values["cause"]: f for f in findings_for(t, "TC202", min_gap_us=4.0)}
    assert fs["unknown"].values["gaps_count"] == 6  # + the 4 us gap after the copy (queued work)


def test_data_loading_needs_the_majority_of_the_host_window(tmp_path):
    t = gap_causes_trace(tmp_path)
    fs = {f.values["cause"]: f for f in findings_for(t, "TC202", min_host_share_pct=95.0)}
    # 200 of the 215 us are data loading (93 %): below 95 % the host activity decides -> unknown
    assert "data-loading" not in fs
    assert fs["unknown"].values["gaps_count"] == 6


def test_a_gap_covered_by_another_stream_is_no_gap(tmp_path):
    b = KinetoBuilder()
    b.step(1, 0, 1_000_000)
    b.op("aten::add", 100_000, 400_000)
    b.launch(None, "gemm_a", 1_000, 5_000, 100_000, stream=7)
    b.launch(None, "gemm_b", 500_000, 505_000, 100_000, stream=7)
    b.launch(None, "side_kernel", 2_000, 100_000, 410_000, stream=8)  # covers 105 .. 505 us
    t = load(b.write(tmp_path / "covered.json"))
    assert findings_for(t, "TC202", min_gap_us=0.001) == []


def test_nsys_sync_gap_exact(tmp_path):
    facts = launch_gap_with_sync_export(tmp_path / "gap.sqlite")
    (f,) = findings_for(load(tmp_path / "gap.sqlite"), "TC202")
    assert f.location == "host-sync gaps before gemm_b"  # nsys without NVTX: no stage, no op
    assert f.values["gap_ns"] == facts["gap_ns"] == 2_010_000 and f.values["gaps_count"] == 1
    assert f.recoverable_ns == 2_008_000
    assert f.severity == "high"  # 50 % of the 4 ms capture (the whole trace is the step)
    (e,) = f.evidence
    assert (e.start_ns, e.end_ns) == (facts["a_end"], facts["b_start"])
    assert e.kernels == ("gemm_a", "gemm_b")
    assert e.values["host_wait_ns"] == 2_000  # the sync returned 2 us after gemm_a ended


def test_nsys_kernel_storm_has_no_gap_of_30_us(tmp_path):
    small_kernel_storm_export(tmp_path / "storm.sqlite")
    t = load(tmp_path / "storm.sqlite")
    assert findings_for(t, "TC202") == []
    (f,) = findings_for(t, "TC202", min_gap_us=5.0)
    # nsys without NVTX shows only CUDA calls: the 199 gaps of 7 us are unexplained
    assert f.location == "unknown gaps before vectorized_elementwise_kernel" and f.values["gaps_count"] == 199


def test_dataloader_range_is_recognised(tmp_path):
    t = gap_causes_trace(tmp_path, steps=1)
    assert any(t.strings[c] == DATALOADER for c in t.annotations.name)
    (f,) = [f for f in findings_for(t, "TC202") if f.values["cause"] == "data-loading"]
    assert f.values["gaps_count"] == 1 and f.severity == "medium"  # one step only: it is steady
