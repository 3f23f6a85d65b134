"""Large Kineto files, plain or gzip, are read by several processes (ingest/kineto.py
``_split_at``): this one up to an event near the first split point, a forked helper from each
split point to the next. The trace must be the one a
single reader builds, column for column and string code for string code, whatever the split
point and however the file is cut into runs; a split point that is not an event's start, or
a helper that cannot read its part, must fall back to reading here."""

from __future__ import annotations

import dataclasses
import gzip
import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

from kineto_builder import KinetoBuilder
from traceclass.errors import TraceFormatError
from traceclass.ingest import jsonstream, kineto, load

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "sample_traces"
pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="split reading is Linux-only (fork)")


def _flat(obj, out, key=""):
    """Every array and value of a trace, by path, to compare two traces whole."""
    if isinstance(obj, np.ndarray):
        out[key] = (str(obj.dtype), obj.shape, obj.tobytes() if obj.dtype != object else repr(obj.tolist()))
    elif dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        for f in dataclasses.fields(obj):
            _flat(getattr(obj, f.name), out, f"{key}.{f.name}")
    elif hasattr(obj, "_values"):  # string and inputs tables
        out[key] = repr(list(obj._values))
    elif isinstance(obj, frozenset):
        out[key] = sorted(obj)
    else:
        out[key] = repr(obj)
    return out


_HELPER_INIT = kineto._Helper.__init__


def _state(path, monkeypatch, split: bool, lone: bool = True, cores: int = 2):
    helpers = []
    monkeypatch.setattr(kineto, "SPLIT_ABOVE", 0 if split else 1 << 62)
    monkeypatch.setattr(kineto, "usable_cores", lambda: cores)  # as on a machine with that many
    if lone:  # as in the command: no other thread (an earlier test's may linger in this process)
        import threading

        monkeypatch.setattr(threading, "active_count", lambda: 1)

    def counted(self, *a):
        helpers.append(a[1])
        _HELPER_INIT(self, *a)

    monkeypatch.setattr(kineto._Helper, "__init__", counted)
    t = load(str(path))
    flat = _flat(t, {})
    flat = {k: v for k, v in flat.items() if not k.startswith(".source")}
    return flat, helpers


def _plain(tmp_path, sample: str) -> Path:
    out = tmp_path / sample.replace(".gz", "")
    with gzip.open(SAMPLES / sample, "rb") as src, open(out, "wb") as dst:
        shutil.copyfileobj(src, dst)
    return out


@pytest.mark.parametrize("sample", ["torch_ddp-nccl-train_a100.json.gz", "torch_cpu_transformer_block.json.gz",
                                    "torch_minitoy-train_mi250.json.gz", "torch_cuda-event-sync_a100.json.gz"])
def test_two_processes_build_the_trace_one_builds(tmp_path, monkeypatch, sample) -> None:
    path = _plain(tmp_path, sample)
    one, none = _state(path, monkeypatch, split=False)
    two, helpers = _state(path, monkeypatch, split=True)
    assert none == [] and len(helpers) == 1
    assert 0 < helpers[0] < path.stat().st_size
    assert two == one


def _collective_trace(tmp_path) -> Path:
    # collectives (ops and kernels with process-group texts) between ops with new names, so
    # string codes depend on the order texts and names are interned in
    b = KinetoBuilder()
    for i in range(300):
        ext = b.op(f"aten::op_{i}", 1_000 * i, 500)
        if i % 7 == 3:
            b.events[-1]["args"].update({"Collective name": f"allreduce_{i % 3}", "Process Group Name": str(i % 2),
                                         "Process Group Ranks": [0, 1], "dtype": "Float", "In msg nelems": i})
            b.launch(ext, f"ncclKernel_{i}", cpu_ts=1_000 * i + 10, gpu_ts=1_000 * i + 50, gpu_dur=100)
            b.events[-1]["args"].update({"Collective name": f"allreduce_{i % 3}", "Process Group Name": str(i % 2)})
        elif i % 5 == 0:
            b.launch(ext, f"kernel_{i}", cpu_ts=1_000 * i + 10, gpu_ts=1_000 * i + 50, gpu_dur=100)
    return b.write(tmp_path / "coll.json")


