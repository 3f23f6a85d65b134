"""The reduce step: summaries of all ranks -> the cluster report (plain, JSON-ready data).

Per-rank figures are per steady step, medians over the rank's steps (ns): compute, comm,
exposed comm (see :mod:`.summary`); **overlap** = 1 - exposed / comm; **wait** and **transfer**
= the rank's clock-based wait and the instances' transfer times (:mod:`.collectives`) summed
over its timed collectives, divided by the steps that hold timed collectives. Exposed
communication of a rank (verdict) = its exposed comm / its step wall time, all steady steps.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Mapping, Sequence

import numpy as np

from traceclass import __version__
from traceclass import units
from traceclass.cluster.clocks import align
from traceclass.cluster.collectives import collective_table, instance_stats
from traceclass.cluster.identity import Identity, rank_set
from traceclass.cluster.links import link_peak
from traceclass.cluster.match import match
from traceclass.cluster.rules import CLUSTER_RULES
from traceclass.cluster.stragglers import RankVerdict, judge
from traceclass.registry import selected_cluster
from traceclass.rule import SEVERITIES

SCHEMA_VERSION = 1


@dataclasses.dataclass(frozen=True)
class _Ctx:
    """What the cluster rules read."""

    ranks: list[int]
    verdict: RankVerdict
    table: list[dict[str, Any]]
    link_peak_gbps: float | None


def _med(v: Sequence[float]) -> float:
    return float(np.median(v)) if len(v) else 0.0


def build(summaries: Sequence[dict[str, Any]], link_gbps: float | None = None,
          select: Sequence[str] = (), ignore: Sequence[str] = (),
          thresholds: Mapping[str, Mapping[str, Any]] | None = None) -> dict[str, Any]:
    """The cluster report of ``summaries`` (one per input file, any order). ``thresholds``: rule
    code -> threshold overrides (``Config.rules``); the cluster rules' declared defaults fill the rest."""
    th = {info.code: {**info.defaults(), **dict((thresholds or {}).get(info.code, {}))} for info, _ in CLUSTER_RULES}
    files = [s["file"] for s in summaries]
    ids = [Identity(s.get("rank"), s.get("rank_source", ""), s.get("world_size"), s.get("job", "")) for s in summaries]
    rs = rank_set(files, ids)
    notes = list(rs.notes)
    chosen: list[int] = []
    seen: set[int] = set()
    for k in rs.order:
        r = rs.ranks[k]
        if r is None or r in seen:
            continue
        seen.add(r)
        chosen.append(k)
    if rs.duplicates:
        notes.append("of each duplicated rank only the first file is compared across ranks")
    sums = [summaries[k] for k in chosen]
    ranks = [int(rs.ranks[k]) for k in chosen]  # type: ignore[arg-type]
    m = match(sums, ranks)
    times = align(sums, m)
    st = instance_stats(sums, m, times)
    table = collective_table(m, st, ranks)
    verdict = judge(sums, m, st, alpha=th["TC801"]["max_p_value"], min_blame_pct=th["TC801"]["min_blame_pct"],
                    z_imbalance=th["TC803"]["min_modified_z"])
    notes += m.notes
    if not times.anchored:
        notes.append("not every rank has baseTimeNanoseconds: clocks compared in the traces' own time")
    big = np.abs(times.offset_ns)
    if len(big) and big.max() > 0:
        r = int(np.argmax(big))
        notes.append(f"clock offsets from collective ends: largest {'+' if times.offset_ns[r] >= 0 else ''}"
                     f"{units.duration(times.offset_ns[r])} (rank {ranks[r]}), "
                     f"median |offset| {units.duration(float(np.median(big)))}; applied before skew and wait")
    devices = {s.get("device_name", "") for s in sums if s.get("device_name")}
    peak, peak_src = (link_gbps, "--link-gbps") if link_gbps else (None, "")
    if peak is None and len(devices) == 1:
        peak, peak_src = link_peak(devices.pop())
    steps_c = max(verdict.steps_with_collectives, 1)
    timed = st.use
    rows = []
    for r, s in enumerate(sums):
        sp = s["steps"]
        comm = _med(sp["comm_ns"])
        exposed = _med(sp["exposed_comm_ns"])
        wall = sum(sp["wall_ns"])
        has = (m.rows[:, r] >= 0) & timed
        rows.append({
            "rank": ranks[r], "file": s["file"], "steps": len(sp["wall_ns"]),
            "step_p50_ns": _med(sp["wall_ns"]), "busy_pct": s["device_busy_pct"],
            "compute_ns": _med(sp["compute_ns"]), "comm_ns": comm, "exposed_comm_ns": exposed,
            "exposed_comm_pct": round(100.0 * sum(sp["exposed_comm_ns"]) / wall, 3) if wall else 0.0,
            "overlap_pct": round(100.0 * (1 - exposed / comm), 3) if comm else None,
            "wait_ns": float(st.wait_clock_ns[has, r].sum() / steps_c),
            "transfer_ns": float(st.transfer_ns[has].sum() / steps_c),
            "times_last": int(verdict.times_last[r]), "collectives": int(verdict.instances[r]),
            "straggler_score": round(float(verdict.score[r]), 3), "p_value": float(verdict.p_value[r]),
            "blame_pct": round(float(verdict.blame_pct[r]), 3), "straggler": bool(verdict.straggler[r]),
            "cause": verdict.cause[r], "compute_z": round(float(verdict.z[r]), 3),
            "clock_offset_ns": int(times.offset_ns[r]),
        })
    ctx = _Ctx(ranks, verdict, table, peak)
    findings = []
    for rule in selected_cluster(tuple(select), tuple(ignore)):
        findings += rule.check(ctx, th[rule.info.code])
    findings.sort(key=lambda f: (-f.recoverable_ns, f.code))
    merged = merge_findings(sums)
    dur = np.where(st.use[:, None] & times.present, times.end - times.start, 0)
    total_dur = int(dur.sum())
    total_wait = int(st.wait_clock_ns.sum())
    wait_share = 100.0 * total_wait / total_dur if total_dur else None
    exposed_pcts = [row["exposed_comm_pct"] for row in rows]
    slow = max(rows, key=lambda x: x["step_p50_ns"]) if rows else None
    large = [t for t in table if t["busbw_p50_gbps"] is not None and t["name"] not in ("send", "recv", "send_recv")]
    best_bus = max(large, key=lambda t: t["total_transfer_ns"]) if large else None
    if wait_share is None:
        kind = "no matched collectives"
    elif wait_share >= 50.0:
        kind = "imbalance"
    else:
        kind = "network"
    verdict_d = {
        "ranks": len(rows), "files": len(summaries),
        "slowest_rank": slow["rank"] if slow else None, "slowest_step_p50_ns": slow["step_p50_ns"] if slow else None,
        "median_step_p50_ns": _med([x["step_p50_ns"] for x in rows]),
        "stragglers": [{"rank": x["rank"], "blame_pct": x["blame_pct"], "cause": x["cause"], "times_last": x["times_last"],
                        "collectives": x["collectives"], "p_value": x["p_value"]} for x in rows if x["straggler"]],
        "imbalanced_ranks": [ranks[r] for r in np.flatnonzero(verdict.imbalanced).tolist()],
        "exposed_comm_median_pct": _med(exposed_pcts), "exposed_comm_max_pct": max(exposed_pcts) if exposed_pcts else 0.0,
        "wait_share_pct": round(wait_share, 3) if wait_share is not None else None,
        "imbalance_or_network": kind,
        "busbw_collective": best_bus and {"name": best_bus["name"], "bytes": best_bus["bytes"],
                                          "busbw_p50_gbps": best_bus["busbw_p50_gbps"]},
        "link_peak_gbps": peak, "link_peak_source": peak_src,
        "matched_collectives": int(st.use.sum()), "instances": len(m.name), "match_keys": m.counts,
    }
    return {
        "schema_version": SCHEMA_VERSION, "kind": "cluster", "traceclass_version": __version__,
        "verdict": verdict_d, "ranks": rows, "collectives": table,
        "findings": [_finding_dict(f) for f in findings], "rank_findings": merged,
        "notes": notes + _rank_notes(summaries),
        "missing_ranks": rs.missing, "duplicate_ranks": {str(k): v for k, v in rs.duplicates.items()},
        "unknown_rank_files": rs.unknown,
    }


