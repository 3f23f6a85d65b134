"""Device spec data: completeness, sourcing, internal consistency, API behaviour."""

from __future__ import annotations

import dataclasses
import math

import pytest

from traceclass import hardware
from traceclass.errors import ConfigError
from traceclass.hardware.specs import _parse

REQUIRED = [
    "v100-sxm2-16gb", "v100-sxm2-32gb", "v100-pcie-16gb", "v100-pcie-32gb",
    "a100-sxm4-40gb", "a100-sxm4-80gb", "a100-pcie-40gb", "a100-pcie-80gb",
    "h100-sxm", "h100-pcie", "h100-nvl", "h200-sxm", "b200",
    "l4", "l40s", "a10", "t4", "rtx-3090", "rtx-4090",
    "mi210", "mi250", "mi250x", "mi300x", "jetson-agx-orin-64gb",
    "rtx-3060", "rtx-3080", "rtx-2070-super", "rtx-a5000", "gtx-1050", "gtx-1050-3gb",
    "cpu-generic-avx2",
]

SPECS = hardware.load_specs()


@pytest.mark.parametrize("name", REQUIRED)
def test_required_device_present(name: str) -> None:
    assert name in SPECS


@pytest.mark.parametrize("name", sorted(SPECS))
def test_every_figure_positive_and_sourced(name: str) -> None:
    spec = SPECS[name]
    assert spec.name == name
    assert spec.vendor in {"nvidia", "amd", "cpu"}
    assert spec.memory_bandwidth_bps > 0
    assert spec.sources["memory_bandwidth"].strip()
    assert spec.peaks, "a device without any peak is useless for the roofline"
    for key, value in spec.peaks.items():
        assert key in hardware.PEAK_KEYS
        assert value > 0 and math.isfinite(value)
        assert "http" in spec.sources[key], f"{name}.{key} has no URL in its source"
    # every device has a plain fp32 rate: the roofline of every elementwise op needs it
    assert "vector_fp32" in spec.peaks


@pytest.mark.parametrize("name", sorted(SPECS))
def test_figures_are_physically_ordered(name: str) -> None:
    """Catches a typo by orders of magnitude or a sparse figure left undivided."""
    p = SPECS[name].peaks
    if "matrix_fp16" in p:
        assert p["matrix_fp16"] >= p["vector_fp32"]
    if "matrix_bf16" in p and "matrix_fp16" in p:
        assert p["matrix_bf16"] == p["matrix_fp16"]
    if "matrix_fp8" in p:
        assert p["matrix_fp8"] == pytest.approx(2 * p["matrix_fp16"], rel=0.02)
    if "matrix_tf32" in p and "matrix_fp16" in p:
        assert p["matrix_tf32"] <= p["matrix_fp16"]
    if "vector_fp64" in p:
        assert p["vector_fp64"] <= p["vector_fp32"]
    if "matrix_fp64" in p:
        assert p["matrix_fp64"] >= p["vector_fp64"]
    # no single device exceeds 10 PFLOP/s dense or 10 TB/s today
    assert max(p.values()) < 10e15
    assert SPECS[name].memory_bandwidth_bps < 10e12


def test_dense_figures_are_half_of_sparse_ones_where_derived() -> None:
    h100 = SPECS["h100-sxm"]
    assert h100.peaks["matrix_bf16"] == 989.5e12
    assert "sparsity" in h100.sources["matrix_bf16"]
    assert "nvidia-tensor-core-gpu-datasheet" in h100.sources["matrix_bf16"]
    assert SPECS["a100-sxm4-80gb"].peaks["matrix_bf16"] == 312e12
    assert SPECS["mi300x"].peaks["matrix_bf16"] == 1307.4e12


def test_sxm_and_pcie_differ_where_the_datasheets_do() -> None:
    assert SPECS["h100-pcie"].peaks["matrix_bf16"] < SPECS["h100-sxm"].peaks["matrix_bf16"]
    assert SPECS["a100-pcie-80gb"].memory_bandwidth_bps < SPECS["a100-sxm4-80gb"].memory_bandwidth_bps
    assert SPECS["v100-pcie-32gb"].peaks["vector_fp32"] < SPECS["v100-sxm2-32gb"].peaks["vector_fp32"]


def test_mi250_entries_are_per_gcd() -> None:
    assert SPECS["mi250x"].peaks["matrix_bf16"] == pytest.approx(383e12 / 2)
    assert SPECS["mi250x"].memory_gb == 64
    assert any("GCD" in n for n in SPECS["mi250x"].notes)


# --------------------------------------------------------------------------- peak_flops fallbacks


def test_peak_flops_exact_key() -> None:
    assert hardware.peak_flops(SPECS["h100-sxm"], "bf16", "matrix") == 989.5e12
    assert hardware.peak_flops(SPECS["h100-sxm"], "tf32", "matrix") == 494.5e12


def test_fp32_matmul_is_not_promoted_to_tf32() -> None:
    a100 = SPECS["a100-sxm4-80gb"]
    assert hardware.peak_flops(a100, "fp32", "matrix") == 19.5e12  # CUDA-core SGEMM
    assert hardware.peak_flops(a100, "tf32", "matrix") == 156e12  # only when asked for
    assert hardware.peak_flops(SPECS["mi300x"], "fp32", "matrix") == 163.4e12  # real matrix path


def test_fp64_matrix_prefers_tensor_path_then_vector() -> None:
    assert hardware.peak_flops(SPECS["a100-sxm4-80gb"], "fp64", "matrix") == 19.5e12
    assert hardware.peak_flops(SPECS["v100-sxm2-32gb"], "fp64", "matrix") == 7.8e12


