"""A device from what ``deviceProperties`` reports when its name does not say.

ROCm often names an Instinct part ``AMD Radeon Graphics`` (or nothing); CUDA names are usually
specific but not always (``NVIDIA Graphics Device`` on engineering boards, ``Tesla PG509``).
The architecture (CUDA compute capability; ROCm ``gfx`` version from computeMajor/Minor), the
SM/CU count and the memory size together narrow the table down:

* one entry fits: that spec;
* several fit whose roofs agree within 1 % (MI210 and one MI250 GCD: gfx90a, 104 CUs, 64 GB,
  181 TFLOP/s bf16, 1.64 TB/s): the first, and the candidates are named;
* several fit with different roofs, or the parts that fit are not in the table (MI350X and
  MI355X: gfx950, 256 CUs, 288 GB): no spec; the candidates are named.

A part must match every figure the trace reports; a figure the trace does not report does not
filter. Nothing is identified from the architecture alone.
"""

from __future__ import annotations

import dataclasses
import math

from traceclass import units
from traceclass.hardware.lookup import _fits
from traceclass.hardware.specs import DeviceSpec, _table

#: parts the trace may report that the hardware table has no roofs for: (label, arch, CUs, GB)
KNOWN_WITHOUT_SPEC = (
    ("AMD Instinct MI350X", "gfx95", 256, 288),
    ("AMD Instinct MI355X", "gfx95", 256, 288),
)


@dataclasses.dataclass(frozen=True)
class Identified:
    spec: DeviceSpec | None
    candidates: tuple[str, ...]  # labels of every part that fits
    how: str  # one line for the report


def identify(vendor: str, arch: str | None, sm_count: int | None, memory_bytes: int | None) -> Identified | None:
    """The part ``deviceProperties`` describe, or None when the trace reports too little to try."""
    if not arch or not (sm_count or memory_bytes):
        return None
    facts = _facts(arch, sm_count, memory_bytes)
    fits = [s for s in _table().specs.values()
            if s.kind == "gpu" and s.arch == arch and (not vendor or s.vendor == vendor) and
            _fits(s, sm_count, memory_bytes) and (sm_count is None or s.sm_count is not None)]
    extra = [label for label, a, cus, gb in KNOWN_WITHOUT_SPEC
             if a == arch and (not sm_count or sm_count == cus) and
             (not memory_bytes or 0.85 <= memory_bytes / 2**30 / gb <= 1.05)]
    labels = tuple([s.label for s in fits] + extra)
    if not labels:
        return Identified(None, (), f"deviceProperties ({facts}) fit no entry of the hardware table")
    if len(fits) == 1 and not extra:
        return Identified(fits[0], labels, f"identified from deviceProperties ({facts})")
    if fits and not extra and _same_roofs(fits):
        return Identified(fits[0], labels, f"deviceProperties ({facts}) fit {' or '.join(labels)}, whose roofs "
                                           f"agree within 1 %: judged as {fits[0].label}")
    if not fits:
        return Identified(None, labels, f"deviceProperties ({facts}) fit {' or '.join(labels)}, not in the "
                                        "hardware table: no roofline labels (--device NAME judges against a "
                                        "known spec)")
    return Identified(None, labels, f"ambiguous: deviceProperties ({facts}) fit {' or '.join(labels)}; "
                                    "pass --device NAME")


def _facts(arch: str, sm_count: int | None, memory_bytes: int | None) -> str:
    parts = [arch if arch.startswith("gfx") else f"compute capability {arch}"]
    if sm_count:
        parts.append(f"{sm_count} {'CUs' if arch.startswith('gfx') else 'SMs'}")
    if memory_bytes:
        parts.append(units.binary_size(memory_bytes))
    return ", ".join(parts)


def _same_roofs(specs: list[DeviceSpec]) -> bool:
    a = specs[0]
    for b in specs[1:]:
        if not math.isclose(a.memory_bandwidth_bps, b.memory_bandwidth_bps, rel_tol=0.01):
            return False
        if set(a.peaks) != set(b.peaks):
            return False
        if any(not math.isclose(a.peaks[k], b.peaks[k], rel_tol=0.01) for k in a.peaks):
            return False
    return True
