"""The CPU profile section of the report (markdown) and its JSON form.

Every name from the profile (functions, files, thread names) is untrusted and goes through
:func:`traceclass.render.escape.code`; labels and numbers are ours.
"""

from __future__ import annotations

from typing import Any

from traceclass.analysis.cpu_types import COMPUTE_BASIS, NO_FRAMES, NO_FRAMES_LABEL, CpuProfile, FrameStat, KindShare
from traceclass.analysis.cpu_types import ThreadProfile
from traceclass.analysis.frame_kinds import label as kind_label
from traceclass import units
from traceclass.render.escape import code

_BASIS_TEXT = {
    "recorded": "",
    "unknown": "unknown: the file does not say (py-spy `--idle`)",
    "thread state": "thread states recorded per sample",
    "timed": "not applicable: times come from timed frames (wall clock)",
    "unitless": "not applicable: the values are not samples of time",
}


def _amount(cpu: CpuProfile, value: int, ns: int | None) -> str:
    if cpu.unit == "ns":
        return units.duration(value)
    if cpu.unit == "samples":
        return f"{value:,}" + (f" ({units.duration(ns)})" if ns is not None else "")
    return f"{value:,}"


def _unit_words(cpu: CpuProfile) -> str:
    """The file's own unit for values that are not time (speedscope ``none``: plain units)."""
    return {"none": "units", "": "units"}.get(cpu.weight_unit, cpu.weight_unit)


def _value_header(cpu: CpuProfile) -> str:
    return {"ns": "time", "samples": "samples"}.get(cpu.unit, "weight")


def _table(headers: list[str], rows: list[list[str]], align: str) -> str:
    align = align.ljust(len(headers), "l")
    out = [
        "| " + " | ".join(headers) + " |",
        "| " + " | ".join("---:" if a == "r" else "---" for a in align) + " |",
    ]
    out += ["| " + " | ".join(c if c else "—" for c in r) + " |" for r in rows]
    return "\n".join(out)


def _kind_text(kind: str) -> str:
    return NO_FRAMES_LABEL if kind == NO_FRAMES else kind_label(kind)


def _facts(cpu: CpuProfile) -> list[str]:
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
            rate = f" at {1e9 / cpu.interval_ns:.4g} Hz ({units.duration(cpu.interval_ns)} each)"
        total = f" = {units.duration(cpu.total_ns)} of thread time" if cpu.total_ns is not None else ""
        out.append(f"- Source: {code(src)}; {what}; {cpu.samples:,} samples{rate}{total}.")
    else:
        out.append(f"- Source: {code(src)}; {what}; total weight {cpu.total_value:,} {_unit_words(cpu)} (not time).")
    if cpu.includes_idle is True:
        if cpu.includes_idle_basis == "inferred" and cpu.idle_evidence is not None:
            who, n, pct = cpu.idle_evidence
            out.append(
                f"- Idle samples: included (inferred: thread {code(who)} has {n:,} samples in "
                f"waiting calls, {pct:.0f}% of its samples; without `--idle` py-spy drops most of them)."
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
            f"{code(t)}: " + (f"{code(loc)}, " if loc else "") + why
            for t, loc, why in cpu.blocked_evidence
        )
        out.append(
            f"- Likely blocked ({units.pct(cpu.blocked_pct)}, a guess from the profile, not from the source): {who}."
        )
    if cpu.unverified_basis:
        out.append(f"- {COMPUTE_BASIS[cpu.unverified_basis][0].upper()}{COMPUTE_BASIS[cpu.unverified_basis][1:]}.")
    if not cpu.has_line_numbers:
        out.append("- Frames have no line numbers (e.g. py-spy `--nolineno`): hot spots are per function.")
    return out


