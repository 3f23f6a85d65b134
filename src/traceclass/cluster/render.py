"""Cluster report -> markdown or JSON. Names from the traces (files, groups) are escaped."""

from __future__ import annotations

import json
import math
from typing import Any

from traceclass.render.escape import code, text
from traceclass.rule import plural

#: rows of the per-rank table in --issue mode (the slowest and the stragglers come first)
ISSUE_RANK_ROWS = 32


def render_json(report: dict[str, Any]) -> str:
    def clean(o: Any) -> Any:
        if isinstance(o, float):
            return o if math.isfinite(o) else None
        if isinstance(o, dict):
            return {str(k): clean(v) for k, v in o.items()}
        if isinstance(o, (list, tuple)):
            return [clean(v) for v in o]
        return o

    return json.dumps(clean(report), indent=1) + "\n"


def _ms(ns: float | None) -> str:
    if ns is None:
        return "—"
    return f"{ns / 1e6:.3f} ms" if abs(ns) >= 1e5 else f"{ns / 1e3:.1f} us"


def _pct(v: float | None) -> str:
    return "—" if v is None else f"{v:.1f} %"


def _gb(v: float | None) -> str:
    return "—" if v is None else f"{v:.2f} GB/s"


def _bytes(b: int) -> str:
    if b < 0:
        return "?"
    for unit, k in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if b >= k:
            return f"{b / k:.2f} {unit}"
    return f"{b} B"


def verdict_lines(r: dict[str, Any]) -> list[str]:
    v = r["verdict"]
    out = [f"{plural(v['ranks'], 'rank')} ({plural(v['files'], 'file')}); step P50 median {_ms(v['median_step_p50_ns'])}, slowest "
           f"rank {v['slowest_rank']} at {_ms(v['slowest_step_p50_ns'])}."]
    if v["stragglers"]:
        out.append("Stragglers: " + "; ".join(
            f"rank {s['rank']} (last in {s['times_last']} of {s['collectives']} collectives, p = {s['p_value']:.2g}; "
            f"blame {s['blame_pct']:.1f} % of the step; cause: {s['cause']})" for s in v["stragglers"]) + ".")
    else:
        out.append("No straggler: no rank arrives last clearly more often than 1/n with a blame of at least 5 % "
                   "of the step.")
    if v["imbalanced_ranks"]:
        out.append(f"Compute imbalance: rank(s) {', '.join(map(str, v['imbalanced_ranks']))} (modified z >= 3.5).")
    out.append(f"Exposed communication: median {v['exposed_comm_median_pct']:.1f} %, max "
               f"{v['exposed_comm_max_pct']:.1f} % of step time across ranks.")
    b = v["busbw_collective"]
    if b:
        peak = v["link_peak_gbps"]
        vs = (f" = {100 * b['busbw_p50_gbps'] / peak:.1f} % of the {peak:g} GB/s link peak ({text(v['link_peak_source'])})"
              if peak else " (no link peak known: pass --link-gbps)")
        out.append(f"Bus bandwidth of the costliest collective ({b['name']}, {_bytes(b['bytes'])}): "
                   f"P50 {_gb(b['busbw_p50_gbps'])}{vs}.")
    if v["wait_share_pct"] is None:
        out.append("Imbalance or network: no matched collectives to tell.")
    else:
        what = ("imbalance: ranks wait for late arrivers more than data moves" if v["imbalance_or_network"] == "imbalance"
                else "network: transfer, not waiting, dominates collective time")
        out.append(f"Imbalance or network: {what} (wait = {v['wait_share_pct']:.1f} % of collective time, "
                   f"{v['matched_collectives']} matched collectives).")
    return out