def _finding_dict(f: Any) -> dict[str, Any]:
    return {"code": f.code, "name": f.name, "severity": f.severity, "message": f.message,
            "recoverable_ns": int(f.recoverable_ns), "estimate": f.estimate, "fix": f.fix, "location": f.location,
            "fingerprint": f.fingerprint, "values": dict(f.values)}


def merge_findings(sums: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per-rank findings by fingerprint: on how many ranks, the range of their recoverable share."""
    by: dict[str, dict[str, Any]] = {}
    for s in sums:
        for f in s["findings"]:
            d = by.setdefault(f["fingerprint"], {"fingerprint": f["fingerprint"], "code": f["code"], "name": f["name"],
                                                 "location": f["location"], "ranks": [], "pct": [], "severity": "info"})
            d["ranks"].append(s["rank"])
            d["pct"].append(f["recoverable_pct"])
            if SEVERITIES.index(f["severity"]) < SEVERITIES.index(d["severity"]):
                d["severity"] = f["severity"]
    out = []
    for d in by.values():
        out.append({"fingerprint": d["fingerprint"], "code": d["code"], "name": d["name"], "location": d["location"],
                    "severity": d["severity"], "ranks": sorted(r for r in d["ranks"] if r is not None),
                    "rank_count": len(d["ranks"]), "of": len(sums),
                    "min_pct": min(d["pct"]), "max_pct": max(d["pct"])})
    out.sort(key=lambda d: (SEVERITIES.index(d["severity"]), -d["rank_count"], -d["max_pct"], d["code"]))
    return out


def _rank_notes(summaries: Sequence[dict[str, Any]]) -> list[str]:
    """Reader notes shared by the ranks, once each with the number of ranks."""
    count: dict[str, int] = {}
    for s in summaries:
        for n in dict.fromkeys(s.get("notes", [])):
            count[n] = count.get(n, 0) + 1
    return [f"{n} ({c} of {len(summaries)} ranks)" for n, c in sorted(count.items(), key=lambda kv: -kv[1])[:10]]


def short(path: str) -> str:
    return os.path.basename(path)
