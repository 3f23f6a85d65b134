"""diff on GPU traces: the H100 corpus traces against each other, an NVIDIA and an AMD trace
of the same model (op groups pair by name and shapes, kernels differ), GPU against CPU-only."""

from __future__ import annotations

import itertools
import json
import re

import pytest
from compare_helpers import BASELINE, assert_tables_intact, run_of
from conftest import corpus
from kineto_builder import KinetoBuilder

from traceclass.cli import main
from traceclass.compare import noise
from traceclass.compare.diff import build_diff, to_dict
from traceclass.compare.match import merged_ops
from traceclass.compare.run import op_key
from traceclass.render.diff_markdown import render_markdown, verdict_plain

H100 = ("h100_bert-small_inference", "h100_qwen1.5-0.5b_inference", "h100_timesformer_inference")


def _h100(name):
    return corpus("torch", "gpu", f"{name}.json.gz")


@pytest.mark.parametrize("a, b", list(itertools.permutations(H100, 2)), ids=lambda x: x.split("_")[1])
def test_h100_pairs_compare_what_they_share(a, b):
    ra, rb = run_of(_h100(a)), run_of(_h100(b))
    diff = build_diff(ra, rb)
    d = to_dict(diff)
    # op groups: exactly the keys both runs have are matched, the rest listed apart
    ka = {op_key(o) for o in merged_ops(ra)}
    kb = {op_key(o) for o in merged_ops(rb)}
    matched = {("op" if o["kind"] == "op" else o["kind"], o["name"], o["shapes"] if o["kind"] == "op" else "",
                o["dtype"] if o["kind"] == "op" else "") for o in d["ops"]}
    assert matched == ka & kb
    assert len(d["ops_vanished"]) == len(ka - kb) and len(d["ops_appeared"]) == len(kb - ka)
    # kernel families are vendor- and model-neutral: most are shared
    fa, fb = {f.family for f in ra.families}, {f.family for f in rb.families}
    assert {f["family"] for f in d["families"] if f["status"] == "matched"} == fa & fb
    assert {"gemm", "elementwise"} <= fa & fb
    # same GPU and software: no device/version call-out, but the different models are called out
    topics = {c["topic"] for c in d["callouts"]}
    assert "device" not in topics and "version" not in topics
    assert "workload" in topics
    assert d["gpu_step"] is not None and d["devices"][0]["busy_pct"]["unit"] == "pct"
    # one step per trace: noise unknown, said in the verdict and in the notes
    assert d["verdict"]["step"]["p50"]["noise"]["noise_known"] is False
    assert "noise unknown" in verdict_plain(d)
    md = render_markdown(d)
    assert md.count("\n## ") >= 6


@pytest.mark.parametrize("name", H100)
def test_h100_trace_against_itself(name):
    r = run_of(_h100(name))
    d = to_dict(build_diff(r, r))
    assert d["callouts"] == []
    assert d["ops_appeared"] == [] and d["ops_vanished"] == []
    labels = {o["per_step"]["label"] for o in d["ops"]} | {f["per_step"]["label"] for f in d["families"]}
    labels |= {d["gpu_step"][k]["label"] for k in ("busy", "idle", "copy")}
    assert labels == {noise.WITHIN}


