"""Fingerprints of the GPU rules: the same program on another device index matches, another site
does not, two GPUs of one process stay apart, and severities share one scale."""

from __future__ import annotations

import pytest

from conftest import corpus
from kineto_builder import KinetoBuilder
from ruletest import findings_for
from traceclass.ingest import load
from traceclass.rule import Context, severity_for

CODES = ("TC101", "TC201", "TC202", "TC203", "TC301", "TC302", "TC303", "TC401", "TC601")
N = 2048
SHAPE, PERMUTED = [16, 128, 64], [8192, 1, 128]


def _step(b: KinetoBuilder, s: int, name: str, line: int, device: int) -> None:
    """One 4 ms step of the program (times in us from s), all inside stage:<name> and a Python
    frame train.py(<line>): an fp32 2048^3 aten::mm on sgemm (0.5 ms, TC101); 12 tiny adds in
    stage:<name>_storm (TC201, TC601); aten::add/relu host work before a 50 us kernel (TC202
    launch overhead); .item(): pageable 4-byte DtoH + stream sync, then idle until aten::mul
    (TC203, TC302, TC303, TC202 host-sync); a permute().contiguous() copy kernel (TC401); a pageable
    8 MiB HtoD copy from aten::to > aten::copy_ with nothing running (TC301, TC302)."""
    b.annotation(f"stage:{name}", s + 1_000, 3_980_000)
    b.python(f"train.py({line}): step", s + 1_000, 3_980_000)
    mm = b.op("aten::mm", s + 2_000, 6_000, dims=[[N, N], [N, N]], types=["float", "float"], strides=[[N, 1], [N, 1]])
    b.launch(mm, "ampere_sgemm_128x64_nn", s + 3_000, s + 10_000, 500_000, device=device)
    b.annotation(f"stage:{name}_storm", s + 600_000, 200_000)
    for i in range(12):
        ks = s + 610_000 + i * 10_000
        add = b.op("aten::add", ks - 6_000, 4_000)
        b.launch(add, "add_kernel", ks - 5_000, ks, 2_000, cpu_dur=2_000, device=device)
    b.op("aten::add", s + 730_000, 170_000)
    relu = b.op("aten::relu", s + 900_000, 100_000)
    b.launch(relu, "relu_kernel", s + 990_000, s + 1_000_000, 50_000, device=device)
    b.op("aten::item", s + 1_100_000, 20_000)
    lsd = b.op("aten::_local_scalar_dense", s + 1_101_000, 18_000)
    corr = b.runtime("cudaMemcpyAsync", s + 1_102_000, 5_000, ext=lsd)
    b.memcpy("DtoH", "Device", "Pageable", s + 1_107_000, 2_000, 4, corr=corr, device=device)
    corr = b.runtime("cudaStreamSynchronize", s + 1_108_000, 4_000, ext=lsd)
    b.sync("Stream Sync", s + 1_108_000, 4_000, stream=7, corr=corr, device=device)
    mul = b.op("aten::mul", s + 1_290_000, 10_000)
    b.launch(mul, "mul_kernel", s + 1_295_000, s + 1_305_000, 10_000, device=device)
    b.op("aten::permute", s + 1_350_000, 10_000, dims=[[16, 64, 128], []], types=["float", "ScalarList"],
         strides=[[8192, 128, 1], []], concrete=["", "[0, 2, 1]"])
    ext = b.op("aten::contiguous", s + 1_370_000, 50_000, dims=[SHAPE, []], types=["float", "Scalar"],
               strides=[PERMUTED, []], concrete=["", "0"])
    b.op("aten::clone", s + 1_372_000, 45_000, dims=[SHAPE, []], types=["float", "Scalar"], strides=[PERMUTED, []],
         concrete=["", "0"])
    cp = b.op("aten::copy_", s + 1_375_000, 40_000, dims=[SHAPE, SHAPE, []], types=["float", "float", "Scalar"],
              strides=[[8192, 64, 1], PERMUTED, []], concrete=["", "", "False"])
    b.launch(cp, "elementwise_kernel", s + 1_380_000, s + 1_400_000, 300_000, device=device)
    assert ext
    to = b.op("aten::to", s + 1_750_000, 600_000)
    cp = b.op("aten::copy_", s + 1_760_000, 580_000)
    corr = b.runtime("cudaMemcpyAsync", s + 1_770_000, 560_000, ext=cp)
    b.memcpy("HtoD", "Pageable", "Device", s + 1_800_000, 500_000, 8 << 20, corr=corr, device=device)
    assert to


