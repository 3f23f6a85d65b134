"""nsys reader on hand-built exports (real table and column names) with exact answers."""

from __future__ import annotations

import numpy as np
import pytest

import nsys_fixtures as fx
from traceclass.ingest import load
from traceclass.ingest.nsys import read_nsys_sqlite
from traceclass.ingest.nsys_nvtx import parse_emit_nvtx, parse_sizes
from traceclass.model import AnnotationKind, ApiKind, CopyKind, GpuKind, MemKind


def _names(trace, codes):
    return [trace.strings[int(c)] for c in codes]


@pytest.mark.parametrize("version", ["2024.5", "2025.5"])
def test_small_kernel_storm(tmp_path, version):
    exp = fx.small_kernel_storm_export(tmp_path / "storm.sqlite", version=version)
    t = load(tmp_path / "storm.sqlite")
    g = t.gpu
    assert len(g) == exp["kernels"] == 200
    assert (g.kind == GpuKind.KERNEL).all()
    assert g.start_ns[0] == exp["first_start"] and g.end_ns[-1] == exp["last_end"]
    assert (g.end_ns - g.start_ns == exp["kernel_ns"]).all()
    assert (g.start_ns[1:] - g.end_ns[:-1] == exp["gap_ns"]).all()
    assert int((g.end_ns - g.start_ns).sum()) == exp["total_kernel_ns"]
    assert set(_names(t, g.name)) == {"vectorized_elementwise_kernel"}
    assert set(_names(t, g.full_name)) == {fx.ELEMENTWISE_DEMANGLED}
    assert (g.grid == 4).all() and (g.block == 128).all() and (g.registers == 32).all()
    assert (g.stream == 7).all() and (g.device == 0).all() and not g.graph.any()
    # each kernel is linked to its own launch, which ends 2 us before the kernel starts
    assert (g.api == np.arange(200)).all()
    assert (t.api.correlation[g.api] == g.correlation).all()
    assert (g.start_ns - t.api.end_ns[g.api] == 2_000).all()
    assert set(_names(t, t.api.name)) == {"cudaLaunchKernel"}
    assert (t.api.kind == ApiKind.LAUNCH).all()
    assert (t.api.pid == fx.PID).all() and (t.api.tid == fx.TID).all()
    assert t.window == (exp["first_start"] - 100_000, exp["first_start"] + 200 * 10_000 + 100_000)
    assert t.source.producer == f"Nsight Systems {fx.VERSIONS[version][0]}"
    assert t.source.format_version == fx.VERSIONS[version][1]
    assert t.captured == frozenset({"gpu", "api"})
    d = t.devices[0]
    assert (d.index, d.name, d.sm_count, d.compute_capability) == (0, "NVIDIA H100 80GB HBM3", 132, "9.0")
    assert d.memory_bandwidth_bps == 3_352_320_000_000 and d.clock_hz == 1_980_000_000
    assert d.memory_bytes == 85_028_224_000
    assert _names(t, t.threads.name) == ["python"]


def test_launch_gap_with_stream_sync(tmp_path):
    exp = fx.launch_gap_with_sync_export(tmp_path / "gap.sqlite")
    t = load(tmp_path / "gap.sqlite")
    g, api = t.gpu, t.api
    k = np.flatnonzero(g.kind == GpuKind.KERNEL)
    assert _names(t, g.name[k]) == ["gemm_a", "gemm_b"]
    assert g.start_ns[k[1]] - g.end_ns[k[0]] == exp["gap_ns"] == 2_010_000
    a = k[0]
    assert g.grid[a] == 128 and g.block[a] == 256 and g.registers[a] == 128
    assert g.shared_mem[a] == 16_384 + 32_768
    assert t.strings[g.full_name[a]] == fx.SGEMM_DEMANGLED
    assert g.full_name[k[1]] == -1  # demangled name equals the short one
    # the host sync is an API call of kind SYNC_STREAM, and the GPU-side record links to it
    s = np.flatnonzero(api.kind == ApiKind.SYNC_STREAM)
    assert len(s) == 1 and t.strings[api.name[s[0]]] == "cudaStreamSynchronize"
    assert (api.start_ns[s[0]], api.end_ns[s[0]]) == exp["sync_api"]
    sync = np.flatnonzero(g.kind == GpuKind.SYNC)
    assert len(sync) == 1 and g.api[sync[0]] == s[0]
    assert t.strings[g.name[sync[0]]] == "Stream Sync"
    assert g.correlation[sync[0]] == exp["corr_sync"]
    assert api.correlation[g.api[k]].tolist() == [exp["corr_a"], exp["corr_b"]]


