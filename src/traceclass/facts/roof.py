"""The roof a piece of work is measured against: its device's peak for a precision and unit."""

from __future__ import annotations

from traceclass.analysis.devices import ResolvedDevice
from traceclass.analysis.roofline import Roof


def roof_for(devices: dict[int, ResolvedDevice], device: int, precision: str, unit: str) -> Roof | None:
    from traceclass import hardware

    rd = devices.get(device)
    if rd is None or rd.spec is None:
        return None
    spec = rd.spec
    if unit == "link":  # host <-> device copies: the PCIe / C2C link is the roof
        if not spec.host_link_bps:
            return None
        return Roof(device=spec.name, precision="", unit="link", peak_flops=None,
                    bandwidth_bps=spec.host_link_bps)
    return Roof(
        device=spec.name,
        precision=precision,
        unit=unit,
        peak_flops=hardware.peak_flops(spec, precision, unit) if precision else None,
        bandwidth_bps=spec.memory_bandwidth_bps,
    )
