"""TC303 sync-copy: synchronous copy APIs and async copies waited on at once."""

from __future__ import annotations

from ingest.nsys_fixtures import DEVICE, DTOD, HTOD, PAGEABLE, PINNED, NsysExportBuilder, pageable_copies_export
from kineto_builder import KinetoBuilder
from ruletest import findings_for
from traceclass.ingest import load


def _item_trace(tmp_path, sync_gap_ns: int, other_call_between: bool = False):
    """A 1 ms kernel, then ``.item()``: cudaMemcpyAsync DtoH + cudaStreamSynchronize; the next
    kernel starts 150 us after the copy ends."""
    b = KinetoBuilder()
    b.launch(None, "gemm", 0, 10_000, 1_000_000)
    op = b.op("aten::_local_scalar_dense", 20_000, 1_100_000)
    corr = b.runtime("cudaMemcpyAsync", 30_000, 10_000, ext=op)
    b.memcpy("DtoH", "Device", "Pageable", 1_010_000, 2_000, 4, corr=corr)
    t = 40_000 + sync_gap_ns
    if other_call_between:
        b.runtime("cudaGetDevice", 40_000, 1_000, ext=op)
    b.runtime("cudaStreamSynchronize", t, 1_012_000 - t + 1_000, ext=op)
    b.launch(None, "next_kernel", 1_100_000, 1_162_000, 50_000)
    return load(b.write(tmp_path / "item.json"))


def test_async_copy_waited_at_once(tmp_path):
    t = _item_trace(tmp_path, 1_000)
    (f,) = findings_for(t, "TC303")
    assert f.location == "async copies synchronized at once from aten::_local_scalar_dense"
    blocked = 10_000 + (1_012_000 - 41_000 + 1_000)  # copy call + sync call
    assert f.values["blocked_ns"] == blocked
    assert f.values["idle_after_ns"] == 1_162_000 - 1_012_000  # copy end -> next kernel
    # issue 10: min(host blocked, GPU idle after) is host-sync time, claimed once, by TC203
    assert f.values["cost_ns"] == 150_000 and f.recoverable_ns == 0 and f.values["see"] == "TC203"
    assert f.values["bytes"] == 4 and f.values["copies_count"] == 1
    assert f.message.startswith("GPU 0: 1 async copy followed by a synchronize call (gap 1 us, threshold 50 us)")
    assert "the GPU idled 150 us right after it" in f.message
    # no steps: 150 us of the 1.212 ms trace is 12.4 %, but 0.15 ms: medium, not high
    assert f.values["analysed_ns"] == 1_212_000 and f.severity == "info"
    (e,) = f.evidence
    assert e.ops == ("aten::_local_scalar_dense",) and e.what.startswith("1x Memcpy DtoH (Device -> Pageable) via")


def test_late_or_interrupted_sync_is_not_a_waited_copy(tmp_path):
    assert findings_for(_item_trace(tmp_path, 60_000), "TC303") == []  # sync 60 us later: > 50 us
    assert findings_for(_item_trace(tmp_path, 60_000), "TC303", max_wait_gap_us=100) != []
    assert findings_for(_item_trace(tmp_path, 5_000, other_call_between=True), "TC303") == []


def test_nsys_synchronous_copies(tmp_path):
    facts = pageable_copies_export(tmp_path / "p.sqlite")
    (f,) = findings_for(load(tmp_path / "p.sqlite"), "TC303")
    assert f.location == "synchronous-API copies from cudaMemcpy"
    assert f.message.startswith("GPU 0: 5 copies through a synchronous API (4 HtoD, 1 DtoH;")
    assert f.values["copies_count"] == facts["pageable"]  # the five cudaMemcpy calls
    assert f.values["blocked_ns"] == 5 * 2_000_000
    # GPU idle after each copy: 700 us before the next copy (x4), 620 us before the pinned one
    assert f.values["idle_after_ns"] == 4 * 700_000 + 620_000
    assert f.values["cost_ns"] == 4 * 700_000 + 620_000 and f.recoverable_ns == 0  # TC203's (issue 10)
    assert f.values["bytes"] == 5 * (8 << 20)
    assert f.evidence[0].what == "4x Memcpy HtoD (Pageable -> Device) via cudaMemcpy"


def test_small_pageable_htod_sync_copies_are_left_out_like_nsys(tmp_path):
    t0 = 1_000_000_000
    with NsysExportBuilder(tmp_path / "s.sqlite") as b:
        b.gpu()
        c = b.runtime(t0, t0 + 30_000, "cudaMemcpy_v3020")
        b.memcpy(t0 + 5_000, t0 + 10_000, 65_536, HTOD, PAGEABLE, DEVICE, c)  # excluded: <= 64 KiB pageable
        c = b.runtime(t0 + 100_000, t0 + 130_000, "cudaMemcpy_v3020")
        b.memcpy(t0 + 105_000, t0 + 110_000, 65_536, HTOD, PINNED, DEVICE, c)  # pinned: fully synchronous
        c = b.runtime(t0 + 200_000, t0 + 230_000, "cudaMemcpy_v3020")
        b.memcpy(t0 + 205_000, t0 + 215_000, 65_537, HTOD, PAGEABLE, DEVICE, c)
        b.launch(t0 + 240_000, t0 + 245_000, t0 + 300_000, t0 + 400_000, "k")
    (f,) = findings_for(load(tmp_path / "s.sqlite"), "TC303")
    assert f.values["copies_count"] == 2 and f.values["bytes"] == 65_536 + 65_537
    assert f.values["blocked_ns"] == 60_000
    assert findings_for(load(tmp_path / "s.sqlite"), "TC303", max_small_htod_bytes=0)[0].values["copies_count"] == 3


def test_cuda_device_to_device_cudamemcpy_does_not_block_the_host(tmp_path):
    t0 = 1_000_000_000
    with NsysExportBuilder(tmp_path / "d.sqlite") as b:
        b.gpu()
        c = b.runtime(t0, t0 + 8_000, "cudaMemcpy_v3020")
        b.memcpy(t0 + 5_000, t0 + 60_000, 1 << 20, DTOD, DEVICE, DEVICE, c)
        b.launch(t0 + 70_000, t0 + 75_000, t0 + 100_000, t0 + 200_000, "k")
    assert findings_for(load(tmp_path / "d.sqlite"), "TC303") == []


def test_hip_synchronous_copies_count_in_every_direction(tmp_path):
    b = KinetoBuilder(gpu_name="AMD Instinct MI300X")
    b.top["hip_runtime_version"] = 60443483
    corr = b.runtime("hipMemcpyWithStream", 0, 80_000)
    b.memcpy("DtoD", "Device", "Device", 10_000, 60_000, 1 << 20, corr=corr)
    b.launch(None, "k", 90_000, 100_000, 50_000)
    (f,) = findings_for(load(b.write(tmp_path / "hip.json")), "TC303")
    assert f.values["blocked_ns"] == 80_000 and f.values["idle_after_ns"] == 30_000
    assert f.values["cost_ns"] == 30_000 and f.recoverable_ns == 0  # TC203's (issue 10)
