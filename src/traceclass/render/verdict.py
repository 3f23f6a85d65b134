"""The verdict paragraph: where the time goes, what bounds it, what to look at first.

Composed once from the report and rendered by a ``name`` formatter: markdown passes one that
makes code spans, JSON passes the identity, so both say the same thing.
"""

from __future__ import annotations

from typing import Callable

from traceclass import units
from traceclass.render.cpu_verdict import cpu_verdict
from traceclass.facts.idle_causes import LAUNCH_LATENCY_NS
from traceclass.report.model import IdleSummary, Report

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


def _same(x: str) -> str:
    return x


def _unknown_sentence(idle: IdleSummary, device: int, unknown: int, name: Fmt, prose: Fmt) -> str:
    """What the trace shows of a device's ``unknown`` idle: work queued that the GPU did not
    start (a wait, or start-up latency in short stretches), or a host thread with little
    recorded activity (facts.idle_causes, IdleCauses.queued)."""
    quiet = ("the host thread that launches the next work was active (ops, Python, runtime calls) for less "
             "than half of the stretch, or no host thread is known")
    queued = idle.unknown_queued_ns.get(device, 0)
    latency = idle.unknown_latency_ns.get(device, 0)
    rest = unknown - queued - latency
    if not queued and not latency:
        return f"In the unknown {units.duration(unknown)} {quiet}: the trace does not show what the process did."
    floor = units.duration(LAUNCH_LATENCY_NS)
    parts = []
    if queued:
        ns, kernel, stream, host, src = idle.longest_queued[device]
        meanwhile = f", while the host was in {prose(host)}" + (f" at {name(src)}" if src else "") if host else ""
        parts.append(f"for {units.duration(queued)} the GPU had its next work queued and did not start it, {floor} or "
                     f"more at a time: a stream or event dependency, or a wait on work the trace does not show (the "
                     f"longest stretch, {units.duration(ns)}, before {name(kernel)} on stream {stream}{meanwhile})")
    if latency:
        parts.append(f"{units.duration(latency)} is start-up latency, stretches under {floor} from a launch call's "
                     f"return to its work's start")
    if rest > 0:
        parts.append(f"for {units.duration(rest)} {quiet}")
    return f"Of the unknown {units.duration(unknown)}, " + "; ".join(parts) + "."


