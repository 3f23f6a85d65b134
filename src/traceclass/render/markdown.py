"""Report -> GitHub-flavoured markdown, laid out for GitHub's 980 px content column.

Every untrusted string (op, kernel, stage, file names, finding messages) passes through
:mod:`traceclass.render.escape`; every number carries its unit (joined to it by a non-breaking
space inside tables, so "262 ms" never wraps into "262 / ms"). Tables put the conclusion columns
(bound, % of roof, gap, share) left of the detail columns; long names are shortened at an
identifier boundary in tables and listed in full once below them (:class:`Names`). Detail
sections (``###``) show messages whole.
"""

from __future__ import annotations

import re
from typing import Iterable, Sequence

from traceclass import units
from traceclass.render.escape import clean, code, shorten, text
from traceclass.render.verdict import key_numbers, opportunities, opportunities_header, verdict_sentences
from traceclass.report.model import Report
from traceclass.rule import Finding

EVIDENCE_ROWS = 5
NAME_WIDTH = 34  # characters of a kernel/op name shown in a table cell (full name listed below)
SHAPES_WIDTH = 32

_CODE_SPAN = re.compile(r"(`+).*?\1")


def _cell(c: str) -> str:
    if c == "":
        return "—"
    if "`" not in c:
        return units.nonbreaking(c)
    # keep code spans as they are; join numbers and units in the prose around them
    out, last = [], 0
    for m in _CODE_SPAN.finditer(c):
        out += [units.nonbreaking(c[last:m.start()]), m.group(0)]
        last = m.end()
    out.append(units.nonbreaking(c[last:]))
    return "".join(out)


_LONG_TOKEN = re.compile(r"[^\s`]{24,}")


def breakable(prose: str) -> str:
    """Escaped prose whose long tokens (a 120-character kernel name inside a sentence) may wrap at
    their separators: ``<wbr>`` marks a break opportunity and adds no character, so the text stays
    whole (detail sections never cut) yet the table cell does not widen the page."""
    return _LONG_TOKEN.sub(lambda m: re.sub(r"(_|::|,|/)(?=[^\s])", r"\1<wbr>", m.group(0)), prose)


def table(headers: Sequence[str], rows: Iterable[Sequence[str]], align: str = "") -> str:
    """A markdown table; ``align`` is one char per column: l (default) or r. Columns whose
    every cell is empty ("—") are left out: they say nothing and cost width."""
    rows = [list(r) for r in rows]
    keep = [i for i in range(len(headers)) if not rows or any(r[i] not in ("", "—") for r in rows)]
    align = align.ljust(len(headers), "l")
    heads = [headers[i] for i in keep]
    sep = ["---:" if align[i] == "r" else "---" for i in keep]
    lines = ["| " + " | ".join(heads) + " |", "| " + " | ".join(sep) + " |"]
    for r in rows:
        lines.append("| " + " | ".join(_cell(r[i]) for i in keep) + " |")
    return "\n".join(lines)


class Names:
    """Long names shortened in a table, each listed in full once below it.

    ``Names("k")`` numbers them k1, k2, ...; :meth:`short` gives the table cell, :meth:`key`
    the folded list of full names (empty when nothing was shortened)."""

    def __init__(self, prefix: str, width: int = NAME_WIDTH) -> None:
        self.prefix, self.width = prefix, width
        self.full: dict[str, str] = {}

    def short(self, name: str, width: int | None = None, full: str = "") -> str:
        """``name`` as a table cell; ``full`` (a demangled signature) is what the key lists when
        it says more than the name."""
        w = width or self.width
        c = clean(name)
        whole = clean(full) if full and clean(full) != c else c
        if len(c) <= w and whole == c:
            return code(c)
        tag = self.full.setdefault(whole, f"{self.prefix}{len(self.full) + 1}")
        if len(c) <= w:
            return f"{code(c)} {tag}"
        # the namespace noise goes first: the full name is listed below
        short = c.replace("(anonymous namespace)::", "").replace("at::native::", "")
        return f"{code(shorten(short, w))} {tag}"

    def key(self, what: str = "Full names") -> str:
        """The folded list of full names; ``what`` makes its summary distinct in the document."""
        if not self.full:
            return ""
        lines = [f"<details><summary>{what} ({len(self.full)} shortened above)</summary>", ""]
        lines += [f"- {tag}: {code(name, None, table=False)}" for name, tag in self.full.items()]
        return "\n".join(lines + ["", "</details>"])


