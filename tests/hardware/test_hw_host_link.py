"""Host-link (PCIe) bandwidth figures: optional, per direction, sourced."""

from __future__ import annotations

import pytest

from traceclass import hardware
from traceclass.errors import ConfigError
from traceclass.hardware.specs import _parse

SPECS = hardware.load_specs()


@pytest.mark.parametrize("name,gbps", [("v100-pcie-32gb", 16), ("a100-sxm4-80gb", 32), ("h100-sxm", 64),
                                       ("mi300x", 64), ("t4", 16), ("rtx-3080", 32)])
def test_host_link_per_direction(name: str, gbps: int) -> None:
    spec = SPECS[name]
    assert spec.host_link_bps == gbps * 1e9
    assert "http" in spec.sources["host_link"]


def test_host_link_is_optional_and_never_invented() -> None:
    # integrated memory (Jetson) and per-GCD MI250 entries have no separate host link on record
    assert SPECS["jetson-agx-orin-64gb"].host_link_bps is None
    assert SPECS["mi250"].host_link_bps is None
    assert "host_link" not in SPECS["mi250"].sources


def test_host_link_figures_are_plausible() -> None:
    for spec in SPECS.values():
        if spec.host_link_bps is not None:
            # PCIe Gen3..Gen5 x16 per direction; never above device memory bandwidth
            assert 8e9 <= spec.host_link_bps <= 128e9
            assert spec.host_link_bps < spec.memory_bandwidth_bps


def test_host_link_rejects_unsourced_figure() -> None:
    raw = {"sources": {"s": "Some datasheet - https://example.com"},
           "devices": {"x": {"vendor": "nvidia", "match": [], "memory_bandwidth": {"value": 1e12, "source": "s"},
                             "peaks": {"vector_fp32": {"value": 1e12, "source": "s"}},
                             "host_link": {"value": 32e9, "source": "nope"}}}}
    with pytest.raises(ConfigError):
        _parse(raw)
    raw["devices"]["x"]["host_link"] = {"value": 32e9, "source": "s"}
    assert _parse(raw).specs["x"].host_link_bps == 32e9
