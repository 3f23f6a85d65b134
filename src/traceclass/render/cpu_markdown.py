"""The CPU profile section of the report (markdown).

Every name from the profile (functions, files, thread names) is untrusted and goes through
:func:`traceclass.render.escape.code`; labels and numbers are ours.
"""

from __future__ import annotations

from traceclass import units
from traceclass.analysis.cpu_types import COMPUTE_BASIS
from traceclass.report.cpu import CpuSection, kind_text
from traceclass.render.escape import code

_BASIS_TEXT = {
    "recorded": "",
    "unknown": "unknown: the file does not say (py-spy `--idle`)",
    "thread state": "thread states recorded per sample",
    "timed": "not applicable: times come from timed frames (wall clock)",
    "unitless": "not applicable: the values are not samples of time",
}


def _amount(cpu: CpuSection, value: int, ns: int | None) -> str:
    if cpu.unit == "ns":
        return units.duration(value)
    if cpu.unit == "samples":
        return f"{value:,}" + (f" ({units.duration(ns)})" if ns is not None else "")
    return f"{value:,}"


def _unit_words(cpu: CpuSection) -> str:
    """The file's own unit for values that are not time (speedscope ``none``: plain units)."""
    return {"none": "units", "": "units"}.get(cpu.weight_unit or "", cpu.weight_unit or "")


def _value_header(cpu: CpuSection) -> str:
    return {"ns": "time", "samples": "samples"}.get(cpu.unit, "weight")


def _table(headers: list[str], rows: list[list[str]], align: str) -> str:
    align = align.ljust(len(headers), "l")
    out = [
        "| " + " | ".join(headers) + " |",
        "| " + " | ".join("---:" if a == "r" else "---" for a in align) + " |",
    ]
    out += ["| " + " | ".join(c if c else "—" for c in r) + " |" for r in rows]
    return "\n".join(out)


def _facts(cpu: CpuSection) -> list[str]:
    out = []
    src = cpu.producer or cpu.source_format
    what = f"{len(cpu.threads)} thread{'s' if len(cpu.threads) != 1 else ''}"
    if cpu.from_intervals:
        if cpu.total_ns is not None:
            out.append(f"- Source: {code(src)} timed frames; {what}; {units.duration(cpu.total_ns)} of frame self time.")
        else:
            out.append(f"- Source: {code(src)} evented frames; {what}; {cpu.total_value:,} {_unit_words(cpu)} of frame "
                       "self value (not time).")
    elif cpu.samples is not None:
        rate = ""
        if cpu.interval_ns:
            rate = f" at {units.frequency(1e9 / cpu.interval_ns)} ({units.duration(cpu.interval_ns)} each)"
        total = f" = {units.duration(cpu.total_ns)} of thread time" if cpu.total_ns is not None else ""
        out.append(f"- Source: {code(src)}; {what}; {cpu.samples:,} samples{rate}{total}.")
    else:
        out.append(f"- Source: {code(src)}; {what}; total weight {cpu.total_value:,} {_unit_words(cpu)} (not time).")
    if cpu.includes_idle is True:
        if cpu.includes_idle_basis == "inferred" and cpu.idle_evidence is not None:
            who, n, pct = cpu.idle_evidence.thread, cpu.idle_evidence.waiting_samples, cpu.idle_evidence.waiting_pct
            out.append(
                f"- Idle samples: included (inferred: thread {code(who)} has {n:,} samples in "
                f"waiting calls, {units.pct(pct, 0)} of its samples; without `--idle` py-spy drops most of them)."
            )
        else:
            out.append("- Idle samples: included (recorded with `--idle`): shares are of wall-clock thread time.")
    elif cpu.includes_idle is False:
        out.append("- Idle samples: not recorded: the profile is close to on-CPU time; waits are mostly missing.")
    else:
        out.append(f"- Idle samples: {_BASIS_TEXT.get(cpu.includes_idle_basis, 'unknown')}.")
    if cpu.gil_only is True:
        out.append("- GIL-only profile: only samples of threads holding the GIL were recorded (py-spy `--gil`); "
                   "threads waiting without it are missing.")
    elif not cpu.from_intervals and cpu.producer.startswith("py-spy"):
        out.append("- GIL: not recorded" + (" (all threads sampled, holding it or not)." if cpu.gil_only is False else "."))
    basis = (
        "from recorded thread states"
        if cpu.waiting_basis == "thread state"
        else "estimated from frames: a stack ending in a known blocking call (lock/condition wait, "
        "sleep, file or socket I/O) counts as waiting"
    )
    unknown = f", blocked or computing {units.pct(cpu.unverified_pct)}" if cpu.unverified_pct > 0 else ""
    out.append(
        f"- Running {units.pct(cpu.running_pct)}, waiting {units.pct(cpu.waiting_pct)}{unknown} ({basis})."
    )
    if cpu.unverified_pct > 0:
        out.append(
            f"- {units.pct(cpu.unverified_pct)} of the time is at Python lines whose source file was not found "
            "here (or only `def` lines were recorded): blocked or computing, which only the line's text tells "
            "(a line calling `time.sleep`, `lock.acquire` or `sock.recv` looks like any other without it). "
            "Pass `--source-root DIR` where the program's files are, or record with `traceclass record`."
        )
    if cpu.blocked_evidence:
        who = "; ".join(
            f"{code(b.thread)}: " + (f"{code(b.location)}, " if b.location else "") + b.reason
            for b in cpu.blocked_evidence
        )
        out.append(
            f"- Likely blocked ({units.pct(cpu.blocked_pct)}, a guess from the profile, not from the source): {who}."
        )
    if cpu.unverified_basis:
        out.append(f"- {COMPUTE_BASIS[cpu.unverified_basis][0].upper()}{COMPUTE_BASIS[cpu.unverified_basis][1:]}.")
    if not cpu.has_line_numbers:
        out.append("- Frames have no line numbers (e.g. py-spy `--nolineno`): hot spots are per function.")
    return out


