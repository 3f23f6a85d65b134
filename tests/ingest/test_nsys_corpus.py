"""nsys reader on every real export of the corpus, checked against independent SQL.

The expected figures come from SQL written here against the file itself, not from the
reader's code; the file's bytes must not change.
"""

from __future__ import annotations

import hashlib
import re
import sqlite3
import urllib.parse
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from conftest import CORPUS
from traceclass.ingest import load
from traceclass.model import ApiKind, GpuKind

NSYS = CORPUS / "nsys"
FILES = sorted(p.name for p in NSYS.glob("*.sqlite")) if NSYS.is_dir() else []

#: Device names as TARGET_INFO_GPU / TARGET_INFO_CUDA_GPU spell them (nsys-sqlite.md section 10)
GPU_NAMES = {
    "CO18326_uvmTorch__report1.sqlite": ["NVIDIA RTX A5000"],
    "MohanadOdema_DLProf__nsys_profile.sqlite": ["NVIDIA GeForce RTX 2070 SUPER"],
    "SamuelAmsih_CUDA__report14.sqlite": ["Orin"],
    "annikola_cuda_bitonic_sort__report1.sqlite": ["NVIDIA GeForce GTX 1050"],
    "generated_nvtx_py0217_2022_4_no_ranges.sqlite": [],
    "generated_nvtx_py028_2022_4.sqlite": [],
    "lockfuehrer_beast__report1_a.sqlite": ["Tesla V100-PCIE-32GB", "Tesla V100-PCIE-32GB"],
    "lockfuehrer_beast__report1_b.sqlite": ["Tesla V100-PCIE-32GB", "Tesla V100-PCIE-32GB"],
    "lsaeteurn_vectoraddition__report1.sqlite": ["NVIDIA A100-SXM4-40GB"],
    "martisu_kmeans__report2.sqlite": ["NVIDIA GeForce RTX 3080"],
    "p4arth_cuda-perf-sandbox__report1.sqlite": ["NVIDIA GeForce RTX 3060"],
}
#: Product version per file; "" where the export records none (2020.x)
VERSIONS = {
    "CO18326_uvmTorch__report1.sqlite": "2025.3.2.367",
    "MohanadOdema_DLProf__nsys_profile.sqlite": "2022.1.3.3",
    "SamuelAmsih_CUDA__report14.sqlite": "2024.5.4.34",
    "annikola_cuda_bitonic_sort__report1.sqlite": "2024.5.1.113",
    "generated_nvtx_py0217_2022_4_no_ranges.sqlite": "2022.4.2.1",
    "generated_nvtx_py028_2022_4.sqlite": "2022.4.2.1",
    "lockfuehrer_beast__report1_a.sqlite": "",
    "lockfuehrer_beast__report1_b.sqlite": "",
    "lsaeteurn_vectoraddition__report1.sqlite": "2022.2.1.31",
    "martisu_kmeans__report2.sqlite": "",
    "p4arth_cuda-perf-sandbox__report1.sqlite": "2025.5.2.266",
}
HOST_SYNC_APIS = (
    "cudaDeviceSynchronize", "cudaStreamSynchronize", "cudaEventSynchronize",
    "cudaThreadSynchronize", "cuCtxSynchronize", "cuStreamSynchronize", "cuEventSynchronize",
)
SYNC_KINDS = (ApiKind.SYNC_DEVICE, ApiKind.SYNC_STREAM, ApiKind.SYNC_EVENT)

pytestmark = pytest.mark.skipif(not FILES, reason="nsys corpus not available")


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _ro(path: Path) -> sqlite3.Connection:
    con = sqlite3.connect(f"file:{urllib.parse.quote(str(path))}?mode=ro", uri=True)
    con.text_factory = bytes
    return con


def _tables(con: sqlite3.Connection) -> set[str]:
    return {r[0].decode() for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}


def test_corpus_is_the_documented_one():
    assert set(FILES) == set(GPU_NAMES), "corpus changed: update GPU_NAMES/VERSIONS"


