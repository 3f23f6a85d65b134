"""TC602 memory-pressure: exact GPU peaks against the device's memory, allocator calls, host info."""

from __future__ import annotations

from conftest import corpus
from kineto_builder import KinetoBuilder, _us
from ruletest import findings_for
from traceclass.ingest import load

GB = 1_000_000_000
H100 = 85_520_809_984  # KinetoBuilder's totalGlobalMem


def _mem(b: KinetoBuilder, ts: int, allocated: int, reserved: int, device_type: int = 1, device: int = 0,
         nbytes: int = 1 << 20) -> None:
    b.events.append({"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "pid": b.pid, "tid": b.tid,
                     "ts": _us(ts), "s": "t",
                     "args": {"Total Reserved": reserved, "Total Allocated": allocated, "Bytes": nbytes,
                              "Device Type": device_type, "Device Id": device, "Addr": 1234}})


def _pressure_trace(tmp_path, peak_reserved: int = 81 * GB, peak_allocated: int = 77 * GB, name: str = "mem.json",
                    device: int = 0, device_type: int = 1):
    """Two 2 ms steps (the first warm-up) on an H100. The allocator reserves 60 GB, then
    ``peak_reserved`` at 2.5 ms with ``peak_allocated`` in tensors; a cudaFree (300 us) and a cudaMalloc
    (200 us) run in the steady step, a cudaMalloc (400 us) in the warm-up step, a cudaMallocHost
    (pinned host memory, 100 us) in the steady step. The CPU allocator peaks at 3 MB."""
    b = KinetoBuilder()
    b.step(1, 0, 2_000_000)
    b.step(2, 2_000_000, 2_000_000)
    b.launch(b.op("aten::mm", 10_000, 5_000), "sm90_gemm", 11_000, 20_000, 1_000_000, device=device)
    b.launch(b.op("aten::mm", 2_010_000, 5_000), "sm90_gemm", 2_011_000, 2_020_000, 1_000_000, device=device)
    b.runtime("cudaMalloc", 100_000, 400_000)
    b.runtime("cudaFree", 2_100_000, 300_000)
    b.runtime("cudaMalloc", 2_400_000, 200_000)
    b.runtime("cudaMallocHost", 2_700_000, 100_000)
    _mem(b, 50_000, 50 * GB, 60 * GB, device_type, device)
    _mem(b, 2_500_000, peak_allocated, peak_reserved, device_type, device)
    _mem(b, 3_000_000, 40 * GB, peak_reserved - GB, device_type, device)
    _mem(b, 60_000, 3_000_000, 0, 0, -1)
    _mem(b, 70_000, 1_000_000, 0, 0, -1)
    return load(b.write(tmp_path / name))


def test_no_memory_size_no_gpu_finding(tmp_path):
    b = KinetoBuilder()
    del b.top["deviceProperties"][0]["totalGlobalMem"]
    b.step(1, 0, 1_000_000)
    b.launch(b.op("aten::mm", 0, 5_000), "gemm", 1_000, 10_000, 100_000)
    _mem(b, 50_000, 80 * GB, 84 * GB)
    assert findings_for(load(b.write(tmp_path / "nosize.json")), "TC602") == []


def test_gpu_near_capacity_exact(tmp_path):
    t = _pressure_trace(tmp_path)
    gpu, host = findings_for(t, "TC602")
    assert gpu.location == "GPU memory near capacity"
    assert gpu.values["peak_reserved_bytes"] == 81 * GB and gpu.values["peak_allocated_bytes"] == 77 * GB
    assert gpu.values["capacity_bytes"] == H100 and gpu.values["peak_pct"] == round(100 * 81 * GB / H100, 2)  # 94.71
    # the steady step's cudaFree + cudaMalloc; neither the warm-up cudaMalloc nor cudaMallocHost
    assert gpu.values["allocator_calls_count"] == 2 and gpu.recoverable_ns == 500_000
    assert gpu.severity == "medium"  # 0.5 ms of the 2 ms step: 25 %, but under the 1 ms a high needs
    assert gpu.message.startswith("GPU 0 (CUDA memory events of device 0): peak 81 GB of 85.5 GB, 94.7% "
                                  "(threshold 90.0%); allocated 77 GB, reserved 81 GB (4 GB held but not allocated")
    assert "2 allocator calls inside the steady steps took 500 µs" in gpu.message
    kinds = [e.values["kind"] for e in gpu.evidence]
    assert kinds == ["allocated", "reserved", "allocator calls", "allocator calls"]
    base = int(t.gpu.start_ns.min()) - 20_000
    assert gpu.evidence[1].start_ns == base + 2_500_000
    assert host.severity == "info" and host.location == "host memory peak" and host.recoverable_ns == 0
    assert host.values["peak_allocated_bytes"] == 3_000_000