def test_sync_name_follows_the_api_not_sync_type(tmp_path):
    """syncType 1 meant device sync in 2022.1 and event sync in 2024.5: the API decides."""
    p = tmp_path / "s.sqlite"
    with fx.NsysExportBuilder(p) as b:
        for i, (api, _label) in enumerate([("cudaDeviceSynchronize_v3020", "Context Sync"),
                                         ("cudaEventSynchronize_v3020", "Event Sync"),
                                         ("cudaStreamWaitEvent_v3020", "Stream Wait Event"),
                                         ("cuStreamSynchronize", "Stream Sync")]):
            c = b.runtime(1_000 + i * 100, 1_050 + i * 100, api)
            b.sync(1_000 + i * 100, 1_050 + i * 100, c, sync_type=1)
        b.sync(2_000, 2_010, 999, sync_type=1)  # no API call with that correlation
    t = load(p)
    assert _names(t, t.gpu.name) == ["Context Sync", "Event Sync", "Stream Wait Event",
                                     "Stream Sync", "Synchronization"]
    assert t.gpu.api.tolist() == [0, 1, 2, 3, -1]
    assert t.api.kind.tolist() == [ApiKind.SYNC_DEVICE, ApiKind.SYNC_EVENT, ApiKind.STREAM_WAIT,
                                   ApiKind.SYNC_STREAM]


def test_pageable_copies(tmp_path):
    exp = fx.pageable_copies_export(tmp_path / "copies.sqlite")
    t = load(tmp_path / "copies.sqlite")
    g = t.gpu
    m = g.kind == GpuKind.MEMCPY
    assert int(m.sum()) == exp["memcpy"]
    pageable = np.isin(g.copy_kind, [CopyKind.HTOD, CopyKind.DTOH]) & (
        (g.src_mem == MemKind.PAGEABLE) | (g.dst_mem == MemKind.PAGEABLE)) & m
    assert int(pageable.sum()) == exp["pageable"]
    for ck, nbytes in exp["bytes_by_kind"].items():
        assert int(g.bytes[m & (g.copy_kind == ck)].sum()) == nbytes
    assert _names(t, g.name[m]) == ["Memcpy HtoD (Pageable -> Device)"] * 4 + [
        "Memcpy DtoH (Device -> Pageable)", "Memcpy HtoD (Pinned -> Device)"]
    assert (g.end_ns[pageable] - g.start_ns[pageable] == exp["copy_ns"]).all()
    # the blocking copies run inside their cudaMemcpy call
    api = t.api
    assert (api.kind[g.api[pageable]] == ApiKind.MEMCPY_SYNC).all()
    assert (api.start_ns[g.api[pageable]] < g.start_ns[pageable]).all()
    assert (api.end_ns[g.api[pageable]] > g.end_ns[pageable]).all()
    ms = np.flatnonzero(g.kind == GpuKind.MEMSET)
    assert len(ms) == exp["memset"] and g.dst_mem[ms[0]] == MemKind.DEVICE
    assert g.bytes[ms[0]] == 1 << 20 and t.strings[g.name[ms[0]]] == "Memset (Device)"
    assert api.kind[g.api[ms[0]]] == ApiKind.MEMSET_ASYNC
    assert any("kernel table absent" in n for n in t.notes)


def test_nvtx_ranges_domains_and_open_range(tmp_path):
    exp = fx.nvtx_export(tmp_path / "nvtx.sqlite")
    t = load(tmp_path / "nvtx.sqlite")
    a = t.annotations
    got = {t.strings[c]: (int(s), int(e), int(tid)) for c, s, e, tid in
           zip(a.name, a.start_ns, a.end_ns, a.tid)}
    assert got == exp["ranges"]
    assert len(t.ops) == 0 and "ops" not in t.captured and "annotations" in t.captured
    by = {t.strings[c]: i for i, c in enumerate(a.name)}
    assert a.kind[by["ProfilerStep#3"]] == AnnotationKind.STEP
    assert a.kind[by["outer"]] == AnnotationKind.USER
    assert a.parent[by["inner"]] == by["outer"]
    assert a.parent[by["traceclass:inner_dom"]] == by["inner"]
    assert a.depth[by["traceclass:inner_dom"]] == 2
    assert a.parent[by["ProfilerStep#3"]] == -1
    # the launch inside the ranges is attributed to the innermost one
    assert t.strings[a.name[t.api.annotation[0]]] == exp["launch_annotation"]
    assert any("1 NVTX ranges were still open" in n for n in t.notes)
    assert t.meta["event_counts"]["nvtx_marks"] == 1
    assert t.window == exp["window"]
    assert sorted(_names(t, t.threads.name)) == ["python", "worker"]


