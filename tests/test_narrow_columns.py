"""Memory-saving representations that must not change a single answer: id columns held as
int32 when they fit, host unions from the rows not inside another, merge without a sort on
ascending input, device timelines from the cached busy sets."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from conftest import corpus
from kineto_builder import KinetoBuilder
from traceclass import timeline as tl
from traceclass.analysis.gpu_timeline import device_timelines
from traceclass.analysis.kernel_families import gpu_family_codes
from traceclass.facts.core import Facts
from traceclass.facts.host import covering_rows
from traceclass.ingest import kineto
from traceclass.ingest import load
from traceclass.model import ApiCalls, Ops

BIG = 5_000_000_000  # above int32


def test_ids_that_fit_are_int32_and_the_rest_exact_int64():
    t = Ops.build(3, pid=[1, 2, 3], tid=[5, 6, 2**31 - 1], external_id=[1, BIG, -1], start_ns=[0, 1, 2])
    assert t.pid.dtype == np.int32 and t.tid.dtype == np.int32
    assert t.external_id.dtype == np.int64 and t.external_id.tolist() == [1, BIG, -1]
    assert t.seq.dtype == np.int32 and t.seq.tolist() == [-1, -1, -1]  # not given: unknown
    assert t.start_ns.dtype == np.int64  # times are never narrowed
    assert Ops.build(1, pid=[-2**31 - 1]).pid.dtype == np.int64
    joined = Ops.concat([t, Ops.build(1, external_id=[7], pid=[9])])
    assert joined.external_id.dtype == np.int64 and joined.external_id.tolist() == [1, BIG, -1, 7]
    assert joined.pid.dtype == np.int32 and joined.pid.tolist() == [1, 2, 3, 9]
    assert ("pid", "int32 or int64", "") in ApiCalls.describe()
    assert ApiCalls.narrow_columns() == {"pid", "tid", "correlation", "external_id"}


def _trace(tmp_path, pid: int, last_ext: int, last_corr: int):
    b = KinetoBuilder(pid=pid)
    for k in range(3):
        if k == 2:
            b._ext = last_ext - 1
            b._corr = last_corr - 1
        ext = b.op("aten::mm", k * 100_000, 50_000)
        b.launch(ext, f"gemm_{k}", k * 100_000 + 1_000, k * 100_000 + 60_000, 5_000)
    return b.write(tmp_path / "t.json")


@pytest.mark.parametrize("pid,ext,corr", [(100, 3, 1003), (BIG, 3, 1003), (100, BIG, 1003), (100, 3, BIG)])
def test_reader_keeps_ids_exact_when_one_chunk_does_not_fit(tmp_path, monkeypatch, pid, ext, corr):
    monkeypatch.setattr(kineto, "CHUNK_EVENTS", 2)  # the big id lands in a chunk of its own
    t = load(str(_trace(tmp_path, pid, ext, corr)))
    assert t.ops.external_id.tolist() == [1, 2, ext]
    assert t.api.correlation.tolist() == [1001, 1002, corr]
    assert set(t.ops.pid.tolist()) == {pid}
    assert t.ops.pid.dtype == (np.int64 if pid == BIG else np.int32)
    assert t.ops.external_id.dtype == (np.int64 if ext == BIG else np.int32)
    assert t.api.correlation.dtype == (np.int64 if corr == BIG else np.int32)
    # links found through the wide ids as through the narrow ones
    names = [t.strings[int(c)] for c in t.gpu.name]
    assert names == ["gemm_0", "gemm_1", "gemm_2"]
    assert t.gpu.api.tolist() == [0, 1, 2] and t.gpu.op.tolist() == [0, 1, 2] and t.api.op.tolist() == [0, 1, 2]


def test_covering_rows_drop_only_rows_inside_another(tmp_path):
    b = KinetoBuilder()
    outer = b.op("outer", 0, 100_000)
    b.op("inner", 10_000, 40_000)
    b.op("innermost", 20_000, 10_000)
    b.op("first", 200_000, 100_000)
    b.op("overlaps", 250_000, 150_000)  # overlaps "first" without nesting: outlasts its parent
    b.runtime("cudaLaunchKernel", 22_000, 5_000, ext=outer)  # inside its op: dropped
    b.runtime("cudaMalloc", 500_000, 5_000)  # no op: kept
    b.runtime("cudaMemcpyAsync", 150_000, 10_000, ext=outer)  # no op around it in time: kept
    b.runtime("cudaStreamSynchronize", 30_000, 5_000)  # made by "innermost" (ends as it starts), outlasts it: kept
    b.op("other thread", 0, 50_000, tid=200)
    t = load(str(b.write(tmp_path / "t.json")))
    o, f, a = covering_rows(t)
    names = [t.strings[int(t.ops.name[r])] for r in o]
    assert sorted(names) == ["first", "other thread", "outer", "overlaps"]
    assert sorted(t.strings[int(t.api.name[r])] for r in a) == ["cudaMalloc", "cudaMemcpyAsync", "cudaStreamSynchronize"]
    assert len(f) == 0
    hv = Facts(t).host_view
    for k, (p, th) in enumerate(zip(hv.pid.tolist(), hv.tid.tolist())):
        s = np.r_[t.ops.start_ns[(t.ops.pid == p) & (t.ops.tid == th)], t.api.start_ns[(t.api.pid == p) & (t.api.tid == th)]]
        e = np.r_[t.ops.end_ns[(t.ops.pid == p) & (t.ops.tid == th)], t.api.end_ns[(t.api.pid == p) & (t.api.tid == th)]]
        want = tl.merge(s, e)
        assert np.array_equal(hv.busy[k][0], want[0]) and np.array_equal(hv.busy[k][1], want[1])
    main = hv.thread(np.array([100]), np.array([100]))[0]
    assert tl.total(hv.busy[main]) == 100_000 + 200_000 + 10_000 + 5_000  # [0,100) [200,400) [150,160) [500,505) us


def test_merge_of_ascending_starts_equals_the_sorted_path():
    rng = np.random.default_rng(3)
    for n in (1, 2, 50, 5000):
        s = rng.integers(0, 10_000, n)
        e = s + rng.integers(0, 300, n)  # zero-length rows and touching neighbours included
        order = np.argsort(s, kind="stable")
        shuffled = rng.permutation(n)
        a = tl.merge(s[order], e[order])
        b = tl.merge(s[shuffled], e[shuffled])
        assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])
        assert a[0].dtype == np.int64 and (a[0][1:] > a[1][:-1]).all()


@pytest.mark.parametrize("name", ["v100_ns_resolution.json.gz", "a100_nccl_collectives.json.gz"])
def test_device_timelines_from_cached_busy_sets_equal_computing_them(name):
    trace = load(str(corpus("torch", "gpu", name)))
    f = Facts(trace)
    want = device_timelines(trace)
    got = device_timelines(trace, gpu_family_codes(trace), lambda d: (f.gaps(d).busy, (f.gaps(d).start_ns, f.gaps(d).end_ns)))
    assert want and [dataclasses.asdict(x) for x in want] == [dataclasses.asdict(x) for x in got]
    assert f.timelines == want


@pytest.mark.parametrize("block", [1 << 20, 3])
def test_blockwise_reductions_equal_the_whole_array_ones(monkeypatch, block):
    monkeypatch.setattr(tl, "_BLOCK", block)
    rng = np.random.default_rng(9)
    for n in (0, 1, 2, 7, 500):
        s = rng.integers(0, 100_000, n)
        iv = tl.merge(s, s + rng.integers(1, 400, n))
        assert tl.total(iv) == int((iv[1] - iv[0]).sum())
        for lo, hi in ((-5, 10**6), (3_000, 60_000), (50_000, 50_001), (7, 7), (90_000, 10)):
            assert tl.total_within(iv, lo, hi) == (tl.total(tl.clip(iv, lo, hi)) if hi > lo else 0), (n, lo, hi)
        d = iv[1] - iv[0]
        assert tl.longest(iv) == (int(np.argmax(d)) if n else -1)
        q0 = rng.integers(-100, 100_500, 50)
        q1 = q0 + rng.integers(0, 5_000, 50)
        want = [tl.total(tl.clip(iv, int(a), int(b))) for a, b in zip(q0, q1)]
        assert tl.overlap_each(q0, q1, iv).tolist() == want
    ties = (np.array([0, 10, 20, 30]), np.array([5, 12, 25, 35]))  # lengths 5, 2, 5, 5: the first
    assert tl.longest(ties) == 0
    assert tl.union(tl.empty(), ties)[0] is ties[0]  # an empty set adds nothing: no merge


def _merge_reference(s: np.ndarray, e: np.ndarray) -> tuple[list[int], list[int]]:
    """Filter empty intervals, sort, sweep: the textbook union."""
    out: list[list[int]] = []
    for a, b in sorted((int(a), int(b)) for a, b in zip(s, e) if b > a):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return [a for a, _ in out], [b for _, b in out]


@pytest.mark.parametrize("block", [1, 2, 3, 7, 1 << 20])
def test_merge_in_blocks_with_empty_and_inverted_intervals(monkeypatch, block):
    monkeypatch.setattr(tl, "_BLOCK", block)
    rng = np.random.default_rng(block)
    for n in (1, 2, 3, 10, 300):
        for ascending in (True, False):
            s = rng.integers(0, 200, n)
            e = s + rng.integers(-20, 30, n)  # empty and inverted ones, touching ones
            if ascending:
                o = np.argsort(s, kind="stable")
                s, e = s[o], e[o]
            got = tl.merge(s, e)
            want = _merge_reference(s, e)
            assert got[0].tolist() == want[0] and got[1].tolist() == want[1], (n, ascending)
            assert got[0].dtype == np.int64 and got[1].dtype == np.int64
            for p in (0.0, 0.3, 1.0):  # a selection read in place, none and all of it included
                m = rng.random(n) < p
                got = tl.merge(s, e, where=m)
                want = _merge_reference(s[m], e[m])
                assert got[0].tolist() == want[0] and got[1].tolist() == want[1], (n, ascending, p)
    assert tl.merge(np.array([5, 5, 6]), np.array([5, 9, 6]))[0].tolist() == [5]
    assert tl.merge(np.array([3, 3]), np.array([3, 3]))[0].tolist() == []


@pytest.mark.parametrize("block", [1, 3, 1 << 20])
def test_union_length_by_group_in_group_chunks(monkeypatch, block):
    monkeypatch.setattr(tl, "_BLOCK", block)
    rng = np.random.default_rng(13)
    n = 400
    group = rng.choice([5, 9, 2, 40, 41], n, p=[0.6, 0.1, 0.1, 0.1, 0.1]).astype(np.int32)  # one group > a block
    s = rng.integers(0, 10_000, n)
    e = s + rng.integers(0, 300, n)
    g, length = tl.union_length_by_group(group, s, e)
    assert g.tolist() == [2, 5, 9, 40, 41]
    assert length.tolist() == [tl.total(tl.merge(s[group == k], e[group == k])) for k in g.tolist()]


def test_owner_times_hold_only_owners_and_answer_zero_elsewhere():
    from traceclass.analysis.ops import OwnerTimes

    dense = np.array([0, 5, 0, 0, 7, 0, 9], dtype=np.int64)
    ot = OwnerTimes.from_column(dense)
    assert ot.rows.tolist() == [1, 4, 6] and ot.rows.dtype == np.int32 and ot.ns.tolist() == [5, 7, 9]
    q = np.array([6, 0, 1, 3, 4, 2, 5, 6])
    assert ot.of(q).tolist() == dense[q].tolist()
    assert OwnerTimes.from_column(np.zeros(0, np.int64)).of(np.array([0, 3])).tolist() == [0, 0]
    v100 = Facts(load(str(corpus("torch", "gpu", "v100_ns_resolution.json.gz")))).ops
    assert len(v100.owner_time.rows) > 100 and (v100.owner_time.ns > 0).all()
    assert (v100.owner_of_op[v100.owner_time.rows] == v100.owner_time.rows).all()  # owners only
