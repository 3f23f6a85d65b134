"""Report -> GitHub-flavoured markdown.

Every untrusted string (op, kernel, stage, file names, finding messages) passes through
:mod:`traceclass.render.escape`; every number carries its unit.
"""

from __future__ import annotations

from typing import Iterable, Sequence

from traceclass import units
from traceclass.render.escape import code, text
from traceclass.render.verdict import opportunities, opportunities_header, verdict_sentences
from traceclass.report.model import Report
from traceclass.rule import Finding

EVIDENCE_ROWS = 5


def table(headers: Sequence[str], rows: Iterable[Sequence[str]], align: str = "") -> str:
    """A markdown table; ``align`` is one char per column: l (default) or r."""
    align = align.ljust(len(headers), "l")
    sep = ["---:" if a == "r" else "---" for a in align]
    lines = ["| " + " | ".join(headers) + " |", "| " + " | ".join(sep) + " |"]
    for r in rows:
        lines.append("| " + " | ".join(c if c != "" else "—" for c in r) + " |")
    return "\n".join(lines)


NAME = "md"
EXTENSION = ".md"
DEFAULT_TOP_N = 15


def render(report: Report, top_n: int | None = None) -> str:
    top_n = DEFAULT_TOP_N if top_n is None else top_n
    parts = [_header(report), _verdict(report)]
    if report.findings:
        parts.append(_findings(report))
    if report.stages:
        parts.append(_stages(report))
    if report.ops:
        parts.append(_ops(report, top_n))
    if report.devices:
        parts.append(_timeline(report))
    if report.kernels:
        parts.append(_kernels(report, top_n))
    if getattr(report, "memory", ()):
        parts.append(_memory(report))
    if report.cpu_profile is not None:
        parts.append(_cpu(report, top_n))
    if report.devices or any(o.flops is not None for o in report.ops):
        parts.append(_hardware(report))
    if report.notes or report.rule_errors:
        parts.append(_notes(report))
    if report.devices or report.ops:
        parts.append(_definitions(report))
    return "\n\n".join(p for p in parts if p).rstrip() + "\n"


def _header(r: Report) -> str:
    s = r.source
    bits = [code(s.producer or s.format, 60)]
    if s.format_version and s.format_version not in (s.producer or ""):
        bits.append(f"format {code(s.format_version, 40)}")
    bits.append(f"{units.size(s.size_bytes)} read")
    if s.duration_ns:
        bits.append(f"{units.duration(s.duration_ns)} recorded")
    return f"# traceclass report: {code(s.file, 120)}\n\n" + ", ".join(bits) + \
        f"; traceclass {text(r.traceclass_version, 20)}."


def _verdict(r: Report) -> str:
    lines = ["## Verdict", "", " ".join(verdict_sentences(r, lambda n: code(n, 90, table=False), text))]
    opp = opportunities(r, lambda n: code(n, 90, table=False), text)
    if opp:
        lines += ["", f"**Top opportunities** ({opportunities_header(r)}):", ""]
        lines += [f"{i}. {o}" for i, o in enumerate(opp, 1)]
    return "\n".join(lines)


def _findings(r: Report) -> str:
    main = [f for f in r.findings if f.severity != "info"]
    info = [f for f in r.findings if f.severity == "info"]

    def rows(fs: list[Finding]) -> list[tuple[str, ...]]:
        return [(f.code, text(f.name, 40), f.severity, units.duration(f.recoverable_ns), text(f.message, 240))
                for f in fs]

    out = [
        "## Findings",
        "",
        "Sorted by recoverable time (what fixing the finding would save, estimated as stated per "
        "finding). `traceclass explain CODE` documents each rule.",
    ]
    if main:
        out += ["", table(["code", "rule", "severity", "recoverable", "what was measured"], rows(main), "lllrl")]
    else:
        out += ["", "No finding with recoverable time."]
    for f in main:
        out += ["", finding_details(f)]
    if info:
        out += ["", f"<details><summary>{len(info)} informational finding{'s' if len(info) != 1 else ''} "
                "(measured, nothing claimed as recoverable)</summary>", "",
                table(["code", "rule", "severity", "recoverable", "what was measured"], rows(info), "lllrl"),
                "", "</details>"]
    return "\n".join(out)