def verdict_sentences(report: Report, name: Fmt, prose: Fmt = _same, detail: list[str] | None = None) -> list[str]:
    """Where the time goes, what bounds it, what the rules found: names through ``name``,
    text taken from the trace (host activity, paths) through ``prose``.

    With ``detail`` (a list to fill), the sentences that locate the time (largest stage, bound
    mix, largest item) go there instead, so the verdict paragraph keeps only the steps, the
    device's busy/idle split by cause, trace hygiene and the findings count."""
    out: list[str] = []
    more_out = out if detail is None else detail
    steps = [s for s in report.stages if s.kind == "step"]
    step = steps[0] if steps else None
    if step is not None and (step.count or step.warmup_count):
        s = step
        if s.name == "(whole trace)":
            out.append(f"The trace has no step markers; it spans {units.duration(s.p50_ns)}.")
        else:
            extra = []
            if s.warmup_count:
                extra.append(f"{s.warmup_count} warm-up step{'s' if s.warmup_count > 1 else ''} excluded, "
                             f"P50 {units.duration(s.warmup_p50_ns)}")
            if s.empty_count:
                extra.append(f"{s.empty_count} empty step{'s' if s.empty_count > 1 else ''} (no work) left out")
            spread = (f" (P90 {units.duration(s.p90_ns)}, P99 {units.duration(s.p99_ns)})"
                      if s.count >= 2 else "")
            tail = f" ({'; '.join(extra)})" if extra else ""
            n = s.count or s.warmup_count
            out.append(f"{n} {'steady ' if s.count else ''}step{'s' if n != 1 else ''} took "
                       f"{'P50 ' if n > 1 else ''}{units.duration(s.p50_ns)}{spread}{tail}.")
        big = _largest_stage(report, s)
        if big is not None:
            st, share = big
            more_out.append(f"The largest stage inside the steps is {name(st.name)}: {units.pct(share, 0)} of step time "
                       f"(P50 {units.duration(st.p50_ns)}).")
    if report.devices:
        d = max(report.devices, key=lambda r: r.busy_ns)
        label = f"GPU {d.device}" + (f" ({prose(d.name)})" if d.name else "")
        more = f" ({len(report.devices) - 1} other device(s) below)" if len(report.devices) > 1 else ""
        comm = f"communication {units.pct(d.comm_pct)}"
        if d.comm_ns:
            comm += f", {units.pct(100.0 * d.exposed_comm_ns / d.window_ns if d.window_ns else 0)} of the window exposed"
        idle = report.idle
        if idle is not None and d.device in idle.busy_ns and idle.analysed_ns > 0:
            # the headline: busy over the steady step wall time; the active-window share is context
            # work queued before the profiler window is not the step's (TC207)
            back = idle.backlog_busy_ns.get(d.device, 0)
            busy = idle.busy_ns[d.device] - back
            basis = "the trace's analysed time (no steps)" if idle.synthetic else \
                f"the {units.duration(idle.analysed_ns)} of steady step time"
            extra = (f", plus {units.duration(back)} busy only with work queued before the profiler window (TC207)"
                     if back else "")
            out.append(
                f"{label} was busy {units.duration(busy)}, {units.pct(100.0 * busy / idle.analysed_ns)} of {basis}"
                f"{extra}"
                f" ({units.pct(d.busy_pct)} of its own {units.duration(d.window_ns)} active window: compute "
                f"{units.pct(d.compute_pct)}, copies {units.pct(d.copy_pct)}, {comm}){more}."
            )
            causes = {c: ns for c, ns in idle.idle_by_cause_ns.get(d.device, {}).items() if ns > 0}
            total = sum(causes.values())
            if total:
                parts = sorted(causes.items(), key=lambda kv: -kv[1])
                text = ", ".join(f"{c} {units.duration(ns)} ({units.pct(100.0 * ns / total, 0)})"
                                 for c, ns in parts[:4])
                out.append(f"Its {units.duration(total)} of idle, one cause per stretch: {text}.")
                unknown = causes.get("unknown", 0)
                if 4 * unknown >= total:  # a material part: say what "unknown" was made of
                    out.append(_unknown_sentence(idle, d.device, unknown, name, prose))
                top, top_ns = parts[0]
                if top == "host-work" and 2 * top_ns >= total:
                    out.append(f"The {'step' if not idle.synthetic else 'trace'} is host-bound: the GPU waits "
                               f"{units.pct(100.0 * top_ns / idle.analysed_ns)} of the time while the host works "
                               f"between GPU bursts (TC205 names the functions).")
        else:
            out.append(
                f"{label} was busy {units.pct(d.busy_pct)} of its {units.duration(d.window_ns)} active window "
                f"(compute {units.pct(d.compute_pct)}, copies {units.pct(d.copy_pct)}, {comm}) "
                f"and idle {units.pct(d.idle_pct)}{more}."
            )
            if d.longest_idle_ns and d.window_ns and d.idle_ns and d.longest_idle_ns >= 0.1 * d.window_ns:
                where = f" at {name(d.longest_idle_source)}" if d.longest_idle_source else ""
                host = f", while the host was in {prose(d.longest_idle_host)}{where}" if d.longest_idle_host else ""
                out.append(f"Its longest idle stretch is {units.duration(d.longest_idle_ns)} "
                           f"({units.pct(100.0 * d.longest_idle_ns / d.window_ns, 0)} of the window, from "
                           f"{units.duration(d.longest_idle_start_ns)}){host}.")
    mix = bound_mix(report)
    if mix:
        basis = "GPU op time" if report.ops_time_basis == "gpu" else "host op time"
        parts = [f"{units.pct(v, 0)} {k}" for k, v in mix.items() if v >= 0.5]
        if parts:
            more_out.append(f"By {basis}: " + ", ".join(parts) + ".")
    if report.ops:
        o = report.ops[0]
        shapes = f" on {prose(o.shapes)}" if o.shapes else ""
        roof = ""
        if o.bound in ("compute-bound", "memory-bound") and o.pct_of_roof is not None:
            roof = f", {o.bound} at {units.pct(o.pct_of_roof, 0)} of its roof"
        elif o.bound:
            roof = f", {o.bound}" + (" (from the kernel name)" if o.heuristic else "")
        more_out.append(
            f"The largest item is {name(o.name)}{shapes}: {units.pct(o.share_pct)} of "
            f"{'GPU busy time' if report.ops_time_basis == 'gpu' else 'op time'} "
            f"({o.count} call{'s' if o.count != 1 else ''}, {units.duration(o.total_ns)}){roof}."
        )
    cpu = report.cpu_profile
    if cpu is not None:
        # the sentence is our own words and numbers; names in it go through ``name``
        text = cpu_verdict(cpu, name)
        if text:
            out.append(text)
    for f in report.findings:
        # trace hygiene claims no time but changes how every number reads: say it up front
        if f.values.get("hygiene"):
            out.append(f"Trace hygiene ({f.code}): {prose(str(f.values.get('summary') or f.message))}.")
    real = [f for f in report.findings if f.severity != "info"]
    if report.findings or report.ops or report.devices:
        if real:
            out.append(f"{len(real)} finding{'s' if len(real) != 1 else ''} below "
                       f"({', '.join(sorted({f.code for f in real}))}).")
        else:
            out.append("No rule fired at its default thresholds.")
    if not out:
        out.append("The trace holds no timed operator, GPU or sample data to attribute.")
    return out


def _largest_stage(report: Report, step):  # type: ignore[no-untyped-def]
    """The non-step stage with the most steady time, and its share of step time (>= 10 %)."""
    if step is None or not step.total_ns or step.name == "(whole trace)":
        return None
    cands = [s for s in report.stages if s.kind != "step" and s.count and s.total_ns < step.total_ns]
    if not cands:
        return None
    st = max(cands, key=lambda s: s.total_ns)
    share = 100.0 * st.total_ns / step.total_ns
    return (st, share) if share >= 10.0 else None


