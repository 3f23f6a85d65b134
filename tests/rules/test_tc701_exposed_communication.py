"""TC701 exposed-communication: exact exposed time and overlap on hand-built traces, and the corpus."""

from __future__ import annotations

from conftest import corpus
from kineto_builder import KinetoBuilder
from ruletest import findings_for
from traceclass.ingest import load

ALLREDUCE = "ncclKernel_AllReduce_RING_LL_Sum_float"
BROADCAST = "ncclKernel_Broadcast_RING_LL_Sum_int8_t"


def _ddp_trace(tmp_path, device: int = 0, collective: str = "all_reduce", name: str = "ddp.json",
               compute_end: int = 2_800_000):
    """Two 2 ms steps, the first warm-up. Each step: a GEMM on stream 7 from step start + 0 to
    ``compute_end`` (relative to the second step), an all-reduce of 1 Mi floats on stream 20 from
    +0.5 to +1.5 ms (c10d op with shapes, inside nccl:<collective>), a broadcast (no shapes) from
    +1.6 to +1.7 ms. In the steady step a second all-reduce runs 3.9 .. 4.3 ms, past the step end
    at 4 ms."""
    b = KinetoBuilder(pid=100)
    for k, t0 in enumerate((0, 2_000_000)):
        b.step(k + 1, t0, 2_000_000)
        mm = b.op("aten::mm", t0 + 1_000, 5_000)
        b.launch(mm, "sm80_gemm", t0 + 2_000, t0, compute_end - 2_000_000, device=device)
        c10d = b.op(f"c10d::{collective.replace('_', '')}_", t0 + 10_000, 50_000, dims=[[1 << 20]], types=["float"])
        b.annotation(f"nccl:{collective}", t0 + 20_000, 30_000)
        b.launch(c10d, ALLREDUCE, t0 + 25_000, t0 + 500_000, 1_000_000, stream=20, device=device)
        bc = b.op("c10d::broadcast_", t0 + 70_000, 20_000)
        b.annotation("nccl:broadcast", t0 + 72_000, 10_000)
        b.launch(bc, BROADCAST, t0 + 75_000, t0 + 1_600_000, 100_000, stream=20, device=device)
    tail = b.op(f"c10d::{collective.replace('_', '')}_", 3_800_000, 50_000, dims=[[1 << 18]], types=["float"])
    b.annotation(f"nccl:{collective}", 3_810_000, 30_000)
    b.launch(tail, ALLREDUCE, 3_815_000, 3_900_000, 400_000, stream=20, device=device)
    return load(b.write(tmp_path / name))


def test_exposed_communication_exact(tmp_path):
    t = _ddp_trace(tmp_path)
    (f,) = findings_for(t, "TC701")
    # steady step 2-4 ms: all-reduce 2.5-3.5 (GEMM to 2.8: 0.7 exposed), broadcast 3.6-3.7 (0.1),
    # tail all-reduce 3.9-4.0 inside the step (0.1; its 0.3 ms after the step end is not counted)
    assert f.values["comm_ns"] == 1_200_000 and f.values["exposed_ns"] == 900_000
    assert f.values["analysed_ns"] == 2_000_000 and f.values["exposed_pct"] == 45.0
    assert f.values["overlap_pct"] == 25.0  # 0.3 of 1.2 ms overlapped by the GEMM
    assert f.recoverable_ns == 900_000 and f.severity == "medium"  # 45 %, but under 1 ms
    assert f.values["kernels_count"] == 3 and f.values["collectives_count"] == 2
    # the timeline counts both steps and the tail past the step end
    assert f.values["timeline_comm_ns"] == 2 * 1_100_000 + 400_000
    ar, bc = f.evidence
    assert ar.values["collective"] == "nccl:all_reduce" and ar.count == 2 and ar.duration_ns == 800_000
    assert ar.values["comm_ns"] == 1_100_000
    assert ar.bytes == ((1 << 20) + (1 << 18)) * 4 and ar.values["elements"] == (1 << 20) + (1 << 18)
    assert "5.24 MB in messages" in ar.what
    assert bc.values["collective"] == "nccl:broadcast" and bc.bytes is None and bc.duration_ns == 100_000
    assert f.location == "exposed communication: nccl:all_reduce + nccl:broadcast"
    assert f.message.startswith("GPU 0: 3 communication kernels ran 1.2 ms inside the steady steps, 900 µs of it "
                                "with no compute kernel alongside: 45.0% of the 2 ms analysed (threshold 5.0%); "
                                "comm/compute overlap 25.0%")
    assert "most exposed: nccl:all_reduce x2 (800 µs exposed)" in f.message


