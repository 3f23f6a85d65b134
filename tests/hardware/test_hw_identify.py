"""Devices identified from deviceProperties (architecture, SM/CU count, memory) when the name does not say."""

from __future__ import annotations

from kineto_builder import KinetoBuilder
from traceclass.analysis import analyze
from traceclass.hardware.identify import identify
from traceclass.ingest import load


def test_rocm_generic_name_is_an_mi300x():
    found = identify("amd", "gfx94", 304, 206141652992)
    assert found is not None and found.spec is not None and found.spec.name == "mi300x"
    assert found.how == "identified from deviceProperties (gfx94, 304 CUs, 192 GiB)"


def test_mi300a_and_mi325x_by_cu_count_and_memory():
    assert identify("amd", "gfx94", 228, 128 << 30).spec.name == "mi300a"
    assert identify("amd", "gfx94", 304, 256 << 30).spec.name == "mi325x"


def test_mi210_or_mi250_gcd_share_their_roofs():
    found = identify("amd", "gfx90", 104, 68702699520)
    assert found.spec is not None and found.spec.name == "mi210"
    assert found.candidates == ("AMD Instinct MI210", "AMD Instinct MI250 (one GCD)")
    assert "roofs agree within 1 %" in found.how


def test_mi355x_is_named_but_has_no_roofs():
    found = identify("amd", "gfx95", 256, 288 << 30)
    assert found.spec is None
    assert found.candidates == ("AMD Instinct MI350X", "AMD Instinct MI355X")
    assert "not in the hardware table" in found.how


def test_nvidia_ambiguous_boards_are_stated_with_candidates():
    found = identify("nvidia", "8.0", 108, 84990623744)  # SXM4 or PCIe: different bandwidths
    assert found.spec is None
    assert set(found.candidates) == {"NVIDIA A100 SXM4 80GB", "NVIDIA A100 PCIe 80GB"}
    assert found.how.startswith("ambiguous: deviceProperties (compute capability 8.0, 108 SMs, 79.2 GiB)")
    assert identify("nvidia", "9.0", 132, 85018279936).spec.name == "h100-sxm"


def test_too_little_reported_is_not_a_guess():
    assert identify("amd", "gfx94", None, None) is None
    assert identify("amd", None, 304, 192 << 30) is None


def test_trace_with_generic_rocm_name_gets_the_mi300x_roof(tmp_path):
    b = KinetoBuilder(gpu_name="AMD Radeon Graphics")
    b.top["deviceProperties"][0].update(numSms=304, totalGlobalMem=206141652992, computeMajor=9, computeMinor=4)
    b.top["hip_runtime_version"] = 60200
    b.op("aten::mm", 0, 50_000, dims=[[4096, 4096], [4096, 4096]], types=["c10::BFloat16"] * 2)
    b.launch(1, "Cijk_Alik_Bljk_BBS_BH_MT256x192x64_MI16x16x1_SN", 10_000, 100_000, 200_000)
    a = analyze(load(b.write(tmp_path / "rocm.json")))
    rd = a.devices[0]
    assert rd.spec is not None and rd.spec.name == "mi300x"
    assert rd.how.startswith("identified from deviceProperties")