def cpu_profile_markdown(cpu: CpuSection, top_n: int = 15) -> str:
    vh = _value_header(cpu)
    parts = ["## CPU profile", "", "\n".join(_facts(cpu))]

    if cpu.kinds:
        rows = [[k.label, _amount(cpu, k.value, k.time_ns), units.pct(k.share_pct)] for k in cpu.kinds]
        parts += ["", "### Where the time goes", "", _table(["kind", vh, "share"], rows, "lrr")]

    if cpu.threads:
        rows = []
        unknown = any(t.unverified_pct > 0 for t in cpu.threads)
        for t in cpu.threads[:top_n]:
            rows.append([
                code(t.label),
                f"{t.samples:,}" if t.samples is not None else "",
                units.duration(t.time_ns) if t.time_ns is not None else (f"{t.weight:,}" if t.weight is not None else ""),
                units.pct(t.share_pct),
                units.pct(t.running_pct),
                units.pct(t.waiting_pct),
                *([units.pct(t.unverified_pct)] if unknown else []),
                kind_text(t.dominant_kind),
            ])
        headers = ["thread", "samples", "time" if cpu.unit != "units" else "weight", "share", "running", "waiting"]
        headers += ["no source"] if unknown else []
        parts += [
            "",
            "### Threads",
            "",
            _table(headers + ["mostly"], rows, "lrrrrr" + ("r" if unknown else "") + "l"),
        ]
        if unknown:
            parts.append("\nno source = at Python lines whose source was not found: blocked or computing.")
        if len(cpu.threads) > top_n:
            parts.append(f"\n{len(cpu.threads) - top_n} more threads not shown.")
        if cpu.producer.startswith("py-spy") and not cpu.from_intervals and len(cpu.threads) > 1:
            parts.append(
                "\nThread shares add up sampled time of all threads; they are not time-aligned "
                "(py-spy records no timestamps)."
            )

    if cpu.hot_spots:
        rows = []
        for i, h in enumerate(cpu.hot_spots[:top_n], 1):
            rows.append([
                str(i),
                code(h.function),
                code(h.location) if h.location else "",
                kind_text(h.kind),
                _amount(cpu, h.self_value, h.self_ns),
                units.pct(h.self_pct),
                units.pct(h.total_pct),
                ", ".join(code(t, 40) for t in h.threads[:2]),
            ])
        parts += [
            "",
            "### Hot spots (self time)",
            "",
            "Where the samples land: the innermost frame of each stack, by function and line. "
            "Total = share of samples with the frame anywhere on the stack (recursion counted once).",
            "",
            _table(["#", "function", "location", "kind", f"self {vh}", "self", "total", "thread"], rows, "rlllrrrl"),
        ]

    if cpu.notes:
        parts += ["", "\n".join(f"- {n}" for n in cpu.notes)]
    return "\n".join(parts) + "\n"
