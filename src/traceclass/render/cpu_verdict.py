"""The CPU profile's one-sentence verdict (the report's summary line for sampled profiles).

Prose over the report's :class:`~traceclass.report.cpu.CpuSection`; the analysis writes none.
"""

from __future__ import annotations

from typing import Callable

from traceclass.analysis.cpu_types import _running
from traceclass.analysis.frame_kinds import WAITING
from traceclass.report.cpu import CpuFrame, CpuKind, CpuSection


def _p(x: float) -> str:
    return f"{x:.0f}%" if x >= 1 or x == 0 else "<1%"


def _kind_list(kinds: list[CpuKind], limit: int = 2) -> str:
    shown = [k for k in kinds if k.share_pct >= 1][:limit] or kinds[:1]
    return ", ".join(f"{_p(k.share_pct)} {k.label}" for k in shown)


def _frame_text(f: CpuFrame, fmt: Callable[[str], str], short: bool = False) -> str:
    loc = f.location
    if short and f.file:
        base = f.file.replace("\\", "/").rsplit("/", 1)[-1]
        loc = f"{base}:{f.line}" if f.line is not None else base
    return f"{fmt(f.function)} ({fmt(loc)})" if loc else fmt(f.function)


def _same(text: str) -> str:
    return text


def cpu_verdict(cpu: CpuSection, name: Callable[[str], str] | None = None) -> str:
    """One sentence for the report's summary: the running, waiting and unknown shares, and
    the hottest *on-CPU* line (a wait is never called hot), kept short (the report's verdict
    cuts long sentences): at most two kinds per share, the line's file by its base name.

    ``name`` formats the line's function and location (untrusted text from the profile).
    Everything else in the sentence is our own words and numbers, plain text that needs no
    escaping. Without ``name`` the names are left as they are: the caller then escapes the
    whole sentence as prose (the report's verdict does)."""
    if not cpu.total_value or not cpu.kinds:
        return ""
    fmt = name or _same
    if cpu.unit == "units":
        top = cpu.kinds[0]
        unit = "bytes" if cpu.weight_unit == "bytes" else "unitless, not time"
        text = f"CPU profile: {top.share_pct:.0f}% of profile weight ({unit}) is {top.label}"
        if len(cpu.kinds) > 1 and cpu.kinds[1].share_pct >= 10:
            text += f", {cpu.kinds[1].share_pct:.0f}% {cpu.kinds[1].label}"
        hot = cpu.hottest_running()
        if hot is not None:
            text += f"; the heaviest frame is {_frame_text(hot, fmt)} with {hot.self_pct:.0f}%"
        return text + "."
    what = "timed frames' cpu time" if cpu.from_intervals else "sampled thread time"
    if cpu.gil_only:
        what += " (GIL-only profile, py-spy --gil)"
    running = [k for k in cpu.kinds if _running(k.kind)]
    waiting = [k for k in cpu.kinds if k.kind in WAITING]
    segs = []
    run_pct = sum(k.share_pct for k in running)
    wait_pct = sum(k.share_pct for k in waiting)
    if running and run_pct >= 1:
        segs.append(f"{_p(run_pct)} running ({_kind_list(running)})")
    if waiting and wait_pct >= 1:
        segs.append(f"{_p(wait_pct)} waiting ({_kind_list(waiting)})")
    if cpu.unverified_pct >= 1:
        segs.append(f"{_p(cpu.unverified_pct)} blocked or computing (no source: pass --source-root)")
    if not segs:
        top = cpu.kinds[0]
        segs.append(f"{_p(top.share_pct)} {top.label}")
    text = f"CPU profile of {what}: " + ", ".join(segs)
    hot = cpu.hottest_running()
    if hot is not None and hot.self_pct >= 1:
        what = "line" if hot.line is not None else "function"
        text += f"; hottest on-CPU {what} {_frame_text(hot, fmt, short=True)}, {hot.self_pct:.0f}%"
    elif cpu.unverified_pct >= 50:
        text += "; no line is known to be on-CPU"
    return text + "."