def cpu_profile_markdown(cpu: CpuProfile, top_n: int = 15) -> str:
    vh = _value_header(cpu)
    parts = ["## CPU profile", "", "\n".join(_facts(cpu))]

    if cpu.kinds:
        rows = [[k.label, _amount(cpu, k.value, k.ns), units.pct(k.pct)] for k in cpu.kinds]
        parts += ["", "### Where the time goes", "", _table(["kind", vh, "share"], rows, "lrr")]

    if cpu.threads:
        rows = []
        unknown = any(t.unverified_pct > 0 for t in cpu.threads)
        for t in cpu.threads[:top_n]:
            rows.append([
                code(t.label),
                f"{t.samples:,}" if t.samples is not None else "",
                units.duration(t.ns) if t.ns is not None else (f"{t.value:,}" if cpu.unit == "units" else ""),
                units.pct(t.share_pct),
                units.pct(t.running_pct),
                units.pct(t.waiting_pct),
                *([units.pct(t.unverified_pct)] if unknown else []),
                _kind_text(t.dominant_kind),
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
                _kind_text(h.kind),
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


def _frame_json(cpu: CpuProfile, f: FrameStat) -> dict[str, Any]:
    d: dict[str, Any] = {
        "function": f.function,
        "file": f.file,
        "line": f.line,
        "kind": f.kind,
        "kind_label": _kind_text(f.kind),
        "self_ns": f.self_ns,
        "total_ns": f.total_ns,
        "self_pct": round(f.self_pct, 3),
        "total_pct": round(f.total_pct, 3),
    }
    if cpu.unit == "samples":
        d["self_samples"] = f.self_value
        d["total_samples"] = f.total_value
    elif cpu.unit == "units":
        d["self_weight"] = f.self_value
        d["total_weight"] = f.total_value
    if f.threads:
        d["threads"] = list(f.threads)
    return d


def _kind_json(cpu: CpuProfile, k: KindShare) -> dict[str, Any]:
    d: dict[str, Any] = {"kind": k.kind, "label": k.label, "time_ns": k.ns, "share_pct": round(k.pct, 3)}
    if cpu.unit == "samples":
        d["samples"] = k.value
    elif cpu.unit == "units":
        d["weight"] = k.value
    return d


def _thread_json(cpu: CpuProfile, t: ThreadProfile) -> dict[str, Any]:
    return {
        "pid": t.pid if t.pid >= 0 else None,
        "tid": t.tid if t.tid >= 0 else None,
        "name": t.name,
        "samples": t.samples,
        "time_ns": t.ns,
        "share_pct": round(t.share_pct, 3),
        "running_pct": round(t.running_pct, 3),
        "waiting_pct": round(t.waiting_pct, 3),
        "no_frames_pct": round(t.no_frames_pct, 3),
        "unverified_pct": round(t.unverified_pct, 3),
        "dominant_kind": t.dominant_kind,
        "kinds": [_kind_json(cpu, k) for k in t.kinds],
        "hot_spots": [_frame_json(cpu, f) for f in t.hot_spots],
    }


def cpu_profile_json(cpu: CpuProfile) -> dict[str, Any]:
    evidence = None
    if cpu.idle_evidence is not None:
        who, n, pct = cpu.idle_evidence
        evidence = {"thread": who, "waiting_samples": n, "waiting_pct": round(pct, 3)}
    return {
        "source_format": cpu.source_format,
        "producer": cpu.producer,
        "unit": cpu.unit,
        "interval_ns": cpu.interval_ns,
        "total_ns": cpu.total_ns,
        "samples": cpu.samples,
        "total_weight": cpu.total_value if cpu.unit == "units" else None,
        "includes_idle": cpu.includes_idle,
        "includes_idle_basis": cpu.includes_idle_basis,
        "idle_evidence": evidence,
        "gil_only": cpu.gil_only,
        "waiting_basis": cpu.waiting_basis,
        "running_pct": round(cpu.running_pct, 3),
        "waiting_pct": round(cpu.waiting_pct, 3),
        "from_intervals": cpu.from_intervals,
        "has_line_numbers": cpu.has_line_numbers,
        "source_lines_read": cpu.source_lines,
        "unverified_pct": round(cpu.unverified_pct, 3),
        "unverified_basis": cpu.unverified_basis or None,
        "blocked_evidence": [{"thread": t, "location": loc or None, "reason": why} for t, loc, why in cpu.blocked_evidence],
        "weight_unit": cpu.weight_unit or None,
        "kinds": [_kind_json(cpu, k) for k in cpu.kinds],
        "threads": [_thread_json(cpu, t) for t in cpu.threads],
        "hot_spots": [_frame_json(cpu, f) for f in cpu.hot_spots],
        "top_total": [_frame_json(cpu, f) for f in cpu.top_total],
        "notes": list(cpu.notes),
    }