def finding_details(f: Finding, rows: int = EVIDENCE_ROWS) -> str:
    head = f"### {f.code} {text(f.name, 60)}: {units.duration(f.recoverable_ns)} recoverable"
    lines = [head, "", text(f.message, 400), "", f"*Estimate:* {text(f.estimate, 400)}",
             "", f"*Fix:* {text(f.fix, 400)}", "", f"*Fingerprint:* `{f.fingerprint}`"]
    if f.evidence:
        ev_rows = []
        for e in f.evidence[:rows]:
            when = "—"
            if e.start_ns is not None:
                when = _window(e.start_ns, e.end_ns)
            names = ", ".join(code(n, 60) for n in (e.ops + e.kernels)[:4])
            ev_rows.append(
                (
                    text(e.what, 160),
                    when,
                    units.duration(e.duration_ns) if e.duration_ns is not None else "—",
                    str(e.count) if e.count is not None else "—",
                    units.size(e.bytes) if e.bytes is not None else "—",
                    names or "—",
                    code(e.source, 80) if e.source else "—",
                )
            )
        lines += [
            "",
            table(["evidence", "window (from trace start)", "time", "count", "bytes", "ops / kernels",
                   "source (function start)"],
                  ev_rows, "llrrrll"),
        ]
        if len(f.evidence) > rows:
            lines.append(f"\n({len(f.evidence) - rows} more instances in the JSON report)")
    return "\n".join(lines)


def _window(start_ns: int, end_ns: int | None) -> str:
    """``a → b`` with enough digits that a and b differ when the times do."""
    a = units.duration(start_ns)
    if end_ns is None:
        return a
    b = units.duration(end_ns)
    if a == b and end_ns != start_ns:
        m = max(abs(start_ns), abs(end_ns))
        scale, unit = next((s, u) for s, u in ((1e9, "s"), (1e6, "ms"), (1e3, "µs"), (1.0, "ns")) if m >= s)
        for digits in range(4, 13):
            a, b = f"{start_ns / scale:.{digits}g} {unit}", f"{end_ns / scale:.{digits}g} {unit}"
            if a != b:
                break
    return f"{a} → {b}"


def _stages(r: Report) -> str:
    has_gpu = any(s.gpu_busy_ns is not None for s in r.stages)
    headers = ["stage", "kind", "count", "P50", "P90", "P99", "total"]
    align = "llrrrrr"
    if has_gpu:
        headers += ["GPU busy", "GPU busy / span"]
        align += "rr"
    headers += ["dominant bound", "modeled work vs roof"]
    align += "l"
    rows = []
    for s in r.stages[:30]:
        extra = "".join(f" (+{n} {what})" for n, what in ((s.warmup_count, "warm-up"), (s.empty_count, "empty"))
                        if n)
        row = [code(s.name, 60), s.kind, str(s.count) + extra,
               units.duration(s.p50_ns), units.duration(s.p90_ns), units.duration(s.p99_ns),
               units.duration(s.total_ns)]
        if has_gpu:
            row += [units.duration(s.gpu_busy_ns), units.pct(s.gpu_share_pct)]
        dom = s.dominant_bound
        if dom and s.bound_shares_pct:
            dom = f"{dom} ({units.pct(s.bound_shares_pct.get(dom), 0)})"
        row.append(dom or "—")
        row.append(f"{units.ratio(s.intensity)} FLOP/B, {units.pct(s.pct_of_roof, 0)} of roof"
                   if s.pct_of_roof is not None else "—")
        rows.append(row)
    out = ["## Stages", "",
           "Wall time of each range across its steady-state occurrences (warm-up steps apart). "
           + ("GPU busy = union of the GPU work launched inside the range (its own thread and "
              "helper threads such as autograd's), exact to the ns; span = from the range's start to the "
              "later of its end and the end of the last GPU work it launched (GPU work outlives a short "
              "CPU range, so busy ÷ wall could pass 100 %). " if has_gpu else "")
           + "Dominant bound = the roofline label holding most of the stage's op time; the last column "
           "puts the stage's modeled FLOPs and bytes against its whole work time (a lower bound on "
           "what the stage achieves).",
           "", table(headers, rows, align)]
    if len(r.stages) > 30:
        out.append(f"\n({len(r.stages) - 30} more stages in the JSON report)")
    return "\n".join(out)


