"""TC204 data-loading-bound: exact data shares on hand-built traces, the sample and the corpus."""

from __future__ import annotations

import pytest

from conftest import ROOT, corpus
from kineto_builder import KinetoBuilder
from ruletest import findings_for
from traceclass.ingest import load

SINGLE = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"
MULTI = "enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__"


def _cpu_loop(tmp_path, data_ns=(300_000, 400_000, 500_000), loader: str = SINGLE, stage: str | None = "stage:data",
               name: str = "loop.json", other_thread: bool = False):
    """CPU-only: three 1 ms steps (the first is warm-up). Each step opens ``stage`` at its start
    with the DataLoader's __next__ inside (10 us shorter), then runs a forward op to the step end.
    With ``other_thread`` a 900 us "stage:prefetch" range runs on a second thread in every step."""
    b = KinetoBuilder(gpu_name=None)
    for k, d in enumerate(data_ns):
        t0 = k * 1_000_000
        b.step(k + 1, t0, 1_000_000)
        if stage:
            b.annotation(stage, t0 + 1_000, d)
        b.annotation(loader, t0 + 2_000, d - 10_000)
        b.op("aten::linear", t0 + 1_000 + d + 1_000, 1_000_000 - d - 3_000)
        if other_thread:
            b.annotation("stage:prefetch", t0 + 50_000, 900_000, tid=200)
            b.op("aten::copy_", t0 + 60_000, 800_000, tid=200)
    return load(b.write(tmp_path / name))


def test_cpu_data_share_exact(tmp_path):
    t = _cpu_loop(tmp_path)
    (f,) = findings_for(t, "TC204")
    # steady steps 2 and 3: stage:data 400 + 500 us of 2 ms; the DataLoader range nests inside it
    assert f.values["data_ns"] == 900_000 and f.values["analysed_ns"] == 2_000_000
    assert f.values["share_pct"] == 45.0 and f.recoverable_ns == 900_000  # no GPU: the data time itself
    assert f.severity == "medium"  # 45 %, but 0.9 ms: high needs 1 ms
    assert f.location == "data loading: stage:data"
    assert [s["data_ns"] for s in f.values["per_step"]] == [400_000, 500_000]
    assert [s["step"] for s in f.values["per_step"]] == ["ProfilerStep#2", "ProfilerStep#3"]
    assert f.message.startswith("data loading on the main thread took 900 us of the 2 ms steady step time "
                                "(45.0%, threshold 1.0%; 2 steps, 450 us per step): stage:data 900 us, DataLoader 880 us")
    stage, loader = f.evidence
    assert (stage.values["site"], stage.count, stage.duration_ns) == ("stage:data", 2, 900_000)
    assert (loader.values["site"], loader.count, loader.duration_ns) == ("DataLoader", 2, 880_000)
    assert SINGLE in loader.what
    assert "num_workers" in f.fix and "pin_memory" in f.fix and "persistent_workers" in f.fix
    assert "prefetch_factor" in f.fix and "decode" in f.fix


def test_threshold_and_pattern(tmp_path):
    t = _cpu_loop(tmp_path, data_ns=(30_000, 20_000, 21_000))
    # 41 us of 2 ms = 2.05 %: reported at the default 1 %, not at 2.1 %
    (f,) = findings_for(t, "TC204")
    assert f.values["share_pct"] == 2.05 and f.severity == "low"
    assert findings_for(t, "TC204", min_share_pct=2.1) == []
    # a stage the default pattern does not know, made data loading by the user's own pattern
    t2 = _cpu_loop(tmp_path, stage="stage:fetch_rows", loader="stage:forward", name="rows.json")
    assert findings_for(t2, "TC204") == []
    (g,) = findings_for(t2, "TC204", data_stage_regex=r"fetch_rows")
    assert g.location == "data loading: stage:fetch_rows" and g.values["data_ns"] == 900_000


@pytest.mark.parametrize("name", ["DistributedDataParallel.forward", "stage:offload", "stage:forward"])
def test_names_that_only_contain_a_data_word_are_not_data(tmp_path, name):
    t = _cpu_loop(tmp_path, stage=name, loader="stage:compute", name="names.json")
    assert findings_for(t, "TC204") == []


def test_a_prefetch_thread_is_off_the_critical_path(tmp_path):
    t = _cpu_loop(tmp_path, data_ns=(30_000, 20_000, 21_000), other_thread=True)
    (f,) = findings_for(t, "TC204")
    assert f.values["data_ns"] == 41_000  # the 900 us stage:prefetch ranges on thread 200 are not counted
    assert f.values["threads"] == ["100/100"]


