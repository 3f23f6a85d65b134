"""What the nsys reader tells the analysis: NVTX stage projection, emit_nvtx ops, devices."""

from __future__ import annotations

import math

import numpy as np
import pytest

import nsys_fixtures as fx
from traceclass import hardware
from traceclass.analysis import analyze
from traceclass.analysis.devices import FROM_EXPORT, bandwidth_only_spec, resolve_devices
from traceclass.analysis.roofline import MEMORY, UNCLASSIFIED, classify
from traceclass.ingest import load
from traceclass.ingest.nsys import NVTX_OPS, STAGE_PROJECTION
from traceclass.model import DeviceInfo, Vendor


# --------------------------------------------------------------------------- stage projection


def test_nsys_traces_ask_for_same_thread_projection(tmp_path):
    fx.small_kernel_storm_export(tmp_path / "s.sqlite")
    assert load(tmp_path / "s.sqlite").meta[STAGE_PROJECTION] == "same-thread"


def test_nvtx_range_owns_only_its_own_threads_launches(tmp_path):
    exp = fx.two_thread_launch_export(tmp_path / "thr.sqlite")
    t = load(tmp_path / "thr.sqlite")
    assert t.meta["stage_projection"] == "same-thread"
    # the other thread launches GPU work and opens no range: Kineto would treat it as a
    # helper (autograd) thread; NVTX projection never does
    assert set(t.api.tid.tolist()) == {fx.TID, exp["other_tid"]}
    an = analyze(t)
    occ = an.occurrences
    j = occ.names.index(exp["stage"])
    rows = np.flatnonzero(occ.stage == j)
    assert len(rows) == exp["occurrences"]
    assert occ.gpu_busy_ns[rows].tolist() == [exp["own_busy_ns"]] * exp["occurrences"]
    for r in rows:
        assert {t.strings[c] for c in t.gpu.name[occ.gpu_rows[r]]} == {"kernel_main"}
        # the cached row lists are stored narrow: they are held for every rule
        assert occ.gpu_rows[r].dtype == np.int32 and occ.op_rows[r].dtype == np.int32
    st = {s.name: s for s in an.stages}[exp["stage"]]
    assert st.gpu_busy_ns == exp["occurrences"] * exp["own_busy_ns"]


# --------------------------------------------------------------------------- emit_nvtx ops


def test_emit_nvtx_ops_are_marked_and_carry_no_dtypes(tmp_path):
    fx.emit_nvtx_export(tmp_path / "ops.sqlite")
    t = load(tmp_path / "ops.sqlite")
    assert t.meta[NVTX_OPS] is True and NVTX_OPS == "nvtx_ops"
    codes = np.unique(t.ops.inputs[t.ops.inputs >= 0])
    assert len(codes) == 6  # every op with a sizes suffix (aten::resize_ has none)
    for c in codes.tolist():
        inp = t.inputs[c]
        assert len(inp.dtypes) == len(inp.dims) and set(inp.dtypes) == {""}
    # the raw range texts are parsed, not kept: one distinct text per op call would bloat the
    # string table every name predicate scans
    assert not any(", seq = " in s or ", op_id = " in s for s in t.strings.values)
    assert {"aten::addmm", "aten::resize_", "my_stage", "forward"} <= set(t.strings.values)


def test_plain_nvtx_has_no_op_marker(tmp_path):
    fx.nvtx_export(tmp_path / "n.sqlite")
    t = load(tmp_path / "n.sqlite")
    assert len(t.ops) == 0 and NVTX_OPS not in t.meta


def test_many_emit_nvtx_ops_keep_the_string_table_small(tmp_path):
    p = tmp_path / "many.sqlite"
    with fx.NsysExportBuilder(p) as b:
        b.thread("python")
        for i in range(300):
            b.nvtx(1_000 * i, 1_000 * i + 500, fx.emit_nvtx_text("aten::add", i, i + 1, [[4, i % 3 + 1]]))
        b.nvtx(0, 400_000, "outer", domain=0)
    t = load(p)
    assert len(t.ops) == 300 and len(np.unique(t.ops.inputs)) == 3
    assert len(t.strings) < 20
    assert (t.ops.seq == np.arange(300)).all() and (t.ops.external_id == np.arange(1, 301)).all()