def test_emit_nvtx_ops(tmp_path):
    exp = fx.emit_nvtx_export(tmp_path / "ops.sqlite")
    t = load(tmp_path / "ops.sqlite")
    ops = t.ops
    names = _names(t, ops.name)
    assert sorted(names) == sorted(exp["ops"])
    assert sorted(_names(t, t.annotations.name)) == sorted(exp["annotations"])
    assert {"ops", "shapes", "annotations"} <= t.captured
    by = {n: i for i, n in enumerate(names)}
    for name, want in exp["ops"].items():
        i = by[name]
        assert ops.seq[i] == want["seq"], name
        assert ops.external_id[i] == want["op_id"], name
        inp = t.inputs[int(ops.inputs[i])]
        if want["dims"] is None:
            assert inp is None, name
        else:
            assert inp.dims == want["dims"], name
            assert inp.dtypes == ("",) * len(want["dims"])  # NVTX carries no dtypes
        parent = want["parent"]
        assert ops.parent[i] == (by[parent] if parent else -1), name
        assert ops.pid[i] == fx.PID and ops.tid[i] == fx.TID
    # kernels -> launch call -> enclosing op
    g = t.gpu
    for corr, op_name in exp["kernel_op"].items():
        row = int(np.flatnonzero(g.correlation == corr)[0])
        assert g.api[row] >= 0
        assert t.api.op[g.api[row]] == g.op[row] == by[op_name]
    # the launch calls sit in the "forward" annotation (inside "my_stage")
    assert set(_names(t, t.annotations.name[t.api.annotation])) == {"forward"}


def test_graph_launch_and_graph_nodes(tmp_path):
    p = tmp_path / "graph.sqlite"
    with fx.NsysExportBuilder(p, "2025.5") as b:
        c = b.runtime(1_000, 2_000, "cudaGraphLaunch_v10000")
        for i in range(3):
            b.kernel(3_000 + i * 1_000, 3_500 + i * 1_000, f"node{i}", c, graph_node=100 + i)
        b.launch(10_000, 10_500, 11_000, 11_200, "plain")
    t = load(p)
    g = t.gpu
    assert g.graph.tolist() == [True, True, True, False]
    assert g.api.tolist() == [0, 0, 0, 1]
    assert t.api.kind[0] == ApiKind.GRAPH_LAUNCH


def test_correlation_is_joined_within_the_process(tmp_path):
    """Two processes reuse correlation ids; each kernel must find its own process's call."""
    p = tmp_path / "mp.sqlite"
    with fx.NsysExportBuilder(p) as b:
        b.runtime(1_000, 1_100, "cudaLaunchKernel_v7000", 1, pid=100, tid=100)
        b.runtime(1_000, 1_200, "cudaLaunchKernel_v7000", 1, pid=200, tid=201)
        b.kernel(5_000, 6_000, "k200", 1, pid=200)
        b.kernel(2_000, 3_000, "k100", 1, pid=100)
        b.kernel(7_000, 8_000, "orphan", 0, pid=100)  # correlation 0: none
    t = load(p)
    g, api = t.gpu, t.api
    assert _names(t, g.name) == ["k100", "k200", "orphan"]
    assert api.pid[g.api[0]] == 100 and api.pid[g.api[1]] == 200 and api.tid[g.api[1]] == 201
    assert g.api[2] == -1


def test_strings_with_invalid_utf8_load(tmp_path):
    p = tmp_path / "bad_utf8.sqlite"
    with fx.NsysExportBuilder(p) as b:
        c = b.runtime(1_000, 2_000, "cudaLaunchKernel_v7000")
        b.kernel(3_000, 4_000, b"kern\xff\xfe_\xc3(", c)
        b.nvtx(500, 5_000, b"range\xff")
    t = load(p)
    assert t.strings[t.gpu.name[0]] == "kern\ufffd\ufffd_\ufffd("
    assert t.strings[t.annotations.name[0]] == "range\ufffd"