def test_half_vector_falls_back_to_fp32_only_on_the_vector_path() -> None:
    v100 = SPECS["v100-sxm2-32gb"]
    assert hardware.peak_flops(v100, "bf16", "vector") == v100.peaks["vector_fp32"]
    assert hardware.peak_flops(v100, "bf16", "matrix") is None  # Volta has no BF16 tensor path
    assert hardware.peak_flops(SPECS["t4"], "fp8", "matrix") is None
    assert hardware.peak_flops(SPECS["h100-sxm"], "int64", "vector") is None
    assert hardware.peak_flops(SPECS["a100-sxm4-80gb"], "tf32", "vector") is None
    with pytest.raises(ValueError):
        hardware.peak_flops(v100, "fp32", "tensor")


def test_ridge_point() -> None:
    h100 = SPECS["h100-sxm"]
    assert hardware.ridge_point(h100, "bf16", "matrix") == pytest.approx(989.5e12 / 3.35e12)
    assert hardware.ridge_point(h100, "fp32", "vector") == pytest.approx(67e12 / 3.35e12)
    assert hardware.ridge_point(SPECS["t4"], "bf16", "matrix") is None


def test_with_measured_bandwidth() -> None:
    base = SPECS["a100-sxm4-40gb"]
    measured = hardware.with_measured_bandwidth(base, 1.4e12)
    assert measured.memory_bandwidth_bps == 1.4e12
    assert measured.peaks == base.peaks
    assert "profiler" in measured.sources["memory_bandwidth"]
    assert any("Memory bandwidth 1.4 TB/s as reported by the profiler (datasheet: 1.55 TB/s)" in n for n in measured.notes)
    assert base.memory_bandwidth_bps == 1555e9  # the cached spec is untouched
    assert hardware.with_measured_bandwidth(base, 0.0) is base
    assert hardware.with_measured_bandwidth(base, float("nan")) is base


def test_spec_is_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        SPECS["h100-sxm"].memory_bandwidth_bps = 1.0  # type: ignore[misc]
    with pytest.raises(TypeError):
        SPECS["h100-sxm"].peaks["matrix_bf16"] = 1.0  # type: ignore[index]


# --------------------------------------------------------------------------- CPU entries


def test_cpu_entry_is_per_core_and_scales_linearly() -> None:
    one = hardware.default_cpu()
    assert one.kind == "cpu" and one.cores == 1
    assert one.peaks["vector_fp32"] == 32 * 3.0e9
    sixteen = hardware.cpu_spec("cpu-generic-avx2", cores=16)
    assert sixteen.peaks["vector_fp32"] == 16 * one.peaks["vector_fp32"]
    assert sixteen.memory_bandwidth_bps == one.memory_bandwidth_bps == 2 * 25.6e9
    assert "16 cores" in sixteen.label and sixteen.name == "cpu-generic-avx2:16"
    faster = hardware.cpu_spec("cpu-generic-avx2", cores=4, clock_hz=4e9, memory_bandwidth_bps=80e9)
    assert faster.peaks["vector_fp64"] == 4 * 16 * 4e9
    assert faster.memory_bandwidth_bps == 80e9
    assert any("Assumptions" in n for n in one.notes)
    assert hardware.peak_flops(sixteen, "fp32", "matrix") == sixteen.peaks["vector_fp32"]


def test_cpu_override_syntax() -> None:
    assert hardware.get("cpu-generic-avx2:8").cores == 8
    assert hardware.get("cpu:2").peaks["vector_fp32"] == 2 * 96e9
    with pytest.raises(ConfigError):
        hardware.get("cpu-generic-avx2:zero")
    with pytest.raises(ConfigError):
        hardware.cpu_spec("h100-sxm", cores=2)


# --------------------------------------------------------------------------- get()


def test_get_by_name_alias_and_reported_name() -> None:
    assert hardware.get("h100-sxm").name == "h100-sxm"
    assert hardware.get("H100").name == "h100-sxm"
    assert hardware.get("mi300x").name == "mi300x"
    assert hardware.get("NVIDIA A100-SXM4-80GB").name == "a100-sxm4-80gb"
    assert hardware.get("orin").name == "jetson-agx-orin-64gb"


def test_get_unknown_raises_one_line_config_error_with_close_names() -> None:
    with pytest.raises(ConfigError) as e:
        hardware.get("nonsense")
    assert "\n" not in str(e.value) and "--device" in str(e.value)
    with pytest.raises(ConfigError) as e:
        hardware.get("h10O-sxm")
    assert "h100-sxm" in str(e.value) and "close names" in str(e.value)


# --------------------------------------------------------------------------- loader validation


def _minimal(**peak: object) -> dict:
    return {
        "sources": {"s": "Some datasheet - https://example.com"},
        "devices": {"x": {"vendor": "nvidia", "match": [], "memory_bandwidth": {"value": 1e12, "source": "s"},
                          "peaks": peak}},
    }


def test_loader_rejects_bad_figures() -> None:
    assert _parse(_minimal(vector_fp32={"value": 1e12, "source": "s"})).specs["x"].peaks["vector_fp32"] == 1e12
    for bad in ({"value": 0, "source": "s"}, {"value": -1.0, "source": "s"}, {"value": 1e12, "source": "nope"},
                {"value": 1e12}):
        with pytest.raises(ConfigError):
            _parse(_minimal(vector_fp32=bad))
    with pytest.raises(ConfigError):
        _parse(_minimal(tensor_fp32={"value": 1e12, "source": "s"}))
