"""Diff and check results -> markdown (and JSON with the same content).

Input is the plain dict of ``traceclass.compare.diff.to_dict`` / ``compare.gate.to_dict`` (the
JSON form), so the markdown and the JSON cannot drift apart; the verdict text is composed
here for both. Every name from a trace goes through :func:`escape.code`; every number carries
its unit.
"""

from __future__ import annotations

import datetime
import json
from typing import Any, Mapping, Sequence

from traceclass import units
from traceclass.render.escape import clean, code
from traceclass.report.enums import NoiseBasis

Segment = tuple[str, str]  # ("text", plain words we wrote) or ("name", untrusted name)

TEST_SHORT = {"Mann-Whitney U": "MW", "Welch t": "Welch"}


# --------------------------------------------------------------------------- numbers


def value(v: float | None, unit: str) -> str:
    if v is None:
        return "—"
    if unit == "ns":
        return units.duration(v)
    if unit == "bytes":
        return units.size(v)
    if unit == "pct":
        return units.pct(v)
    if unit == "samples":
        return f"{v:,.0f} sample{'' if round(v) == 1 else 's'}"
    return f"{v:.3g}"


def delta_text(d: Mapping[str, Any]) -> str:
    x = d.get("delta")
    if x is None:
        return "—"
    if d["unit"] == "ns":
        return units.signed_duration(x)
    if d["unit"] == "bytes":
        return units.sign(x) + units.size(abs(x))
    if d["unit"] == "pct":
        return units.signed_pct(x, 1, " pp")
    if d["unit"] == "samples":
        return units.sign(round(x)) + value(abs(x), "samples")
    return f"{x:+.3g}"


def delta_pct_text(d: Mapping[str, Any]) -> str:
    if d.get("unit") == "pct":
        return "—"  # shares: the delta is already in percentage points
    return units.signed_pct(d.get("delta_pct"))


def test_text(d: Mapping[str, Any]) -> str:
    n = d["noise"]
    if not n["noise_known"]:
        if n["basis"] == NoiseBasis.SINGLE_SAMPLE:
            return f"noise unknown ({n['n_baseline']} vs {n['n_candidate']} samples)"
        return n["reason"]  # "one value per run: noise unknown", "not measured in both runs"
    if n["test"] == "none":
        return f"{n['reason']} ({n['n_baseline']} vs {n['n_candidate']})"
    return f"{TEST_SHORT.get(n['test'], n['test'])} {n['reason']} ({n['n_baseline']} vs {n['n_candidate']})"


def when_text(epoch_ns: int | None) -> str:
    if epoch_ns is None:
        return "unknown"
    t = datetime.datetime.fromtimestamp(epoch_ns / 1e9, datetime.timezone.utc)
    return t.strftime("%Y-%m-%d %H:%M:%S UTC")


# --------------------------------------------------------------------------- verdict


def _op_label(o: Mapping[str, Any]) -> list[Segment]:
    segs: list[Segment] = [("name", o["name"])]
    if o.get("shapes"):
        segs += [("text", " on "), ("name", o["shapes"])]
    return segs