def test_h100_cli_runs(tmp_path, capsys):
    a, b = _h100(H100[0]), _h100(H100[2])
    assert main(["diff", str(a), str(b)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("# traceclass diff:")
    assert "**Not a like-for-like comparison" in out  # different models, called out first
    bl = tmp_path / "bl.json"
    assert main(["baseline", "save", str(a), "-o", str(bl)]) == 0
    doc = json.loads(bl.read_text())
    assert doc["environment"]["gpus"] == ["NVIDIA H100 80GB HBM3"]
    assert doc["environment"]["versions"]["CUDA runtime"] == 12040
    assert doc["metrics"]["gpu_busy_pct"] is not None
    assert doc["metrics"]["peak_memory"]["device"] == "GPU 0"
    assert main(["check", str(a), "--baseline", str(bl)]) == 0
    capsys.readouterr()


# ------------------------------------------------------------------------- vendors


def _model_trace(path, vendor: str, step_ns: int, mm_ns: int):
    """Three steps of one tiny model: a matmul and an add, with vendor-specific kernels."""
    nvidia = vendor == "nvidia"
    b = KinetoBuilder(gpu_name="NVIDIA H100 80GB HBM3" if nvidia else "AMD Instinct MI300X")
    if not nvidia:
        b.top.pop("cuda_runtime_version", None)
        b.top["hip_runtime_version"] = 60242134
    gemm = "sm90_xmma_gemm_f32f32_f32f32_f32_tn_n" if nvidia else "Cijk_Ailk_Bljk_SB_MT64x64x16_MI16x16x4x1"
    add = "void at::native::vectorized_elementwise_kernel<4, add>" if nvidia else "elementwise_kernel_manual_unroll<add>"
    api = "cudaLaunchKernel" if nvidia else "hipLaunchKernel"
    t = 1_000_000
    for n in range(4):
        b.step(n, t, step_ns)
        e1 = b.op("aten::mm", t + 10_000, 50_000, dims=[[256, 256], [256, 256]], types=["float", "float"])
        b.launch(e1, gemm, t + 20_000, t + 100_000, mm_ns + 1_000 * n, api=api)
        e2 = b.op("aten::add", t + 70_000, 20_000, dims=[[256, 256], [256, 256], []],
                  types=["float", "float", "Scalar"])
        b.launch(e2, add, t + 80_000, t + 100_000 + mm_ns + 10_000, 20_000 + 100 * n, api=api)
        t += step_ns + 50_000
    return b.write(path)


def test_nvidia_and_amd_traces_of_one_model_pair_their_ops(tmp_path):
    nv = _model_trace(tmp_path / "nv.json", "nvidia", 1_000_000, 300_000)
    amd = _model_trace(tmp_path / "amd.json", "amd", 1_000_000, 200_000)
    from traceclass.compare.run import run_from_report
    from traceclass.engine import run
    from traceclass.ingest import load

    rn = run_from_report(run(load(nv))[1])
    ra = run_from_report(run(load(amd))[1])
    d = to_dict(build_diff(rn, ra))
    assert d["ops_appeared"] == [] and d["ops_vanished"] == []
    by_name = {o["name"]: o for o in d["ops"]}
    assert set(by_name) == {"aten::mm", "aten::add"}
    mm = by_name["aten::mm"]
    assert mm["kernels_baseline"] != mm["kernels_candidate"]  # different kernels, same op group
    assert mm["per_step"]["delta"] == pytest.approx(-100_000, abs=1)  # 300 -> 200 us per call
    assert mm["per_step"]["label"] == noise.FASTER
    fam = {f["family"]: f for f in d["families"]}
    assert fam["gemm"]["status"] == "matched" and fam["gemm"]["per_step"]["label"] == noise.FASTER
    what = {(c["topic"], c["what"]) for c in d["callouts"]}
    assert ("device", "GPU") in what and ("version", "CUDA runtime") in what and ("version", "HIP runtime") in what
    text = verdict_plain(d)
    assert text.startswith("Not a like-for-like comparison, so it does not isolate one change: GPU differs "
                           "(`NVIDIA H100 80GB HBM3` vs `AMD Instinct MI300X`)")


def test_gpu_trace_against_cpu_only_trace(tmp_path):
    gpu = _model_trace(tmp_path / "nv.json", "nvidia", 1_000_000, 300_000)
    from traceclass.compare.run import run_from_report
    from traceclass.engine import run
    from traceclass.ingest import load

    d = to_dict(build_diff(run_from_report(run(load(gpu))[1]), run_of(BASELINE)))
    assert any(c["what"] == "GPU activity" for c in d["callouts"])
    assert any(c["what"] == "op time basis" for c in d["callouts"])
    assert d["gpu_step"] is None
    render_markdown(d)


def test_hostile_names_stay_inside_their_cells(tmp_path):
    b = KinetoBuilder(gpu_name=None)
    evil = "evil|op`with`ticks\n## heading @team <script>"
    t = 1_000_000
    for n in range(3):
        b.step(n, t, 100_000)
        b.op(evil, t + 1_000, 50_000 + 1_000 * n, dims=[[4, 4]], types=["float"])
        t += 200_000
    p = b.write(tmp_path / "evil.json")
    from traceclass.compare.run import run_from_report
    from traceclass.engine import run
    from traceclass.ingest import load

    r = run_from_report(run(load(p))[1])
    d = to_dict(build_diff(r, run_of(BASELINE)))
    md = render_markdown(d)
    assert "evil" in md
    assert "\n## heading" not in md  # the line break is gone, no heading is injected
    # every occurrence of the name sits inside a code span (GitHub renders no HTML or mention there)
    for line in md.splitlines():
        for m in re.finditer("<script>", line):
            assert line[:m.start()].count("``") % 2 == 1, line
    assert_tables_intact(md)



def test_table_check_catches_a_split_cell():
    assert_tables_intact("| a | b |\n| --- | --- |\n| `x\\|y` | z |\n")
    with pytest.raises(AssertionError):
        assert_tables_intact("| a | b |\n| --- | --- |\n| `x|y` | z |\n")