def _program(tmp_path, device: int = 0, name: str = "loop", line: int = 42, devices: tuple[int, ...] = ()):
    b = KinetoBuilder()
    for k in range(3):
        b.step(k + 1, k * 4_000_000, 4_000_000)
        for d in devices or (device,):
            _step(b, k * 4_000_000, name, line, d)
    return load(b.write(tmp_path / f"p{device}{name}{line}{len(devices)}.json"))


def _fingerprints(trace, code: str) -> list[str]:
    return sorted(f.fingerprint for f in findings_for(trace, code))


@pytest.fixture(scope="module")
def programs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("fp")
    return {"d0": _program(tmp, 0), "d6": _program(tmp, 6), "other": _program(tmp, 6, name="tail", line=77)}


@pytest.mark.parametrize("code", CODES)
def test_same_program_on_another_device_has_the_same_fingerprints(programs, code):
    a, b = findings_for(programs["d0"], code), findings_for(programs["d6"], code)
    assert a, f"{code} does not fire on the test program"
    assert sorted(f.fingerprint for f in a) == sorted(f.fingerprint for f in b)
    for f in a + b:
        assert "gpu0" not in f.location and "gpu6" not in f.location and "device 6" not in f.location
    assert all(f.message != g.message for f, g in zip(a, b) if "GPU 0" in f.message)  # messages still say which GPU


@pytest.mark.parametrize("code", CODES)
def test_another_site_has_other_fingerprints(programs, code):
    same_device = set(_fingerprints(programs["d6"], code))
    other = set(_fingerprints(programs["other"], code))
    assert other and not (same_device & other), code


def test_two_gpus_of_one_process_stay_apart(tmp_path):
    t = _program(tmp_path, devices=(0, 1))
    for code in ("TC201", "TC301", "TC601"):
        locations = [f.location for f in findings_for(t, code)]
        assert len(locations) == len(set(locations)) and len(locations) >= 2, code
        assert any(loc.endswith("(GPU 2 of 2)") for loc in locations), code


def test_cuda_event_sync_severities_share_one_scale():
    """The reviewer's case: a 1-byte copy waited on at once (35 us) was rated high against a
    263 us GPU window, a 212 us low-utilization window medium against the step. On the shared
    scale (the 3.15 ms step, high needs >= 1 ms) nothing in this trace is high."""
    path = corpus("torch", "gpu", "cuda_event_sync.json.gz")
    sev = {}
    for code in ("TC202", "TC203", "TC302", "TC303", "TC601"):
        for f in findings_for(path, code):
            sev[(code, f.location)] = (f.severity, f.recoverable_ns)
    assert all(s != "high" for s, _ in sev.values())
    (tc303,) = [v for k, v in sev.items() if k[0] == "TC303"]
    # issue 10: both point to the rules of the causes (TC203 host-sync, TC202 launch overhead)
    assert tc303 == ("info", 0)
    (tc601,) = [v for k, v in sev.items() if k[0] == "TC601"]
    assert tc601 == ("info", 0)
    # a finding worth nothing is info, folded by the renderer
    assert all(s == "info" for s, r in sev.values() if r == 0)


def test_severity_floors():
    assert severity_for(35_000, 263_000) == "high"  # the bare share
    kw = dict(high_min_ns=1_000_000, medium_min_ns=100_000, zero="info")
    assert severity_for(35_000, 263_000, **kw) == "low"
    assert severity_for(500_000, 1_000_000, **kw) == "medium"
    assert severity_for(1_000_000, 10_000_000, **kw) == "high"
    assert severity_for(0, 10_000_000, **kw) == "info"


def test_analysed_time_is_the_steady_steps(programs):
    from traceclass.analysis import analyze

    t = programs["d0"]
    ctx = Context(trace=t, analysis=analyze(t))
    assert ctx.analysed_ns == 8_000_000 and ctx.analysed.steps_count == 2 and not ctx.analysed.synthetic
    assert ctx.severity(1_000_000) == "high" and ctx.severity(999_999) == "medium" and ctx.severity(0) == "info"
