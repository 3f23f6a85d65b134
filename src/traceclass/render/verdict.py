"""The verdict paragraph: where the time goes, what bounds it, what to look at first.

Composed once from the report and rendered by a ``name`` formatter: markdown passes one that
makes code spans, JSON passes the identity, so both say the same thing.
"""

from __future__ import annotations

from typing import Callable

from traceclass import units
from traceclass.report.model import Report

Fmt = Callable[[str], str]

BOUND_ORDER = ("compute-bound", "memory-bound", "latency-bound", "communication", "unclassified")


def bound_mix(report: Report) -> dict[str, float]:
    """Share of op time (GPU or CPU) by roofline label, percent."""
    total = sum(o.total_ns for o in report.ops)
    if total <= 0:
        return {}
    mix: dict[str, float] = {}
    for o in report.ops:
        mix[o.bound] = mix.get(o.bound, 0.0) + o.total_ns
    return {k: 100.0 * mix[k] / total for k in BOUND_ORDER if k in mix}


def verdict_sentences(report: Report, name: Fmt) -> list[str]:
    out: list[str] = []
    steps = [s for s in report.stages if s.kind == "step"]
    if steps and steps[0].count:
        s = steps[0]
        if s.name == "(whole trace)":
            out.append(f"The trace has no step markers; it spans {units.duration(s.p50_ns)}.")
        else:
            warm = ""
            if s.warmup_count:
                warm = (
                    f" ({s.warmup_count} warm-up step{'s' if s.warmup_count > 1 else ''} "
                    f"excluded, P50 {units.duration(s.warmup_p50_ns)})"
                )
            out.append(
                f"{s.count} steady step{'s' if s.count != 1 else ''} took P50 {units.duration(s.p50_ns)} "
                f"(P90 {units.duration(s.p90_ns)}, P99 {units.duration(s.p99_ns)}){warm}."
            )
    if report.devices:
        d = max(report.devices, key=lambda r: r.busy_ns)
        label = f"GPU {d.device}" + (f" ({d.name})" if d.name else "")
        more = f" ({len(report.devices) - 1} other device(s) below)" if len(report.devices) > 1 else ""
        out.append(
            f"{label} was busy {units.pct(d.busy_pct)} of its {units.duration(d.window_ns)} active window "
            f"(compute {units.pct(d.compute_pct)}, copies {units.pct(d.copy_pct)}, communication "
            f"{units.pct(d.comm_pct)}) and idle {units.pct(d.idle_pct)}{more}."
        )
    mix = bound_mix(report)
    if mix:
        basis = "GPU op time" if report.ops_time_basis == "gpu" else "host op time"
        parts = [f"{units.pct(v, 0)} {k}" for k, v in mix.items() if v >= 0.5]
        if parts:
            out.append(f"By {basis}: " + ", ".join(parts) + ".")
    if report.ops:
        o = report.ops[0]
        shapes = f" on {o.shapes}" if o.shapes else ""
        roof = ""
        if o.bound in ("compute-bound", "memory-bound") and o.pct_of_roof is not None:
            roof = f", {o.bound} at {units.pct(o.pct_of_roof, 0)} of its roof"
        elif o.bound:
            roof = f", {o.bound}" + (" (from the kernel name)" if o.heuristic else "")
        out.append(
            f"The largest item is {name(o.name)}{shapes}: {units.pct(o.share_pct)} of "
            f"{'GPU busy time' if report.ops_time_basis == 'gpu' else 'op time'} "
            f"({o.count} call{'s' if o.count != 1 else ''}, {units.duration(o.total_ns)}){roof}."
        )
    cpu = report.cpu_profile
    if cpu is not None and hasattr(cpu, "verdict"):
        try:
            text = cpu.verdict()
        except Exception:  # noqa: BLE001 - the CPU profile is optional prose
            text = ""
        if text:
            out.append(text)
    if not out:
        out.append("The trace holds no timed operator, GPU or sample data to attribute.")
    return out


def opportunities(report: Report, name: Fmt, prose: Fmt) -> list[str]:
    """One line per opportunity; names as code, everything else as escaped prose."""
    lines = []
    for op in report.opportunities:
        text = prose(op.title)
        for n in op.names:
            escaped = prose(n)
            if escaped and escaped in text:
                text = text.replace(escaped, name(n), 1)
        lines.append(f"{text} — up to {units.duration(op.recoverable_ns)} at stake ({prose(op.source)})")
    return lines