def test_string_codes_do_not_depend_on_runs_or_the_split(tmp_path, monkeypatch) -> None:
    path = _collective_trace(tmp_path)
    one, _ = _state(path, monkeypatch, split=False)
    assert "allreduce_1" in one[".strings"] and len(one) > 10
    for run in (300, 2_000, 9_000):
        monkeypatch.setattr(jsonstream, "BLOCK", 4_096)
        monkeypatch.setattr(jsonstream, "RUN", run)
        cut, _ = _state(path, monkeypatch, split=False)
        assert cut == one, run
        two, helpers = _state(path, monkeypatch, split=True)
        assert len(helpers) == 1 and two == one, run


@pytest.mark.parametrize("block", [None, 4_096])
def test_a_split_point_inside_an_event_falls_back_to_one_reader(tmp_path, monkeypatch, block) -> None:
    # the middle of the file is one event's args: a list of objects, whose "}, {" looks like
    # the boundary between two events
    b = KinetoBuilder()
    for i in range(100):
        b.op(f"aten::before_{i}", i * 100, 10)
    b.op("aten::middle", 40_000, 10)
    b.events[-1]["args"]["Nested"] = [{"k": i} for i in range(20_000)]
    for i in range(100):
        b.op(f"aten::after_{i}", 50_000 + i * 100, 10)
    path = b.write(tmp_path / "odd.json")
    one, _ = _state(path, monkeypatch, split=False)
    restarts = []
    real = kineto.read_kineto

    def read(*a, **k):
        restarts.append(k.get("split", True))
        return real(*a, **k)

    monkeypatch.setattr(kineto, "read_kineto", read)
    if block:  # the part before the split point is read in runs: found out at its end
        monkeypatch.setattr(jsonstream, "BLOCK", block)
        monkeypatch.setattr(jsonstream, "RUN", block)
    two, helpers = _state(path, monkeypatch, split=True)
    if block:
        assert len(helpers) == 1 and restarts == [True, False]  # started, stopped, read again here alone
    else:
        assert helpers == [] and restarts == [True]  # found in the first block: never started
    assert two == one
    assert "aten::after_99" in one[".strings"]


def test_a_bad_event_after_the_split_is_reported_as_one_reader_reports_it(tmp_path, monkeypatch) -> None:
    b = KinetoBuilder()
    for i in range(400):
        b.op(f"aten::op_{i}", 1_000 * i, 500)
    text = json.dumps(b.to_dict())
    cut = text.index('"aten::op_350"')
    bad = tmp_path / "bad.json"
    bad.write_bytes(text[:cut].encode() + b'"aten::\xff\xfe op"' + text[cut + len('"aten::op_350"'):].encode()
                    .replace(b'"aten::op_351", "pid"', b'"aten::op_351", "pid": }'))
    monkeypatch.setattr(kineto, "SPLIT_ABOVE", 1 << 62)
    with pytest.raises(TraceFormatError) as single:
        load(str(bad))
    monkeypatch.setattr(kineto, "SPLIT_ABOVE", 0)
    with pytest.raises(TraceFormatError) as split:
        load(str(bad))
    assert str(split.value) == str(single.value)


