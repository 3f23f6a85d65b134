"""Roofline chart (PNG) of the op groups: points sized by time, both roofs drawn.

matplotlib is imported here only, with the non-interactive Agg backend, so analyses never plot.
"""

from __future__ import annotations

import io
import math

from traceclass.report.model import Report

_COLORS = {
    "compute-bound": "#d62728",
    "memory-bound": "#1f77b4",
    "latency-bound": "#7f7f7f",
    "unclassified": "#2ca02c",
}


NAME = "plot"
EXTENSION = ".png"


def render(report: Report, top_n: int | None = None) -> bytes:
    """The roofline chart as PNG bytes (``top_n`` is not used: up to 60 op groups are drawn)."""
    return roofline_png(report)


def roofline_png(report: Report, max_points: int = 60) -> bytes:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pts = [o for o in report.ops if o.intensity and o.achieved_flops_per_s and o.flops][:max_points]
    fig, ax = plt.subplots(figsize=(8, 5.5), dpi=110)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP/byte, ideal traffic)")
    ax.set_ylabel("achieved FLOP/s")
    hw = [h for h in report.hardware if h.spec and h.memory_bandwidth_per_s and
          (h.device >= 0 or report.ops_time_basis == "cpu")]
    xs = [o.intensity for o in pts if o.intensity] or [1.0]
    lo = min(min(xs) / 4, 0.1)
    hi = max(max(xs) * 4, 1000.0)
    drawn = set()
    for h in hw[:1]:
        bw = h.memory_bandwidth_per_s or 0.0
        precisions = sorted({(o.precision, o.unit) for o in pts if o.precision}) or [("fp32", "vector")]
        for prec, unit in precisions[:3]:
            peak = h.peaks_flops_per_s.get(f"{unit}_{prec}")
            if not peak or (prec, unit) in drawn:
                continue
            drawn.add((prec, unit))
            ridge = peak / bw
            xline = [lo, ridge, hi]
            yline = [lo * bw, peak, peak]
            ax.plot(xline, yline, lw=1.5, label=f"{h.spec}: {prec} {unit} roof ({peak / 1e12:.3g} TFLOP/s)")
        ax.plot([lo, hi], [lo * bw, hi * bw], ls=":", lw=1, color="black",
                label=f"memory roof ({bw / 1e9:.0f} GB/s)")
    total = sum(o.total_ns for o in pts) or 1
    for o in pts:
        size = 20 + 600 * math.sqrt(o.total_ns / total)
        ax.scatter([o.intensity], [o.achieved_flops_per_s], s=size, alpha=0.6,
                   color=_COLORS.get(o.bound, _COLORS["unclassified"]), edgecolors="black", linewidths=0.5)
    seen: set[str] = set()
    for k, o in enumerate(pts[:8]):
        if o.name in seen:  # one label per op name; offsets alternate so neighbours do not overlap
            continue
        seen.add(o.name)
        ax.annotate(o.name[:28], (o.intensity, o.achieved_flops_per_s), fontsize=7,
                    xytext=(4, 4 if k % 2 == 0 else -10), textcoords="offset points")
    if not drawn:
        ax.text(0.02, 0.02, "no roof: the device is not in the hardware table (pass --device NAME)",
                transform=ax.transAxes, fontsize=8, va="bottom")
    for label, color in _COLORS.items():
        ax.scatter([], [], color=color, label=label, s=40)
    ax.set_xlim(lo, hi)
    ax.legend(fontsize=7, loc="lower right")
    ax.set_title(f"Roofline: {report.source.file} (points sized by time)", fontsize=9)
    ax.grid(True, which="both", alpha=0.2)
    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="png")
    plt.close(fig)
    return buf.getvalue()