NAME = "md"
EXTENSION = ".md"
DEFAULT_TOP_N = 15


def render(report: Report, top_n: int | None = None) -> str:
    top_n = DEFAULT_TOP_N if top_n is None else top_n
    parts = [_header(report), _verdict(report), _caveats(report)]
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
    if other_notes(report) or report.rule_errors:
        parts.append(_notes(report))
    if report.devices or report.ops:
        parts.append(_definitions(report))
    return "\n\n".join(p for p in parts if p).rstrip() + "\n"


#: formats by their reader name, as a user would call them
_FORMAT_NAMES = {"kineto": "kineto", "nsys": "nsys SQLite", "speedscope": "speedscope", "collapsed": "collapsed stacks"}


def _header(r: Report) -> str:
    s = r.source
    fmt = s.format or "unknown"
    bits = [f"{code(fmt, 40)} trace" + (f" from {code(s.producer, 60)}" if s.producer and s.producer != fmt else "")]
    if s.format_version and s.format_version not in (s.producer or ""):
        bits.append(f"schema {code(s.format_version, 40)}")
    bits.append(f"{units.size(s.size_bytes)} read")
    if s.duration_ns:
        bits.append(f"{units.duration(s.duration_ns)} recorded")
    return f"# traceclass report: {code(s.file, 120)}\n\n" + ", ".join(bits) + \
        f"; traceclass {text(r.traceclass_version, 20)}."


def _verdict(r: Report) -> str:
    # a name in the verdict's paragraph stays whole up to 300 characters (real op names do); a
    # longer one (a mangled kernel) is cut at a boundary: its table lists it in full
    name = lambda n: code(n, 300, table=False)  # noqa: E731
    lines = ["## Verdict", ""]
    keys = key_numbers(r)
    if keys:
        lines += ["**" + " · ".join(keys) + "**", ""]
    # a short paragraph (steps, busy/idle by cause, findings), the opportunities, then where the
    # time goes: the reader sees the decision before the detail
    detail: list[str] = []
    lines.append(" ".join(verdict_sentences(r, name, text, detail)))
    opp = opportunities(r, name, text)
    if opp:
        lines += ["", f"**Top opportunities** ({opportunities_header(r)}; evidence under Findings):", ""]
        lines += [f"{i}. {o}" for i, o in enumerate(opp, 1)]
    if detail:
        lines += ["", "**Where the time goes:**", ""] + [f"- {d}" for d in detail]
    return "\n".join(lines)


#: notes that say what the recording could not show: they change how the numbers read, so they
#: stand right under the verdict (the rest go to Notes at the end)
_CAVEAT = re.compile(r"without shapes|no ProfilerStep|too few steps|no GPU activity|input repaired|"
                     r"not supported yet|not recorded|recorded without", re.I)


def caveat_notes(r: Report) -> list[str]:
    return [n for n in r.notes if _CAVEAT.search(n)]


def other_notes(r: Report) -> list[str]:
    return [n for n in r.notes if not _CAVEAT.search(n)]


def _caveats(r: Report) -> str:
    cav = caveat_notes(r)
    if not cav:
        return ""
    return "\n".join(["**What the recording could not show:**", ""] + [f"- {text(n, None)}" for n in cav])


def recoverable(f: Finding) -> str:
    """Recoverable time as a table cell: informational findings claim none, so show none."""
    return "info" if f.severity == "info" else units.duration(f.recoverable_ns)