def test_the_switch_keeps_one_reader(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(kineto, "SPLIT_ABOVE", 0)
    path = _plain(tmp_path, "torch_cpu_tiny_ops_loop.json.gz")
    monkeypatch.setenv(kineto.SPLIT_ENV, "0")
    _, helpers = _state(path, monkeypatch, split=True)
    assert helpers == []
    monkeypatch.delenv(kineto.SPLIT_ENV)
    _, helpers = _state(path, monkeypatch, split=True)
    assert len(helpers) == 1


def _small_gzip_steps(monkeypatch) -> None:
    # a sample compresses to ~100 KB: read it 4 KB at a time so split points fall inside it
    monkeypatch.setattr(jsonstream, "GZ_IN", 4_096)
    monkeypatch.setattr(jsonstream, "SPLIT_WINDOW", 16_384)
    monkeypatch.setattr(jsonstream, "BLOCK", 16_384)


@pytest.mark.parametrize(("sample", "cores"), [
    ("torch_ddp-nccl-train_a100.json.gz", 2), ("torch_ddp-nccl-train_a100.json.gz", 4),
    ("torch_cpu_transformer_block.json.gz", 2), ("torch_cpu_transformer_block.json.gz", 4),
    ("torch_minitoy-train_mi250.json.gz", 2), ("torch_cuda-event-sync_a100.json.gz", 2)])
def test_a_gzip_file_split_builds_the_trace_one_builds(tmp_path, monkeypatch, sample, cores) -> None:
    # helpers go on from where the split-point pass left the stream (decompressor state copied
    # by the fork) instead of inflating the file up to their part
    path = SAMPLES / sample
    one, _ = _state(path, monkeypatch, split=False)
    _small_gzip_steps(monkeypatch)
    inflated = []
    real_piece = jsonstream._Inflater.piece
    monkeypatch.setattr(jsonstream._Inflater, "piece",
                        lambda self, block: (lambda p: inflated.append(len(p or b"")) or p)(real_piece(self, block)))
    many, helpers = _state(path, monkeypatch, split=True, cores=cores)
    assert len(helpers) == cores - 1 and helpers == sorted(helpers)
    with gzip.open(path, "rb") as fh:
        content = fh.read()
    assert all(content[at:at + 1] == b"{" for at in helpers)
    # this process inflated the file up to the last point (and a window after it), then its
    # own part up to the first, besides the first block: the helpers inflate only their parts
    assert helpers[-1] + helpers[0] <= sum(inflated) <= helpers[-1] + helpers[0] + 4 * 16_384
    assert many == one


def _members(tmp_path, sample: str, cuts: int) -> Path:
    """The sample as a gzip file of ``cuts + 1`` members, cut at arbitrary bytes."""
    with gzip.open(SAMPLES / sample, "rb") as fh:
        content = fh.read()
    out = tmp_path / ("members_" + sample)
    bounds = [0] + [len(content) * (k + 1) // (cuts + 1) + 17 for k in range(cuts)] + [len(content)]
    out.write_bytes(b"".join(gzip.compress(content[a:b]) for a, b in zip(bounds, bounds[1:])))
    return out


def test_a_gzip_file_of_several_members_reads_as_one(tmp_path, monkeypatch) -> None:
    # a member ending in a step whose output bound was hit leaves the bytes after it in both
    # unused_data and unconsumed_tail: taking both doubled them (corrupt data, or endless growth)
    path = _members(tmp_path, "torch_ddp-nccl-train_a100.json.gz", 5)
    with gzip.open(path, "rb") as fh:
        content = fh.read()
    for gz_in, block in ((4_096, 16_384), (65_536, 16_384), (65_536, 65_536), (1 << 20, 1 << 20)):
        monkeypatch.setattr(jsonstream, "GZ_IN", gz_in)
        assert b"".join(jsonstream._blocks(str(path), block)) == content, (gz_in, block)
    one, _ = _state(SAMPLES / "torch_ddp-nccl-train_a100.json.gz", monkeypatch, split=False)
    again, _ = _state(path, monkeypatch, split=False)
    assert again == one


def test_a_gzip_file_of_several_members_splits(tmp_path, monkeypatch) -> None:
    path = _members(tmp_path, "torch_ddp-nccl-train_a100.json.gz", 5)
    one, _ = _state(SAMPLES / "torch_ddp-nccl-train_a100.json.gz", monkeypatch, split=False)
    _small_gzip_steps(monkeypatch)
    many, helpers = _state(path, monkeypatch, split=True, cores=4)
    assert len(helpers) == 3 and many == one


@pytest.mark.parametrize("block", [4_096, 1 << 20])
def test_gzip_content_between_two_offsets(tmp_path, monkeypatch, block) -> None:
    # a part of a gzip file is its content between two offsets, inflated up to the start or
    # taken up where a resume point left the stream (the same point twice: the first use
    # must not advance it)
    path = _members(tmp_path, "torch_cpu_transformer_block.json.gz", 2)
    with gzip.open(SAMPLES / "torch_cpu_transformer_block.json.gz", "rb") as fh:
        content = fh.read()
    monkeypatch.setattr(jsonstream, "GZ_IN", 4_096)
    monkeypatch.setattr(jsonstream, "SPLIT_WINDOW", 16_384)
    n = len(content)
    for start, stop in ((0, None), (0, 1), (1_000, 50_000), (n // 2, n - 3), (n - 5, None), (n, None)):
        got = b"".join(jsonstream._blocks(str(path), block, start, stop))
        assert got == content[start:stop], (start, stop)
    seen = []
    points = jsonstream.gzip_split_points(str(path), 4, lambda done, total: seen.append((done, total)))
    # progress in compressed bytes, up to the last point's share of the file
    size = path.stat().st_size
    assert seen and all(t == 3 * size // 4 for _, t in seen)
    assert [d for d, _ in seen] == sorted(d for d, _ in seen) and seen[-1][0] == 3 * size // 4
    assert len(points) == 3 and [at for at, _ in points] == sorted({at for at, _ in points})
    for at, resume in points:
        assert content[at:at + 1] == b"{" and content[at - 1:at] in (b",", b" ", b"\n")
        for _ in range(2):
            got = b"".join(jsonstream._blocks(str(path), block, at, at + 5_000, resume))
            assert got == content[at:at + 5_000]
    # a resume point whose window took in the rest of the file: the stream is at its end, and a
    # stop inside the bytes the point holds still ends the part there
    monkeypatch.setattr(jsonstream, "SPLIT_WINDOW", n)
    ((at, resume),) = jsonstream.gzip_split_points(str(path), 2)
    assert b"".join(jsonstream._blocks(str(path), block, at, at + 7, resume)) == content[at:at + 7]
    assert b"".join(jsonstream._blocks(str(path), block, at, n + 100, resume)) == content[at:]


def test_a_gzip_helper_that_dies_leaves_its_part_to_this_process(tmp_path, monkeypatch) -> None:
    # this process then inflates the file again up to that part, from a copy of its resume point
    path = SAMPLES / "torch_ddp-nccl-train_a100.json.gz"
    one, _ = _state(path, monkeypatch, split=False)
    _small_gzip_steps(monkeypatch)
    monkeypatch.setattr(kineto, "_help", _exit_at_once)
    reads = []
    real_from = kineto.stream_from
    monkeypatch.setattr(kineto, "stream_from",
                        lambda path, at, *a, **k: reads.append(k.get("resume")) or real_from(path, at, *a, **k))
    two, helpers = _state(path, monkeypatch, split=True)
    assert len(helpers) == 1 and len(reads) == 1 and isinstance(reads[0], jsonstream.GzipResume)
    assert two == one


def test_a_damaged_gzip_file_gives_the_error_one_reader_gives(tmp_path, monkeypatch) -> None:
    # the split-point pass meets the damage first: it reads alone, which reports it
    data = (SAMPLES / "torch_ddp-nccl-train_a100.json.gz").read_bytes()
    bad = tmp_path / "bad.json.gz"
    bad.write_bytes(data[:len(data) // 2] + bytes(b ^ 0x5A for b in data[len(data) // 2:len(data) // 2 + 64])
                    + data[len(data) // 2 + 64:])
    monkeypatch.setattr(kineto, "SPLIT_ABOVE", 1 << 62)
    with pytest.raises(TraceFormatError) as single:
        load(str(bad))
    _small_gzip_steps(monkeypatch)
    with pytest.raises(TraceFormatError) as split:
        _state(bad, monkeypatch, split=True)
    assert str(split.value) == str(single.value) and "gzip" in str(single.value)


def test_one_free_core_keeps_one_reader(tmp_path, monkeypatch) -> None:
    path = _plain(tmp_path, "torch_cpu_tiny_ops_loop.json.gz")
    one, _ = _state(path, monkeypatch, split=False)
    monkeypatch.setattr(kineto, "SPLIT_ABOVE", 0)
    monkeypatch.setattr(kineto, "usable_cores", lambda: 1)
    helpers = []
    monkeypatch.setattr(kineto._Helper, "__init__", lambda self, *a: helpers.append(a))
    t = load(str(path))
    assert helpers == [] and _flat(t, {})[".ops.start_ns"] == one[".ops.start_ns"]


_POOL_CHILD = """
import concurrent.futures as cf, multiprocessing as mp, sys
from traceclass.ingest import kineto, load

def read(path):
    kineto.SPLIT_ABOVE = 0
    started = []
    real = kineto._Helper.__init__
    kineto._Helper.__init__ = lambda self, *a: (started.append(1), real(self, *a))[1]
    return len(load(path).ops), len(started)

if __name__ == "__main__":
    with cf.ProcessPoolExecutor(1, mp_context=mp.get_context("spawn")) as pool:
        print(*pool.submit(read, sys.argv[1]).result())
"""


def test_a_pool_worker_reads_alone(tmp_path) -> None:
    # the cluster engine's workers already use the cores (and Dask's are daemons, which may
    # not start processes): a file read in one is not split
    import subprocess

    path = _plain(tmp_path, "torch_cpu_tiny_ops_loop.json.gz")
    script = tmp_path / "pool.py"
    script.write_text(_POOL_CHILD)
    out = subprocess.run([sys.executable, str(script), str(path)], capture_output=True, text=True, check=True)
    ops, started = out.stdout.split()
    assert int(ops) > 0 and started == "0"


def test_no_split_beside_other_threads(tmp_path, monkeypatch) -> None:
    # a fork copies locks other threads may hold (a notebook's output streams): not split there
    import threading

    path = _plain(tmp_path, "torch_cpu_tiny_ops_loop.json.gz")
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait)
    thread.start()
    try:
        _, helpers = _state(path, monkeypatch, split=True, lone=False)
    finally:
        stop.set()
        thread.join()
    assert helpers == []


def _exit_at_once(*args):
    import os

    os._exit(3)


def _hang(*args):
    import time

    time.sleep(60)


@pytest.mark.parametrize("helper", [_exit_at_once, _hang])
def test_a_helper_that_dies_or_hangs_leaves_its_part_to_this_process(tmp_path, monkeypatch, helper) -> None:
    path = _plain(tmp_path, "torch_ddp-nccl-train_a100.json.gz")
    one, _ = _state(path, monkeypatch, split=False)
    monkeypatch.setattr(kineto, "_help", helper)
    monkeypatch.setattr(kineto, "HELPER_PATIENCE_S", 0.5)
    two, helpers = _state(path, monkeypatch, split=True)
    assert len(helpers) == 1 and two == one


@pytest.mark.parametrize("cores", [3, 4, 8])
def test_one_part_per_core(tmp_path, monkeypatch, cores) -> None:
    path = _plain(tmp_path, "torch_ddp-nccl-train_a100.json.gz")
    one, _ = _state(path, monkeypatch, split=False)
    many, helpers = _state(path, monkeypatch, split=True, cores=cores)
    assert len(helpers) == cores - 1 and helpers == sorted(helpers)
    assert many == one


def test_a_middle_helper_that_fails_leaves_the_rest_to_this_process(tmp_path, monkeypatch) -> None:
    # the second of three helpers dies: its part and the third's are read here, the first's kept
    path = _plain(tmp_path, "torch_ddp-nccl-train_a100.json.gz")
    one, _ = _state(path, monkeypatch, split=False)
    real, size = kineto._help, path.stat().st_size

    def second_dies(path, at, stop, exact_ts, conn, resume=None):
        if 0.4 * size < at < 0.6 * size:  # the parts start near 1/4, 1/2 and 3/4 of the file
            import os

            os._exit(3)
        real(path, at, stop, exact_ts, conn, resume)

    monkeypatch.setattr(kineto, "_help", second_dies)
    reads = []
    real_from = kineto.stream_from
    monkeypatch.setattr(kineto, "stream_from", lambda path, at, *a, **k: reads.append(at) or real_from(path, at, *a, **k))
    many, helpers = _state(path, monkeypatch, split=True, cores=4)
    assert len(helpers) == 3 and reads == [helpers[1]]  # read here from the second helper's start
    assert many == one


def test_collective_strings_split_four_ways(tmp_path, monkeypatch) -> None:
    path = _collective_trace(tmp_path)
    one, _ = _state(path, monkeypatch, split=False)
    many, helpers = _state(path, monkeypatch, split=True, cores=4)
    assert len(helpers) == 3 and many == one
