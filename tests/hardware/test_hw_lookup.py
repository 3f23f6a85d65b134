"""Resolving device names as profilers report them, including every device in the corpus."""

from __future__ import annotations

import gzip
import json
import sqlite3
import pytest
from conftest import CORPUS

from traceclass import hardware

# (name as reported, SM/CU count, memory bytes, expected spec or None)
REPORTED = [
    # torch.profiler deviceProperties in corpus/torch/gpu
    ("NVIDIA A100-PG509-200", 108, 42297524224, "a100-sxm4-40gb"),
    ("NVIDIA A100-SXM4-80GB", 108, 84990623744, "a100-sxm4-80gb"),
    ("NVIDIA B200", 148, 191503138816, "b200"),
    ("NVIDIA H100 80GB HBM3", 132, 85018279936, "h100-sxm"),
    ("AMD Instinct MI210", 104, 68702699520, "mi210"),
    ("AMD Instinct MI300X", 304, 206141652992, "mi300x"),
    ("Tesla V100-SXM2-32GB", 80, 34079637504, "v100-sxm2-32gb"),
    # ROCm names MI250 GCDs (and consumer APUs) "AMD Radeon Graphics": deliberately unresolved
    ("AMD Radeon Graphics", 104, 68702699520, None),
    # nsys TARGET_INFO_GPU / TARGET_INFO_CUDA_GPU in corpus/nsys
    ("Tesla V100-PCIE-32GB", 80, 32510 * 2**20, "v100-pcie-32gb"),
    ("NVIDIA GeForce RTX 3080", 68, 10495524864, "rtx-3080"),
    ("NVIDIA GeForce RTX 2070 SUPER", 40, 8368816128, "rtx-2070-super"),
    ("NVIDIA A100-SXM4-40GB", 108, 42297524224, "a100-sxm4-40gb"),
    ("NVIDIA GeForce GTX 1050", 6, 3149266944, "gtx-1050-3gb"),
    ("NVIDIA RTX A5000", 64, 25283526656, "rtx-a5000"),
    ("NVIDIA GeForce RTX 3060", 28, 12884377600, "rtx-3060"),
    # the corpus "Orin" (GA10B) has 8 SMs and 8 GB: an Orin NX/Nano, not the AGX Orin we model
    ("Orin", 8, 7990091776, None),
]


@pytest.mark.parametrize("name,sms,mem,expected", REPORTED)
def test_corpus_device_names(name: str, sms: int, mem: int, expected: str | None) -> None:
    spec = hardware.lookup(name, sm_count=sms, memory_bytes=mem)
    assert (spec.name if spec else None) == expected


@pytest.mark.parametrize(
    "name,expected",
    [
        ("NVIDIA H100 PCIe", "h100-pcie"),
        ("NVIDIA H100 NVL", "h100-nvl"),
        ("NVIDIA H200", "h200-sxm"),
        ("NVIDIA H200 NVL", "h200-nvl"),
        ("NVIDIA A100-PCIE-40GB", "a100-pcie-40gb"),
        ("NVIDIA A100 80GB PCIe", "a100-pcie-80gb"),
        ("Tesla V100-SXM2-16GB", "v100-sxm2-16gb"),
        ("Tesla V100-PCIE-16GB", "v100-pcie-16gb"),
        ("NVIDIA L4", "l4"),
        ("NVIDIA L40S", "l40s"),
        ("NVIDIA A10", "a10"),
        ("Tesla T4", "t4"),
        ("NVIDIA GeForce RTX 3090", "rtx-3090"),
        ("NVIDIA GeForce RTX 4090", "rtx-4090"),
        ("AMD Instinct MI250X", "mi250x"),
        ("AMD Instinct MI250", "mi250"),
        ("Orin", "jetson-agx-orin-64gb"),
        ("  nvidia   h100 80gb hbm3 ", "h100-sxm"),
    ],
)
def test_reported_names_resolve(name: str, expected: str) -> None:
    spec = hardware.lookup(name)
    assert spec is not None and spec.name == expected


@pytest.mark.parametrize(
    "name",
    [
        "",
        "AMD Radeon Graphics",
        "NVIDIA H100",  # SXM, PCIe or NVL?
        "NVIDIA GeForce GTX 1050",  # 2 GB or 3 GB board, no hint given
        "NVIDIA GH200 480GB",  # not an H200
        "NVIDIA GB200",  # not an HGX B200
        "NVIDIA A10G",  # not an A10
        "NVIDIA L40",  # not an L40S
        "NVIDIA GeForce RTX 3090 Ti",
        "NVIDIA GeForce RTX 4090 D",
        "NVIDIA GeForce RTX 3060 Laptop GPU",
        "Tesla V100S-PCIE-32GB",
        "AMD Instinct MI355X",
        "Intel(R) Data Center GPU Max 1550",
        "something else",
    ],
)
def test_unknown_or_ambiguous_names_give_none(name: str) -> None:
    assert hardware.lookup(name) is None


def test_hints_reject_a_board_that_shares_the_name() -> None:
    assert hardware.lookup("NVIDIA GeForce RTX 3060", memory_bytes=8 * 2**30) is None  # the 8 GB board
    assert hardware.lookup("NVIDIA GeForce RTX 3080", sm_count=70) is None  # the 12 GB board
    assert hardware.lookup("Orin", sm_count=16, memory_bytes=64 * 10**9).name == "jetson-agx-orin-64gb"
    assert hardware.lookup("NVIDIA GeForce GTX 1050", sm_count=5).name == "gtx-1050"


def _corpus_torch_devices() -> list[tuple[str, int, int]]:
    out = set()
    for path in sorted((CORPUS / "torch" / "gpu").glob("*.json.gz")):
        with gzip.open(path) as f:
            doc = json.load(f)
        if isinstance(doc, dict):
            for p in doc.get("deviceProperties", []):
                out.add((p["name"], p.get("numSms"), p.get("totalGlobalMem")))
    return sorted(out)


def _corpus_nsys_devices() -> list[tuple[str, int | None]]:
    out = set()
    for path in sorted((CORPUS / "nsys").glob("*.sqlite")):
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            tables = {r[0] for r in con.execute("select name from sqlite_master where type='table'")}
            if "TARGET_INFO_CUDA_GPU" in tables:
                out.update((n, s) for n, s in con.execute("select name, numMultiprocessors from TARGET_INFO_CUDA_GPU"))
            elif "TARGET_INFO_GPU" in tables:
                cols = {r[1] for r in con.execute("pragma table_info(TARGET_INFO_GPU)")}
                if "smCount" in cols:
                    out.update(con.execute("select name, smCount from TARGET_INFO_GPU"))
        finally:
            con.close()
    return sorted(out)


@pytest.mark.skipif(not CORPUS.exists(), reason="corpus not available")
def test_every_corpus_device_name_is_covered_by_the_table_above() -> None:
    """A new corpus file with a new device must get an explicit expectation here."""
    listed = {r[0] for r in REPORTED}
    torch_devs = _corpus_torch_devices()
    nsys_devs = _corpus_nsys_devices()
    assert torch_devs and nsys_devs
    missing = {n for n, *_ in torch_devs + nsys_devs} - listed
    assert not missing
    for name, sms, mem in torch_devs:
        expected = next(e for n, s, m, e in REPORTED if n == name)
        spec = hardware.lookup(name, sm_count=sms, memory_bytes=mem)
        assert (spec.name if spec else None) == expected, name
