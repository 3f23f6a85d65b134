"""GPU rows whose export names no device never take the host CPU's index (HOST_DEVICE, -1)."""

from __future__ import annotations

import numpy as np

from kineto_builder import KinetoBuilder
from traceclass.engine import run
from traceclass.ingest import load
from traceclass.model import HOST_DEVICE, DeviceInfo, GpuActivity, InputsTable, SourceInfo, StringTable, Trace

DESCRIBED = "the one GPU the export describes that no other row ran on"
GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64"


def _mm_trace(tmp_path, strip, devices=(0,), described=None):
    """Three steps, each one bf16 4096^3 aten::mm whose kernel takes 400 us; ``strip(kernel_event)``
    removes what names its device."""
    b = KinetoBuilder()
    b.top["deviceProperties"] = [{**b.top["deviceProperties"][0], "id": d}
                                 for d in (devices if described is None else described)]
    for s in range(3):
        t0 = s * 1_000_000
        b.step(s, t0, 900_000)
        for k, d in enumerate(devices):
            e = b.op("aten::mm", t0 + 10_000 + k, 200_000, dims=[[4096, 4096], [4096, 4096]],
                     types=["c10::BFloat16"] * 2)
            b.launch(e, GEMM, t0 + 20_000 + k, t0 + 50_000, 400_000, device=d)
    k0 = [ev for ev in b.events if ev["cat"] == "kernel"]
    for ev in k0[:: len(devices)]:  # the first device's kernels lose their device
        strip(ev)
    return load(b.write(tmp_path / "t.json"))


def _no_device_pid_minus_one(ev):
    del ev["args"]["device"]
    ev["pid"] = -1


def test_kernels_without_device_and_pid_minus_one_run_on_the_described_gpu(tmp_path):
    t = _mm_trace(tmp_path, _no_device_pid_minus_one)
    assert t.gpu.device.tolist() == [0, 0, 0]
    assert [(d.index, d.name) for d in t.devices] == [(0, "NVIDIA H100 80GB HBM3")]
    note = f"3 GPU rows name no device (no device id in the export): analysed as GPU 0, {DESCRIBED}"
    assert note in t.notes
    _, r = run(t, strict=True)
    assert [(h.device, h.reported_name, h.spec) for h in r.hardware] == [
        (HOST_DEVICE, "host CPU", "cpu-generic-avx2"), (0, "NVIDIA H100 80GB HBM3", "h100-sxm")]
    (mm,) = [o for o in r.ops if o.name == "aten::mm"]
    # 2 * 4096^3 FLOP in 400 us = 343.6 TFLOP/s against the H100's bf16 matrix roof, not a CPU's
    assert mm.device == 0 and mm.bound == "compute-bound"
    assert mm.achieved_flops_per_s == 2 * 4096**3 / 400e-6 and mm.attainable_flops_per_s == 989.5e12
    assert note in r.notes


def test_unknown_rows_go_to_the_one_described_gpu_nothing_else_ran_on(tmp_path):
    t = _mm_trace(tmp_path, _no_device_pid_minus_one, devices=(0, 1))
    # device 0's kernels lost their id; device 1's kept it: the lost ones ran on described device 0
    assert t.gpu.device.tolist() == [0, 1, 0, 1, 0, 1]
    assert sorted(d.index for d in t.devices) == [0, 1]
    assert f"3 GPU rows name no device (no device id in the export): analysed as GPU 0, {DESCRIBED}" in t.notes
    _, r = run(t, strict=True)
    assert {h.device: (h.reported_name, h.spec) for h in r.hardware} == {
        HOST_DEVICE: ("host CPU", "cpu-generic-avx2"), 0: ("NVIDIA H100 80GB HBM3", "h100-sxm"),
        1: ("NVIDIA H100 80GB HBM3", "h100-sxm")}


def test_unknown_rows_beside_busy_devices_get_a_free_index(tmp_path):
    t = _mm_trace(tmp_path, _no_device_pid_minus_one, devices=(0, 1, 2), described=(1, 2))
    # every described device has rows of its own: the lost ones get index 0, with no spec guessed
    t2 = t.replace(gpu=t.gpu)  # construction is idempotent
    assert t.gpu.device.tolist() == [0, 1, 2] * 3 == t2.gpu.device.tolist()
    assert "3 GPU rows name no device (no device id in the export): analysed as GPU 0, an index of their own" \
        in t.notes and t2.notes == t.notes
    _, r = run(t, strict=True)
    rows = {h.device: (h.reported_name, h.spec) for h in r.hardware}
    assert rows[HOST_DEVICE] == ("host CPU", "cpu-generic-avx2") and rows[0] == ("", None)
    assert rows[1] == rows[2] == ("NVIDIA H100 80GB HBM3", "h100-sxm")


def test_model_keeps_host_index_off_gpu_rows():
    strings = StringTable()
    gpu = GpuActivity.build(4, start_ns=[0, 10, 20, 30], end_ns=[5, 15, 25, 35], device=[-1, 3, -1, 0],
                            name=strings.intern_many(["k"] * 4))
    t = Trace(source=SourceInfo(path="x", format="kineto"), strings=strings, inputs=InputsTable(), gpu=gpu,
              devices=(DeviceInfo(index=0, name="A"), DeviceInfo(index=3, name="B")))
    assert t.gpu.device.tolist() == [1, 3, 1, 0]
    assert t.notes == ("2 GPU rows name no device (no device id in the export): analysed as GPU 1, an index of their own",)
    again = t.replace(notes=t.notes)
    assert again.notes == t.notes and np.array_equal(again.gpu.device, t.gpu.device)
