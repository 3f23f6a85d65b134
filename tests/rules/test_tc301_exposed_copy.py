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
    kernel on another stream. GPU window 0 .. 2.6 ms; no steps: the analysed time is the 3 ms
    profiler window."""
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
    assert set(fs) == {"HtoD copies from aten::to > aten::copy_", "DtoD copies from cudaMemcpyAsync"}
    h = fs["HtoD copies from aten::to > aten::copy_"]
    assert h.recoverable_ns == 500_000
    assert h.values["exposed_ns"] == 500_000 and h.values["analysed_ns"] == 3_000_000
    assert h.values["bytes"] == MIB4 and h.values["copies_count"] == 1
    assert h.values["achieved_gb_s"] == pytest.approx(MIB4 / 0.0005 / 1e9, abs=1e-3)  # 8.389 GB/s
    assert h.values["peak_gb_s"] == 64.0  # H100 SXM PCIe Gen5 per direction
    # 16.7 % of the analysed time, but 0.5 ms: below the 1 ms a "high" finding needs
    assert h.severity == "medium"
    assert "GPU 0: 1 HtoD copy exposed for 500 µs, 16.7% of the 3 ms analysed" in h.message
    assert "threshold 1.0%" in h.message
    (e,) = h.evidence
    assert e.ops == ("aten::to", "aten::copy_") and e.count == 1 and e.bytes == MIB4
    assert e.duration_ns == 500_000 and e.start_ns == t.gpu.start_ns.min() + 1_000_000
    d = fs["DtoD copies from cudaMemcpyAsync"]
    assert d.recoverable_ns == 200_000  # 300 us copy, the last 100 us under kernel_c
    assert d.values["copy_ns"] == 300_000 and d.values["peak_gb_s"] == pytest.approx(3350 / 2)
    assert d.severity == "medium"  # 6.7 %
    assert d.evidence[0].what.endswith("from cudaMemcpyAsync")
    # the timeline's exposed-copy figure is the same here: no memsets, no warm-up
    assert d.values["timeline_exposed_copy_ns"] == 700_000


def test_memsets_and_warmup_copies_are_not_counted_unlike_the_timeline(tmp_path):
    """Two steps: a 300 us exposed HtoD copy in the warm-up step and one in the steady step, and a
    200 us exposed memset in the steady step. TC301 counts only the steady copy; the timeline's
    exposed-copy figure counts all three."""
    b = KinetoBuilder()
    for k, t0 in enumerate((0, 2_000_000)):
        b.step(k + 1, t0, 2_000_000)
        b.launch(None, "gemm", t0 + 10_000, t0 + 20_000, 500_000)
        corr = b.runtime("cudaMemcpyAsync", t0 + 30_000, 5_000)
        b.memcpy("HtoD", "Pinned", "Device", t0 + 600_000, 300_000, MIB4, corr=corr)
    corr = b.runtime("cudaMemsetAsync", 2_040_000, 5_000)
    b.memset(3_000_000, 200_000, 1 << 20, corr=corr)
    t = load(b.write(tmp_path / "warm.json"))
    (f,) = findings_for(t, "TC301")
    assert f.recoverable_ns == 300_000 and f.values["copies_count"] == 1
    assert f.values["analysed_ns"] == 2_000_000 and f.values["exposed_pct"] == 15.0
    assert f.values["timeline_exposed_copy_ns"] == 800_000


def test_same_site_on_another_device_fingerprints_alike(tmp_path):
    def trace(device: int, op: str):
        b = KinetoBuilder()
        b.window(0, 2_000_000)
        ext = b.op(op, 90_000, 600_000)
        b.launch(None, "gemm", 0, 0, 100_000, device=device)
        corr = b.runtime("cudaMemcpyAsync", 100_000, 5_000, ext=ext)
        b.memcpy("HtoD", "Pinned", "Device", 200_000, 500_000, MIB4, corr=corr, device=device)
        return load(b.write(tmp_path / f"d{device}{op}.json"))

    (a,) = findings_for(trace(0, "aten::copy_"), "TC301")
    (b,) = findings_for(trace(3, "aten::copy_"), "TC301")
    (c,) = findings_for(trace(3, "aten::index_put_"), "TC301")
    assert a.message.startswith("GPU 0:") and b.message.startswith("GPU 3:")
    assert a.fingerprint == b.fingerprint and a.location == "HtoD copies from aten::copy_"
    assert c.fingerprint != b.fingerprint


def test_thresholds_are_honoured(tmp_path):
    t = _copy_trace(tmp_path)
    assert [f.location for f in findings_for(t, "TC301", min_exposed_pct=10.0)] == \
        ["HtoD copies from aten::to > aten::copy_"]
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
    assert set(fs) == {"HtoD copies from cudaMemcpy", "DtoH copies from cudaMemcpy"}
    h, d = fs["HtoD copies from cudaMemcpy"], fs["DtoH copies from cudaMemcpy"]
    # no kernels: every copy is exposed; 4 pageable 1.8 ms copies + one pinned 0.68 ms copy
    assert h.recoverable_ns == 4 * facts["copy_ns"] + 680_000
    assert h.values["bytes"] == facts["bytes_by_kind"][1]  # the pinned copy included
    assert d.recoverable_ns == facts["copy_ns"] and d.values["bytes"] == facts["bytes_by_kind"][2]
    # no steps: the analysed time is the whole trace, first API call .. memset end (13.53 ms)
    assert h.values["analysed_ns"] == 13_530_000
    assert {e.what for e in h.evidence} == {"4x Memcpy HtoD (Pageable -> Device) from cudaMemcpy",
                                            "1x Memcpy HtoD (Pinned -> Device) from cudaMemcpyAsync"}
