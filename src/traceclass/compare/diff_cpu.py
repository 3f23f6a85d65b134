"""Two sampled CPU profiles -> :class:`CpuDiff`: hot spots matched by (function, file, line),
kinds and threads, each as self time (or samples) and share of all sampled time, judged by
the single-run rule (a profile has no repeated steps)."""

from __future__ import annotations

import dataclasses
from typing import Sequence

from traceclass import units
from traceclass.compare import noise
from traceclass.compare.delta import MATERIAL_PCT_OF_STEP, Delta
from traceclass.compare.run import CpuFrame, CpuRun, CpuShare


@dataclasses.dataclass(frozen=True)
class CpuRowDelta:
    """A hot spot, kind or thread of two sampled CPU profiles."""

    name: str  # function, kind label or thread name (untrusted, but for kind labels)
    location: str  # "file:line" for hot spots, "" else
    kind: str  # the frame's kind (hot spots) or the kind's code (kinds), "" for threads
    status: str  # "matched", "appeared", "vanished"; "unlisted" when the other run ranks it too low to list
    value: Delta  # self time (unit "ns") or samples (unit "samples"); None values when not comparable
    share: Delta  # of all sampled time (unit "pct")
    # labels are higher / lower / within noise: more time at a line or in a thread may be a
    # slower line or a longer recording, the figures say which


@dataclasses.dataclass(frozen=True)
class CpuDiff:
    unit: str  # "ns" (time), "samples", or "share" (only shares compare)
    basis: str  # plain text: why this unit
    total: Delta  # all sampled thread time (or samples)
    hot_spots: tuple[CpuRowDelta, ...]  # largest change first
    kinds: tuple[CpuRowDelta, ...]
    threads: tuple[CpuRowDelta, ...]
    movers: tuple[CpuRowDelta, ...]  # rows beyond the single-run rule, largest change first
    notes: tuple[str, ...]
    rule_pct: float = noise.SINGLE_SAMPLE_PCT  # |Δ| from which a single-run figure counts (points for shares)
    lengths_differ: bool = False  # the totals differ by rule_pct or more: shares tell more than values



def _cpu_unit(b: CpuRun, c: CpuRun) -> tuple[str, str]:
    if b.total_ns is not None and c.total_ns is not None and b.unit != "units" and c.unit != "units":
        if b.interval_ns and c.interval_ns and b.interval_ns != c.interval_ns:
            return "ns", "sampled time (the runs sample at different intervals: times still compare, counts not)"
        return "ns", "sampled time (the sampling interval is known in both runs)"
    if b.samples is not None and c.samples is not None:
        return "samples", ("sample counts (a run does not record its sampling interval, so counts stand in for "
                           "time: equal only at equal sampling rates)")
    return "share", "shares of all sampled weight only (a run's values are neither time nor samples)"


def _amount(x: CpuFrame | CpuShare | None, unit: str) -> float | None:
    if x is None:
        return 0.0
    v = (x.self_ns if isinstance(x, CpuFrame) else x.ns) if unit == "ns" else \
        (x.self_samples if isinstance(x, CpuFrame) else x.samples) if unit == "samples" else None
    return None if v is None else float(v)


def _pct_of(x: CpuFrame | CpuShare | None) -> float:
    if x is None:
        return 0.0
    return x.self_pct if isinstance(x, CpuFrame) else x.pct


def _cpu_row(name: str, location: str, kind: str, status: str, xb: CpuFrame | CpuShare | None,
             xc: CpuFrame | CpuShare | None, unit: str) -> CpuRowDelta:
    if status == "unlisted":  # ranked too low in one run to be listed: no value there
        vb = None if xb is None else _amount(xb, unit)
        vc = None if xc is None else _amount(xc, unit)
        sb = None if xb is None else _pct_of(xb)
        sc = None if xc is None else _pct_of(xc)
    else:
        vb, vc = _amount(xb, unit), _amount(xc, unit)
        sb, sc = _pct_of(xb), _pct_of(xc)
    value_unit = unit if unit in ("ns", "samples") else "samples"
    if unit == "share":
        vb = vc = None
    return CpuRowDelta(
        name=name, location=location, kind=kind, status=status,
        value=Delta(vb, vc, value_unit, noise.judge((), (), vb, vc, time_like=False, single_run=True)),
        share=Delta(sb, sc, "pct", noise.judge((), (), sb, sc, time_like=False, points=True, single_run=True)),
    )


