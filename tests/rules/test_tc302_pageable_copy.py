"""TC302 pageable-copy: counts, bytes and staging cost; ROCm's unknown host memory kind."""

from __future__ import annotations

import math

from ingest.nsys_fixtures import pageable_copies_export
from kineto_builder import KinetoBuilder
from ruletest import findings_for
from traceclass.ingest import load

MIB8 = 8 << 20


def test_kineto_pageable_async_copies(tmp_path):
    b = KinetoBuilder()  # H100 SXM: 64 GB/s per direction
    for i in range(3):
        ext = b.op("aten::copy_", i * 1_000_000, 900_000)
        corr = b.runtime("cudaMemcpyAsync", i * 1_000_000 + 10_000, 800_000, ext=ext)
        b.memcpy("HtoD", "Pageable", "Device", i * 1_000_000 + 20_000, 700_000, MIB8, corr=corr)
    corr = b.runtime("cudaMemcpyAsync", 3_100_000, 5_000)
    b.memcpy("HtoD", "Pinned", "Device", 3_110_000, 140_000, MIB8, corr=corr)
    t = load(b.write(tmp_path / "pageable.json"))
    (f,) = findings_for(t, "TC302")
    assert f.location == "pageable HtoD copies from aten::copy_"
    assert f.values["copies_count"] == 3 and f.values["async_api_count"] == 3
    assert f.values["bytes"] == 3 * MIB8 and f.values["copy_ns"] == 2_100_000
    ideal = math.ceil(MIB8 / 64e9 * 1e9)  # 131072 ns at the host link
    assert ideal == 131_072
    assert f.recoverable_ns == 3 * (700_000 - ideal)
    assert "3 issued through an async API" in f.message and "vs 64 GB/s pinned" in f.message
    assert f.message.startswith("GPU 0: 3 pageable HtoD copies (threshold 1)")
    # no steps: analysed time = first to last event (0 .. 3.25 ms); 1.7 ms recoverable is 52 %
    assert f.values["analysed_ns"] == 3_250_000 and f.severity == "high"
    (e,) = f.evidence
    assert e.count == 3 and e.ops == ("aten::copy_",) and e.bytes == 3 * MIB8


def test_pinned_copies_only_do_not_fire(tmp_path):
    b = KinetoBuilder()
    corr = b.runtime("cudaMemcpyAsync", 0, 5_000)
    b.memcpy("HtoD", "Pinned", "Device", 10_000, 140_000, MIB8, corr=corr)
    corr = b.runtime("cudaMemcpyAsync", 200_000, 5_000)
    b.memcpy("DtoH", "Device", "Pinned", 210_000, 140_000, MIB8, corr=corr)
    assert findings_for(load(b.write(tmp_path / "pinned.json")), "TC302") == []


def test_rocm_host_memory_kind_is_unknown_not_guessed(tmp_path):
    b = KinetoBuilder(gpu_name="AMD Instinct MI300X")
    b.top["hip_runtime_version"] = 60443483
    corr = b.runtime("hipMemcpyWithStream", 0, 60_000)
    b.memcpy("HtoD", "Host", "Device", 10_000, 40_000, MIB8, corr=corr)
    (f,) = findings_for(load(b.write(tmp_path / "rocm.json")), "TC302")
    assert f.severity == "info" and f.recoverable_ns == 0
    assert f.location == "copies with unknown host memory kind from hipMemcpyWithStream"
    assert "ROCm traces name the host side 'Host'" in f.message
    assert f.message.startswith("GPU 0: 1 host<->device copy (8.39 MB, 40 µs) whose")
    assert f.values == {"copies_count": 1, "copy_ns": 40_000, "bytes": MIB8}


def test_nsys_pageable_export(tmp_path):
    facts = pageable_copies_export(tmp_path / "p.sqlite")
    fs = {f.location: f for f in findings_for(load(tmp_path / "p.sqlite"), "TC302")}
    assert set(fs) == {"pageable HtoD copies from cudaMemcpy", "pageable DtoH copies from cudaMemcpy"}
    h, d = fs["pageable HtoD copies from cudaMemcpy"], fs["pageable DtoH copies from cudaMemcpy"]
    assert h.values["copies_count"] + d.values["copies_count"] == facts["pageable"]
    assert h.values["copies_count"] == 4 and h.values["bytes"] == 4 * MIB8
    assert h.values["async_api_count"] == 0 and "issued through synchronous APIs" in h.message
    assert h.values["copy_ns"] == 4 * facts["copy_ns"]
    assert h.recoverable_ns == 4 * (facts["copy_ns"] - 131_072)  # the nsys GPU is an H100: 64 GB/s
    assert d.recoverable_ns == facts["copy_ns"] - 131_072
    assert "1 pageable DtoH copy (threshold 1)" in d.message and "issued through a synchronous API;" in d.message
    assert h.evidence[0].what == "4x Memcpy HtoD (Pageable -> Device) from cudaMemcpy"


def test_reference_rate_from_pinned_copies_when_link_unknown(tmp_path):
    b = KinetoBuilder(gpu_name="NVIDIA B200")  # no host-link figure on record
    corr = b.runtime("cudaMemcpyAsync", 0, 5_000)
    b.memcpy("HtoD", "Pinned", "Device", 10_000, 200_000, MIB8, corr=corr)  # 41.9 GB/s
    corr = b.runtime("cudaMemcpyAsync", 300_000, 5_000)
    b.memcpy("HtoD", "Pageable", "Device", 310_000, 1_000_000, MIB8, corr=corr)
    (f,) = findings_for(load(b.write(tmp_path / "b200.json")), "TC302")
    assert f.recoverable_ns == 1_000_000 - 200_000
    assert "pinned copies of 1 MiB or more reached in this trace" in f.estimate


def test_tiny_pageable_copies_never_rate_high(tmp_path):
    """One 1-byte pageable DtoH copy in a 100 us trace: 2 us of staging is 2 % of the trace but
    microseconds: low, whatever share of a short trace it is."""
    b = KinetoBuilder()
    b.window(0, 100_000)
    corr = b.runtime("cudaMemcpyAsync", 10_000, 5_000)
    b.memcpy("DtoH", "Device", "Pageable", 20_000, 2_000, 1, corr=corr)
    (f,) = findings_for(load(b.write(tmp_path / "tiny.json")), "TC302")
    assert f.recoverable_ns == 2_000 - 1 and f.severity == "low"  # 1 byte at 64 GB/s: 1 ns ideal
