"""Roofline chart (PNG) for a slide: modeled op groups only, numbered, with a key.

* y axis in TFLOP/s, x in FLOP/byte (ideal traffic), both log;
* each precision's roof drawn and labelled with its peak, the memory roof with its bandwidth;
* points numbered by time (1 = most time) and listed in a key beside the plot, so labels never
  overlap; point area ∝ share of the plotted time, with a size legend;
* only ops with a cost model: ``unclassified`` and name-heuristic labels have no coordinates;
* 2x resolution (2000 x 1200 px).

matplotlib is imported here only, with the non-interactive Agg backend, so analyses never plot.
:func:`roofline_png` returns None when nothing can be plotted, with the reason in
:func:`why_no_plot`.
"""

from __future__ import annotations

import io
import math

from traceclass import units
from traceclass.errors import ConfigError
from traceclass.render.escape import clean, shorten
from traceclass.report.model import OpRow, Report

_COLORS = {
    "compute-bound": "#d62728",
    "memory-bound": "#1f77b4",
    "latency-bound": "#7f7f7f",
}
NAME = "plot"
EXTENSION = ".png"
MAX_POINTS = 12
_SIZES = (1.0, 10.0, 50.0)  # % of plotted time, for the size legend


def render(report: Report, top_n: int | None = None) -> bytes:
    """The roofline chart as PNG bytes (``top_n`` is not used: up to :data:`MAX_POINTS` op groups
    are drawn). Raises :class:`ConfigError` with the reason when no op can be plotted."""
    png = roofline_png(report)
    if png is None:
        raise ConfigError(f"no roofline plot: {why_no_plot(report)}")
    return png


def modeled_points(report: Report, max_points: int = MAX_POINTS) -> list[OpRow]:
    """Op groups with a cost model and a measured rate, most time first."""
    pts = [o for o in report.ops if o.bound in _COLORS and not o.heuristic and o.flops and o.intensity
           and o.achieved_flops_per_s]
    return sorted(pts, key=lambda o: -o.total_ns)[:max_points]


def why_no_plot(report: Report) -> str:
    """Why no roofline chart was written (empty when one can be)."""
    if modeled_points(report):
        return ""
    if not report.ops:
        return "the trace has no op groups to place on a roofline"
    unknown = [h for h in report.hardware if h.device >= 0 and not h.spec]
    if unknown and any(o.flops for o in report.ops):
        return (f"the device ({clean(unknown[0].reported_name) or 'unnamed'}) is not in the hardware table, so ops "
                "have no roof to be placed against; pass --device NAME (`traceclass devices` lists them)")
    if any("without shapes" in n for n in report.notes):
        return ("no op has a cost model: the trace was recorded without shapes "
                "(record_shapes=False), so FLOPs and bytes are unknown")
    return "no op group has a cost model (all are unclassified or labelled from kernel names only)"


def _area(share_pct: float) -> float:
    return 25 + 7 * share_pct


def _place_labels(ax, xy: list[tuple[float, float]]) -> list[tuple[float, float]]:  # type: ignore[no-untyped-def]
    """Offsets (points) for numbered labels so no two overlap: each label takes the first of a
    ring of candidate positions around its point that is clear of the labels placed before it."""
    disp = ax.transData.transform(xy)
    scale = ax.figure.dpi / 72.0
    placed: list[tuple[float, float]] = []
    out = []
    clear = 11 * scale  # a label's footprint (pixels)
    for px, py in disp:
        best = (0.0, 0.0)
        for radius in (0, 12, 20, 28, 36, 44):
            ring = [(0.0, 0.0)] if radius == 0 else [
                (radius * math.cos(a), radius * math.sin(a)) for a in (math.radians(d) for d in range(45, 405, 45))]
            ok = [(dx, dy) for dx, dy in ring
                  if all(math.hypot(px + dx * scale - qx, py + dy * scale - qy) >= clear for qx, qy in placed)]
            if ok:
                best = ok[0]
                break
        placed.append((px + best[0] * scale, py + best[1] * scale))
        out.append(best)
    return out