def finding_rows(fs: list[Finding]) -> list[tuple[str, ...]]:
    return [(recoverable(f), f.severity, f"{f.code} {text(f.name, None)}", text(f.title or f.message, None))
            for f in fs]


def _findings(r: Report, rows: int = EVIDENCE_ROWS) -> str:
    main = [f for f in r.findings if f.severity != "info"]
    info = [f for f in r.findings if f.severity == "info"]
    heads = ["recoverable", "severity", "rule", "what to change"]
    out = [
        "## Findings",
        "",
        "Sorted by recoverable time (what fixing the finding would save, estimated as stated per "
        "finding). `traceclass explain CODE` documents each rule.",
    ]
    if main:
        out += ["", table(heads, finding_rows(main), "rlll")]
    else:
        out += ["", "No finding with recoverable time."]
    for f in main:
        out += ["", finding_details(f, rows)]
    if info:
        out += ["", f"<details><summary>{len(info)} informational finding{'s' if len(info) != 1 else ''} "
                "(measured, nothing claimed as recoverable)</summary>", "",
                table(heads, finding_rows(info), "rlll")]
        for f in info:
            out += ["", finding_details(f, rows)]
        out += ["", "</details>"]
    return "\n".join(out)


def finding_details(f: Finding, rows: int = EVIDENCE_ROWS, heading: bool = True, estimate: bool = True) -> str:
    """A finding in full: message, estimate, fix, fingerprint and its evidence (nothing cut)."""
    claim = "informational" if f.severity == "info" else f"{units.duration(f.recoverable_ns)} recoverable"
    lines = [f"### {f.code} {text(f.name, None)}: {claim}", ""] if heading else []
    lines += [text(f.message, None), ""]
    if estimate:
        lines += [f"*Estimate:* {text(f.estimate, None)}", ""]
    lines += [f"*Fix:* {text(f.fix, None)}", "", f"*Fingerprint:* `{f.fingerprint}`"]
    if f.evidence:
        names = Names("n")
        ev_rows = []
        for e in f.evidence[:rows]:
            when = _window(e.start_ns, e.end_ns) if e.start_ns is not None else "—"
            shown = tuple(dict.fromkeys(e.ops + e.kernels))[:3]
            ev_rows.append((
                units.duration(e.duration_ns) if e.duration_ns is not None else "—",
                # a path wraps at its slashes (a code span would not): the column stays narrow
                breakable(text(e.source, None)) if e.source else "—",
                breakable(text(e.what, None)),
                when,
                str(e.count) if e.count is not None else "—",
                units.size(e.bytes) if e.bytes is not None else "—",
                ", ".join(names.short(n, 30) for n in shown) or "—",
            ))
        lines += [
            "",
            table(["time", "source", "evidence", "window", "count", "bytes", "ops / kernels"], ev_rows, "rllrrrl"),
            "",
            "Window: from the trace start" + ("; source: the user function's `def` line."
                                              if any(e.source for e in f.evidence[:rows]) else "."),
        ]
        key = names.key(f"Full names in the {f.code} evidence ({f.fingerprint})")
        if key:
            lines += ["", key]
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
        a, b = units.distinct_durations(start_ns, end_ns)
    return f"{a} → {b}"