def test_worker_count_change_keeps_the_fingerprint(tmp_path):
    a = findings_for(_cpu_loop(tmp_path, stage=None, name="a.json"), "TC204")[0]
    b = findings_for(_cpu_loop(tmp_path, stage=None, loader=MULTI, name="b.json"), "TC204")[0]
    assert a.location == b.location == "data loading: DataLoader" and a.fingerprint == b.fingerprint
    c = findings_for(_cpu_loop(tmp_path, name="c.json"), "TC204")[0]
    assert c.fingerprint != a.fingerprint


def test_gpu_idle_inside_the_data_ranges(tmp_path):
    """One 2 ms step: stage:data 0.1-1.1 ms; a kernel runs 0.0-0.4 ms (launched before the data
    range) and the next one 1.2-1.9 ms: the GPU idles 700 us of the 1 ms of data loading."""
    b = KinetoBuilder()
    b.step(1, 0, 2_000_000)
    b.launch(b.op("aten::mm", 1_000, 5_000), "gemm_a", 2_000, 10_000, 390_000)
    b.annotation("stage:data", 100_000, 1_000_000)
    b.annotation(SINGLE, 101_000, 990_000)
    b.launch(b.op("aten::mm", 1_110_000, 5_000), "gemm_b", 1_112_000, 1_200_000, 700_000)
    t = load(b.write(tmp_path / "gpu.json"))
    (f,) = findings_for(t, "TC204")
    assert f.values["data_ns"] == 1_000_000 and f.values["share_pct"] == 50.0
    # issue 10: the claim is the data-loading part of the shared idle attribution: the host
    # window 0.4-1.112 ms (data fills 700 of its 712 us), not the launch call or the queue after it
    assert f.values["gpu_idle_in_data_ns"] == {"0": 700_000} and f.recoverable_ns == 712_000
    assert "; GPU 0 idle 700 us of it (70.0%)" in f.message
    assert f.severity == "medium"  # 35 % of the step, 0.7 ms


def test_silent_without_data_ranges(tmp_path):
    b = KinetoBuilder(gpu_name=None)
    b.step(1, 0, 1_000_000)
    b.op("aten::linear", 1_000, 900_000)
    assert findings_for(load(b.write(tmp_path / "none.json")), "TC204") == []


def test_sample_dataloader_trace():
    (f,) = findings_for(ROOT / "sample_traces" / "torch_cpu_dataloader.json.gz", "TC204")
    # stage:data (holding the DataLoader's __next__) in the two steady steps: 40.68 of 61.58 ms
    assert f.values["data_ns"] == 40_681_038 and f.values["analysed_ns"] == 61_583_974
    assert f.values["share_pct"] == 66.058 and f.severity == "high"
    assert [s["share_pct"] for s in f.values["per_step"]] == [65.47, 66.65]
    assert f.location == "data loading: stage:data"
    assert f.evidence[0].source == "sample_traces/make_samples.py:310"


def test_corpus_mixed_stack_dataload():
    (f,) = findings_for(corpus("torch", "cpu", "mixed_stack.step6.pt.trace.json.gz"), "TC204")
    by = {e.values["site"]: e for e in f.evidence}
    # 2 DataLoader workers on 2 cores: stage:dataload waits 24.67 ms in the 3 steady steps, the
    # per-batch stage:preprocess runs 13.39 ms: 2.09 % of 1.82 s together
    assert by["stage:dataload"].duration_ns == 24_671_555 and by["stage:dataload"].count == 3
    assert by["stage:preprocess"].duration_ns == 13_393_982
    assert MULTI in by["DataLoader"].what
    assert f.values["data_ns"] == 38_065_537 and f.values["analysed_ns"] == 1_823_984_421
    assert f.values["share_pct"] == 2.087 and f.severity == "low"
    assert f.location == "data loading: stage:dataload + stage:preprocess"


def test_corpus_torchrec_input_pipeline_on_gpu():
    (f,) = findings_for(corpus("torch", "gpu", "a100_train_rank0_of16.json.gz"), "TC204")
    # TorchRec's sparse_data_dist (the input all-to-all) and copy_batch_to_gpu on the training
    # thread: 643 ms of the 864 ms of 4 steady steps; the GPU idles 388 ms inside them
    assert f.values["data_ns"] == 642_589_000 and f.values["share_pct"] == 74.349
    assert f.values["gpu_idle_in_data_ns"] == {"0": 387_798_000}
    # issue 10: most of that idle lies between rows one cudaGraphLaunch queued long before (the
    # GPU waits inside the replay, not for the data): the shared attribution gives data loading
    # only the 6.68 ms in which the launching thread was in a data range before the next launch
    assert f.recoverable_ns == 6_680_000 and f.values["claimed_idle_ns"] == {"0": 6_680_000}
    assert f.values["threads"] == ["4515/4515"]  # not the autograd thread 25556
    assert f.location == "data loading: ## copy_batch_to_gpu ## + ## sparse_data_dist ## + ## wait_sparse_data_dist ##"
    assert f.severity == "low"
