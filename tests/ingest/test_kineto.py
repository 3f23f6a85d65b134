"""Kineto reader on hand-built traces with exact answers, plus damaged input."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pytest

from kineto_builder import KinetoBuilder
from traceclass.errors import TraceFormatError
from traceclass.ingest import load
from traceclass.model import ApiKind, CopyKind, GpuKind, MemKind


def _names(trace, codes):
    return [trace.strings[c] for c in codes]


def test_linking_by_external_id_and_exact_times(tmp_path):
    b = KinetoBuilder()
    step = b.step(1, 0, 100_000)
    mm = b.op("aten::mm", 1_000, 20_000, dims=[[64, 128], [128, 32]], types=["float", "float"],
              strides=[[128, 1], [32, 1]], concrete=["", ""])
    b.launch(mm, "ampere_sgemm_64x64_nn", cpu_ts=2_000, gpu_ts=30_000, gpu_dur=7_777)
    t = load(b.write(tmp_path / "t.json"))
    assert len(t.ops) == 1 and len(t.gpu) == 1 and len(t.api) == 1
    k = t.gpu
    assert k.start_ns[0] == 30_000 and k.end_ns[0] == 37_777
    assert k.api[0] == 0 and k.op[0] == 0
    assert t.api.op[0] == 0 and t.api.kind[0] == ApiKind.LAUNCH
    inp = t.inputs[t.ops.inputs[0]]
    assert inp.dims == ((64, 128), (128, 32))
    assert inp.strides == ((128, 1), (32, 1))
    assert inp.dtypes == ("float", "float")
    assert _names(t, t.annotations.name) == ["ProfilerStep#1"]
    assert step > 0


def test_linking_by_time_containment_when_external_id_is_the_correlation(tmp_path):
    # 2023-era Kineto: the runtime event's External id equals its own correlation
    b = KinetoBuilder()
    outer = b.op("aten::linear", 0, 50_000)
    inner = b.op("aten::addmm", 1_000, 40_000)
    corr = b.runtime("cudaLaunchKernel", 5_000, 3_000, ext=None, corr=777)
    b.events[-1]["args"]["External id"] = 777
    b.kernel("gemm", 60_000, 4_000, corr=corr)
    t = load(b.write(tmp_path / "t.json"))
    addmm = _names(t, t.ops.name).index("aten::addmm")
    assert t.api.op[0] == addmm
    assert t.gpu.op[0] == addmm
    assert t.ops.parent[addmm] == _names(t, t.ops.name).index("aten::linear")
    assert outer != inner


def test_epoch_microseconds_keep_their_nanoseconds(tmp_path):
    # float64 cannot hold 1712195495519689.047; the reader parses the text exactly
    raw = (
        '{"schemaVersion": 1, "deviceProperties": [], "traceEvents": ['
        '{"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 1712195495519689.047, "dur": 1.5, '
        '"args": {"External id": 1}},'
        '{"ph": "X", "cat": "cpu_op", "name": "b", "pid": 1, "tid": 1, "ts": 1712195495519689.048, "dur": 0.001, '
        '"args": {"External id": 2}}]}'
    )
    p = tmp_path / "ns.json"
    p.write_text(raw)
    t = load(p)
    assert t.ops.start_ns.tolist() == [1712195495519689047, 1712195495519689048]
    assert t.ops.end_ns.tolist() == [1712195495519690547, 1712195495519689049]


def test_graph_launch_fans_out_and_sync_rows_are_kept_apart(tmp_path):
    b = KinetoBuilder()
    op = b.op("my_graph_replay", 0, 10_000)
    corr = b.runtime("cudaGraphLaunch", 1_000, 2_000, ext=op)
    for i in range(3):
        b.kernel(f"k{i}", 20_000 + i * 1_000, 500, corr=corr)
    b.sync("Stream Sync", 25_000, 100, stream=7)
    t = load(b.write(tmp_path / "g.json"))
    kern = t.gpu.kind == GpuKind.KERNEL
    assert kern.sum() == 3 and (t.gpu.kind == GpuKind.SYNC).sum() == 1
    assert t.gpu.graph[kern].all()
    assert (t.gpu.op[kern] == 0).all()
    assert t.api.kind[0] == ApiKind.GRAPH_LAUNCH


def test_memcpy_names_give_direction_and_memory_kinds(tmp_path):
    b = KinetoBuilder()
    b.memcpy("HtoD", "Pageable", "Device", 0, 1_000, 4096)
    b.memcpy("DtoH", "Device", "Pinned", 2_000, 1_000, 8)
    b.memcpy("DtoD", "Device", "Device", 4_000, 1_000, 16)
    t = load(b.write(tmp_path / "c.json"))
    g = t.gpu
    assert g.copy_kind.tolist() == [CopyKind.HTOD, CopyKind.DTOH, CopyKind.DTOD]
    assert g.src_mem.tolist() == [MemKind.PAGEABLE, MemKind.DEVICE, MemKind.DEVICE]
    assert g.dst_mem.tolist() == [MemKind.DEVICE, MemKind.PINNED, MemKind.DEVICE]
    assert g.bytes.tolist() == [4096, 8, 16]


def test_gzip_and_bare_array_and_thread_names(tmp_path):
    b = KinetoBuilder(gpu_name=None)
    b.op("aten::add", 0, 1_000)
    b.events.append({"ph": "M", "name": "thread_name", "pid": 100, "tid": 100, "args": {"name": "main"}})
    t = load(b.write(tmp_path / "t.json.gz", gz=True))
    assert len(t.ops) == 1
    assert _names(t, t.threads.name) == ["main"]
    arr = tmp_path / "bare.json"
    arr.write_text(json.dumps(b.events))
    t2 = load(arr)
    assert len(t2.ops) == 1 and t2.source.format == "kineto"


def test_invalid_utf8_and_control_characters_are_tolerated(tmp_path):
    b = KinetoBuilder(gpu_name=None)
    b.op("NAME_PLACEHOLDER", 0, 1_000)
    data = json.dumps(b.to_dict()).encode().replace(b"NAME_PLACEHOLDER", b"bad\xff\x01name")
    p = tmp_path / "bad.json"
    p.write_bytes(data)
    t = load(p)
    assert len(t.ops) == 1
    assert "\ufffd" in t.strings[t.ops.name[0]]
    assert any("repaired" in n for n in t.notes)


def test_huge_integer_ids_do_not_crash(tmp_path):
    b = KinetoBuilder()
    b.op("aten::mm", 0, 1_000)
    b.events[-1]["args"]["External id"] = 2**70
    t = load(b.write(tmp_path / "big.json"))
    assert t.ops.external_id[0] >= 0


@pytest.mark.parametrize(
    "content, message",
    [
        (b"", "empty"),
        (b"   \n\t ", "whitespace"),
        (b'{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a", "ts": 1, "dur"', "truncated"),
        (b'{"traceEvents": 5}', "not a list"),
        (b'{"foo": 1}', "traceEvents"),
        (b"\x00\x01\x02binary", "binary"),
    ],
)
def test_bad_inputs_give_one_line_errors(tmp_path, content, message):
    p = tmp_path / "bad.json"
    p.write_bytes(content)
    with pytest.raises(TraceFormatError) as exc:
        load(p)
    text = str(exc.value)
    assert "\n" not in text and str(p) in text and message in text


def test_truncated_gzip_is_reported(tmp_path):
    b = KinetoBuilder()
    for i in range(2000):
        b.op(f"aten::op{i % 7}", i * 1000, 500)
    data = gzip.compress(json.dumps(b.to_dict()).encode())
    p = tmp_path / "cut.json.gz"
    p.write_bytes(data[: len(data) // 2])
    with pytest.raises(TraceFormatError, match="truncated gzip"):
        load(p)


def test_gzip_bomb_is_refused_quickly(tmp_path):
    # 400 MB of JSON whitespace compresses ~1000:1; we stop past 128 MiB at > 250:1
    comp = gzip.compress(b'{"traceEvents": [' + b" " * (400 << 20), compresslevel=9)
    p = tmp_path / "bomb.json.gz"
    p.write_bytes(comp)
    with pytest.raises(TraceFormatError, match="bomb"):
        load(p)


def test_gzip_of_binary_zeros_is_refused_at_once(tmp_path):
    p = tmp_path / "zeros.json.gz"
    p.write_bytes(gzip.compress(b"\x00" * (64 << 20)))
    with pytest.raises(TraceFormatError, match="binary"):
        load(p)


def test_input_file_is_not_modified(tmp_path):
    b = KinetoBuilder()
    b.op("aten::mm", 0, 1_000)
    p = b.write(tmp_path / "t.json")
    before = p.read_bytes()
    mtime = p.stat().st_mtime_ns
    load(p)
    assert p.read_bytes() == before and p.stat().st_mtime_ns == mtime


def test_all_corpus_torch_files_load():
    from conftest import CORPUS

    files = sorted((CORPUS / "torch").glob("*/*.json*"))
    if not files:
        pytest.skip("corpus not available")
    for f in files:
        t = load(f)
        assert t.source.format == "kineto"
        assert len(t.ops) + len(t.gpu) + len(t.api) > 0, f
        # every linked GPU row points at a real API call with the same correlation
        linked = t.gpu.api >= 0
        assert np.all(t.api.correlation[t.gpu.api[linked]] == t.gpu.correlation[linked]), f