def _stages(r: Report, limit: int = 30) -> str:
    has_gpu = any(s.gpu_busy_ns is not None for s in r.stages)
    names = Names("s")
    headers = ["stage", "dominant bound", "modeled work vs roof"]
    align = "lll"
    if has_gpu:
        headers += ["GPU busy / span"]
        align += "r"
    # P90, the range kind and GPU busy stay in the JSON report: the table must fit 980 px
    headers += ["P50", "P99", "count"]
    align += "rrr"
    rows = []
    for s in r.stages[:limit]:
        extra = "".join(f" (+{n} {what})" for n, what in ((s.warmup_count, "warm-up"), (s.empty_count, "empty"))
                        if n)
        dom = s.dominant_bound
        if dom and s.bound_shares_pct:
            dom = f"{dom} ({units.pct(s.bound_shares_pct.get(dom), 0)})"
        row = [names.short(s.name), dom or "—",
               f"{units.pct(s.pct_of_roof, 0)} of roof at {units.ratio(s.intensity)} FLOP/B"
               if s.pct_of_roof is not None else "—"]
        if has_gpu:
            row.append(units.pct(s.gpu_share_pct))
        row += [units.duration(s.p50_ns), units.duration(s.p99_ns), str(s.count) + extra]
        rows.append(row)
    out = ["## Stages", "",
           "Wall time of each range across its steady-state occurrences (warm-up steps apart). "
           + ("GPU busy = union of the GPU work launched inside the range (its own thread and "
              "helper threads such as autograd's), exact to the ns; span = from the range's start to the "
              "later of its end and the end of the last GPU work it launched (GPU work outlives a short "
              "CPU range, so busy ÷ wall could pass 100%). " if has_gpu else "")
           + "Dominant bound = the roofline label holding most of the stage's op time; modeled work vs roof "
           "puts the stage's modeled FLOPs and bytes against its whole work time (a lower bound on "
           "what the stage achieves).",
           "", table(headers, rows, align)]
    key = names.key("Full stage names")
    if key:
        out += ["", key]
    if len(r.stages) > limit:
        out.append(f"\n({len(r.stages) - limit} more stages in the JSON report)")
    return "\n".join(out)


def _shapes(o) -> str:  # type: ignore[no-untyped-def]
    s = ("causal ½ · " if o.causal else "") + clean(o.shapes or "")
    return s