def key_numbers(report: Report) -> list[str]:
    """The numbers that decide, in reading order: step time, GPU busy, the dominant bound and
    what the findings put at stake (each "label value", plain text)."""
    out = []
    steps = [s for s in report.stages if s.kind == "step" and s.count and s.name != "(whole trace)"]
    if steps:
        out.append(f"step P50 {units.duration(steps[0].p50_ns)}")
    if report.devices:
        d = max(report.devices, key=lambda r: r.busy_ns)
        busy = d.busy_pct
        idle = report.idle
        if idle is not None and d.device in idle.busy_ns and idle.analysed_ns > 0:
            # the verdict's headline: busy over the analysed (steady step) time, backlog apart
            busy = units.percent(idle.busy_ns[d.device] - idle.backlog_busy_ns.get(d.device, 0), idle.analysed_ns)
        out.append(f"GPU busy {units.pct(busy, 0)}" + (f" (GPU {d.device})" if len(report.devices) > 1 else ""))
    mix = {k: v for k, v in bound_mix(report).items() if k != "unclassified"}
    if mix:
        k, v = max(mix.items(), key=lambda kv: kv[1])
        out.append(f"{units.pct(v, 0)} of op time {k}")
    if report.opportunities:
        top = report.opportunities[0]
        out.append(f"top opportunity {units.duration(top.recoverable_ns)}")
    return out


#: a lead line's length in characters as read (markup aside): one line on a 980 px page
LEAD_LINE = 120
#: characters of the title a lead line keeps before the file name itself is shortened (a
#: generated file's hashed name, TorchInductor's 52-character ones, left the title 26)
MIN_TITLE = 56


def _short_file(where: str) -> str:
    """``…/dir/cobhwrc24pdghpl…(52 chars).py:132`` -> ``…/cobhwrc24pdghpldxge….py:132``: the file name
    alone, a long stem cut as any name is (enough to find it in the finding's full path)."""
    from traceclass.model.names import cut

    name = where.rsplit("/", 1)[-1]
    file, colon, line = name.rpartition(":")
    if not (colon and line.isdigit()):
        file, colon, line = name, "", ""
    stem, dot, ext = file.rpartition(".")
    if not dot:
        stem, ext = file, ""
    return "…/" + cut(stem, 20) + dot + ext + colon + line


def opportunities(report: Report, name: Fmt, prose: Fmt) -> list[str]:
    """One lead line per opportunity: what to change, where (file:line when known), how much;
    names as code, everything else as escaped prose. The evidence is the finding's own section,
    so a line over :data:`LEAD_LINE` characters is shortened there: the path to its last two
    parts, the file name alone when the title would keep less than :data:`MIN_TITLE` characters
    and that shows more of it, then the title at a word boundary."""
    from traceclass.model.names import cut

    lines = []
    for op in report.opportunities:
        where = op.where if op.where and op.where not in op.title else ""
        # overlaps: other findings measuring the same kernels; merged: other rules claiming the
        # same idle cause; either way their time is counted once, here (the header says so)
        once = [c for c in dict.fromkeys((*op.overlaps, *op.merged)) if c != op.source]
        also = f"; also {', '.join(once)}" if once else ""
        tail = f": up to {units.duration(op.recoverable_ns)} ({op.source}{also})"
        title = op.title
        if len(title) + len(where) + 4 + len(tail) > LEAD_LINE and where.count("/") > 1:
            where = "…/" + "/".join(where.split("/")[-2:])
        room = LEAD_LINE - len(tail) - (len(where) + 4 if where else 0)
        if len(title) > room and room < MIN_TITLE and "/" in where:
            short = _short_file(where)
            wider = LEAD_LINE - len(tail) - len(short) - 4
            if cut(title, max(wider, 30)) != cut(title, max(room, 30)):  # only if more of the title shows
                where, room = short, wider
        if len(title) > room:
            title = cut(title, max(room, 30))
        text = prose(title)
        for n in sorted(op.names, key=len, reverse=True):
            escaped = prose(n)
            if escaped and escaped in text:
                text = text.replace(escaped, name(n), 1)
        at = f" at {name(where)}" if where else ""
        lines.append(f"**{text}**{at}{prose(tail)}")
    return lines


def opportunities_header(report: Report) -> str:
    """What the opportunities add up to: they are additive (one cause per stretch of time)."""
    total = sum(o.recoverable_ns for o in report.opportunities)
    idle = report.idle
    if idle is None or idle.analysed_ns <= 0:
        return "time a fix could recover, estimated"
    idle_total = sum(o.recoverable_ns for o in report.opportunities if o.idle_cause)
    gpu_idle = sum(sum(c.values()) for c in idle.idle_by_cause_ns.values())
    text = (f"time a fix could recover, estimated; additive, no time counted twice: together "
            f"{units.duration(total)} of the {units.duration(idle.analysed_ns)} analysed")
    if idle_total:
        text += f", the GPU-idle ones {units.duration(idle_total)} of {units.duration(gpu_idle)} idle"
    return text
