"""TC301 exposed-copy: exact exposed time, bytes and bandwidth on hand-built traces."""

from __future__ import annotations

import pytest

from ingest.nsys_fixtures import pageable_copies_export
from kineto_builder import KinetoBuilder
from ruletest import findings_for
from traceclass.ingest import load

MIB4 = 4 << 20


def _copy_trace(tmp_path):
    """H100. Kernel A, an exposed pageable 4 MiB HtoD copy, kernel B, a DtoD copy half-covered by a
    kernel on another stream. GPU window 0 .. 2.6 ms."""
    b = KinetoBuilder()
    b.window(0, 3_000_000)
    to = b.op("aten::to", 900_000, 700_000)
    cp = b.op("aten::copy_", 910_000, 600_000)
    b.launch(None, "kernel_a", 0, 0, 1_000_000, cpu_dur=1_000)
    corr = b.runtime("cudaMemcpyAsync", 920_000, 5_000, ext=cp)
    b.memcpy("HtoD", "Pageable", "Device", 1_000_000, 500_000, MIB4, corr=corr)
    b.launch(None, "kernel_b", 1_400_000, 1_500_000, 500_000, cpu_dur=1_000)
    corr2 = b.runtime("cudaMemcpyAsync", 1_650_000, 5_000)
    b.memcpy("DtoD", "Device", "Device", 2_000_000, 300_000, 1 << 20, corr=corr2)
    b.launch(None, "kernel_c", 1_700_000, 2_200_000, 400_000, cpu_dur=1_000, stream=8)
    assert to < cp
    return load(b.write(tmp_path / "copies.json"))


def test_exposed_copies_exact(tmp_path):
    t = _copy_trace(tmp_path)
    fs = {f.location: f for f in findings_for(t, "TC301")}
    assert set(fs) == {"device 0 HtoD copies", "device 0 DtoD copies"}
    h = fs["device 0 HtoD copies"]
    assert h.recoverable_ns == 500_000
    assert h.values["exposed_ns"] == 500_000 and h.values["window_ns"] == 2_600_000
    assert h.values["bytes"] == MIB4 and h.values["copies_count"] == 1
    assert h.values["achieved_gb_s"] == pytest.approx(MIB4 / 0.0005 / 1e9, abs=1e-3)  # 8.389 GB/s
    assert h.values["peak_gb_s"] == 64.0  # H100 SXM PCIe Gen5 per direction
    assert h.severity == "high"  # 19.2 % of the window
    assert "19.2% of the 2.6 ms GPU window" in h.message and "threshold 1.0%" in h.message
    (e,) = h.evidence
    assert e.ops == ("aten::to", "aten::copy_") and e.count == 1 and e.bytes == MIB4
    assert e.duration_ns == 500_000 and e.start_ns == t.gpu.start_ns.min() + 1_000_000
    d = fs["device 0 DtoD copies"]
    assert d.recoverable_ns == 200_000  # 300 us copy, the last 100 us under kernel_c
    assert d.values["copy_ns"] == 300_000 and d.values["peak_gb_s"] == pytest.approx(3350 / 2)
    assert d.severity == "medium"  # 7.7 %
    assert d.evidence[0].what.endswith("from cudaMemcpyAsync")


def test_thresholds_are_honoured(tmp_path):
    t = _copy_trace(tmp_path)
    assert [f.location for f in findings_for(t, "TC301", min_exposed_pct=10.0)] == ["device 0 HtoD copies"]
    assert findings_for(t, "TC301", min_exposed_us=501) == []


def test_pinned_async_copies_overlapping_compute_on_another_stream_are_not_exposed(tmp_path):
    b = KinetoBuilder()
    b.launch(None, "gemm", 0, 0, 3_000_000, stream=7)
    for ts in (100_000, 1_000_000, 2_000_000):
        corr = b.runtime("cudaMemcpyAsync", ts - 50_000, 5_000)
        b.memcpy("HtoD", "Pinned", "Device", ts, 500_000, MIB4, corr=corr, stream=8)
    t = load(b.write(tmp_path / "overlap.json"))
    assert findings_for(t, "TC301", min_exposed_us=0, min_exposed_pct=0.0) == []


def test_nsys_export_exact(tmp_path):
    facts = pageable_copies_export(tmp_path / "p.sqlite")
    fs = {f.location: f for f in findings_for(load(tmp_path / "p.sqlite"), "TC301")}
    assert set(fs) == {"device 0 HtoD copies", "device 0 DtoH copies"}
    h, d = fs["device 0 HtoD copies"], fs["device 0 DtoH copies"]
    # no kernels: every copy is exposed; 4 pageable 1.8 ms copies + one pinned 0.68 ms copy
    assert h.recoverable_ns == 4 * facts["copy_ns"] + 680_000
    assert h.values["bytes"] == facts["bytes_by_kind"][1]  # the pinned copy included
    assert d.recoverable_ns == facts["copy_ns"] and d.values["bytes"] == facts["bytes_by_kind"][2]
    assert h.values["window_ns"] == 13_430_000  # first copy start .. memset end
    assert {e.what for e in h.evidence} == {"4x Memcpy HtoD (Pageable -> Device) from cudaMemcpy",
                                            "1x Memcpy HtoD (Pinned -> Device) from cudaMemcpyAsync"}