def _ops(r: Report, top_n: int, detail: bool = True) -> str:
    basis = "GPU time" if r.ops_time_basis == "gpu" else "host time"
    names = Names("o")
    # shapes carry each input's dtype; the dtype column only stands in when shapes were not recorded
    headers = ["op", "bound", "% of roof", "at stake", "share", basis, "calls", "shapes (dtype)"]
    op_rows = [o for o in r.ops if o.kind == "op"]
    rows, detail_rows = [], []
    for o in op_rows[:top_n]:
        bound = o.bound + (" (heuristic)" if o.heuristic else "")
        shapes = _shapes(o)
        short = code(shorten(shapes, SHAPES_WIDTH)) if shapes else (o.dtype or "—")
        op = names.short(o.name)
        rows.append([
            op, bound, units.pct(o.pct_of_roof, 0), units.duration(o.stake_ns), units.pct(o.share_pct),
            units.duration(o.total_ns), f"{o.count:,}", short,
        ])
        achieved = units.flop_rate(o.achieved_flops_per_s) if o.flops else units.byte_rate(o.achieved_bytes_per_s)
        if o.flops is not None or o.bytes is not None or len(shapes) > SHAPES_WIDTH:
            detail_rows.append([op, units.flops(o.flops), units.size(o.bytes), units.ratio(o.intensity),
                                achieved if o.flops is not None else "—", text(o.stake_basis or "—", None),
                                units.duration(o.gap_ns), code(shapes, None) if shapes else "—"])
    denom = "device busy time (union over streams)" if r.ops_time_basis == "gpu" else "total op time on host threads"
    lat = r.thresholds.get("latency_floor_us" if r.ops_time_basis == "gpu" else "cpu_latency_floor_us")
    out = [
        "## Top operators (roofline)", "",
        f"Grouped by op name, input shapes and dtype; share = {basis} ÷ {denom}. "
        "FLOP and bytes per call come from the recorded shapes (ideal traffic: every tensor read or "
        "written once). `latency-bound` means the roofline lower bound per call is under "
        f"{units.duration((lat or 0) * 1000)}, too small for either roof to matter; `unclassified` means no cost "
        "model applies (the op is counted, not guessed). At stake = time above the achievable ceiling "
        "(the lower of the best rate a sibling of the same family and precision reaches in this trace and "
        "the family's documented fraction of the roof: the basis in the folded table); datasheet gap = time "
        "above 100% of the roof.",
        "", table(headers, rows, "lllrrrrl"),
    ]
    if detail and detail_rows:
        out += ["", "<details><summary>Roofline inputs per op (FLOP and bytes per call, intensity, "
                "achieved, achievable basis, datasheet gap, full shapes)</summary>", "",
                table(["op", "FLOP/call", "bytes/call", "FLOP/byte", "achieved", "achievable basis", "datasheet gap",
                       "shapes"], detail_rows, "lrrrrlrl"), "", "</details>"]
    key = names.key("Full op names")
    if key:
        out += ["", key]
    details = sorted({(o.stake_basis, o.stake_detail) for o in op_rows[:top_n] if o.stake_detail and
                      "documented" in o.stake_basis})
    if details:
        out += ["", "Achievable ceilings used:"]
        out += [f"- {text(b, None)}: {text(d, None)}" for b, d in details]
    out += _kernel_groups([o for o in r.ops if o.kind != "op"], top_n)
    by_note: dict[str, list[str]] = {}
    for o in op_rows[:top_n] + [k for k in r.ops if k.kind != "op"][:top_n]:
        if o.note and o.name not in by_note.setdefault(o.note, []):
            by_note[o.note].append(o.name)
    if by_note:
        out += ["", "Notes:"]
        for note, nms in by_note.items():
            shown = ", ".join(code(n, None, table=False) for n in nms[:4]) + \
                (f" and {len(nms) - 4} more" if len(nms) > 4 else "")
            out.append(f"- {shown}: {text(note, None)}")
    if len(op_rows) > top_n:
        rest = sum(o.total_ns for o in op_rows[top_n:])
        more = len(op_rows) - top_n
        out.append(f"\n{more} more op group{'s' if more != 1 else ''} ({units.duration(rest)}) in the JSON report.")
    if r.unmodeled_ops:
        top = list(r.unmodeled_ops.items())[:8]
        out.append(
            "\nOps without a cost model (calls): "
            + ", ".join(f"{code(n, None, table=False)} ({c})" for n, c in top)
            + (f" and {len(r.unmodeled_ops) - 8} more" if len(r.unmodeled_ops) > 8 else "")
            + "."
        )
    return "\n".join(out)