@pytest.fixture(scope="module")
def loaded():
    cache = {}

    def get(name: str):
        if name not in cache:
            path = NSYS / name
            before = _sha256(path)
            trace = load(path)
            cache[name] = (trace, before, _sha256(path))
        return cache[name]

    return get


@pytest.mark.parametrize("name", FILES)
def test_file_unchanged_and_versions(name, loaded):
    trace, before, after = loaded(name)
    assert before == after
    assert trace.source.format == "nsys-sqlite"
    assert trace.meta["nsys.product_version"] == VERSIONS[name] or (
        VERSIONS[name] == "" and trace.meta["nsys.version_source"] == "schema features"
    )
    if VERSIONS[name]:
        assert trace.source.producer == f"Nsight Systems {VERSIONS[name]}"
        assert re.fullmatch(r"\d+\.\d+\.\d+", trace.source.format_version)
    assert trace.source.size_bytes == (NSYS / name).stat().st_size


@pytest.mark.parametrize("name", FILES)
def test_gpu_names(name, loaded):
    trace, _, _ = loaded(name)
    assert [d.name for d in trace.devices] == GPU_NAMES[name]


@pytest.mark.parametrize("name", FILES)
def test_kernels_match_sql(name, loaded):
    trace, _, _ = loaded(name)
    con = _ro(NSYS / name)
    k = trace.gpu.kind == GpuKind.KERNEL
    if "CUPTI_ACTIVITY_KIND_KERNEL" in _tables(con):
        n, total = con.execute(
            "SELECT count(*), coalesce(sum(end - start), 0) FROM CUPTI_ACTIVITY_KIND_KERNEL"
        ).fetchone()
        names = Counter(
            v.decode() for (v,) in con.execute(
                "SELECT s.value FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.shortName"
            )
        )
        assert "gpu" in trace.captured
    else:
        n, total, names = 0, 0, Counter()
        assert any("kernel table absent" in note for note in trace.notes)
    assert int(k.sum()) == n
    assert int((trace.gpu.end_ns[k] - trace.gpu.start_ns[k]).sum()) == total
    assert Counter(trace.strings[c] for c in trace.gpu.name[k]) == names


@pytest.mark.parametrize("name", FILES)
def test_memcpy_match_sql(name, loaded):
    trace, _, _ = loaded(name)
    con = _ro(NSYS / name)
    m = trace.gpu.kind == GpuKind.MEMCPY
    got = Counter()
    got_bytes = Counter()
    for ck, b in zip(trace.gpu.copy_kind[m].tolist(), trace.gpu.bytes[m].tolist()):
        got[ck] += 1
        got_bytes[ck] += b
    pageable = int(
        (np.isin(trace.gpu.copy_kind, [1, 2]) & ((trace.gpu.src_mem == 0) | (trace.gpu.dst_mem == 0)) & m).sum()
    )
    if "CUPTI_ACTIVITY_KIND_MEMCPY" in _tables(con):
        rows = con.execute(
            "SELECT copyKind, count(*), sum(bytes) FROM CUPTI_ACTIVITY_KIND_MEMCPY GROUP BY copyKind"
        ).fetchall()
        want = Counter({ck: c for ck, c, _ in rows})
        want_bytes = Counter({ck: b for ck, _, b in rows})
        (want_pageable,) = con.execute(
            "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_MEMCPY "
            "WHERE copyKind IN (1, 2) AND (srcKind = 0 OR dstKind = 0)"
        ).fetchone()
    else:
        want, want_bytes, want_pageable = Counter(), Counter(), 0
    assert got == want
    assert got_bytes == want_bytes
    assert pageable == want_pageable


@pytest.mark.parametrize("name", FILES)
def test_sync_api_calls_match_sql(name, loaded):
    trace, _, _ = loaded(name)
    con = _ro(NSYS / name)
    want = Counter()
    if "CUPTI_ACTIVITY_KIND_RUNTIME" in _tables(con):
        for (v,) in con.execute(
            "SELECT s.value FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s ON s.id = r.nameId"
        ):
            base = re.sub(r"_v\d{4,}$", "", v.decode())
            if base in HOST_SYNC_APIS:
                want[base] += 1
    is_sync = np.isin(trace.api.kind, [int(k) for k in SYNC_KINDS])
    got = Counter(trace.strings[c] for c in trace.api.name[is_sync])
    assert got == want