def test_below_threshold_only_the_host_is_reported(tmp_path):
    t = _pressure_trace(tmp_path, peak_reserved=70 * GB, peak_allocated=65 * GB)  # 81.9 %
    (host,) = findings_for(t, "TC602")
    assert host.location == "host memory peak"
    (gpu,) = [f for f in findings_for(t, "TC602", min_peak_pct=80.0) if f.location.startswith("GPU")]
    assert gpu.values["peak_pct"] == 81.85


def test_silent_without_memory_events(tmp_path):
    b = KinetoBuilder()
    b.step(1, 0, 1_000_000)
    b.launch(b.op("aten::mm", 0, 5_000), "sm90_gemm", 1_000, 10_000, 100_000)
    assert findings_for(load(b.write(tmp_path / "none.json")), "TC602") == []


def test_rocm_memory_events_find_the_renumbered_device(tmp_path):
    """ROCm: kernels on device 9, deviceProperties id 0 (the reader renames it 9), memory events of
    HIP device 0 (c10 device type 6)."""
    b = KinetoBuilder()
    b.step(1, 0, 1_000_000)
    b.launch(b.op("aten::mm", 0, 5_000), "gemm", 1_000, 10_000, 100_000, device=9)
    _mem(b, 50_000, 80 * GB, 82 * GB, 6, 0)
    t = load(b.write(tmp_path / "rocm0.json"))
    assert [d.index for d in t.devices] == [9]
    (f,) = findings_for(t, "TC602")
    assert f.values["device"] == 9 and f.values["memory_device"] == 0
    assert f.message.startswith("GPU 9 (HIP memory events of device 0): peak 82 GB of 85.5 GB")


def test_same_pressure_on_another_device_fingerprints_alike(tmp_path):
    b = KinetoBuilder()
    b.top["deviceProperties"].append({**b.top["deviceProperties"][0], "id": 3})
    b.step(1, 0, 1_000_000)
    b.launch(b.op("aten::mm", 0, 5_000), "gemm", 1_000, 10_000, 100_000, device=3)
    _mem(b, 50_000, 80 * GB, 82 * GB, 1, 3)
    (f3,) = findings_for(load(b.write(tmp_path / "d3.json")), "TC602")
    (f0, _) = findings_for(_pressure_trace(tmp_path, name="d0.json"), "TC602")
    assert f3.values["device"] == 3 and f3.fingerprint == f0.fingerprint


def test_corpus_gpu_traces_are_far_from_full():
    # the fullest GPU of the corpus: SGLang graph capture on MI300X, 152 GB reserved of 206 GB (73.8 %)
    for name in ("mi300x_sglang_decode_graph_capture.json.gz", "h100_timesformer_inference.json.gz"):
        fs = findings_for(corpus("torch", "gpu", name), "TC602")
        assert [f.location for f in fs if f.location.startswith("GPU")] == []
    (f,) = findings_for(corpus("torch", "gpu", "mi300x_sglang_decode_graph_capture.json.gz"), "TC602",
                        min_peak_pct=70.0)
    assert f.values["peak_reserved_bytes"] == 145_122 << 20 and f.values["device"] == 9
    assert f.values["peak_pct"] == round(100 * (145_122 << 20) / 206_141_652_992, 2)


def test_corpus_cpu_trace_host_peak_is_info():
    (f,) = findings_for(corpus("torch", "cpu", "mixed_stack.step6.pt.trace.json.gz"), "TC602")
    assert f.severity == "info" and f.values["events_count"] == 12_352
    assert f.values["peak_allocated_bytes"] == 78_422_868