def verdict_segments(d: Mapping[str, Any]) -> list[list[Segment]]:
    """The verdict as sentences of segments; names stay apart so each renderer escapes them."""
    out: list[list[Segment]] = []
    callouts = d.get("callouts") or []
    if callouts:
        s: list[Segment] = [("text", "Not a like-for-like comparison, so it does not isolate one change: ")]
        for k, c in enumerate(callouts):
            if k:
                s.append(("text", "; "))
            if c["topic"] == "workload":  # our own figures, not names
                s.append(("text", f"few op groups in common (baseline: {c['baseline']}; candidate: {c['candidate']})"))
                continue
            s += [("text", f"{c['what']} differs ("), ("name", c["baseline"]), ("text", " vs "),
                  ("name", c["candidate"]), ("text", ")")]
        s.append(("text", "."))
        out.append(s)
    v = d["verdict"]
    step = v.get("step")
    no_markers = v.get("no_step_markers") or []
    if step is None and not v.get("cpu_compared"):
        if d.get("ops") or d.get("ops_appeared") or d.get("ops_vanished") or d.get("families"):
            out.append([("text", "No step times to compare (a run has no steps or ranges); "
                                  "see the op groups and kernel families below.")])
        else:
            out.append([("text", "No step times to compare (a run has no steps or ranges).")])
    elif step is None:
        pass
    elif no_markers:
        out.append([("text", _window_sentence(step, no_markers))])
        out.append(_work_sentence(v))
    else:
        p = step["p50"]
        b, c = p["baseline"], p["candidate"]
        n = p["noise"]
        label = p["label"]
        if label in ("faster", "slower"):
            pct = abs(p["delta_pct"]) if p["delta_pct"] is not None else 0.0
            # "965% slower" reads badly: from twice the time on, say how many times
            how = f"{units.fraction(c / b)} slower" if (label == "slower" and b and c and c >= 2 * b) else f"{units.pct(pct, 0)} {label}"
            head = f"Candidate is {how} per step (P50 {value(b, 'ns')} → {value(c, 'ns')})"
        else:
            head = (f"No step-time change beyond noise (P50 {value(b, 'ns')} → {value(c, 'ns')}, "
                    f"{units.signed_pct(p['delta_pct'])})")
        if n["noise_known"] and n["test"] != "none":
            if label in ("faster", "slower"):
                head += f", beyond noise ({_p_clause(n)}, {n['n_baseline']} vs {n['n_candidate']} steps)"
            else:
                head += f" ({_p_clause(n)}, {n['n_baseline']} vs {n['n_candidate']} steps)"
        elif not n["noise_known"]:
            head += (f"; noise unknown ({n['n_baseline']} vs {n['n_candidate']} steady steps), so a change "
                     f"under the assumed 10% run-to-run noise is not called")
        sent: list[Segment] = [("text", head)]
        contributors = v.get("contributors") or []
        if contributors:
            word = "gain" if label == "faster" else "loss"
            first = contributors[0]
            share = first.get("share_pct")
            lead = f"; most of the {word} comes from " if (share or 0) >= 50 else f"; the largest part of the {word} comes from "
            sent.append(("text", lead))
            for k, ctr in enumerate(contributors):
                o = ctr["op"]
                if k:
                    sent.append(("text", ", then " if k == 1 else ", "))
                sent += _op_label(o)
                bits = [f"{units.signed_duration(o['per_step']['delta'])} per step"]
                if ctr.get("share_pct") is not None:
                    bits.append(f"{units.pct(ctr['share_pct'], 0)} of the change")
                if o["status"] == "vanished":
                    bits.append("gone in the candidate")
                elif o["status"] == "appeared":
                    bits.append("new in the candidate")
                sent.append(("text", f" ({', '.join(bits)})"))
        sent.append(("text", "."))
        out.append(sent)
    if v.get("cpu_compared"):  # the lead without steps; after the step verdict with them (nsys samples)
        out += _cpu_sentences(d)
    regs = v.get("regressions") or []
    if regs:
        s = [("text", "Regressed: ")]
        for k, r in enumerate(regs[:3]):
            if k:
                s.append(("text", "; "))
            s.append(("text", r["what"]))
            if r["name"]:
                s += [("text", " "), ("name", r["name"])]
            if r.get("detail"):
                s += [("text", " on "), ("name", r["detail"])]
            dd = r["delta"]
            unknown = "" if dd["noise"]["noise_known"] else ", noise unknown"
            pct = "new in the candidate" if not dd["baseline"] else units.signed_pct(dd["delta_pct"])
            per = "P50 " if r["what"] == "stage" else ""
            tail = "" if r["what"] == "stage" else " in the window" if no_markers else " per step"
            s.append(("text", f" {per}by {units.signed_duration(dd['delta'])}{tail} ({pct}{unknown})"))
        if len(regs) > 3:
            s.append(("text", f"; and {len(regs) - 3} more (tables below)"))
        s.append(("text", "."))
        out.append(s)
    elif step is not None:
        known = bool(v.get("work_stages_compared")) if no_markers else step["p50"]["noise"]["noise_known"]
        out.append([("text", "No regression beyond noise." if known else
                     "No regression above 10% (noise unknown).")])
    f = v.get("findings") or {}
    if any(f.values()):
        s = [("text", "Findings: ")]
        for k, status in enumerate(("resolved", "new", "persisting")):
            s.append(("text", ("" if k == 0 else ", ") + f"{f.get(status, 0)} {status}"))
            these = [x for x in d.get("findings") or [] if x["status"] == status] if status != "persisting" else []
            # one mention per rule, the count when a rule fired at several locations
            per_rule: dict[str, int] = {}
            for x in these:
                per_rule[f"{x['code']} {x['name']}"] = per_rule.get(f"{x['code']} {x['name']}", 0) + 1
            for j, (rule, n) in enumerate(list(per_rule.items())[:3]):
                s += [("text", " (" if j == 0 else ", "), ("name", rule)]
                if n > 1:
                    s.append(("text", f" ×{n}"))
            if len(per_rule) > 3:
                s.append(("text", f", {len(per_rule) - 3} more rule{'s' if len(per_rule) > 4 else ''}"))
            if per_rule:
                s.append(("text", ")"))
        s.append(("text", "."))
        out.append(s)
    return out