def roofline_png(report: Report, max_points: int = MAX_POINTS) -> bytes | None:
    pts = modeled_points(report, max_points)
    if not pts:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    fig = plt.figure(figsize=(10, 6), dpi=200)
    ax = fig.add_axes((0.09, 0.27, 0.53, 0.66))
    key = fig.add_axes((0.645, 0.04, 0.35, 0.89))
    key.axis("off")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP/byte, ideal traffic)")
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
    hw = [h for h in report.hardware if h.spec and h.memory_bandwidth_per_s and
          (h.device >= 0 or report.ops_time_basis == "cpu")]
    # TFLOP/s for GPUs; GFLOP/s when nothing (roofs included) reaches 1 TFLOP/s (a CPU core)
    highest = max([o.achieved_flops_per_s or 0 for o in pts] + [max(h.peaks_flops_per_s.values(), default=0) for h in hw])
    tera, unit_name = (1e12, "TFLOP/s") if highest >= 1e12 else (1e9, "GFLOP/s")
    ax.set_ylabel(f"achieved {unit_name}")
    xs = [o.intensity or 1.0 for o in pts]
    ys = [(o.achieved_flops_per_s or 0) / tera for o in pts]
    lo, hi = min(min(xs) / 4, 0.1), max(max(xs) * 4, 1000.0)
    top = max(ys)
    roof_lines = []
    if hw:
        h = hw[0]
        bw = h.memory_bandwidth_per_s or 0.0
        roof_lines += ax.plot([lo, hi], [lo * bw / tera, hi * bw / tera], ls=":", lw=1, color="black",
                              label=f"memory roof {units.byte_rate(bw)}")
        for prec, unit in sorted({(o.precision, o.unit) for o in pts if o.precision and o.unit}):
            peak = h.peaks_flops_per_s.get(f"{unit}_{prec}")
            if not peak:
                continue
            ridge = peak / bw
            # roofs are named in the legend, so their labels never sit on a point
            roof_lines += ax.plot([ridge, hi], [peak / tera, peak / tera], lw=1.5,
                                  label=f"{prec} {unit} roof {units.flop_rate(peak)}")
            top = max(top, peak / tera)
        roofs = f"{h.spec}"
    else:
        roofs = "no roof: device not in the hardware table (pass --device NAME)"
        ax.text(0.02, 0.02, roofs, transform=ax.transAxes, fontsize=8, va="bottom")
    total = sum(o.total_ns for o in pts) or 1
    for n, (o, x, y) in enumerate(zip(pts, xs, ys), 1):
        share = 100.0 * o.total_ns / total
        ax.scatter([x], [y], s=_area(share), alpha=0.65, color=_COLORS[o.bound], edgecolors="black",
                   linewidths=0.5, zorder=3)
    ax.set_xlim(lo, hi)
    ax.set_ylim(min(ys) / 4, top * 3)
    for n, ((x, y), (dx, dy)) in enumerate(zip(zip(xs, ys), _place_labels(ax, list(zip(xs, ys)))), 1):
        moved = (dx, dy) != (0.0, 0.0)
        ax.annotate(str(n), (x, y), xytext=(dx, dy), textcoords="offset points", fontsize=7, fontweight="bold",
                    ha="center", va="center", zorder=4,
                    bbox={"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none", "alpha": 0.8} if moved else None,
                    arrowprops={"arrowstyle": "-", "lw": 0.5, "color": "black"} if moved else None)
    ax.grid(True, which="both", alpha=0.2)
    ax.set_title(f"Roofline: {clean(report.source.file)} ({roofs})", fontsize=9)
    # legends: bound colours and point sizes
    handles = [ax.scatter([], [], color=c, s=40, label=b) for b, c in _COLORS.items()
               if any(o.bound == b for o in pts)]
    handles += [ax.scatter([], [], s=_area(p), color="white", edgecolors="black", label=f"{units.pct(p, 0)} of time")
                for p in _SIZES]
    fig.legend(handles=roof_lines + handles, fontsize=7, loc="lower left", bbox_to_anchor=(0.09, 0.01),
               ncol=3, frameon=False, labelspacing=1.2, columnspacing=2.0)
    # the key: number, op, shapes, share, % of roof
    lines = []
    for n, o in enumerate(pts, 1):
        share = 100.0 * o.total_ns / total
        lines.append(f"{n:>2}  {shorten(clean(o.name), 50)}")
        if o.shapes:
            lines.append(f"    {shorten(clean(o.shapes), 50)}")
        lines.append(f"    {units.pct(share, 0)} of time, {units.pct(o.pct_of_roof, 0)} of roof, {o.precision} {o.unit}")
    key.text(0, 1, "\n".join(lines), va="top", ha="left", fontsize=7, family="monospace")
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    return buf.getvalue()
