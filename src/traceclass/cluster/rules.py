"""Cluster rules: findings that only a set of ranks can show. The per-trace rule engine
(``rules/``) sees one trace, so these live here; they follow the same conventions (code, typed
thresholds, What it finds / Why it matters / How to fix / Example / Thresholds, the measured value
next to the threshold in the message) and return :class:`traceclass.rule.Finding`. Severity is
:func:`traceclass.rule.severity_for` of the recoverable time per step against the step P50, with
the shared floors.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Sequence

import numpy as np

from traceclass.rule import HIGH_MIN_NS, MEDIUM_MIN_NS, Evidence, Finding, RuleInfo, severity_for


def _severity(recoverable_ns: float, step_ns: float) -> str:
    return severity_for(int(recoverable_ns), int(step_ns), high_min_ns=HIGH_MIN_NS, medium_min_ns=MEDIUM_MIN_NS,
                        zero="info")


@dataclasses.dataclass(frozen=True)
class StragglerThresholds:
    alpha: float = 0.01  # binomial test level, divided by the number of ranks
    min_blame_pct: float = 5.0  # blame per step / step P50


def tc801_collective_straggler(c: Any, th: StragglerThresholds = StragglerThresholds()) -> list[Finding]:
    """TC801 collective-straggler: one rank makes the others wait in collectives.

    What it finds: a rank that starts collectives last clearly more often than 1/n (binomial test,
    p < alpha / ranks) and whose blame (latest start - second-latest start, summed over the
    collectives it was last in) is at least ``min_blame_pct`` % of the step; the cause is named
    from its per-step compute, data-loading and other (host) time against its peers.
    Why it matters: every other rank of the group idles inside the collective for that long, each step.
    How to fix: look at what the rank does before the collective (the cause): balance the work
    (compute), prefetch with more DataLoader workers (data loading), move host work (logging,
    checkpoint I/O, Python bookkeeping) off the step or onto every rank equally (host work).
    Example: rank 2 of 4 is last in 16 of 18 all-reduces (expected 4.5, p = 1e-9), 31 % of the step.
    Thresholds: alpha = 0.01 (Bonferroni over ranks); min_blame_pct = 5.
    """
    v = c.verdict
    out = []
    for r in np.flatnonzero(v.straggler).tolist():
        per_step = v.blame_ns[r] / max(v.steps_with_collectives, 1)
        rank = c.ranks[r]
        out.append(Finding(
            code="TC801", name="collective-straggler", severity=_severity(per_step, v.step_p50_ns),
            message=(f"rank {rank} starts collectives last in {int(v.times_last[r])} of {int(v.instances[r])} "
                     f"(expected {v.expected_last[r]:.1f}, p = {v.p_value[r]:.2g} < {th.alpha / len(c.ranks):.2g}); "
                     f"blame {per_step / 1e6:.3f} ms per step = {v.blame_pct[r]:.1f} % of the step "
                     f"(threshold {th.min_blame_pct:g} %); cause: {v.cause[r]}"),
            recoverable_ns=int(per_step),
            estimate="blame per step: what the other ranks wait for this rank alone in each step",
            fix=_FIX.get(v.cause[r], _FIX["unknown"]),
            location=f"rank straggler ({v.cause[r]})",
            evidence=(Evidence(what=f"rank {rank}", duration_ns=int(v.blame_ns[r]), count=int(v.times_last[r]),
                               values={"p_value": float(v.p_value[r]), "blame_pct": float(v.blame_pct[r]),
                                       **{f"excess_{k}": x for k, x in v.excess_ns[r].items()}}),),
            values={"rank": rank, "blame_per_step_ns": int(per_step), "blame_pct": round(float(v.blame_pct[r]), 3)},
        ))
    return out


_FIX = {
    "compute longer than peers": "balance the work across ranks (sequence lengths, expert routing, uneven shards)",
    "data loading": "prefetch: more DataLoader workers, pin_memory, or a faster input pipeline on this rank's host",
    "host work": "move host work (logging, checkpointing, Python bookkeeping, sleeps) off the step or to every rank",
    "unknown": "compare this rank's timeline before its late collectives with a peer's (traceclass analyze on both)",
}


@dataclasses.dataclass(frozen=True)
class BusBandwidthThresholds:
    min_busbw_pct: float = 40.0  # of the link peak
    min_bytes: int = 1 << 20  # smaller messages are latency-bound: not judged


def tc802_low_bus_bandwidth(c: Any, th: BusBandwidthThresholds = BusBandwidthThresholds()) -> list[Finding]:
    """TC802 low-bus-bandwidth: collectives that move data well below the link's peak.

    What it finds: collective kinds (name x group x size x dtype) of at least ``min_bytes`` whose
    median bus bandwidth (nccl-tests' busbw, from the transfer time: the last arriver's duration)
    is under ``min_busbw_pct`` % of the link peak.
    Why it matters: once waiting is taken out, what remains is the network; at a fraction of the
    peak the transfers themselves cost steps.
    How to fix: check the transport NCCL chose (NCCL_DEBUG=INFO: NVLink/IB vs sockets), bucket
    small collectives together (DDP bucket_cap_mb, FSDP), use bf16 gradients, check NIC/GPU affinity.
    Example: all_reduce 64 MB bf16 busbw 41 GB/s = 9 % of 450 GB/s NVLink.
    Thresholds: min_busbw_pct = 40; min_bytes = 1 MiB. Needs a link peak (the GPU's datasheet
    NVLink figure or ``--link-gbps``); without one the rule reports nothing.
    """
    out: list[Finding] = []
    peak = c.link_peak_gbps
    if not peak:
        return out
    for row in c.table:
        bus = row["busbw_p50_gbps"]
        if bus is None or row["bytes"] < th.min_bytes or row["name"] in ("send", "recv", "send_recv"):
            continue
        pct = 100.0 * bus / peak
        if pct >= th.min_busbw_pct:
            continue
        per_step = row["total_transfer_ns"] * (1 - pct / 100.0) / max(c.verdict.steps_with_collectives, 1)
        out.append(Finding(
            code="TC802", name="low-bus-bandwidth", severity=_severity(per_step, c.verdict.step_p50_ns),
            message=(f"{row['name']} {row['bytes'] / 1e6:.1f} MB {row['dtype']}: busbw P50 {bus:.1f} GB/s = "
                     f"{pct:.1f} % of the {peak:g} GB/s link peak (threshold {th.min_busbw_pct:g} %)"),
            recoverable_ns=int(per_step),
            estimate="transfer time per step beyond what the link peak would take",
            fix="check NCCL's transport (NCCL_DEBUG=INFO), bucket small collectives, check NIC/GPU affinity",
            location=f"{row['name']} group {row['group']} {row['bytes']} B {row['dtype']}",
            values={"busbw_gbps": bus, "link_peak_gbps": peak, "busbw_pct": round(pct, 3)},
        ))
    return out


@dataclasses.dataclass(frozen=True)
class ImbalanceThresholds:
    z: float = 3.5  # modified z-score (Iglewicz and Hoaglin's outlier cut)


def tc803_compute_imbalance(c: Any, th: ImbalanceThresholds = ImbalanceThresholds()) -> list[Finding]:
    """TC803 compute-imbalance: a rank computes clearly longer per step than the others.

    What it finds: ranks whose median per-step compute time has a modified z-score
    (x - median) / (1.4826 MAD) of at least ``z`` against all ranks.
    Why it matters: in synchronous training every rank waits at the next collective for the
    slowest; the excess is lost on all the others.
    How to fix: even out the work: shard sizes, padding/bucketing by sequence length, MoE
    capacity, pipeline stage split; check the rank's GPU clocks and thermals.
    Example: rank 3 computes 41.2 ms per step against a median of 30.1 ms (z = 12.4).
    Thresholds: z = 3.5.
    """
    v = c.verdict
    med = float(np.median(v.compute_ns)) if len(v.compute_ns) else 0.0
    out = []
    for r in np.flatnonzero(v.z >= th.z).tolist():
        excess = float(v.compute_ns[r] - med)
        out.append(Finding(
            code="TC803", name="compute-imbalance", severity=_severity(excess, v.step_p50_ns),
            message=(f"rank {c.ranks[r]} computes {v.compute_ns[r] / 1e6:.3f} ms per step against a median of "
                     f"{med / 1e6:.3f} ms (modified z = {v.z[r]:.1f} >= {th.z:g})"),
            recoverable_ns=int(excess), estimate="compute per step beyond the median rank's",
            fix="even out the work across ranks (shards, sequence-length bucketing, MoE capacity, stage split)",
            location="rank compute imbalance",
            values={"rank": c.ranks[r], "compute_ns": float(v.compute_ns[r]), "median_ns": med, "z": float(v.z[r])},
        ))
    return out


CLUSTER_RULES: Sequence[tuple[RuleInfo, Callable[..., list[Finding]]]] = (
    (RuleInfo("TC801", "collective-straggler", "communication", "a rank arrives last at collectives and the others wait"),
     tc801_collective_straggler),
    (RuleInfo("TC802", "low-bus-bandwidth", "communication", "collectives move data far below the link peak"),
     tc802_low_bus_bandwidth),
    (RuleInfo("TC803", "compute-imbalance", "compute", "one rank computes clearly longer per step than the others"),
     tc803_compute_imbalance),
)
