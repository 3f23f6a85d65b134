"""Which rows of the ranks' collective tables are the same collective instance.

Keys, first that applies to a row:

1. ``Comms Id`` (unique per instance across the job);
2. (``Process Group Name``, ``Seq``): NCCL numbers each group's collectives;
3. (group, per-group ordinal): the k-th collective of the group on each rank, after aligning
   each rank's sequence to a reference rank (the one with most rows) by the offset under which
   most (name, elements, step) triples agree, since profiling windows can start at different
   collectives; ties go to the smallest offset. A trace without a process group on its rows but
   with exactly one group in ``pg_config`` uses that group;
4. (stream, ordinal), aligned the same way, when no group is known.

Point-to-point rows (send/recv) pair by (sender, receiver, ordinal of that pair) from their
``Src``/``Dst Rank`` args; without them they cannot be paired and are counted in a note.

An instance whose rows disagree on the collective or its element count (all-to-allv excepted:
its sizes differ by design) is a **mismatch**: dropped, with a note. An instance seen on fewer
ranks than its group has in the input is **partial**: kept for the counts, left out of timing.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Sequence

import numpy as np

from traceclass.cluster.names import P2P

#: offsets tried per rank and lane when aligning ordinals
MAX_CANDIDATE_OFFSETS = 64


@dataclasses.dataclass(frozen=True)
class Matched:
    """Matched instances: ``rows[i, r]`` is the row of rank position ``r``'s collective table
    that is instance ``i`` (-1: not on that rank)."""

    rows: np.ndarray  # int32 [instances, ranks]
    name: list[str]
    group: list[str]
    key_kind: list[str]  # "comms_id", "seq", "ordinal", "stream", "p2p"
    expected: np.ndarray  # participants the group has among the input ranks
    complete: np.ndarray  # bool: seen on every expected rank (and at least 2)
    p2p: np.ndarray  # bool
    notes: list[str]
    counts: dict[str, int]


def _group_members(table: dict[str, list], pg: dict[str, set[int]]) -> list[set[int] | None]:
    out = []
    for g, gr in zip(table["group"], table["group_ranks"]):
        s = gr.strip()
        if s.startswith("[") and len(s) > 2:
            try:
                out.append({int(x) for x in s.strip("[]").split(",") if x.strip()})
                continue
            except ValueError:
                pass
        out.append(pg.get(g))
    return out


def match(summaries: Sequence[dict[str, Any]], ranks: Sequence[int]) -> Matched:
    """Match the collective instances of ``summaries`` (one per rank position; ``ranks`` their ranks)."""
    R = len(summaries)
    keys: dict[tuple, dict[int, int]] = {}
    key_kind: dict[tuple, str] = {}
    members: dict[tuple, set[int] | None] = {}
    dup = 0
    unpaired_p2p = 0
    counts = {"comms_id": 0, "seq": 0, "ordinal": 0, "stream": 0, "p2p": 0}
    lanes: dict[tuple, dict[int, tuple[np.ndarray, np.ndarray]]] = {}  # lane -> rank pos -> (rows, codes)
    default_group_used = 0
    for r, s in enumerate(summaries):
        t = s["collectives"]
        n = len(t["name"])
        pg = {g["pg_name"]: set(g["ranks"]) for g in s.get("pg_config", []) if g.get("ranks") is not None}
        only = list(pg)[0] if len(pg) == 1 else None
        mem = _group_members(t, pg)
        names = t["name"]
        pair_ord: dict[tuple[int, int, str], int] = {}
        ord_rows: dict[tuple, list[int]] = {}
        for i in range(n):
            nm = names[i]
            if nm in P2P:
                src, dst = int(t["src"][i]), int(t["dst"][i])
                if src < 0 or dst < 0:
                    unpaired_p2p += 1
                    continue
                k0 = (src, dst, t["group"][i])
                o = pair_ord.get(k0, 0)
                pair_ord[k0] = o + 1
                key = ("p2p",) + k0 + (o,)
                kind = "p2p"
                m = {src, dst}
            elif t["comms_id"][i]:
                key, kind, m = ("id", t["comms_id"][i]), "comms_id", mem[i]
            elif t["group"][i] and int(t["seq"][i]) >= 0:
                key, kind, m = ("seq", t["group"][i], int(t["seq"][i])), "seq", mem[i]
            else:
                g = t["group"][i] or (only or "")
                if g:
                    if not t["group"][i]:
                        default_group_used += 1
                    ord_rows.setdefault(("ordinal", g), []).append(i)
                else:
                    ord_rows.setdefault(("stream", int(t["stream"][i])), []).append(i)
                continue
            if r in keys.setdefault(key, {}):
                dup += 1
                continue
            keys[key][r] = i
            key_kind[key] = kind
            members.setdefault(key, m)
        for lane, rows in ord_rows.items():
            rows_a = np.asarray(rows, dtype=np.int64)
            codes = np.array([hash((names[i], int(t["in_nelems"][i]), int(t["step"][i]))) for i in rows], dtype=np.int64)
            lanes.setdefault(lane, {})[r] = (rows_a, codes)
            if lane[0] == "ordinal":
                g = lane[1]
                members.setdefault(("lane",) + lane, pg.get(g) if g in pg else (mem[rows[0]] if rows else None))
    for lane, per_rank in lanes.items():
        ref = max(per_rank, key=lambda r: (len(per_rank[r][1]), -r))
        ref_codes = per_rank[ref][1]
        for r, (rows_a, codes) in per_rank.items():
            off = 0 if r == ref else _best_offset(ref_codes, codes)
            for j, i in enumerate(rows_a.tolist()):
                key = lane + (j + off,)
                keys.setdefault(key, {})[r] = i
                key_kind[key] = lane[0]
                members.setdefault(key, members.get(("lane",) + lane))
    rank_pos = {rk: p for p, rk in enumerate(ranks)}
    out_rows, out_name, out_group, out_kind, expected, complete, p2p = [], [], [], [], [], [], []
    mismatched = 0
    for key, per in keys.items():
        first_r = min(per)
        t0 = summaries[first_r]["collectives"]
        i0 = per[first_r]
        nm = t0["name"][i0]
        if nm != "all_to_allv":
            sig = {(summaries[r]["collectives"]["name"][i], int(summaries[r]["collectives"]["in_nelems"][i]))
                   for r, i in per.items()}
            if len(sig) > 1 and not all(k[0] in P2P for k in sig):
                mismatched += 1
                continue
        row = np.full(R, -1, dtype=np.int32)
        for r, i in per.items():
            row[r] = i
        m = members.get(key)
        exp = len([x for x in m if x in rank_pos]) if m else len(per)
        if key_kind[key] in ("ordinal", "stream") and not m:
            exp = len(lanes.get(key[:2], {}))  # no member list: the ranks that have the lane
        out_rows.append(row)
        out_name.append(nm)
        out_group.append(t0["group"][i0] or (key[1] if key_kind[key] == "ordinal" else ""))
        out_kind.append(key_kind[key])
        expected.append(exp)
        complete.append(len(per) >= max(exp, 2))
        p2p.append(key_kind[key] == "p2p")
        counts[key_kind[key]] += 1
    rows = np.array(out_rows, dtype=np.int32).reshape(len(out_rows), R)
    notes = []
    complete_a = np.array(complete, dtype=bool)
    if mismatched:
        notes.append(f"{mismatched} collective instances dropped: their ranks disagree on the collective or its size")
    if dup:
        notes.append(f"{dup} collective rows repeat a Comms Id or (group, Seq) already seen on their rank; left out")
    if unpaired_p2p:
        notes.append(f"{unpaired_p2p} point-to-point operations without Src/Dst rank args could not be paired")
    if default_group_used:
        notes.append(f"{default_group_used} collective rows name no process group; matched as the only group in "
                     "pg_config")
    partial = int((~complete_a).sum())
    if partial:
        notes.append(f"{partial} collective instances were seen on fewer ranks than their group has in the input "
                     "(profiling windows differ, or ranks are missing); left out of timing")
    return Matched(rows, out_name, out_group, out_kind, np.array(expected, dtype=np.int64), complete_a,
                   np.array(p2p, dtype=bool), notes, counts)


def _best_offset(ref: np.ndarray, seq: np.ndarray) -> int:
    """Offset o (instance index = position + o) under which most codes of ``seq`` equal ``ref``'s."""
    if len(seq) == 0 or len(ref) == 0:
        return 0
    cands = {0}
    for j in np.flatnonzero(ref == seq[0])[:MAX_CANDIDATE_OFFSETS].tolist():
        cands.add(j)
    for i in np.flatnonzero(seq == ref[0])[:MAX_CANDIDATE_OFFSETS].tolist():
        cands.add(-i)
    best, best_score = 0, -1
    for o in sorted(cands, key=lambda o: (abs(o), o)):
        lo, hi = max(0, -o), min(len(seq), len(ref) - o)
        score = int((seq[lo:hi] == ref[lo + o:hi + o]).sum()) if hi > lo else 0
        if score > best_score:
            best, best_score = o, score
    return best
