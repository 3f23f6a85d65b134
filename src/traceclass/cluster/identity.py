"""Which rank a trace is, and whether a set of traces is one job.

Rank, first source that has it: ``distributedInfo.rank``; else the collectives' ``Rank`` arg,
else ``Global rank start`` + stride x (position in ``Process Group Ranks``) is not knowable
without the rank itself, so only ``Global rank start`` of a group whose ``Process Group Ranks``
lists one rank; else the last number in the file name (``rank7.json.gz``, ``worker_3.pt.trace``).
Duplicates, gaps and mixed jobs are reported, never silently renumbered: a duplicated rank keeps
its number and the report names both files.
"""

from __future__ import annotations

import dataclasses
import os
import re
from typing import Any, Sequence

import numpy as np

_NUMBER = re.compile(r"(\d+)")


@dataclasses.dataclass(frozen=True)
class Identity:
    rank: int | None
    source: str  # "distributedInfo.rank", "collective Rank arg", "Global rank start", "file name", ""
    world_size: int | None
    job: str  # what ranks of one job share: backend and world size


def rank_from_file_name(path: str) -> int | None:
    """The last number of the base name without extensions, or None."""
    base = os.path.basename(path)
    for ext in (".gz", ".json", ".sqlite", ".tcsum", ".trace", ".pt"):
        if base.endswith(ext):
            base = base[: -len(ext)]
    nums = _NUMBER.findall(base)
    return int(nums[-1]) if nums else None


def identify(path: str, meta: dict[str, Any], comm_rank: np.ndarray, rank_start: np.ndarray,
             group_ranks: Sequence[str]) -> Identity:
    """Identity of one trace from its metadata and collective args (see the module docstring)."""
    world = meta.get("distributed.world_size")
    world = int(world) if isinstance(world, (int, float)) and not isinstance(world, bool) else None
    job = f"{meta.get('distributed.backend', '')}|{world or ''}"
    r = meta.get("distributed.rank")
    if isinstance(r, (int, float)) and not isinstance(r, bool) and r >= 0:
        return Identity(int(r), "distributedInfo.rank", world, job)
    known = comm_rank[comm_rank >= 0]
    if len(known):
        vals, counts = np.unique(known, return_counts=True)
        return Identity(int(vals[np.argmax(counts)]), "collective Rank arg", world, job)
    singles = [int(s) for s, g in zip(rank_start.tolist(), group_ranks) if s >= 0 and g.count(",") == 0 and g.strip("[] ")]
    if singles:
        return Identity(singles[0], "Global rank start", world, job)
    f = rank_from_file_name(path)
    if f is not None:
        return Identity(f, "file name", world, job)
    return Identity(None, "", world, job)


@dataclasses.dataclass(frozen=True)
class RankSet:
    """The ranks of the input, in rank order, and what is wrong with the set."""

    order: list[int]  # summary index per position, sorted by rank (duplicates kept, in input order)
    ranks: list[int | None]
    duplicates: dict[int, list[str]]  # rank -> files
    missing: list[int]  # ranks below the world size (or the largest rank) with no trace
    jobs: dict[str, list[str]]  # job signature -> files, when more than one
    unknown: list[str]  # files whose rank could not be told
    notes: list[str]


def rank_set(files: Sequence[str], identities: Sequence[Identity]) -> RankSet:
    ranks = [i.rank for i in identities]
    order = sorted(range(len(files)), key=lambda k: (ranks[k] is None, ranks[k] if ranks[k] is not None else 0, k))
    seen: dict[int, list[str]] = {}
    for f, r in zip(files, ranks):
        if r is not None:
            seen.setdefault(r, []).append(os.path.basename(f))
    dup = {r: fs for r, fs in seen.items() if len(fs) > 1}
    worlds = {i.world_size for i in identities if i.world_size}
    top = max(worlds) if worlds else (max(seen) + 1 if seen else 0)
    missing = [r for r in range(top) if r not in seen]
    jobs: dict[str, list[str]] = {}
    for f, i in zip(files, identities):
        jobs.setdefault(i.job, []).append(os.path.basename(f))
    jobs = jobs if len(jobs) > 1 else {}
    unknown = [os.path.basename(f) for f, r in zip(files, ranks) if r is None]
    notes = []
    by_source: dict[str, int] = {}
    for i in identities:
        by_source[i.source or "unknown"] = by_source.get(i.source or "unknown", 0) + 1
    notes.append("rank identity from " + ", ".join(f"{s} ({n})" for s, n in sorted(by_source.items())))
    for r, fs in sorted(dup.items()):
        notes.append(f"rank {r} appears in {len(fs)} files ({', '.join(fs)}); kept as given, not renumbered")
    if missing:
        notes.append(f"{len(missing)} of {top} ranks have no trace: {_ranges(missing)}")
    if jobs:
        notes.append(f"the traces come from {len(jobs)} different jobs (backend, world size or world size differ): "
                     + "; ".join(f"{len(fs)} like {fs[0]}" for fs in jobs.values()))
    if unknown:
        notes.append(f"{len(unknown)} traces without a rank (no distributedInfo, collective Rank or number in the "
                     f"file name): {', '.join(unknown[:5])}")
    return RankSet(order, ranks, dup, missing, jobs, unknown, notes)


def _ranges(values: list[int]) -> str:
    """``0-3, 7, 9-10``"""
    out, start, prev = [], None, None
    for v in values:
        if start is None:
            start = prev = v
        elif v == prev + 1:
            prev = v
        else:
            out.append(f"{start}-{prev}" if prev != start else f"{start}")
            start = prev = v
    if start is not None:
        out.append(f"{start}-{prev}" if prev != start else f"{start}")
    return ", ".join(out)