_TOTAL_WORDS = {"ns": "all sampled thread time", "samples": "sample count"}
_CPU_UNIT_WORDS = {"ns": "sampled time", "samples": "sample counts", "share": "shares of the sampled weight"}


def _cpu_sentences(d: Mapping[str, Any]) -> list[list[Segment]]:
    """Sampled CPU profiles: what was compared, the total, and the largest changes."""
    cpu = d["cpu"]
    total = cpu["total"]
    head = (f"Sampled CPU profiles, compared by hot spot (function, file and line), kind and thread in "
            f"{_CPU_UNIT_WORDS.get(cpu['unit'], cpu['unit'])}")
    if total["baseline"] is not None and total["candidate"] is not None:
        head += (f": {_TOTAL_WORDS.get(total['unit'], 'sample count')} {value(total['baseline'], total['unit'])} → "
                 f"{value(total['candidate'], total['unit'])} ({units.signed_pct(total['delta_pct'])})")
    rule = f"{cpu['rule_pct']:g}"
    if cpu.get("lengths_differ"):
        head += "; the recordings differ in length, so the shares tell more than the times"
    head += (f". A profile has no repeated steps: single run each, noise unknown, so a change counts from "
             f"{rule}% ({rule} points for shares).")
    out: list[list[Segment]] = [[("text", head)]]
    movers = d["verdict"].get("cpu_movers") or []
    if not movers:
        out.append([("text", f"No hot spot, kind or thread changed by {rule}% or more ({rule} points for shares).")])
        return out
    s: list[Segment] = [("text", "Largest changes: ")]
    for k, r in enumerate(movers[:3]):
        if k:
            s.append(("text", "; "))
        s += _cpu_row_label(r)
        s.append(("text", " " + _cpu_change(r)))
    if len(movers) > 3:
        s.append(("text", f"; and {len(movers) - 3} more (tables below)"))
    s.append(("text", "."))
    out.append(s)
    return out


def _cpu_row_label(r: Mapping[str, Any]) -> list[Segment]:
    if r["location"]:
        return [("text", "hot spot "), ("name", r["name"]), ("text", " ("), ("name", r["location"]), ("text", ")")]
    if r["kind"]:
        return [("text", f"kind {r['name']}")]  # our own kind label
    return [("text", "thread "), ("name", r["name"])]


def _cpu_change(r: Mapping[str, Any]) -> str:
    """``490 ms → 330 ms (−32.7%; share 5.3% → 3.3%)``; shares alone when values do not compare."""
    v, sh = r["value"], r["share"]
    share = f"{value(sh['baseline'], 'pct')} → {value(sh['candidate'], 'pct')}"
    tag = {"appeared": "new in the candidate", "vanished": "gone in the candidate"}.get(r["status"], "")
    if v["baseline"] is None or v["candidate"] is None:
        text = f"share {share} ({delta_text(sh)}"
    else:
        pct = units.signed_pct(v["delta_pct"]) if v["delta_pct"] is not None else delta_text(v)
        text = f"{value(v['baseline'], v['unit'])} → {value(v['candidate'], v['unit'])} ({pct}; share {share}"
    return text + (f", {tag})" if tag else ")")


