"""Cluster rules: findings that only a set of ranks can show. The per-trace rule engine
(``rules/``) sees one trace, so these live here; they follow the same conventions (code, typed
thresholds, What it finds / Why it matters / How to fix / Example / Thresholds, the measured value
next to the threshold in the message) and return :class:`traceclass.rule.Finding`. Their
thresholds are declared in ``RuleInfo.thresholds``; :mod:`traceclass.registry` lists them in the
catalogue (``traceclass rules``, ``explain``, ``rules/thresholds.toml``) and the config accepts
``[tool.traceclass.rules.TC8nn]`` overrides, which :func:`traceclass.cluster.report.build` applies.
Severity is
:func:`traceclass.rule.severity_for` of the recoverable time per step against the step P50, with
the shared floors.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

import numpy as np

from traceclass import units
from traceclass.rule import HIGH_MIN_NS, MEDIUM_MIN_NS, Evidence, Finding, RuleInfo, Threshold, severity_for


def _severity(recoverable_ns: float, step_ns: float) -> str:
    return severity_for(int(recoverable_ns), int(step_ns), high_min_ns=HIGH_MIN_NS, medium_min_ns=MEDIUM_MIN_NS,
                        zero="info")


TC801 = RuleInfo(
    "TC801", "collective-straggler", "communication", "a rank arrives last at collectives and the others wait",
    thresholds=(
        Threshold("max_p_value", 0.01, "ratio",
                  "binomial-test level over all ranks together: each rank is tested at max_p_value / ranks "
                  "(Bonferroni), so a rank that is last by chance is not blamed in large jobs"),
        Threshold("min_blame_pct", 5.0, "%",
                  "blame per step against the step P50 below which being last costs too little to report "
                  "(the issue's 5 %; HTA reports k ranks with no threshold at all)"),
    ),
)


def tc801_collective_straggler(c: Any, th: Mapping[str, Any]) -> list[Finding]:
    """TC801 collective-straggler: one rank makes the others wait in collectives.

    What it finds
        A rank that starts collectives last clearly more often than 1/n (binomial test,
        p < ``max_p_value`` / ranks) and whose blame (latest start - second-latest start, summed over
        the collectives it was last in) is at least ``min_blame_pct`` % of the step; the cause is named
        from its per-step compute, data-loading and other (host) time against its peers. A cluster
        rule: it needs two or more ranks (``traceclass analyze DIR``).

    Why it matters
        Every other rank of the group idles inside the collective for that long, each step.

    How to fix
        Look at what the rank does before the collective (the cause): balance the work (compute),
        prefetch with more DataLoader workers (data loading), move host work (logging, checkpoint
        I/O, Python bookkeeping) off the step or onto every rank equally (host work).

    Example
        Rank 2 of 4 is last in 16 of 18 all-reduces (expected 4.5, p = 1e-9), 31 % of the step.

    Thresholds
        Declared with their defaults, units and reasons in ``TC801.thresholds``
        (``traceclass explain TC801``); the straggler verdict of the cluster report uses the same ones.
    """
    v = c.verdict
    out = []
    for r in np.flatnonzero(v.straggler).tolist():
        per_step = v.blame_ns[r] / max(v.steps_with_collectives, 1)
        rank = c.ranks[r]
        out.append(Finding(
            code="TC801", name="collective-straggler", severity=_severity(per_step, v.step_p50_ns),
            message=(f"rank {rank} starts collectives last in {int(v.times_last[r])} of {int(v.instances[r])} "
                     f"(expected {v.expected_last[r]:.1f}, p = {v.p_value[r]:.2g} < {th['max_p_value'] / len(c.ranks):.2g}); "
                     f"blame {units.duration(per_step)} per step = {units.pct(v.blame_pct[r])} of the step "
                     f"(threshold {units.pct(th['min_blame_pct'], None)}); cause: {v.cause[r]}"),
            title=f"Find what makes rank {rank} arrive last at collectives ({v.cause[r]})",
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


TC802 = RuleInfo(
    "TC802", "low-bus-bandwidth", "communication", "collectives move data far below the link peak",
    thresholds=(
        Threshold("min_busbw_pct", 40.0, "%",
                  "median bus bandwidth against the link peak below which the transfers are judged slow; "
                  "large NCCL all-reduces reach 70-90 % of NVLink in nccl-tests, so under 40 % is well off"),
        Threshold("min_bytes", 1 << 20, "bytes",
                  "smaller messages are latency-bound (nccl-tests' busbw curves flatten from about 1 MiB): "
                  "not judged"),
    ),
)


def tc802_low_bus_bandwidth(c: Any, th: Mapping[str, Any]) -> list[Finding]:
    """TC802 low-bus-bandwidth: collectives that move data well below the link's peak.

    What it finds
        Collective kinds (name x group x size x dtype) of at least ``min_bytes`` whose median bus
        bandwidth (nccl-tests' busbw, from the transfer time: the last arriver's duration) is under
        ``min_busbw_pct`` % of the link peak. A cluster rule: it needs two or more ranks.

    Why it matters
        Once waiting is taken out, what remains is the network; at a fraction of the peak the
        transfers themselves cost steps.

    How to fix
        Check the transport NCCL chose (NCCL_DEBUG=INFO: NVLink/IB vs sockets), bucket small
        collectives together (DDP bucket_cap_mb, FSDP), use bf16 gradients, check NIC/GPU affinity.

    Example
        all_reduce 64 MB bf16 busbw 41 GB/s = 9 % of 450 GB/s NVLink.

    Thresholds
        Declared with their defaults, units and reasons in ``TC802.thresholds``
        (``traceclass explain TC802``). Needs a link peak (the GPU's datasheet NVLink figure or
        ``--link-gbps``); without one the rule reports nothing.
    """
    out: list[Finding] = []
    peak = c.link_peak_gbps
    if not peak:
        return out
    for row in c.table:
        bus = row["busbw_p50_gbps"]
        if bus is None or row["bytes"] < th["min_bytes"] or row["name"] in ("send", "recv", "send_recv"):
            continue
        pct = 100.0 * bus / peak
        if pct >= th["min_busbw_pct"]:
            continue
        per_step = row["total_transfer_ns"] * (1 - pct / 100.0) / max(c.verdict.steps_with_collectives, 1)
        out.append(Finding(
            code="TC802", name="low-bus-bandwidth", severity=_severity(per_step, c.verdict.step_p50_ns),
            message=(f"{row['name']} {units.size(row['bytes'])} {row['dtype']}: busbw P50 {units.byte_rate(bus * 1e9)} = "
                     f"{units.pct(pct)} of the {units.byte_rate(peak * 1e9)} link peak (threshold "
                     f"{units.pct(th['min_busbw_pct'], None)})"),
            title=f"Raise the bus bandwidth of {row['name']} ({units.size(row['bytes'])})",
            recoverable_ns=int(per_step),
            estimate="transfer time per step beyond what the link peak would take",
            fix="check NCCL's transport (NCCL_DEBUG=INFO), bucket small collectives, check NIC/GPU affinity",
            location=f"{row['name']} group {row['group']} {row['bytes']} B {row['dtype']}",
            values={"busbw_gbps": bus, "link_peak_gbps": peak, "busbw_pct": round(pct, 3)},
        ))
    return out


TC803 = RuleInfo(
    "TC803", "compute-imbalance", "compute", "one rank computes clearly longer per step than the others",
    thresholds=(
        Threshold("min_modified_z", 3.5, "ratio",
                  "modified z-score (x - median) / (1.4826 MAD) from which a rank's compute is an outlier: "
                  "Iglewicz and Hoaglin's cut, robust to the outlier itself"),
    ),
)


def tc803_compute_imbalance(c: Any, th: Mapping[str, Any]) -> list[Finding]:
    """TC803 compute-imbalance: a rank computes clearly longer per step than the others.

    What it finds
        Ranks whose median per-step compute time has a modified z-score (x - median) / (1.4826 MAD)
        of at least ``min_modified_z`` against all ranks. A cluster rule: it needs two or more ranks.

    Why it matters
        In synchronous training every rank waits at the next collective for the slowest; the
        excess is lost on all the others.

    How to fix
        Even out the work: shard sizes, padding/bucketing by sequence length, MoE capacity,
        pipeline stage split; check the rank's GPU clocks and thermals.

    Example
        Rank 3 computes 41.2 ms per step against a median of 30.1 ms (z = 12.4).

    Thresholds
        Declared with their defaults, units and reasons in ``TC803.thresholds``
        (``traceclass explain TC803``); the imbalanced ranks of the cluster verdict use the same cut.
    """
    v = c.verdict
    med = float(np.median(v.compute_ns)) if len(v.compute_ns) else 0.0
    out = []
    for r in np.flatnonzero(v.z >= th["min_modified_z"]).tolist():
        excess = float(v.compute_ns[r] - med)
        out.append(Finding(
            code="TC803", name="compute-imbalance", severity=_severity(excess, v.step_p50_ns),
            message=(f"rank {c.ranks[r]} computes {units.duration(float(v.compute_ns[r]))} per step against a median of "
                     f"{units.duration(med)} (modified z = {v.z[r]:.1f} >= {th['min_modified_z']:g})"),
            title=f"Even out the work of rank {c.ranks[r]} with the other ranks",
            recoverable_ns=int(excess), estimate="compute per step beyond the median rank's",
            fix="even out the work across ranks (shards, sequence-length bucketing, MoE capacity, stage split)",
            location="rank compute imbalance",
            values={"rank": c.ranks[r], "compute_ns": float(v.compute_ns[r]), "median_ns": med, "z": float(v.z[r])},
        ))
    return out


CLUSTER_RULES: Sequence[tuple[RuleInfo, Callable[[Any, Mapping[str, Any]], list[Finding]]]] = (
    (TC801, tc801_collective_straggler),
    (TC802, tc802_low_bus_bandwidth),
    (TC803, tc803_compute_imbalance),
)