def test_missing_optional_columns_read_as_unknown(tmp_path):
    """Third-party tools and old versions change column sets: select by name, fill the rest."""
    import sqlite3

    p = tmp_path / "narrow.sqlite"
    con = sqlite3.connect(p)
    con.executescript(
        "CREATE TABLE StringIds (id INTEGER NOT NULL PRIMARY KEY, value TEXT NOT NULL);"
        "INSERT INTO StringIds VALUES (1, 'k'), (2, 'cuLaunchKernel');"
        "CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER NOT NULL, end INTEGER NOT NULL,"
        " correlationId INTEGER, shortName INTEGER NOT NULL, extra_tool_column TEXT);"
        "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (100, 250, 7, 1, 'x');"
        "CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INTEGER NOT NULL, end INTEGER NOT NULL,"
        " globalTid INTEGER, correlationId INTEGER, nameId INTEGER NOT NULL);"
        "INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (10, 20, NULL, 7, 2);"
    )
    con.commit()
    con.close()
    t = read_nsys_sqlite(p)
    g = t.gpu
    assert (g.start_ns[0], g.end_ns[0]) == (100, 250)
    assert g.stream[0] == -1 and g.grid[0] == -1 and g.full_name[0] == -1
    # no deviceId: an index of its own, never the host CPU's -1
    assert g.device[0] == 0 and t.notes[-1] == \
        "1 GPU row names no device (no device id in the export): analysed as GPU 0, an index of their own"
    assert g.api[0] == 0  # no globalPid: the correlation decides (one process)
    assert t.api.pid[0] == -1 and t.strings[t.api.name[0]] == "cuLaunchKernel"
    assert t.meta["nsys.version_source"] == "schema features"


def test_large_table_is_read_in_chunks(tmp_path, monkeypatch):
    """The chunked group_concat path gives the same columns as one pass."""
    from traceclass.ingest import nsys_schema

    exp = fx.small_kernel_storm_export(tmp_path / "storm.sqlite", n=50)
    whole = load(tmp_path / "storm.sqlite")
    monkeypatch.setattr(nsys_schema, "CHUNK_ROWS", 7)
    chunked = load(tmp_path / "storm.sqlite")
    assert len(chunked.gpu) == exp["kernels"]
    for col in ("start_ns", "end_ns", "correlation", "api", "name"):
        assert (getattr(whole.gpu, col) == getattr(chunked.gpu, col)).all()


def test_progress_is_reported(tmp_path):
    fx.small_kernel_storm_export(tmp_path / "storm.sqlite", n=5)
    seen = []
    load(tmp_path / "storm.sqlite", progress=lambda phase, done, total: seen.append((phase, done, total)))
    assert seen and all(0 <= d <= tot for _, d, tot in seen)
    assert any("CUPTI_ACTIVITY_KIND_KERNEL" in ph for ph, _, _ in seen)


# --------------------------------------------------------------------------- emit_nvtx text


def test_parse_emit_nvtx_forms():
    p = parse_emit_nvtx("aten::addmm, seq = 12, sizes = [[64, 128], [128, 32]]")
    assert (p.name, p.seq, p.op_id, p.sizes, p.is_op) == (
        "aten::addmm", 12, -1, "[[64, 128], [128, 32]]", True)
    p = parse_emit_nvtx("aten::mul, seq = 3")
    assert (p.name, p.seq, p.sizes, p.is_op) == ("aten::mul", 3, None, True)
    p = parse_emit_nvtx(fx.emit_nvtx_text("aten::cat", 5, 77, [[2, 3], [4, 3], []], [(70, 0), (71, 0), (0, -1)]))
    assert (p.name, p.seq, p.op_id, p.sizes) == ("aten::cat", 5, 77, "[[2, 3], [4, 3], []]")
    p = parse_emit_nvtx("AddmmBackward0, seq = 12, op_id = 90")
    assert p.is_op and p.name == "AddmmBackward0"
    p = parse_emit_nvtx("ProfilerStep#2, op_id = 4")  # record_function scope: not an op
    assert p.name == "ProfilerStep#2" and not p.is_op
    for text in ("forward", "x, seq = abc", "{'mod': 'Tensor', 'op': 'add'}", "a, b", ""):
        assert parse_emit_nvtx(text) is None


def test_parse_sizes():
    inp = parse_sizes("[[32], [64, 128], [128, 32], [], []]")
    assert inp.dims == ((32,), (64, 128), (128, 32), None, None)
    assert inp.dtypes == ("",) * 5
    assert parse_sizes("[oops") is None
    assert parse_sizes("[1, 2]") is None


def test_open_range_without_window_ends_at_last_timestamp(tmp_path):
    p = tmp_path / "open.sqlite"
    with fx.NsysExportBuilder(p) as b:  # no ANALYSIS_DETAILS, no CUDA rows
        b.nvtx(1_000, None, "open")
        b.nvtx(2_000, 9_000, "closed")
    t = load(p)
    assert t.window is None
    got = {t.strings[c]: (int(s), int(e)) for c, s, e in
           zip(t.annotations.name, t.annotations.start_ns, t.annotations.end_ns)}
    assert got == {"open": (1_000, 9_000), "closed": (2_000, 9_000)}
