"""``traceclass check``'s summary (markdown for a CI log or a pull-request comment) from the
check's plain-dict form; numbers and tables as in the diff report."""

from __future__ import annotations

from typing import Any, Mapping

from traceclass import units
from traceclass.render.diff_markdown import TEST_SHORT, delta_text, table_lines, value, when_text
from traceclass.render.escape import clean, code


_STATUS = {"ok": "ok", "regressed": "**REGRESSED**", "over budget": "**OVER BUDGET**", "missing": "**MISSING**",
           "improved": "improved", "n/a": "n/a"}


def _check_delta(r: Mapping[str, Any]) -> str:
    if r.get("delta") is None:
        return "—"
    if r["unit"] == "pct":
        return delta_text({"delta": r["delta"], "unit": "pct"})
    return f"{delta_text({'delta': r['delta'], 'unit': r['unit']})} ({units.signed_pct(r.get('delta_pct'))})"


def _count(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


MAX_QUIET_STAGES = 10  # stage rows that pass, shown in the check summary (failing rows always are)


def render_check_markdown(d: Mapping[str, Any]) -> str:
    """Short summary for a CI log or a pull-request comment."""
    rows = d["rows"]
    failing = [r for r in rows if r["status"] in ("regressed", "over budget", "missing")]
    b = d.get("baseline") or {}
    outcome = d.get("outcome") or ("pass" if d["passed"] else "fail")
    if outcome == "nothing comparable":
        head = f"nothing comparable: {d.get('nothing_comparable') or 'no metric was measured in both runs'}"
    elif outcome == "pass":
        head = "PASS"
    else:
        head = f"FAIL: {_count(len(failing), 'metric')} beyond threshold or budget"
    L = [f"## traceclass check: {head}", ""]
    where = [f"candidate {code(d.get('candidate', ''))} vs baseline {code(b.get('file', ''))}"]
    git = b.get("git") or {}
    if git.get("commit"):
        where.append(f"commit {code(str(git['commit'])[:12])}" + (" (dirty tree)" if git.get("dirty") else ""))
    if b.get("recorded_at_epoch_ns") is not None:
        where.append(f"recorded {when_text(b['recorded_at_epoch_ns'])}")
    L += ["; ".join(where) + ".", ""]
    if d.get("callouts"):
        parts = [f"{c['what']} {code(c['baseline'])} vs {code(c['candidate'])}" for c in d["callouts"]]
        L += ["**Setup differs, so the gate does not isolate one change:** " + "; ".join(parts) + ".", ""]
    metric_rows = [r for r in rows if r["metric"] != "budget"]
    quiet_stages = [r for r in metric_rows if r["metric"] == "stage P50" and r["status"] in ("ok", "n/a")]
    hidden = {id(r) for r in quiet_stages[MAX_QUIET_STAGES:]}
    table = []
    for r in metric_rows:
        if r["status"] == "n/a" and r["metric"] == "stage P50" and r["note"] in ("not in the candidate",
                                                                               "new in the candidate"):
            continue  # listed below
        if id(r) in hidden:
            continue
        # stage names come from the trace (code spans); the memory row's device label is ours
        label = (r["name"] if r["metric"] == "peak memory" else code(r["name"])) if r["name"] else ""
        name = r["metric"] + (f" {label}" if label else "")
        noise_txt = ""
        if r.get("noise"):
            n = r["noise"]
            if n["noise_known"] and n["test"] != "none":
                noise_txt = f"{TEST_SHORT.get(n['test'], n['test'])} {n['reason']}"
            elif not n["noise_known"] and "noise unknown" not in (r.get("note") or ""):
                noise_txt = "noise unknown"
        note = "; ".join(x for x in (noise_txt, r.get("note") or "") if x)
        table.append([name, value(r["baseline"], r["unit"]), value(r["candidate"], r["unit"]), _check_delta(r),
                      r["limit"], _STATUS.get(r["status"], r["status"]), clean(note, 160) if note else ""])
    L += table_lines(["metric", "baseline", "candidate", "Δ", "limit", "result", "note"],
                ["l", "r", "r", "r", "l", "l", "l"], table) + [""]
    shown_hidden = [r for r in quiet_stages[MAX_QUIET_STAGES:] if r["note"] not in ("not in the candidate",
                                                                                   "new in the candidate")]
    if shown_hidden:
        L += [f"{len(shown_hidden)} more stages within their threshold (all rows: `--format json`).", ""]
    gone = [r["name"] for r in rows if r["metric"] == "stage P50" and r["note"] == "not in the candidate"]
    new = [r["name"] for r in rows if r["metric"] == "stage P50" and r["note"] == "new in the candidate"]
    if gone:
        L += ["Stages not in the candidate: " + ", ".join(code(n) for n in gone) + ".", ""]
    if new:
        L += ["Stages new in the candidate: " + ", ".join(code(n) for n in new) + ".", ""]
    budgets = [r for r in rows if r["metric"] == "budget"]
    if budgets:
        brows = [[code(r["name"]), units.duration(r["budget_ns"]), value(r["baseline"], "ns"),
                  value(r["candidate"], "ns"), _STATUS.get(r["status"], r["status"]), clean(r.get("note") or "", 160)]
                 for r in budgets]
        L += ["Budgets (candidate P50 per stage):", ""]
        L += table_lines(["stage", "budget", "baseline P50", "candidate P50", "result", "note"],
                    ["l", "r", "r", "r", "l", "l"], brows) + [""]
    th = ", ".join(f"{k} = {v:g}" for k, v in d.get("thresholds", {}).items())
    L += [f"Thresholds: {th} (`[tool.traceclass.check]`; pct = percent of the baseline, points = percentage "
          f"points). Rule: {d['method']}. Exit code {d['exit_code']}.", ""]
    return "\n".join(L).rstrip() + "\n"