def render_markdown(r: dict[str, Any], issue: bool = False) -> str:
    lines = ["# traceclass cluster report", ""]
    lines += ["## Verdict", ""] + [f"* {x}" for x in verdict_lines(r)] + [""]
    if r["findings"]:
        lines += ["## Cluster findings", ""]
        for f in r["findings"]:
            lines.append(f"* **{f['code']} {f['name']}** ({f['severity']}): {text(f['message'], 400)}. Fix: {text(f['fix'])}.")
        lines.append("")
    rows = r["ranks"]
    if issue and len(rows) > ISSUE_RANK_ROWS:
        rows = sorted(rows, key=lambda x: (-x["straggler"], -x["step_p50_ns"]))[:ISSUE_RANK_ROWS]
    lines += ["## Ranks", "",
              "| rank | file | step P50 | busy | compute | comm | exposed comm | overlap | wait | transfer | last | "
              "straggler score | blame | clock offset |",
              "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for x in rows:
        lines.append(
            f"| {x['rank']}{' **straggler**' if x['straggler'] else ''} | {code(x['file'], 40)} | {_ms(x['step_p50_ns'])} | "
            f"{_pct(x['busy_pct'])} | {_ms(x['compute_ns'])} | {_ms(x['comm_ns'])} | {_ms(x['exposed_comm_ns'])} | "
            f"{_pct(x['overlap_pct'])} | {_ms(x['wait_ns'])} | {_ms(x['transfer_ns'])} | "
            f"{x['times_last']}/{x['collectives']} | {x['straggler_score']:.2f} | {_pct(x['blame_pct'])} | "
            f"{x['clock_offset_ns'] / 1e3:+.1f} us |")
    if len(rows) < len(r["ranks"]):
        lines.append(f"\n{len(r['ranks']) - len(rows)} more ranks in the JSON report (`--format json`).")
    lines.append("")
    if r["collectives"]:
        lines += ["## Collectives", "",
                  "| collective | group | size | dtype | ranks | count | transfer P50 | algbw P50 | busbw P50 | "
                  "skew P50 | skew P95 | most often last |",
                  "|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---|"]
        for c in r["collectives"][: 15 if issue else 40]:
            last = f"rank {c['most_last_rank']} ({c['most_last_count']}/{c['count']})" if c["most_last_rank"] is not None else "—"
            imb = f" (size max/mean {c['size_imbalance_p50']:.2f})" if c["size_imbalance_p50"] else ""
            lines.append(f"| {code(c['name'])}{imb} | {code(c['group'] or '?')} | {_bytes(c['bytes'])} | "
                         f"{code(c['dtype'] or '?')} | {c['ranks']} | {c['count']} | {_ms(c['transfer_p50_ns'])} | "
                         f"{_gb(c['algbw_p50_gbps'])} | {_gb(c['busbw_p50_gbps'])} | {_ms(c['start_skew_p50_ns'])} | "
                         f"{_ms(c['start_skew_p95_ns'])} | {last} |")
        lines.append("")
    if r["rank_findings"]:
        lines += ["## Per-rank findings", "", "| finding | where | ranks | recoverable (% of analysed time) | worst |",
                  "|---|---|---:|---:|---|"]
        for f in r["rank_findings"][: 15 if issue else 50]:
            rng = (f"{f['min_pct']:.0f}-{f['max_pct']:.0f} %" if round(f["min_pct"]) != round(f["max_pct"])
                   else f"{f['max_pct']:.0f} %")
            lines.append(f"| {f['code']} {f['name']} | {code(f['location'], 60)} | {f['rank_count']}/{f['of']} | {rng} | "
                         f"{f['severity']} |")
        lines.append("")
    lines += ["## Data quality", ""] + [f"* {text(n, 400)}" for n in r["notes"]] + [""]
    lines += ["## Definitions", "",
              "* Per-rank times are medians per steady step. compute: GPU kernels that are not communication (CPU "
              "traces: top-level ops of the step threads that are not collectives); comm: communication kernels "
              "(CPU: the backend's collective ranges); exposed comm: comm not overlapped by compute; overlap = "
              "1 - exposed / comm.",
              "* Per collective instance: transfer = shortest duration over ranks; wait = latest start - the rank's "
              "start (clock-corrected), per step; skew = latest - earliest start; blame of the last arriver = "
              "latest - second-latest start; straggler score = times last / times expected (sum of 1/n).",
              "* algbw = bytes / transfer (GB/s = 1e9 B/s); busbw = algbw x 2(n-1)/n (all-reduce), (n-1)/n "
              "(reduce-scatter, all-gather, all-to-all), 1 (broadcast, reduce, point-to-point), as in nccl-tests.",
              "* Clock offset: median over matched collectives of (rank end - median end over ranks), subtracted "
              "before skew and wait.", ""]
    return "\n".join(lines)
