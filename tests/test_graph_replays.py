"""Graph replays: kernels labelled by family, summarised by family and by their repeating layer."""

from __future__ import annotations

from kineto_builder import KinetoBuilder
from traceclass import units
from traceclass.analysis import analyze
from traceclass.analysis.graph_replays import describe, replays
from traceclass.ingest import load

GEMM = "Cijk_Alik_Bljk_BBS_BH_Bias_MT64x32x256_MI16x16x1_SN"
LAYER = [(GEMM, 100_000), ("rms_norm_kernel", 10_000), ("paged_attention_ll4mi_kernel", 50_000)]


def _replay(tmp_path, layers: int = 3):
    b = KinetoBuilder()
    corr = b.runtime("cudaGraphLaunch", 1_000, 2_000)
    t = 10_000
    seq = [("indexSelectLargeIndex", 5_000)] + LAYER * layers + [("argmax_kernel_reduce", 8_000)]
    for name, dur in seq:
        b.kernel(name, t, dur, corr=corr)
        t += dur + 1_000
    return load(b.write(tmp_path / "graph.json"))


def test_replayed_kernels_get_family_labels(tmp_path):
    t = _replay(tmp_path)
    a = analyze(t)
    by = {g.name: g for g in a.ops.groups}
    gemm = by["graph replay (cudaGraphLaunch): gemm kernels"]
    assert gemm.kind == "graph" and gemm.point.bound == "compute-bound" and gemm.point.heuristic
    assert gemm.total_ns == 300_000 and gemm.kernels == 3 and gemm.precision == "bf16"
    assert by["graph replay (cudaGraphLaunch): attention kernels"].point.bound == "compute-bound"
    assert by["graph replay (cudaGraphLaunch): norm kernels"].point.bound == "memory-bound"
    assert all(g.point.bound != "unclassified" for g in a.ops.groups)


def test_replay_summary_by_family_and_layer(tmp_path):
    t = _replay(tmp_path)
    (r,) = replays(t, analyze(t).gpu_family_code)
    assert r.kernels == 11 and r.busy_ns == 5_000 + 3 * 160_000 + 8_000
    assert r.by_family[0] == ("gemm", 3, 300_000)
    assert (r.period, r.repeats, r.before, r.after) == (3, 3, 1, 1)
    assert r.layer == (("gemm bf16", 100_000.0), ("norm", 10_000.0), ("attention", 50_000.0))
    line = describe(r, units.duration)
    assert "3 x [gemm bf16 100 µs, attention 50 µs, norm 10 µs] (3 kernels per layer, 1 before, 1 after)" in line


def test_no_layer_pattern_is_said(tmp_path):
    t = _replay(tmp_path, layers=1)
    (r,) = replays(t, analyze(t).gpu_family_code)
    assert r.period == 0 and describe(r, units.duration).endswith("no repeating layer")
