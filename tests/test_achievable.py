"""At stake = time above the achievable ceiling (best sibling or documented fraction), basis stated."""

from __future__ import annotations

import pytest

from kineto_builder import KinetoBuilder
from traceclass.analysis import analyze
from traceclass.analysis.achievable import stakes
from traceclass.engine import run
from traceclass.ingest import load

BF16 = "c10::BFloat16"
PEAK = 989.5e12  # H100 SXM dense bf16


def _mm(b: KinetoBuilder, t: int, m: int, k: int, n: int, pct: float) -> float:
    """One bf16 mm at ``pct`` of the compute roof; returns its lower bound (ns)."""
    ext = b.op("aten::mm", t, 20_000, dims=[[m, k], [k, n]], types=[BF16, BF16])
    lb = 2 * m * k * n / PEAK * 1e9
    b.launch(ext, "sm90_xmma_gemm_bf16bf16_bf16f32", t + 5_000, t + 50_000, round(lb / pct))
    return lb


def test_best_sibling_sets_the_ceiling(tmp_path):
    b = KinetoBuilder()
    lb_a = _mm(b, 0, 8192, 8192, 8192, 0.35)
    _mm(b, 10_000_000, 8192, 4096, 8192, 0.48)
    a = analyze(load(b.write(tmp_path / "two.json")))
    st = dict(zip((g.shapes for g in a.ops.groups), stakes(a.ops.groups)))
    slow, fast = st["[8192x8192] bf16, [8192x8192] bf16"], st["[8192x4096] bf16, [4096x8192] bf16"]
    time_a = round(lb_a / 0.35)
    assert slow.basis == "48% best sibling" and slow.ceiling_pct == pytest.approx(48.0, abs=0.05)
    assert slow.stake_ns == pytest.approx(time_a - lb_a / 0.48, abs=2_000)  # vs datasheet gap time_a - lb_a
    assert "aten::mm [8192x4096] bf16, [4096x8192] bf16" in slow.detail
    assert fast.stake_ns == 0 and fast.basis == "35% best sibling"  # already above its sibling


def test_documented_fraction_without_sibling(tmp_path):
    b = KinetoBuilder()
    lb = _mm(b, 0, 8192, 8192, 8192, 0.35)
    t, rep = run(load(b.write(tmp_path / "one.json")))
    (o,) = [o for o in rep.ops if o.name == "aten::mm"]
    assert o.stake_basis == "80% documented (gemm)" and "traceclass assumption" in o.stake_detail
    assert o.stake_ns == pytest.approx(round(lb / 0.35) - lb / 0.8, abs=2)
    assert o.gap_ns == pytest.approx(round(lb / 0.35) - lb, abs=2)  # the datasheet gap stays
    roof_items = [p for p in rep.opportunities if p.source == "roofline"]
    assert roof_items and roof_items[0].recoverable_ns == o.stake_ns
    assert "from 35% to 80% of its compute roof (documented for gemm)" in roof_items[0].title