@pytest.mark.parametrize("name", FILES)
def test_nvtx_ranges_match_sql(name, loaded):
    trace, _, _ = loaded(name)
    con = _ro(NSYS / name)
    if "NVTX_EVENTS" in _tables(con):
        (want,) = con.execute(
            "SELECT count(*) FROM NVTX_EVENTS WHERE eventType IN (59, 60, 70)"
        ).fetchone()
        assert "annotations" in trace.captured
    else:
        want = 0
        assert "annotations" not in trace.captured
    assert len(trace.annotations) + len(trace.ops) == want


@pytest.mark.parametrize("name", FILES)
def test_gpu_rows_link_to_their_api_call(name, loaded):
    trace, _, _ = loaded(name)
    g, api = trace.gpu, trace.api
    has = g.api >= 0
    assert (g.correlation[has] == api.correlation[g.api[has]]).all()
    # every GPU row whose correlation id exists among the API calls found its call
    con = _ro(NSYS / name)
    if "CUPTI_ACTIVITY_KIND_RUNTIME" in _tables(con) and len(g):
        corr = {c for (c,) in con.execute("SELECT correlationId FROM CUPTI_ACTIVITY_KIND_RUNTIME")}
        expect = np.array([c in corr and c > 0 for c in g.correlation.tolist()])
        assert (has == expect).all()


def test_reference_facts(loaded):
    """Figures quoted in nsys-sqlite.md, as a second, human-written check."""
    t, _, _ = loaded("SamuelAmsih_CUDA__report14.sqlite")
    kinds = Counter(t.gpu.kind.tolist())
    assert kinds[GpuKind.KERNEL] == 2604 and kinds[GpuKind.MEMCPY] == 1301
    assert kinds[GpuKind.MEMSET] == 651 and kinds[GpuKind.SYNC] == 651
    sync_rows = t.gpu.kind == GpuKind.SYNC
    assert {t.strings[c] for c in t.gpu.name[sync_rows]} == {"Context Sync"}
    assert len(t.api) == 8243
    assert t.devices[0].memory_bandwidth_bps == 29_376_000_000
    assert t.devices[0].sm_count == 8 and t.devices[0].compute_capability == "8.7"
    assert t.devices[0].clock_hz == 1_020_000_000  # TARGET_INFO_GPU.clockRate: Hz

    t, _, _ = loaded("lockfuehrer_beast__report1_b.sqlite")
    assert Counter(t.strings[c] for c in t.api.name)["cuStreamSynchronize"] == 2256
    assert t.devices[0].memory_bytes == 32510 << 20  # 2020.3 stores MiB
    # TARGET_INFO_CUDA_GPU only: kHz clock, SM count; a bandwidth of 0 is "not reported"
    assert [(d.clock_hz, d.sm_count, d.memory_bandwidth_bps) for d in t.devices] == [(1.38e9, 80, None)] * 2
    assert t.meta["nsys.version_source"] == "schema features"

    t, _, _ = loaded("martisu_kmeans__report2.sqlite")
    assert t.devices[0].memory_bandwidth_bps == 760_080_000 * 1000  # CUPTI kB/s
    assert t.devices[0].clock_hz == 1_740_000 * 1000  # CUPTI kHz
    assert t.meta["nsys.product_version"] == "2020.5"

    t, _, _ = loaded("lsaeteurn_vectoraddition__report1.sqlite")
    m = t.gpu.kind == GpuKind.MEMCPY
    assert Counter(t.gpu.copy_kind[m].tolist()) == {11: 3072, 12: 1536}
    assert set(t.gpu.src_mem[m].tolist()) == {7} and set(t.gpu.dst_mem[m].tolist()) == {7}