def _timeline(r: Report) -> str:
    """One column per device, one row per measure: narrow however many devices (8 per table)."""
    out = ["## GPU timeline", "",
           "Window = first to last GPU activity on the device. Busy = union of kernels, copies and "
           "memsets over all streams; compute = non-communication kernels; copy = memcpy + memset; "
           "exposed copy = copy time overlapped by no kernel. Exact integer-ns unions (HTA rounds to "
           "whole µs first)."]
    devs = list(r.devices)
    for k in range(0, len(devs), 8):
        chunk = devs[k:k + 8]
        heads = ["measure"] + [f"GPU {d.device}" for d in chunk]

        def both(ns: int, d) -> str:  # type: ignore[no-untyped-def]
            return f"{units.duration(ns)} ({units.share(ns, d.window_ns)})"

        measures = [
            ("busy", lambda d: both(d.busy_ns, d)), ("idle", lambda d: both(d.idle_ns, d)),
            ("compute", lambda d: both(d.compute_ns, d)), ("copy", lambda d: both(d.copy_ns, d)),
            ("communication", lambda d: both(d.comm_ns, d)),
            ("exposed copy", lambda d: units.duration(d.exposed_copy_ns)),
            ("exposed comm", lambda d: units.duration(d.exposed_comm_ns)),
            ("window", lambda d: units.duration(d.window_ns)),
            ("kernels", lambda d: f"{d.kernels:,}"), ("copies + memsets", lambda d: f"{d.memcpys + d.memsets:,}"),
            ("streams", lambda d: str(d.streams)),
        ]
        rows = [[m] + [f(d) for d in chunk] for m, f in measures]
        named = [f"GPU {d.device}: {code(d.name, None, table=False)}" for d in chunk if d.name]
        out += ["", table(heads, rows, "l" + "r" * len(chunk))]
        if named:
            out += ["", "; ".join(named) + "."]
    for d in r.devices:
        bits = []
        if d.comm_overlap_pct is not None:
            bits.append(f"{units.pct(d.comm_overlap_pct)} of its communication time overlapped compute")
        if d.launches:
            bits.append(f"{d.launches:,} kernel launches: launch delay P50 {units.duration(d.launch_delay_p50_ns)}, "
                        f"P90 {units.duration(d.launch_delay_p90_ns)}, max {units.duration(d.launch_delay_max_ns)}; "
                        f"{d.kernels_shorter_than_launch:,} kernels ran shorter than their launch call"
                        + ("; a launch delay of milliseconds means a deep queue (the host runs ahead of the GPU), "
                           "not a slow launch" if (d.launch_delay_p50_ns or 0) >= 1e6 else ""))
        if bits:
            out.append(f"\nGPU {d.device}: " + "; ".join(bits) + ".")
        if d.profiler_window_ns and d.idle_in_profiler_window_ns is not None:
            out.append(
                f"\nGPU {d.device}: over the whole profiler window ({units.duration(d.profiler_window_ns)}) "
                f"the GPU was idle {units.duration(d.idle_in_profiler_window_ns)} "
                f"({units.share(d.idle_in_profiler_window_ns, d.profiler_window_ns)})."
            )
    return "\n".join(out)


def _kernels(r: Report, top_n: int, signatures: bool = True) -> str:
    """``signatures``: list the demangled signature of each shortened kernel (the short form lists
    the kernel's name only)."""
    names = Names("k")
    ops = Names("o")
    rows = [
        [names.short(k.name, 30, k.full_name if signatures else ""), units.pct(k.share_pct), k.bound or "—", units.duration(k.total_ns),
         f"{k.count:,}", k.family, ops.short(k.ops[0], 22) if k.ops else "—"]
        for k in r.kernels[:top_n]
    ]
    out = [
        "## Top GPU kernels", "",
        "Sum of kernel durations by name (like `nsys stats cuda_gpu_kern_sum`); share = ÷ device busy "
        "time, so overlapping kernels can add past 100%. Bound is shown when the kernel is the only "
        "GPU work of its op; launched by = the op that launched most of its time.",
        "", table(["kernel", "share", "bound", "total", "count", "family", "launched by"],
                  rows, "lrlrrll"),
    ]
    for key in (names.key("Full kernel names"), ops.key("Full names of the launching ops")):
        if key:
            out += ["", key]
    return "\n".join(out)


def _memory(r: Report) -> str:
    rows = []
    for m in r.memory:
        where = "host" if m.device_type == "cpu" else f"GPU {m.device}"
        rows.append([where, units.size(m.peak_allocated_bytes), units.size(m.peak_reserved_bytes), f"{m.events:,}"])
    return "\n".join(["## Memory", "",
                      "Allocator peaks from the profiler's memory events (`profile_memory=True`): the most "
                      "memory held by tensors at once (allocated) and by the caching allocator (reserved).",
                      "", table(["where", "peak allocated", "peak reserved", "events"], rows, "lrrr")])


def _cpu(r: Report, top_n: int) -> str:
    from traceclass.render.cpu_markdown import cpu_profile_markdown

    return cpu_profile_markdown(r.cpu_profile, top_n)


