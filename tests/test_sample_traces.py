"""The bundled sample traces (sample_traces/) load with the Kineto reader and show what
sample_traces/README.md promises.

The CPU traces were recorded once by sample_traces/make_samples.py and committed; the numbers
below are facts of those committed files (op counts, shapes, strides, stage names, which side
of the diff pair spends time in aten::copy_), not of a fresh recording.
"""

from __future__ import annotations

import collections
import functools
import gzip
import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from traceclass.ingest import load
from traceclass.model.enums import GpuKind, Vendor

SAMPLES = Path(__file__).resolve().parent.parent / "sample_traces"

RECORDED = [
    "torch_cpu_transformer_block.json.gz",
    "torch_cpu_tiny_ops_loop.json.gz",
    "torch_cpu_dataloader.json.gz",
    "torch_cpu_diff_baseline.json.gz",
    "torch_cpu_diff_candidate.json.gz",
]
# copied byte-identical from HolisticTraceAnalysis test data (see README): name -> sha256
COPIED = {
    "torch_ddp-nccl-train_a100.json.gz": "c1cf9c575fdcd7bdc6326ceab834f94b351f81ae55577a7471aa9e328fb8b58e",
    "torch_cuda-event-sync_a100.json.gz": "63074c678eb92a77410d7911b64ed39c0e859d0998f74ee9b862de7a12cd7616",
    "torch_minitoy-train_mi250.json.gz": "39fdab670f9e80a05ccc6d0d07611b3aeba1092fa10681d8dd08cea48d0488b5",
}
# ProfilerStep annotations per file
STEPS = {
    "torch_cpu_transformer_block.json.gz": 3,
    "torch_cpu_tiny_ops_loop.json.gz": 3,
    "torch_cpu_dataloader.json.gz": 3,
    "torch_cpu_diff_baseline.json.gz": 6,
    "torch_cpu_diff_candidate.json.gz": 6,
    "torch_ddp-nccl-train_a100.json.gz": 3,
    "torch_cuda-event-sync_a100.json.gz": 1,
    "torch_minitoy-train_mi250.json.gz": 2,
}


def trace_files() -> list[str]:
    return sorted(p.name for p in SAMPLES.iterdir() if p.name.endswith((".json.gz", ".json")))


@functools.lru_cache(maxsize=None)
def trace(name: str):
    return load(SAMPLES / name)


def op_names(t) -> np.ndarray:
    return t.strings.decode(t.ops.name)


def ann_names(t) -> np.ndarray:
    return t.strings.decode(t.annotations.name)


def inside(t, name: str, starts: np.ndarray, tids: np.ndarray) -> np.ndarray:
    """Rows (given by start time and tid) that lie inside an annotation called ``name``."""
    an = ann_names(t)
    out = np.zeros(len(starts), dtype=bool)
    for i in np.nonzero(an == name)[0]:
        out |= (
            (starts >= t.annotations.start_ns[i])
            & (starts < t.annotations.end_ns[i])
            & (tids == t.annotations.tid[i])
        )
    return out


def ops_in(t, stage: str) -> np.ndarray:
    return inside(t, stage, t.ops.start_ns, t.ops.tid)


def total_ms(t, mask: np.ndarray) -> float:
    return float((t.ops.end_ns[mask] - t.ops.start_ns[mask]).sum()) / 1e6


def contiguous_strides(dims: tuple[int, ...]) -> tuple[int, ...]:
    out, acc = [], 1
    for d in reversed(dims):
        out.append(acc)
        acc *= max(d, 1)
    return tuple(reversed(out))


def step_ms(t) -> np.ndarray:
    m = t.strings.mask(t.annotations.name, lambda s: s.startswith("ProfilerStep#"))
    return (t.annotations.end_ns[m] - t.annotations.start_ns[m]) / 1e6


# --------------------------------------------------------------------------------------------
# every file


def test_directory_holds_exactly_the_documented_traces():
    assert trace_files() == sorted(RECORDED + list(COPIED))
    readme = (SAMPLES / "README.md").read_text(encoding="utf-8")
    for name in trace_files():
        assert f"`{name}`" in readme, f"{name} is not documented in sample_traces/README.md"


@pytest.mark.parametrize("name", trace_files())
def test_every_sample_loads_with_steps_and_ops(name):
    t = trace(name)
    assert t.source.format == "kineto"
    assert len(t.ops) > 0
    steps = [s for s in ann_names(t) if s.startswith("ProfilerStep#")]
    assert len(steps) == STEPS[name]
    assert (SAMPLES / name).stat().st_size < 1_000_000


@pytest.mark.parametrize("name", sorted(COPIED))
def test_copied_gpu_traces_are_byte_identical_to_their_source(name):
    assert hashlib.sha256((SAMPLES / name).read_bytes()).hexdigest() == COPIED[name]