def test_nvtx_fixture_py028(loaded):
    t, _, _ = loaded("generated_nvtx_py028_2022_4.sqlite")
    names = sorted(t.strings[c] for c in t.annotations.name)
    assert names == sorted(
        ["outer", "decorated_fn", "manual_push", "traceclass:inner_dom", "cross_thread_startend",
         "traceclass:worker_0", "traceclass:worker_1"]  # the workers use domain 1 too
    )
    assert len(t.ops) == 0
    by = {t.strings[c]: i for i, c in enumerate(t.annotations.name)}
    assert t.annotations.parent[by["decorated_fn"]] == by["outer"]
    # worker threads are 20203 and 20204 (globalTid 281813809385195/196) in process 20196
    assert t.annotations.pid[by["traceclass:worker_0"]] == 20196
    assert t.annotations.tid[by["traceclass:worker_0"]] == 20203
    assert t.annotations.tid[by["traceclass:worker_1"]] == 20204


def test_nvtx_only_domain_rows_warns(loaded):
    t, _, _ = loaded("generated_nvtx_py0217_2022_4_no_ranges.sqlite")
    assert len(t.annotations) == 0 and "annotations" in t.captured
    assert any(n.startswith("NVTX was captured but recorded no ranges (known with nvtx 0.2.17 + nsys 2022.4")
               for n in t.notes)


def test_dlprof_emit_nvtx_ranges_become_ops(loaded):
    """The DLProf export holds real torch 1.x emit_nvtx ranges beside pyprof dict texts."""
    t, _, _ = loaded("MohanadOdema_DLProf__nsys_profile.sqlite")
    con = _ro(NSYS / "MohanadOdema_DLProf__nsys_profile.sqlite")
    (aten,) = con.execute("SELECT count(*) FROM NVTX_EVENTS WHERE text LIKE 'aten::%'").fetchone()
    assert len(t.ops) == aten == 27
    assert "ops" in t.captured
    assert all(t.strings[c].startswith("{") for c in t.annotations.name)
    ops = {t.strings[c] for c in t.ops.name}
    assert {"aten::conv2d", "aten::addmm", "aten::resize_"} <= ops
    # kernels launched inside ops are attributed through their launch call
    assert (t.gpu.op[t.gpu.kind == GpuKind.KERNEL] >= 0).any()


def test_cpu_samples(loaded):
    t, _, _ = loaded("p4arth_cuda-perf-sandbox__report1.sqlite")
    con = _ro(NSYS / "p4arth_cuda-perf-sandbox__report1.sqlite")
    (n,) = con.execute("SELECT count(*) FROM COMPOSITE_EVENTS").fetchone()
    (with_stack,) = con.execute(
        "SELECT count(DISTINCT id) FROM SAMPLING_CALLCHAINS WHERE id IN (SELECT id FROM COMPOSITE_EVENTS)"
    ).fetchone()
    assert "samples" in t.captured
    assert len(t.samples) == n
    assert int((t.samples.node >= 0).sum()) == with_stack
    # the leaf frame of sample 4 is its stackDepth 0 symbol; the root its deepest
    leaf_sym, = con.execute(
        "SELECT s.value FROM SAMPLING_CALLCHAINS c JOIN StringIds s ON s.id = c.symbol "
        "WHERE c.id = 4 AND c.stackDepth = 0").fetchone()
    root_sym, = con.execute(
        "SELECT s.value FROM SAMPLING_CALLCHAINS c JOIN StringIds s ON s.id = c.symbol "
        "WHERE c.id = 4 ORDER BY c.stackDepth DESC LIMIT 1").fetchone()
    (start,) = con.execute("SELECT start FROM COMPOSITE_EVENTS WHERE id = 4").fetchone()
    row = int(np.flatnonzero(t.samples.ts_ns == start)[0])
    node = int(t.samples.node[row])
    assert t.strings[t.frames.function[t.stacks.frame[node]]] == leaf_sym.decode()
    while t.stacks.parent[node] >= 0:
        node = int(t.stacks.parent[node])
    assert t.strings[t.frames.function[t.stacks.frame[node]]] == root_sym.decode()
    assert t.threads.name[t.samples.thread[row]] >= 0