def _hardware(r: Report) -> str:
    rows, peaks, notes = [], [], []
    for h in r.hardware:
        if h.device < 0 and r.ops_time_basis == "gpu":
            continue
        who = "host CPU" if h.device < 0 else f"GPU {h.device}"
        used = {f"{o.unit}_{o.precision}" for o in r.ops if o.precision and o.unit and o.device == h.device}
        ordered = sorted(h.peaks_flops_per_s.items(), key=lambda kv: (kv[0] not in used, -kv[1]))
        rows.append([
            who, code(h.spec, 40) if h.spec else "unknown", units.byte_rate(h.memory_bandwidth_per_s),
            code(h.reported_name, None) if h.reported_name else "—", text(h.how, None),
        ])
        if ordered:
            peaks.append(f"- {who} peaks: " + ", ".join(
                ("**" if k in used else "") + f"{k} {units.flop_rate(v)}"
                + (f" (ridge {units.ratio(v / h.memory_bandwidth_per_s)} FLOP/B)" if h.memory_bandwidth_per_s else "")
                + (" (used)**" if k in used else "")
                for k, v in ordered[:6]))
        notes += [f"- {code(h.spec or h.reported_name, None, table=False)}: {text(n, None)}" for n in h.notes]
    out = ["## Hardware", "",
           "Roofs are dense datasheet peaks; `traceclass devices NAME` lists every figure with its source.",
           "", table(["device", "spec used", "memory bandwidth", "reported as", "how"], rows, "llrll")]
    if peaks or notes:
        out += [""] + peaks + notes
    return "\n".join(out)


def _kernel_groups(groups: list, top_n: int) -> list[str]:  # type: ignore[type-arg]
    """GPU work no op launched (grouped by kernel name) and graph replays: their own table, so
    op rows and mangled kernel names do not mix; conclusion columns first, long names tagged."""
    if not groups:
        return []
    names = Names("g")
    rows = []
    for o in groups[:top_n]:
        achieved = units.byte_rate(o.achieved_bytes_per_s) if o.bytes else "—"
        count = f"{o.count:,}" + (f" ({o.kernels:,} kernels)" if o.kernels != o.count else "")
        rows.append([names.short(o.name), o.bound + (" (heuristic)" if o.heuristic else ""),
                     units.pct(o.pct_of_roof, 0), units.pct(o.share_pct), units.duration(o.total_ns), count,
                     o.kind, o.family or "—", achieved])
    out = ["", "GPU work without a recorded op (grouped by kernel name; graph replays by launch):", "",
           table(["kernel / replay", "bound", "% of roof", "share", "GPU time", "count", "kind", "family", "achieved"],
                 rows, "lllrrrllr")]
    key = names.key("Full kernel / replay names")
    if key:
        out += ["", key]
    if len(groups) > top_n:
        out.append(f"\n{len(groups) - top_n} more kernel group(s) in the JSON report.")
    return out


def _notes(r: Report) -> str:
    lines = ["## Notes", ""]
    lines += [f"- {text(n, None)}" for n in other_notes(r)]
    lines += [f"- rule error: {text(e, None)}" for e in r.rule_errors]
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


#: Every section by name, for renderers that arrange them differently (``issue``, ``terminal``);
#: each takes ``(report, top_n, **options)`` and returns markdown ("" when the report has nothing
#: for it).
SECTIONS = {
    "header": lambda r, n: _header(r),
    "verdict": lambda r, n: _verdict(r),
    "caveats": lambda r, n: _caveats(r),
    "findings": lambda r, n: _findings(r),
    "stages": lambda r, n, limit=30: _stages(r, limit),
    "ops": _ops,
    "timeline": lambda r, n: _timeline(r),
    "kernels": _kernels,
    "memory": lambda r, n: _memory(r),
    "cpu": _cpu,
    "hardware": lambda r, n: _hardware(r),
    "notes": lambda r, n: _notes(r),
    "definitions": lambda r, n: _definitions(r),
}


def section(name: str, report: Report, top_n: int = DEFAULT_TOP_N, **options: object) -> str:
    """One section of the markdown report (a key of :data:`SECTIONS`)."""
    return SECTIONS[name](report, top_n, **options)