@pytest.mark.parametrize("name", RECORDED)
def test_recorded_traces_have_full_profiler_data(name):
    t = trace(name)
    # record_shapes: shapes and strides on (almost) every op
    with_strides = np.array([t.inputs[k] is not None and t.inputs[k].strides is not None for k in t.ops.inputs])
    assert with_strides.mean() > 0.9
    # with_stack / with_modules: python frames, including this repo's script and nn.Module frames
    py = set(t.strings.decode(t.python.name))
    assert any(n.startswith("sample_traces/make_samples.py(") for n in py)
    assert any(n.startswith("nn.Module: ") for n in py)
    # profile_memory
    assert len(t.memory) > 0
    assert not t.has_gpu


@pytest.mark.parametrize("name", RECORDED)
def test_recorded_traces_carry_no_identity_data(name):
    text = gzip.decompress((SAMPLES / name).read_bytes()).decode("utf-8")
    top = json.loads(text)
    assert top["host_name"] == "host"
    assert top["traceName"] == f"sample_traces/{name}"
    assert "username" not in top
    for needle in ("/work/", "/home/", "/root/", "/tmp/", "/Users/", "site-packages"):
        assert needle not in text, needle
    # python frames name files relative to the repo or to site-packages / the stdlib
    frames = {e["name"] for e in top["traceEvents"] if e.get("cat") == "python_function"}
    assert frames and not any(f.startswith("/") for f in frames)


# --------------------------------------------------------------------------------------------
# a. transformer block


def test_transformer_block_stages():
    t = trace("torch_cpu_transformer_block.json.gz")
    counts = collections.Counter(ann_names(t))
    for stage in ("stage:preprocess", "stage:conv", "stage:forward", "stage:backward", "stage:optimizer"):
        assert counts[stage] == 3, stage
    assert counts["Optimizer.step#AdamW.step"] == 3
    ops = collections.Counter(op_names(t))
    assert ops["aten::scaled_dot_product_attention"] == 6
    assert ops["aten::layer_norm"] == 6
    assert ops["aten::gelu"] == 3 and ops["aten::gelu_backward"] == 3


def test_transformer_block_has_a_causal_and_a_full_attention_call():
    t = trace("torch_cpu_transformer_block.json.gz")
    is_causal = []
    for k in t.ops.inputs[op_names(t) == "aten::scaled_dot_product_attention"]:
        inp = t.inputs[k]
        assert inp.dims[0] == (8, 4, 128, 32)
        is_causal.append(inp.concrete[5])
    assert sorted(is_causal) == ["False"] * 3 + ["True"] * 3


def test_transformer_block_implicit_transpose_before_matmul():
    t = trace("torch_cpu_transformer_block.json.gz")
    names = op_names(t)
    pre = ops_in(t, "stage:preprocess")
    rows = np.nonzero((names == "aten::contiguous") & pre)[0]
    assert len(rows) == 3
    for i in rows:
        inp = t.inputs[t.ops.inputs[i]]
        assert inp.dims[0] == (8, 128, 96)
        assert inp.strides[0] == (12288, 1, 128)  # permute(0, 2, 1) view of [8, 96, 128]
        assert inp.strides[0] != contiguous_strides(inp.dims[0])
        # the copy that materialises it is a child op
        children = names[t.ops.parent == i]
        assert "aten::clone" in children
    copies = [
        i for i in np.nonzero((names == "aten::copy_") & pre)[0]
        if t.inputs[t.ops.inputs[i]].dims[0] == (8, 128, 96)
    ]
    assert len(copies) == 3
    for i in copies:
        assert t.inputs[t.ops.inputs[i]].strides == ((12288, 96, 1), (12288, 1, 128), ())


def test_transformer_block_channels_last_weight_on_nchw_input():
    t = trace("torch_cpu_transformer_block.json.gz")
    names = op_names(t)
    conv = np.nonzero(names == "aten::convolution")[0]
    assert len(conv) == 3
    assert ops_in(t, "stage:conv")[conv].all()
    for i in conv:
        inp = t.inputs[t.ops.inputs[i]]
        assert inp.dims[0] == (8, 3, 32, 32) and inp.dims[1] == (32, 3, 3, 3)
        assert inp.strides[0] == contiguous_strides((8, 3, 32, 32))  # NCHW input
        assert inp.strides[1] == (27, 1, 9, 3)  # channels_last weight (C stride 1)
    # inside the convolution the input is converted to channels_last (memory_format code 2)
    rows = [
        i for i in np.nonzero(names == "aten::contiguous")[0]
        if t.inputs[t.ops.inputs[i]].dims[0] == (8, 3, 32, 32)
    ]
    assert len(rows) == 6  # 3 forward + 3 in convolution_backward
    assert {t.inputs[t.ops.inputs[i]].concrete[1] for i in rows} == {"2"}


# --------------------------------------------------------------------------------------------
# b. tiny-op storm


def test_tiny_ops_loop_has_200_small_elementwise_ops_per_step():
    t = trace("torch_cpu_tiny_ops_loop.json.gz")
    names = op_names(t)
    tiny = ops_in(t, "stage:tiny_ops")
    for name in ("aten::mul", "aten::add"):
        rows = np.nonzero((names == name) & tiny)[0]
        assert len(rows) == 300  # 100 per step, 3 steps
        assert {t.inputs[t.ops.inputs[i]].dims[0] for i in rows} == {(16,)}
    # the element-wise work is dwarfed by the per-op overhead: each op takes microseconds
    elementwise = ((names == "aten::mul") | (names == "aten::add")) & tiny
    assert np.median(t.ops.end_ns[elementwise] - t.ops.start_ns[elementwise]) < 50_000  # < 50 us
    assert collections.Counter(ann_names(t))["stage:tiny_ops"] == 3


