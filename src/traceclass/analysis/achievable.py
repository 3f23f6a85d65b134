"""What is realistically at stake in an op group: time above an *achievable* ceiling.

The datasheet gap (time above ``max(FLOP / peak, bytes / bandwidth)``) promises 100 % of the
peak, which no kernel reaches: a GEMM at 35 % of 1,307 TFLOP/s "has 158 ms at stake" while the
best GEMM of the same trace runs at 48 %. The achievable ceiling of a group, as a fraction of
its attainable roof, is the lower of

* **the best sibling**: the highest fraction of the roof that another op group of the same
  device, family (gemm, conv, attention, elementwise, ...), precision and unit reaches in this
  trace (latency-bound groups excluded: their fraction measures fixed costs, not the roof);
* **the documented fraction** for the family (:data:`DOCUMENTED`, each with its source).

``at stake = time - calls x lower bound / ceiling`` (0 when the group already reaches its
ceiling). A group without siblings uses the documented fraction alone. The basis is returned
with every estimate, so the report can state it next to the number.
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

from traceclass.analysis.roofline import COMPUTE, MEMORY


@dataclasses.dataclass(frozen=True)
class Ceiling:
    fraction: float
    source: str


_FA3 = ("FlashAttention-3 (Shah et al. 2024, arXiv:2407.08608): FP16 forward up to 740 TFLOP/s, 75 % of the "
        "H100 dense peak; FlashAttention-2 reaches 50-73 % of the A100 peak (Dao 2023, arXiv:2307.08691)")
_GEMM = ("traceclass assumption: vendor GEMM libraries (cuBLAS, hipBLASLt) sustain about 80 % of the dense "
         "matrix peak on large, aligned shapes; the same order as FlashAttention-3's 75 % on H100")
_STREAM = ("BabelStream/STREAM-type kernels (copy, triad) reach about 90 % of the datasheet memory bandwidth "
           "(McCalpin's STREAM; uob-hpc BabelStream); traceclass takes 90 %")

_PCIE = ("traceclass assumption: pinned DMA over PCIe keeps about 80 % of the raw x16 rate after 128b/130b "
         "encoding and TLP header overhead (the host-link figures of the spec table are raw rates)")

#: Documented achievable fraction of the attainable roof per family; unlisted families fall back
#: to the compute or memory entry by their bound.
DOCUMENTED: dict[str, Ceiling] = {
    "gemm": Ceiling(0.80, _GEMM),
    "conv": Ceiling(0.80, _GEMM),
    "attention": Ceiling(0.75, _FA3),
    "memory": Ceiling(0.90, _STREAM),
    "link": Ceiling(0.80, _PCIE),
}


@dataclasses.dataclass(frozen=True)
class Stake:
    stake_ns: int  # total over the group's calls
    ceiling_pct: float  # percent of the attainable roof taken as achievable
    basis: str  # short, for a table cell: "48% best sibling", "80% documented (gemm)"
    detail: str  # the sibling op and shapes, or the documented fraction's source


def documented(family: str, bound: str, unit: str = "") -> Ceiling:
    if unit in ("link", "copy"):
        return DOCUMENTED["link"]
    if family in DOCUMENTED and family not in ("memory", "link"):
        return DOCUMENTED[family]
    return DOCUMENTED["memory"] if bound == MEMORY else DOCUMENTED["gemm"]


@dataclasses.dataclass(frozen=True)
class _View:
    """What the ceiling reads of an op group or of a report's op row."""

    name: str
    shapes: str
    kind: str
    has_flops: bool
    bound: str
    heuristic: bool
    pct_of_roof: float | None
    lower_bound_ns: float | None
    device: int
    family: str
    precision: str
    unit: str
    total_ns: int
    count: int


def stakes(groups: Sequence) -> list[Stake | None]:  # type: ignore[type-arg]
    """Achievable stake per op group (None when the group has no roofline point to judge)."""
    return _stakes([_View(g.name, g.shapes, g.kind, g.flops is not None, g.point.bound, g.point.heuristic,
                          g.point.pct_of_roof, g.point.lower_bound_ns, g.device, g.family, g.precision, g.unit,
                          g.total_ns, g.count) for g in groups])


def stakes_of_rows(rows: Sequence) -> list[Stake | None]:  # type: ignore[type-arg]
    """The same from a report's op rows (a saved report written before stakes existed)."""
    return _stakes([_View(o.name, o.shapes, o.kind, o.flops is not None, o.bound, o.heuristic, o.pct_of_roof,
                          o.lower_bound_ns, o.device, o.family, o.precision, o.unit, o.total_ns, o.count)
                    for o in rows])


def _stakes(groups: list[_View]) -> list[Stake | None]:
    key_of: list[tuple | None] = []  # type: ignore[type-arg]
    best: dict[tuple, list[tuple[float, int]]] = {}  # type: ignore[type-arg]
    for i, g in enumerate(groups):
        ok = (g.kind == "op" or g.has_flops) and g.bound in (COMPUTE, MEMORY) and not g.heuristic \
            and g.pct_of_roof is not None and g.lower_bound_ns is not None
        if not ok:
            key_of.append(None)
            continue
        key = (g.device, g.family, g.precision, g.unit)
        key_of.append(key)
        best.setdefault(key, []).append((float(g.pct_of_roof), i))  # type: ignore[arg-type]
    out: list[Stake | None] = []
    for i, g in enumerate(groups):
        key = key_of[i]
        if key is None:
            out.append(None)
            continue
        doc = documented(g.family, g.bound, g.unit)
        others = [(pct, j) for pct, j in best[key] if j != i]
        sib = max(others) if others else None
        if sib is not None and sib[0] / 100.0 < doc.fraction:
            frac = sib[0] / 100.0
            s = groups[sib[1]]
            basis = f"{sib[0]:.0f}% best sibling"
            detail = f"best {g.family} {g.precision} {g.unit} sibling in this trace: {s.name} {s.shapes}".strip()
        else:
            frac = doc.fraction
            what = "host link" if g.unit in ("link", "copy") else (g.family or g.bound)
            basis = f"{100 * doc.fraction:.0f}% documented ({what})"
            detail = doc.source
        own = float(g.pct_of_roof) / 100.0  # type: ignore[arg-type]
        if own >= frac or frac <= 0:
            stake = 0
        else:
            stake = int(round(max(0.0, g.total_ns - g.count * float(g.lower_bound_ns) / frac)))  # type: ignore[arg-type]
        out.append(Stake(stake, round(100 * frac, 1), basis, detail))
    return out