def _window_sentence(step: Mapping[str, Any], no_markers: Sequence[str]) -> str:
    p = step["p50"]
    who = "either run" if len(no_markers) == 2 else f"the {no_markers[0]}"
    text = (f"No step markers in {who} (no ProfilerStep or NVTX step range): the profiler window stands in "
            f"for the step ({value(p['baseline'], 'ns')} → {value(p['candidate'], 'ns')}, "
            f"{units.signed_pct(p['delta_pct'])}), and its length need not follow the work inside it")
    if len(no_markers) == 1:
        other = "candidate" if no_markers[0] == "baseline" else "baseline"
        text += f"; the {other}'s step is compared with a whole window, which is not a like-for-like step time"
    return text + "."


def _change_text(dd: Mapping[str, Any]) -> str:
    """``6 ms → 7.8 ms (+30.0%, Mann-Whitney U, p < 0.001)``."""
    n = dd["noise"]
    why = _p_clause(n) if (n["noise_known"] and n["test"] != "none") else "noise unknown"
    return (f"{value(dd['baseline'], dd['unit'])} → {value(dd['candidate'], dd['unit'])} "
            f"({units.signed_pct(dd['delta_pct'])}, {why})")


def _work_sentence(v: Mapping[str, Any]) -> list[Segment]:
    """How the work inside the window moved, from the stages and the GPU busy time."""
    label = v.get("work_label") or ""
    stages = v.get("work_stages") or []
    gpu = v.get("work_gpu_busy")
    gpu_moved = gpu is not None and gpu["label"] in ("faster", "slower")
    if not label:
        return [("text", "There are no stages or GPU work to judge the work by either; "
                         "see the op groups and kernel families below.")]
    if label == "within noise":
        parts = []
        n = v.get("work_stages_compared") or 0
        if n:
            parts.append(f"{n} stage{'' if n == 1 else 's'} compared on their occurrences")
        if gpu is not None:
            parts.append(f"GPU busy {_change_text(gpu)}")
        return [("text", "The work inside it did not change beyond noise: " + "; ".join(parts) + ".")]

    def items(direction: str) -> list[Segment]:
        segs: list[Segment] = []
        chosen = [st for st in stages if st["p50"]["label"] == direction]
        for k, st in enumerate(chosen[:3]):
            segs += [("text", ", " if k else ""), ("text", "stage "), ("name", st["name"]),
                     ("text", f" P50 {_change_text(st['p50'])}")]
        if len(chosen) > 3:
            segs.append(("text", f" and {len(chosen) - 3} more stage(s)"))
        if gpu_moved and gpu["label"] == direction:
            segs.append(("text", (", " if chosen else "") + f"GPU busy {_change_text(gpu)}"))
        return segs

    if label == "mixed":
        return [("text", "The work inside it moved both ways: slower ")] + items("slower") + \
            [("text", "; faster ")] + items("faster") + [("text", ".")]
    return [("text", f"The work inside it got {label}: ")] + items(label) + [("text", ".")]


def _p_clause(n: Mapping[str, Any]) -> str:
    reason = n["reason"]
    p = reason.split(" but ")[0]  # "p = 0.008" / "p < 0.001"
    return f"{n['test']}, {p}"


def verdict_plain(d: Mapping[str, Any]) -> str:
    """The verdict as one plain-text paragraph (names in backticks, unescaped): for JSON."""
    return " ".join("".join(f"`{clean(t)}`" if k == "name" else t for k, t in sent)
                    for sent in verdict_segments(d))


def _verdict_md(d: Mapping[str, Any]) -> list[str]:
    out = []
    for k, sent in enumerate(verdict_segments(d)):
        line = "".join(code(t) if kind == "name" else t for kind, t in sent)
        out.append(f"**{line}**" if k == 0 and d.get("callouts") else line)
    return out


# --------------------------------------------------------------------------- tables