def _ops(r: Report, top_n: int) -> str:
    basis = "GPU time" if r.ops_time_basis == "gpu" else "host time"
    headers = ["op", "shapes", "dtype", "calls", basis, "share", "FLOP/call", "bytes/call",
               "FLOP/byte", "ridge (FLOP/byte)", "achieved", "% of roof", "bound", "at stake", "achievable basis",
               "datasheet gap"]
    op_rows = [o for o in r.ops if o.kind == "op"]
    rows = []
    for o in op_rows[:top_n]:
        achieved = units.flop_rate(o.achieved_flops_per_s) if o.flops else units.byte_rate(o.achieved_bytes_per_s)
        bound = o.bound + (" (heuristic)" if o.heuristic else "")
        rows.append([
            code(o.name, 60), ("causal ½ · " if o.causal else "") + (code(o.shapes, 70) if o.shapes else "—"),
            o.dtype or "—", str(o.count),
            units.duration(o.total_ns), units.pct(o.share_pct), units.flops(o.flops), units.size(o.bytes),
            units.ratio(o.intensity), units.ratio(o.ridge), achieved if o.flops is not None else "—",
            units.pct(o.pct_of_roof, 0), bound, units.duration(o.stake_ns), text(o.stake_basis or "—", 40),
            units.duration(o.gap_ns),
        ])
    denom = "device busy time (union over streams)" if r.ops_time_basis == "gpu" else "total op time on host threads"
    lat = r.thresholds.get("latency_floor_us" if r.ops_time_basis == "gpu" else "cpu_latency_floor_us")
    out = [
        "## Top operators (roofline)", "",
        f"Grouped by op name, input shapes and dtype; share = {basis} ÷ {denom}. "
        "FLOP and bytes per call come from the recorded shapes (ideal traffic: every tensor read or "
        "written once). `latency-bound` means the roofline lower bound per call is under "
        f"{lat} µs, too small for either roof to matter; `unclassified` means no cost model "
        "applies (the op is counted, not guessed). At stake = time above the achievable ceiling "
        "(the lower of the best rate a sibling of the same family and precision reaches in this trace and "
        "the family's documented fraction of the roof: basis column); datasheet gap = time above 100 % of "
        "the roof.",
        "", table(headers, rows, "llllrrrrrrrrlrlr"),
    ]
    details = sorted({(o.stake_basis, o.stake_detail) for o in op_rows[:top_n] if o.stake_detail and
                      "documented" in o.stake_basis})
    if details:
        out += ["", "Achievable ceilings used:"]
        out += [f"- {text(b, 60)}: {text(d, 400)}" for b, d in details]
    out += _kernel_groups([o for o in r.ops if o.kind != "op"], top_n)
    by_note: dict[str, list[str]] = {}
    for o in op_rows[:top_n] + [k for k in r.ops if k.kind != "op"][:top_n]:
        if o.note and o.name not in by_note.setdefault(o.note, []):
            by_note[o.note].append(o.name)
    if by_note:
        out += ["", "Notes:"]
        for note, names in by_note.items():
            shown = ", ".join(code(n, 50) for n in names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")
            out.append(f"- {shown}: {text(note, 200)}")
    if len(op_rows) > top_n:
        rest = sum(o.total_ns for o in op_rows[top_n:])
        more = len(op_rows) - top_n
        out.append(f"\n{more} more op group{'s' if more != 1 else ''} ({units.duration(rest)}) in the JSON report.")
    if r.unmodeled_ops:
        top = list(r.unmodeled_ops.items())[:8]
        out.append(
            "\nOps without a cost model (calls): "
            + ", ".join(f"{code(n, 40)} ({c})" for n, c in top)
            + (f" and {len(r.unmodeled_ops) - 8} more" if len(r.unmodeled_ops) > 8 else "")
            + "."
        )
    return "\n".join(out)


def _timeline(r: Report) -> str:
    headers = ["device", "window", "busy", "idle", "compute", "copy", "communication", "exposed copy",
               "exposed comm", "kernels", "copies", "streams"]
    rows = []
    for d in r.devices:
        def both(ns: int) -> str:
            return f"{units.duration(ns)} ({units.pct(100.0 * ns / d.window_ns if d.window_ns else 0)})"

        rows.append([
            f"{d.device} {code(d.name, 40)}" if d.name else str(d.device), units.duration(d.window_ns),
            both(d.busy_ns), both(d.idle_ns), both(d.compute_ns), both(d.copy_ns), both(d.comm_ns),
            units.duration(d.exposed_copy_ns), units.duration(d.exposed_comm_ns), str(d.kernels),
            str(d.memcpys + d.memsets), str(d.streams),
        ])
    out = ["## GPU timeline", "",
           "Window = first to last GPU activity on the device. Busy = union of kernels, copies and "
           "memsets over all streams; compute = non-communication kernels; copy = memcpy + memset; "
           "exposed copy = copy time overlapped by no kernel. Exact integer-ns unions (HTA rounds to "
           "whole µs first).",
           "", table(headers, rows, "lrrrrrrrrrrr")]
    for d in r.devices:
        bits = []
        if d.comm_overlap_pct is not None:
            bits.append(f"{units.pct(d.comm_overlap_pct)} of its communication time overlapped compute")
        if d.launches:
            bits.append(f"{d.launches} kernel launches: launch delay P50 {units.duration(d.launch_delay_p50_ns)}, "
                        f"P90 {units.duration(d.launch_delay_p90_ns)}, max {units.duration(d.launch_delay_max_ns)}; "
                        f"{d.kernels_shorter_than_launch} kernels ran shorter than their launch call"
                        + ("; a launch delay of milliseconds means a deep queue (the host runs ahead of the GPU), "
                           "not a slow launch" if (d.launch_delay_p50_ns or 0) >= 1e6 else ""))
        if bits:
            out.append(f"\nDevice {d.device}: " + "; ".join(bits) + ".")
        if d.profiler_window_ns and d.idle_in_profiler_window_ns is not None:
            out.append(
                f"\nDevice {d.device}: over the whole profiler window ({units.duration(d.profiler_window_ns)}) "
                f"the GPU was idle {units.duration(d.idle_in_profiler_window_ns)} "
                f"({units.pct(100.0 * d.idle_in_profiler_window_ns / d.profiler_window_ns)})."
            )
    return "\n".join(out)


def _kernels(r: Report, top_n: int) -> str:
    rows = [
        [code(k.name, 70), k.family, str(k.count), units.duration(k.total_ns), units.duration(k.mean_ns),
         units.duration(k.p50_ns), units.duration(k.max_ns), units.pct(k.share_pct), k.bound or "—",
         ", ".join(code(o, 30) for o in k.ops[:2]) or "—"]
        for k in r.kernels[:top_n]
    ]
    return "\n".join([
        "## Top GPU kernels", "",
        "Sum of kernel durations by name (like `nsys stats cuda_gpu_kern_sum`); share = ÷ device busy "
        "time, so overlapping kernels can add past 100%. Bound is shown when the kernel is the only "
        "GPU work of its op.",
        "", table(["kernel", "family", "count", "total", "mean", "P50", "max", "share", "bound", "launched by"],
                  rows, "llrrrrrrll"),
    ])


def _memory(r: Report) -> str:
    rows = []
    for m in r.memory:
        where = "host" if m.device_type == "cpu" else f"GPU {m.device}"
        rows.append([where, units.size(m.peak_allocated_bytes), units.size(m.peak_reserved_bytes), str(m.events)])
    return "\n".join(["## Memory", "",
                      "Allocator peaks from the profiler's memory events (`profile_memory=True`): the most "
                      "memory held by tensors at once (allocated) and by the caching allocator (reserved).",
                      "", table(["where", "peak allocated", "peak reserved", "events"], rows, "lrrr")])


def _cpu(r: Report, top_n: int) -> str:
    from traceclass.render.cpu_markdown import cpu_profile_markdown

    return cpu_profile_markdown(r.cpu_profile, top_n)


def _hardware(r: Report) -> str:
    rows = []
    for h in r.hardware:
        if h.device < 0 and r.ops_time_basis == "gpu":
            continue
        used = {f"{o.unit}_{o.precision}" for o in r.ops if o.precision and o.unit and o.device == h.device}
        ordered = sorted(h.peaks_flops_per_s.items(), key=lambda kv: (kv[0] not in used, -kv[1]))
        peaks = ", ".join(f"{k} {units.flop_rate(v)}" + (" (used)" if k in used else "") for k, v in ordered[:6])
        rows.append([
            "host CPU" if h.device < 0 else str(h.device), code(h.reported_name, 50) if h.reported_name else "—",
            code(h.spec, 40) if h.spec else "unknown", text(h.how, 80),
            units.byte_rate(h.memory_bandwidth_per_s), peaks or "—",
        ])
    notes = []
    for h in r.hardware:
        if h.device < 0 and r.ops_time_basis == "gpu":
            continue
        notes += [f"- {code(h.spec or h.reported_name, 40)}: {text(n, 400)}" for n in h.notes]
    out = ["## Hardware", "",
           "Roofs are dense datasheet peaks; `traceclass devices NAME` lists every figure with its source.",
           "", table(["device", "reported as", "spec used", "how", "memory bandwidth", "peaks"], rows, "lllrrl")]
    if notes:
        out += [""] + notes
    return "\n".join(out)


def _kernel_groups(groups: list, top_n: int) -> list[str]:  # type: ignore[type-arg]
    """GPU work no op launched (grouped by kernel name) and graph replays: their own table, so
    op rows and mangled kernel names do not mix."""
    if not groups:
        return []
    rows = []
    for o in groups[:top_n]:
        achieved = units.byte_rate(o.achieved_bytes_per_s) if o.bytes else "—"
        rows.append([code(o.name, 60), o.kind, o.family or "—", str(o.count), str(o.kernels),
                     units.duration(o.total_ns), units.pct(o.share_pct), achieved, units.pct(o.pct_of_roof, 0),
                     o.bound + (" (heuristic)" if o.heuristic else "")])
    out = ["", "GPU work without a recorded op (grouped by kernel name; graph replays by launch):", "",
           table(["kernel / replay", "kind", "family", "count", "kernels", "GPU time", "share", "achieved",
                  "% of roof", "bound"], rows, "lllrrrrrrl")]
    if len(groups) > top_n:
        out.append(f"\n{len(groups) - top_n} more kernel group(s) in the JSON report.")
    return out


def _notes(r: Report) -> str:
    lines = ["## Notes", ""]
    lines += [f"- {text(n, 400)}" for n in r.notes]
    lines += [f"- rule error: {text(e, 300)}" for e in r.rule_errors]
    return "\n".join(lines)


def _definitions(r: Report) -> str:
    return "\n".join([
        "<details><summary>Definitions</summary>",
        "",
        "- **FLOP/byte** (arithmetic intensity): modeled FLOPs ÷ ideal bytes moved.",
        "- **ridge** (FLOP/byte): peak FLOP/s ÷ memory bandwidth of the device for the op's precision and unit "
        "(matrix = tensor cores / MFMA, vector = CUDA cores / SIMD); work below the ridge is memory-bound.",
        "- **achieved**: FLOP/s (or bytes/s for zero-FLOP ops) measured over the op's time per call.",
        "- **% of roof**: achieved ÷ attainable, where attainable = min(peak, intensity × bandwidth).",
        "- **datasheet gap**: time above the roofline lower bound max(FLOP ÷ peak, bytes ÷ bandwidth), summed over calls.",
        "- **at stake**: time above calls × lower bound ÷ achievable ceiling, where the ceiling (percent of the "
        "attainable roof) is the lower of the best sibling (same device, family, precision, unit) in this trace "
        "and the family's documented fraction; 0 when the op already reaches it.",
        "- **P50/P90/P99**: percentiles (linear interpolation) of wall time across occurrences.",
        "- **source**: `file:line` of the user function (outside torch and installed packages) that issued "
        "the work; torch.profiler records the line where each Python function starts, so it is that "
        "function's `def` line, not the statement.",
        "- **exposed communication / copy**: communication (copy) time during which no compute kernel "
        "ran on the device; **comm overlap** = communication time overlapped by compute ÷ communication time.",
        "- **launch delay**: kernel start − end of the API call that launched it, clipped at 0 (HTA's definition).",
        "- Times are wall-clock; µs = microseconds, ms = milliseconds; sizes in decimal units (1 MB = 10^6 bytes).",
        "",
        "</details>",
    ])


#: Every section by name, for renderers that arrange them differently (``issue``); each takes
#: ``(report, top_n)`` and returns markdown ("" when the report has nothing for it).
SECTIONS = {
    "header": lambda r, n: _header(r),
    "verdict": lambda r, n: _verdict(r),
    "findings": lambda r, n: _findings(r),
    "stages": lambda r, n: _stages(r),
    "ops": _ops,
    "timeline": lambda r, n: _timeline(r),
    "kernels": _kernels,
    "memory": lambda r, n: _memory(r),
    "cpu": _cpu,
    "hardware": lambda r, n: _hardware(r),
    "notes": lambda r, n: _notes(r),
    "definitions": lambda r, n: _definitions(r),
}


def section(name: str, report: Report, top_n: int = DEFAULT_TOP_N) -> str:
    """One section of the markdown report (a key of :data:`SECTIONS`)."""
    return SECTIONS[name](report, top_n)