def test_overlapped_communication_is_silent(tmp_path):
    # the GEMM runs to 3.75 ms: only the tail all-reduce's 100 us inside the step is exposed, 5.0 %
    t = _ddp_trace(tmp_path, compute_end=3_750_000)
    (f,) = findings_for(t, "TC701")  # at the threshold: reported
    assert f.values["exposed_ns"] == 100_000 and f.values["exposed_pct"] == 5.0
    assert findings_for(t, "TC701", min_exposed_pct=5.1) == []
    t2 = _ddp_trace(tmp_path, compute_end=4_000_000, name="full.json")
    assert findings_for(t2, "TC701", min_exposed_pct=0.0) == []  # every comm ns under a GEMM


def test_no_communication_no_finding(tmp_path):
    b = KinetoBuilder()
    b.step(1, 0, 1_000_000)
    b.launch(b.op("aten::mm", 0, 5_000), "sm80_gemm", 1_000, 10_000, 100_000)
    assert findings_for(load(b.write(tmp_path / "none.json")), "TC701") == []


def test_same_program_on_another_device_fingerprints_alike(tmp_path):
    (a,) = findings_for(_ddp_trace(tmp_path, device=0, name="d0.json"), "TC701")
    (b,) = findings_for(_ddp_trace(tmp_path, device=5, name="d5.json"), "TC701")
    (c,) = findings_for(_ddp_trace(tmp_path, device=5, collective="reduce_scatter", name="rs.json"), "TC701")
    assert a.message.startswith("GPU 0:") and b.message.startswith("GPU 5:")
    assert a.fingerprint == b.fingerprint
    assert c.location == "exposed communication: nccl:broadcast + nccl:reduce_scatter"
    assert c.fingerprint != a.fingerprint


def test_corpus_ddp_a100():
    (f,) = findings_for(corpus("torch", "gpu", "a100_nccl_collectives.json.gz"), "TC701")
    # 10 all-reduces and 4 broadcasts in the two steady steps; compute covers 15.7 % of them
    assert f.values["comm_ns"] == 34_887_472 and f.values["exposed_ns"] == 29_395_706
    assert f.values["exposed_pct"] == 6.611 and f.values["overlap_pct"] == 15.74
    assert f.severity == "medium"
    assert [(e.values["collective"], e.count) for e in f.evidence] == [("nccl:all_reduce", 10), ("nccl:broadcast", 4)]
    # the timeline's whole-window figures: 46.9 ms of communication, 39.6 ms exposed
    assert f.values["timeline_comm_ns"] == 46_876_493 and f.values["timeline_exposed_comm_ns"] == 39_559_468


def test_corpus_torchrec_rank0_of16():
    (f,) = findings_for(corpus("torch", "gpu", "a100_train_rank0_of16.json.gz"), "TC701")
    assert f.values["exposed_ns"] == 132_961_000 and f.values["exposed_pct"] == 15.384
    assert f.values["overlap_pct"] == 1.42 and f.severity == "high"
    by = {e.values["collective"]: e for e in f.evidence}
    assert set(by) == {"nccl:all_reduce", "nccl:all_to_all", "nccl:_all_gather_base", "nccl:_reduce_scatter_base"}
    assert by["nccl:all_reduce"].count == 8 and by["nccl:all_reduce"].duration_ns == f.evidence[0].duration_ns
    # the reduce-scatter's largest tensor: 65536 x 384 floats per call (100.7 MB), 8 calls: 470 MB
    assert by["nccl:_reduce_scatter_base"].bytes == 469_762_048
    assert by["nccl:all_reduce"].bytes is None  # a TensorList of the old format: no shapes


def test_corpus_mi300x_resnet():
    (f,) = findings_for(corpus("torch", "gpu", "mi300x_resnet_act_checkpoint_train.json.gz"), "TC701")
    # RCCL's ncclDevKernel_Generic: long collectives (8.5 ms each) in 16 ms steps
    assert f.values["exposed_ns"] == 23_037_739 and f.values["exposed_pct"] == 72.359
    assert f.values["overlap_pct"] == 19.74 and f.severity == "high"
    by = {e.values["collective"]: e for e in f.evidence}
    # shapes without dtype (TensorList): elements, no bytes
    assert by["nccl:all_reduce"].values["elements"] == 11_689_512 and by["nccl:all_reduce"].bytes is None
    assert "ncclDevKernel_Generic" in by  # kernels with no recorded launch keep their kernel name


def test_corpus_without_collective_kernels_is_silent():
    for name in ("b200_eager.json.gz", "v100_ns_resolution.json.gz"):
        fs = findings_for(corpus("torch", "gpu", name), "TC701")
        # b200: 2.14 ms of all-reduce kernels, all exposed, but 2.45 % of 87 ms; v100 (1 rank) has no NCCL kernels
        assert fs == []