# --------------------------------------------------------------------------- devices


ORIN = DeviceInfo(index=0, name="Orin", vendor=Vendor.NVIDIA, memory_bytes=7_990_091_776, sm_count=8,
                  compute_capability="8.7", memory_bandwidth_bps=29_376_000_000.0, clock_hz=1_020_000_000.0)


def test_unknown_device_with_reported_bandwidth_gets_a_memory_roof_only():
    assert hardware.lookup(ORIN.name, sm_count=ORIN.sm_count, memory_bytes=ORIN.memory_bytes) is None
    spec = bandwidth_only_spec(ORIN)
    assert spec.name == spec.label == "Orin (bandwidth from the export)"
    assert spec.memory_bandwidth_bps == 29_376_000_000.0 and dict(spec.peaks) == {}
    assert spec.vendor == "nvidia" and spec.kind == "gpu" and spec.sm_count == 8
    assert "profiler" in spec.sources["memory_bandwidth"]
    for unit in hardware.UNITS:
        for prec in hardware.PRECISIONS:
            assert hardware.peak_flops(spec, prec, unit) is None
            assert hardware.ridge_point(spec, prec, unit) is None
    assert bandwidth_only_spec(DeviceInfo(0, "Mystery GPU", Vendor.NVIDIA)) is None
    assert bandwidth_only_spec(DeviceInfo(0, "x", memory_bandwidth_bps=math.nan)) is None


def test_orin_export_resolves_to_the_partial_spec_and_the_roof_labels_only_memory_work(tmp_path):
    p = tmp_path / "orin.sqlite"
    with fx.NsysExportBuilder(p) as b:
        b.gpu(name="Orin", total_memory=7_990_091_776, bandwidth=29_376_000_000, clock_hz=1_020_000_000,
              sm_count=8, cc=(8, 7))
        b.thread("python")
        b.launch(1_000, 2_000, 3_000, 13_000, "some_kernel")
    t = load(p)
    d = t.devices[0]
    assert (d.sm_count, d.clock_hz, d.memory_bandwidth_bps) == (8, 1_020_000_000, 29_376_000_000)
    rd = resolve_devices(t)[0]
    assert rd.how == FROM_EXPORT and rd.spec.name == "Orin (bandwidth from the export)"
    an = analyze(t)
    fp = an.roof(0, "fp32", "matrix")
    assert fp.peak_flops is None and fp.bandwidth_bps == 29_376_000_000
    assert an.roof(0, "", "link") is None  # no host-link figure either
    # FLOP work: no label; a copy (no FLOPs) is judged against the reported bandwidth
    assert classify(1e9, 1e6, 1e6, fp, latency_floor_ns=0).bound == UNCLASSIFIED
    copy = classify(0.0, 2.9376e7, 2e6, an.roof(0, "", "vector"), latency_floor_ns=0)
    assert copy.bound == MEMORY and copy.pct_of_roof == pytest.approx(50.0)
    # an override still wins, and a known device keeps its datasheet peaks
    assert resolve_devices(t, override="h100-sxm")[0].spec.name == "h100-sxm"


def test_known_device_is_not_replaced_by_the_partial_spec(tmp_path):
    fx.small_kernel_storm_export(tmp_path / "h.sqlite")
    rd = resolve_devices(load(tmp_path / "h.sqlite"))[0]
    assert rd.spec.peaks and rd.how.startswith("detected")


def test_row_index_dtype_is_narrow_until_rows_outgrow_int32():
    from traceclass.model.table import row_index_dtype

    assert row_index_dtype(0) is np.int32
    assert row_index_dtype(2**31 - 1) is np.int32
    assert row_index_dtype(2**31) is np.int64