def _row_size(r: CpuRowDelta) -> float:
    """Sort key: the change in share (comparable whatever the recording lengths)."""
    return abs(r.share.delta or 0.0)


def cpu_diff(b: CpuRun, c: CpuRun) -> CpuDiff:
    unit, basis = _cpu_unit(b, c)
    notes: list[str] = []
    tb = float(b.total_ns) if unit == "ns" else float(b.samples) if unit == "samples" and b.samples else None
    tc = float(c.total_ns) if unit == "ns" else float(c.samples) if unit == "samples" and c.samples else None
    if unit == "share":
        tb = tc = None
    total = Delta(tb, tc, "samples" if unit != "ns" else "ns",
                  noise.judge((), (), tb, tc, time_like=False, single_run=True))
    lengths_differ = bool(tb and tc and abs(tc - tb) / tb * 100.0 >= noise.SINGLE_SAMPLE_PCT)
    if lengths_differ:
        assert tb and tc
        notes.append(f"the recordings differ in length ({'all sampled time' if unit == 'ns' else 'sample count'} "
                     f"{units.signed_pct(100.0 * (tc - tb) / tb, 0)}): every value moves with it, so compare shares")

    hot: list[CpuRowDelta] = []
    cb = {h.key: h for h in b.hot_spots}
    cc = {h.key: h for h in c.hot_spots}
    for key in list(cb) + [k for k in cc if k not in cb]:
        hb, hc = cb.get(key), cc.get(key)
        ref = hb or hc
        assert ref is not None
        if hb is not None and hc is not None:
            status = "matched"
        elif hb is None:
            status = "appeared" if b.hot_spots_complete else "unlisted"
        else:
            status = "vanished" if c.hot_spots_complete else "unlisted"
        hot.append(_cpu_row(ref.function, ref.location, ref.kind, status, hb, hc, unit))
    hot.sort(key=lambda r: -_row_size(r))
    if not (b.hot_spots_complete and c.hot_spots_complete):
        floor = max(b.hot_spot_floor_pct, c.hot_spot_floor_pct)
        notes.append(f"the reports list each profile's top {max(len(b.hot_spots), len(c.hot_spots))} lines only: a "
                     f"line listed in one run and not the other is 'unlisted' there (under {units.pct(floor, None)} of its time), "
                     "not gone")

    def shares(xs_b: Sequence[CpuShare], xs_c: Sequence[CpuShare], kinds: bool) -> list[CpuRowDelta]:
        mb = {x.key: x for x in xs_b}
        mc = {x.key: x for x in xs_c}
        out = []
        for key in list(mb) + [k for k in mc if k not in mb]:
            xb, xc = mb.get(key), mc.get(key)
            ref = xb or xc
            assert ref is not None
            status = "matched" if (xb and xc) else "appeared" if xb is None else "vanished"
            out.append(_cpu_row(ref.label, "", key if kinds else "", status, xb, xc, unit))
        out.sort(key=lambda r: -_row_size(r))
        return out

    kinds = shares(b.kinds, c.kinds, True)
    threads = shares(b.threads, c.threads, False)
    # recording and analysis differences (--idle, --gil, interval, --source-root) are callouts: match.py
    material = MATERIAL_PCT_OF_STEP / 100.0 * (tb or 0.0)

    def moved(r: CpuRowDelta) -> bool:
        """Beyond the single-run rule in share, or in value by a material amount (a tiny line
        doubling is not news)."""
        if r.status == "unlisted":
            return False
        return r.share.call.beyond_noise or (r.value.call.beyond_noise and abs(r.value.delta or 0.0) >= material)

    movers = [r for r in hot + kinds + threads if moved(r)]
    movers.sort(key=lambda r: -_row_size(r))
    return CpuDiff(unit=unit, basis=basis, total=total, hot_spots=tuple(hot), kinds=tuple(kinds),
                   threads=tuple(threads), movers=tuple(movers), notes=tuple(notes), lengths_differ=lengths_differ)