def test_tiny_ops_loop_has_one_item_sync_per_step():
    t = trace("torch_cpu_tiny_ops_loop.json.gz")
    names = op_names(t)
    item = names == "aten::item"
    assert item.sum() == 3
    assert ops_in(t, "stage:sync")[item].all()
    assert (names == "aten::_local_scalar_dense").sum() == 3


# --------------------------------------------------------------------------------------------
# c. data loading


def test_dataloader_annotation_inside_data_stage():
    t = trace("torch_cpu_dataloader.json.gz")
    an = ann_names(t)
    dl = np.nonzero(an == "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__")[0]
    assert len(dl) == 3
    assert inside(t, "stage:data", t.annotations.start_ns[dl], t.annotations.tid[dl]).all()
    # num_workers=0: the slow __getitem__ runs in the profiled thread, 16 samples per step
    py = t.strings.decode(t.python.name)
    getitem = [n for n in py if n.startswith("sample_traces/make_samples.py(") and n.endswith("): __getitem__")]
    assert len(getitem) == 48


def test_dataloader_stage_dominates_the_step():
    t = trace("torch_cpu_dataloader.json.gz")
    an = ann_names(t)
    dur = (t.annotations.end_ns - t.annotations.start_ns) / 1e6

    def stage(name: str) -> float:
        return float(dur[an == name].sum())

    data = stage("stage:data")
    compute = stage("stage:forward") + stage("stage:backward") + stage("stage:optimizer")
    assert data > compute
    assert data > 0.5 * step_ms(t).sum()


# --------------------------------------------------------------------------------------------
# d. diff pair


def test_diff_pair_differs_only_by_the_transpose_copy():
    base = trace("torch_cpu_diff_baseline.json.gz")
    cand = trace("torch_cpu_diff_candidate.json.gz")
    cb = collections.Counter(op_names(base))
    cc = collections.Counter(op_names(cand))
    assert cc - cb == collections.Counter()
    assert cb - cc == collections.Counter(
        {"aten::contiguous": 6, "aten::clone": 6, "aten::empty_like": 6, "aten::empty": 6, "aten::copy_": 6}
    )
    rows = np.nonzero(op_names(base) == "aten::contiguous")[0]
    for i in rows:
        inp = base.inputs[base.ops.inputs[i]]
        assert inp.dims[0] == (8, 512, 512) and inp.strides[0] == (262144, 1, 512)
    assert set(ann_names(base)) == set(ann_names(cand))


def test_diff_pair_copy_time_and_step_time_move_in_the_expected_direction():
    base = trace("torch_cpu_diff_baseline.json.gz")
    cand = trace("torch_cpu_diff_candidate.json.gz")
    copy_b = total_ms(base, op_names(base) == "aten::copy_")
    copy_c = total_ms(cand, op_names(cand) == "aten::copy_")
    assert copy_b > 6 * 1.0  # > 1 ms per step over 6 steps
    assert copy_c < 0.05 * copy_b
    sb, sc = step_ms(base), step_ms(cand)
    assert len(sb) == len(sc) == 6
    # the gain is well beyond step-to-step noise: every baseline step is slower than every
    # candidate step
    assert sb.min() > sc.max()
    assert np.median(sb) - np.median(sc) > 0.5 * (copy_b - copy_c) / 6


# --------------------------------------------------------------------------------------------
# copied GPU traces


def test_ddp_nccl_trace():
    t = trace("torch_ddp-nccl-train_a100.json.gz")
    kinds = collections.Counter(int(k) for k in t.gpu.kind)
    assert kinds[GpuKind.KERNEL] == 2700 and kinds[GpuKind.MEMCPY] == 960
    names = t.strings.decode(t.gpu.name)
    assert sum("nchwToNhwc" in n for n in names) == 474
    assert any(n.lower().startswith("nccl") for n in names)
    assert collections.Counter(ann_names(t))["nccl:all_reduce"] == 15
    assert t.devices and t.devices[0].vendor == Vendor.NVIDIA


def test_cuda_event_sync_trace():
    t = trace("torch_cuda-event-sync_a100.json.gz")
    kinds = collections.Counter(int(k) for k in t.gpu.kind)
    assert kinds[GpuKind.KERNEL] == 4 and kinds[GpuKind.SYNC] == 4
    api = set(t.strings.decode(t.api.name))
    assert {"cudaStreamSynchronize", "cudaEventSynchronize"} <= api


def test_mi250_trace_is_rocm():
    t = trace("torch_minitoy-train_mi250.json.gz")
    assert t.devices and t.devices[0].vendor == Vendor.AMD
    assert collections.Counter(int(k) for k in t.gpu.kind)[GpuKind.KERNEL] == 14
    assert any(n.startswith("hip") for n in t.strings.decode(t.api.name))