def table_lines(header: Sequence[str], align: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "| " + " | ".join("---:" if a == "r" else "---" for a in align) + " |"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return out


def _delta_cells(dd: Mapping[str, Any]) -> list[str]:
    return [value(dd["baseline"], dd["unit"]), value(dd["candidate"], dd["unit"]), delta_text(dd),
            delta_pct_text(dd), dd["label"], test_text(dd)]


_DELTA_HEAD = ["baseline", "candidate", "Δ", "Δ%", "label", "noise test (n)"]
_DELTA_ALIGN = ["r", "r", "r", "r", "l", "l"]


def render_markdown(d: Mapping[str, Any], top: int = 15) -> str:
    b, c = d["baseline"], d["candidate"]
    L: list[str] = [f"# traceclass diff: {code(b['file'])} → {code(c['file'])}", ""]
    L += ["## Verdict", ""]
    for line in _verdict_md(d):
        L += [line, ""]
    L += [f"Noise rule: {d['method']}.", ""]

    L += ["## Runs", ""]
    rows = [
        ["file", code(b["file"]), code(c["file"])],
        ["producer / format", f"{code(b['producer'])} / {code(b['format'])}", f"{code(c['producer'])} / {code(c['format'])}"],
        ["steady steps (warm-up)", f"{b['steps']} ({b['warmup_steps']})", f"{c['steps']} ({c['warmup_steps']})"],
        ["GPU", ", ".join(code(g) for g in b["gpus"]) or "none", ", ".join(code(g) for g in c["gpus"]) or "none"],
        ["recorded", when_text(b["recorded_at_epoch_ns"]), when_text(c["recorded_at_epoch_ns"])],
    ]
    if b.get("cpu_unit") or c.get("cpu_unit"):
        rows.append(["sampled CPU profile", _sampled(b), _sampled(c)])
    L += table_lines(["", "baseline", "candidate"], ["l", "l", "l"], rows) + [""]
    if d.get("callouts"):
        crow = [[c_["topic"], c_["what"]] + ([c_["baseline"], c_["candidate"]] if c_["topic"] == "workload"
                                             else [code(c_["baseline"]), code(c_["candidate"])]) + [c_["consequence"]]
                for c_ in d["callouts"]]
        L += ["Setup differences:", ""]
        L += table_lines(["topic", "what", "baseline", "candidate", "why it matters"], ["l"] * 5, crow) + [""]

    if d.get("cpu"):
        L += _cpu_markdown(d["cpu"], top)
    no_stages = not (d["stages"] or d.get("stages_only_baseline") or d.get("stages_only_candidate"))
    if not (no_stages and d.get("cpu")):
        L += _stages_markdown(d)
    if d["ops"] or d.get("ops_appeared") or d.get("ops_vanished") or not d.get("cpu"):
        L += _ops_markdown(d, top)
    L += _rest_markdown(d)
    return "\n".join(L).rstrip() + "\n"


def _stages_markdown(d: Mapping[str, Any]) -> list[str]:
    L = ["## Stages", "", "P50 wall time over the steady-state occurrences (warm-up apart).", ""]
    if d["stages"]:
        rows = [[code(s["name"]) + ("" if s["candidate_name"] == s["name"] else f" / {code(s['candidate_name'])}"),
                 f"{s['count_baseline']} / {s['count_candidate']}"] + _delta_cells(s["p50"]) for s in d["stages"]]
        L += table_lines(["stage", "occurrences"] + _DELTA_HEAD, ["l", "r"] + _DELTA_ALIGN, rows) + [""]
    else:
        L += ["No stage in common.", ""]
    for key, words in (("stages_only_baseline", "Only in the baseline"), ("stages_only_candidate", "Only in the candidate")):
        if d.get(key):
            L += [f"{words}: " + ", ".join(code(n) for n in d[key][:30])
                  + (f" and {len(d[key]) - 30} more" if len(d[key]) > 30 else "") + ".", ""]
    return L


def _ops_markdown(d: Mapping[str, Any], top: int) -> list[str]:
    L = ["## Op groups", "",
         "Matched by op name, input shapes and dtype (kernel names do not matter, so runs on different "
         "GPU vendors pair their ops); time per steady step (mean): GPU time on GPU traces, host op time "
         "on CPU traces. A group missing from a run counts as 0 in each of its steps.", ""]
    ops = d["ops"]
    if ops:
        rows = [[code(o["name"], 60), code(o["shapes"], 60), code(o["dtype"]) if o["dtype"] else "—"]
                + _delta_cells(o["per_step"]) + [f"{o['calls_baseline']} → {o['calls_candidate']}"] for o in ops[:top]]
        L += table_lines(["op", "shapes", "dtype"] + _DELTA_HEAD + ["calls"], ["l", "l", "l"] + _DELTA_ALIGN + ["r"], rows)
        if len(ops) > top:
            L += ["", f"{len(ops) - top} more matched op groups in the JSON output (`--format json`)."]
        L += [""]
    else:
        L += ["No op group in common.", ""]
    for key, title, side in (("ops_vanished", "Vanished in the candidate", "baseline"),
                             ("ops_appeared", "Appeared in the candidate", "candidate")):
        rows_ = d.get(key) or []
        L += [f"### {title} ({len(rows_)})", ""]
        if not rows_:
            L += ["None.", ""]
            continue
        rows = [[code(o["name"], 60), code(o["shapes"], 60), code(o["dtype"]) if o["dtype"] else "—",
                 value(o["per_step"][side], "ns"), str(o[f"calls_{side}"]), o["per_step"]["label"],
                 test_text(o["per_step"])] for o in rows_[:top]]
        L += table_lines(["op", "shapes", "dtype", f"{side} per step", "calls", "label", "noise test (n)"],
                    ["l", "l", "l", "r", "r", "l", "l"], rows)
        if len(rows_) > top:
            total = sum(o["per_step"][side] or 0 for o in rows_[top:])
            L += ["", f"{len(rows_) - top} more ({units.duration(total)} per step) in the JSON output."]
        L += [""]
    return L


def _rest_markdown(d: Mapping[str, Any]) -> list[str]:
    L: list[str] = []
    if d.get("families"):
        L += ["## Kernel families", "", "Summed kernel time per steady step (mean), by family.", ""]
        rows = [[code(f["family"]), f["status"]] + _delta_cells(f["per_step"]) for f in d["families"]]
        L += table_lines(["family", "in"] + _DELTA_HEAD, ["l", "l"] + _DELTA_ALIGN, rows) + [""]

    if d.get("gpu_step") or d.get("devices"):
        L += ["## GPU time", ""]
        g = d.get("gpu_step")
        if g:
            L += ["Per steady step (mean): busy = union of GPU work launched from the step, idle = step wall − busy, "
                  "copy = memcpy + memset time.", ""]
            rows = [[k] + _delta_cells(g[k]) for k in ("busy", "idle", "copy")]
            L += table_lines(["per step"] + _DELTA_HEAD, ["l"] + _DELTA_ALIGN, rows) + [""]
        if d.get("devices"):
            L += ["Share of each device's window (one value per run: noise unknown).", ""]
            rows = []
            for dv in d["devices"]:
                for k in ("busy_pct", "idle_pct", "copy_pct"):
                    rows.append([f"{dv['device']} {code(dv['name_candidate'] or dv['name_baseline'])}",
                                 k.removesuffix("_pct")] + _delta_cells(dv[k]))
            L += table_lines(["device", "share"] + _DELTA_HEAD, ["l", "l"] + _DELTA_ALIGN, rows) + [""]

    if d.get("memory"):
        L += ["## Memory", "", "Allocator peaks from profiler memory events (one value per run).", ""]
        rows = []
        for m in d["memory"]:
            where = "host" if m["device_type"] == "cpu" else f"GPU {m['device']}"
            rows.append([where, "peak allocated"] + _delta_cells(m["peak_allocated"]))
            if m.get("peak_reserved"):
                rows.append([where, "peak reserved"] + _delta_cells(m["peak_reserved"]))
        L += table_lines(["device", "figure"] + _DELTA_HEAD, ["l", "l"] + _DELTA_ALIGN, rows) + [""]

    L += ["## Findings", ""]
    if d.get("findings"):
        L += ["Matched by fingerprint (rule + location); value = estimated recoverable time.", ""]
        rows = [[f["status"], code(f["code"]), code(f["name"]), code(f["message"], 100)]
                + _delta_cells(f["recoverable"])[:4] for f in d["findings"]]
        L += table_lines(["status", "rule", "name", "message", "baseline", "candidate", "Δ", "Δ%"],
                    ["l", "l", "l", "l", "r", "r", "r", "r"], rows) + [""]
    else:
        L += ["No findings in either run.", ""]
    if d.get("notes"):
        L += ["## Notes", ""] + [f"- {n}" for n in d["notes"]] + [""]
    return L


def _cpu_label(r: Mapping[str, Any]) -> str:
    """The value's label, else the share's (``share higher``), else within noise."""
    if r["value"]["label"] != "within noise" and r["value"]["baseline"] is not None:
        return r["value"]["label"]
    if r["share"]["label"] != "within noise":
        return "share " + r["share"]["label"]
    return "within noise"


def _cpu_cells(r: Mapping[str, Any]) -> list[str]:
    v, sh = r["value"], r["share"]
    return [r["status"], value(v["baseline"], v["unit"]), value(v["candidate"], v["unit"]), delta_text(v),
            delta_pct_text(v), f"{value(sh['baseline'], 'pct')} → {value(sh['candidate'], 'pct')}", delta_text(sh),
            _cpu_label(r)]


_CPU_HEAD = ["in", "baseline", "candidate", "Δ", "Δ%", "share", "Δ share", "label"]
_CPU_ALIGN = ["l", "r", "r", "r", "r", "r", "r", "l"]


def _cpu_markdown(cpu: Mapping[str, Any], top: int) -> list[str]:
    rule = f"{cpu['rule_pct']:g}"
    L = ["## CPU profile", "",
         f"Compared in {cpu['basis']}. Share = of all sampled thread time. A sampled profile has no repeated "
         f"steps, so every figure is one value per run (single run, noise unknown) and a change counts from "
         f"{rule}% ({rule} percentage points for shares).", ""]
    t = cpu["total"]
    if t["baseline"] is not None and t["candidate"] is not None:
        L += [f"{_TOTAL_WORDS.get(t['unit'], 'sample count').capitalize()}: {value(t['baseline'], t['unit'])} → "
              f"{value(t['candidate'], t['unit'])} "
              f"({delta_text(t)}, {units.signed_pct(t['delta_pct'])}).", ""]
    hot = cpu["hot_spots"]
    L += ["### Hot spots (self time)", "", "Matched by function, file and line.", ""]
    if hot:
        rows = [[code(r["name"], 60), code(r["location"], 80) if r["location"] else "—", code(r["kind"]) if r["kind"] else "—"]
                + _cpu_cells(r) for r in hot[:top]]
        L += table_lines(["function", "location", "kind"] + _CPU_HEAD, ["l", "l", "l"] + _CPU_ALIGN, rows)
        if len(hot) > top:
            L += ["", f"{len(hot) - top} more hot spots in the JSON output (`--format json`)."]
        L += [""]
    else:
        L += ["No hot spots in either profile.", ""]
    if cpu["kinds"]:
        L += ["### Kinds", "", "What the sampled lines do (Python compute, lock wait, sleep, I/O, ...).", ""]
        rows = [[r["name"]] + _cpu_cells(r) for r in cpu["kinds"]]
        L += table_lines(["kind"] + _CPU_HEAD, ["l"] + _CPU_ALIGN, rows) + [""]
    if cpu["threads"]:
        L += ["### Threads", "", "Matched by thread name (ids change from run to run); unnamed threads by role, "
              "same names in order of time.", ""]
        rows = [[code(r["name"], 60)] + _cpu_cells(r) for r in cpu["threads"][:top]]
        L += table_lines(["thread"] + _CPU_HEAD, ["l"] + _CPU_ALIGN, rows)
        if len(cpu["threads"]) > top:
            L += ["", f"{len(cpu['threads']) - top} more threads in the JSON output."]
        L += [""]
    if cpu.get("notes"):
        L += [f"- {n}" for n in cpu["notes"]] + [""]
    return L


def _sampled(info: Mapping[str, Any]) -> str:
    unit = info.get("cpu_unit")
    if not unit:
        return "—"
    n, total, interval = info.get("cpu_samples"), info.get("cpu_total_ns"), info.get("cpu_interval_ns")
    if total is not None and n is not None and interval:
        return f"{units.duration(total)} ({n:,} samples every {units.duration(interval)})"
    if total is not None:
        return units.duration(total)
    if n is not None:
        return f"{n:,} samples (interval not recorded)"
    return "weights that are not time"


def render_json(d: Mapping[str, Any]) -> str:
    out = dict(d)
    out["verdict"] = dict(d["verdict"]) | {"summary": verdict_plain(d)}
    return json.dumps(out, indent=1, ensure_ascii=False, allow_nan=False) + "\n"


__all__ = ["render_markdown", "render_json", "verdict_plain", "verdict_segments", "value", "delta_text", "test_text",
           "table_lines", "when_text", "TEST_SHORT"]
