"""Op groups: where the time goes, per (op name, input shapes, dtypes), with roofline points.

Ownership. Time is attributed to *owner* ops so that no FLOP or nanosecond counts twice:

* an op is *modeled* when the cost model knows it; a modeled op whose work a modeled
  descendant already accounts for (``aten::linear`` above ``aten::addmm``) is a *wrapper*;
* every op row's owner is its nearest ancestor-or-self that is a modeled non-wrapper op, or,
  when there is none, the row itself (an *unclassified* owner).

GPU traces: an owner instance's time is the union of the intervals of all GPU rows its
subtree launched (kernels on several streams are not double counted). GPU rows no op
launched are grouped by kernel name, or under the graph launch that replayed them. CPU-only
traces: each op's self time goes to its owner.

Labels: modeled ops get a roofline point; ops without a model but with kernels, and kernels
without an op, get a label from the kernel-name family, marked heuristic; collective ops
(``record_param_comms``, ``c10d::*``, ``nccl:*``) are ``communication``. Ops recorded without
dtypes (Nsight ``emit_nvtx`` ranges) take the dtype their kernels' names show, or fp32,
and say so (:mod:`traceclass.analysis.op_costs`). Work that starts inside warm-up steps is left out (steady state only).
"""

from __future__ import annotations

import dataclasses
import math
import re
from typing import Callable

import numpy as np

from traceclass import costmodel
from traceclass import timeline as tl
from traceclass.analysis import roof_choice
from traceclass.analysis.backlog import backlog_mask
from traceclass.analysis.devices import modal_device
from traceclass.analysis.kernel_families import FAMILY_ORDER, gpu_family_codes
from traceclass.analysis.op_costs import PairCosts, estimate_all, slices_by_key
from traceclass.analysis.roofline import COMMUNICATION, Point, Roof, classify, heuristic_point
from traceclass.model import GpuKind, OpInputs, Trace
from traceclass.model.dtypes import canonical_dtype
from traceclass.model.nesting import ancestors_until, group_ids
from traceclass.model.table import row_index_dtype

RoofFor = Callable[[int, str, str], Roof | None]  # (device index, precision, unit) -> Roof

_COMM_OP = re.compile(r"^(record_param_comms|c10d::|c10d_functional::|_c10d_functional::|nccl:|gloo:|"
                      r"ProcessGroup|DistributedDataParallel\.reducer|allreduce_|all_reduce)")


@dataclasses.dataclass(frozen=True)
class OpGroup:
    name: str
    shapes: str  # compact text; "" when not recorded
    dtype: str  # dominant input dtype ("" when unknown)
    kind: str  # "op" (has an op), "kernel" (no op: grouped by kernel), "graph" (graph replay)
    count: int  # owner instances (or kernels for kernel groups)
    kernels: int  # GPU rows launched
    total_ns: int  # GPU time (union per instance) on GPU traces; op time on CPU traces
    host_ns: int  # CPU time of the owner instances (inclusive)
    device: int  # device index, -1 host CPU
    family: str  # cost-model family or kernel family
    flops: float | None  # per instance
    bytes: float | None  # per instance
    precision: str
    unit: str
    note: str
    point: Point
    top_kernels: tuple[str, ...]  # most time-consuming kernel names of the group
    inputs_code: int  # code into trace.inputs, -1 none
    name_code: int  # code into trace.strings


@dataclasses.dataclass(frozen=True)
class OwnerTimes:
    """Time attributed to owner ops, held for the rows that have some: a column over every op
    would be mostly zeros (hundreds of MB at 10 GB of trace)."""

    rows: np.ndarray  # op rows with attributed time > 0, ascending
    ns: np.ndarray  # their attributed time

    @classmethod
    def from_column(cls, per_op: np.ndarray) -> "OwnerTimes":
        rows = np.flatnonzero(per_op)
        return cls(rows.astype(row_index_dtype(len(per_op))), per_op[rows])

    def of(self, op_rows: np.ndarray) -> np.ndarray:
        """Attributed time of each given op row (0 for rows with none)."""
        op_rows = np.asarray(op_rows)
        if len(self.rows) == 0:
            return np.zeros(len(op_rows), dtype=np.int64)
        k = np.minimum(np.searchsorted(self.rows, op_rows), len(self.rows) - 1)
        return np.where(self.rows[k] == op_rows, self.ns[k], 0)


@dataclasses.dataclass(frozen=True)
class OpAnalysis:
    groups: list[OpGroup]
    total_ns: int  # denominator for shares: device busy (GPU) or op time (CPU), steady state
    unmodeled_names: dict[str, int]  # op name -> instance count, for ops with no cost model
    owner_of_op: np.ndarray  # owner row per op row
    owner_time: OwnerTimes  # time attributed to each owner op row
    gpu_owner: np.ndarray  # owner op row per gpu row (-1 none)
    costs: dict[tuple[int, int], costmodel.OpCost | None]
    op_group: np.ndarray  # per op row: index into groups when the row is an owner, else -1
    gpu_group: np.ndarray  # per gpu row: index into groups, -1 for sync rows
    excluded_warmup: int = 0  # owner instances / GPU rows left out as warm-up


@dataclasses.dataclass(frozen=True)
class Limits:
    """Latency thresholds (ns) for the labels: see :func:`traceclass.analysis.roofline.classify`."""

    floor_ns: float
    call_ns: float = math.inf


@dataclasses.dataclass
class _Env:
    trace: Trace
    costs: dict[tuple[int, int], costmodel.OpCost | None]
    roof_for: RoofFor
    limits: Limits
    inferred: dict[int, str]  # inputs code -> note on how its dtype was inferred
    fam_code: np.ndarray  # int8 family index per gpu row (kernel_families.FAMILY_ORDER)
    paths: roof_choice.PathCache | None = None  # kernel name -> (precision, unit) it ran on


def _dominant_dtype(inputs: OpInputs | None) -> str:
    if inputs is None:
        return ""
    for d, t in zip(inputs.dims, inputs.dtypes):
        if d is not None:
            c = canonical_dtype(t)
            if c is not None:
                return c
    return ""


def analyze_ops(trace: Trace, roof_for: RoofFor, latency_floor_ns: float, cpu_latency_floor_ns: float,
                latency_call_ns: float = math.inf, cpu_latency_call_ns: float = math.inf,
                warmup_windows: np.ndarray | None = None, cpu_roof: bool = True,
                family_codes: np.ndarray | None = None) -> OpAnalysis:
    """Op groups of the trace. ``warmup_windows`` is an (n, 2) array of warm-up step ranges whose
    work is left out; ``cpu_roof`` False leaves host ops unlabelled (ops of a GPU program whose
    kernels were not captured must not be judged against a CPU)."""
    ops = trace.ops
    n_ops = len(ops)
    pc = estimate_all(trace)
    costs, inferred = pc.costs, pc.inferred
    modeled = pc.ok[pc.pair_of_op]
    parent = ops.parent
    demoted = _wrappers(parent, modeled, pc)
    owner_mask = modeled & ~demoted
    del demoted
    # row numbers as int32 where the table allows: owner_of_op and the group columns stay
    # cached for every rule (op-sized: hundreds of MB as int64 at 10 GB of trace)
    row_dtype = row_index_dtype(n_ops)
    owner_of_op = ancestors_until(parent, np.arange(n_ops, dtype=row_dtype), owner_mask).astype(row_dtype) \
        if n_ops else np.zeros(0, row_dtype)
    self_owned = np.flatnonzero(owner_of_op < 0)
    owner_of_op[self_owned] = self_owned
    del self_owned

    unmodeled: dict[str, int] = {}
    if n_ops:
        un = (owner_of_op == np.arange(n_ops, dtype=row_dtype)) & ~modeled
        codes, cnt = np.unique(ops.name[un], return_counts=True)
        unmodeled = {trace.strings[c]: int(k) for c, k in zip(codes.tolist(), cnt.tolist())}

    gpu_trace = len(trace.gpu) > 0
    limits = (Limits(latency_floor_ns, latency_call_ns) if gpu_trace
              else Limits(cpu_latency_floor_ns, cpu_latency_call_ns))
    if not gpu_trace and not cpu_roof:
        roof_for = _no_roof
    codes = gpu_family_codes(trace) if family_codes is None else family_codes
    env = _Env(trace, costs, roof_for, limits, inferred, codes,
               roof_choice.PathCache(trace))
    windows = np.zeros((0, 2), dtype=np.int64) if warmup_windows is None else np.asarray(warmup_windows)
    if gpu_trace:
        return _gpu_groups(env, owner_mask, owner_of_op, unmodeled, windows)
    return _cpu_groups(env, owner_mask, owner_of_op, unmodeled, windows)


def _no_roof(device: int, precision: str, unit: str) -> Roof | None:
    return None


def _in_windows(t: np.ndarray, windows: np.ndarray) -> np.ndarray:
    """Whether each time lies in one of the (sorted or not) [start, end] windows."""
    if len(windows) == 0 or len(t) == 0:
        return np.zeros(len(t), dtype=bool)
    w = tl.merge(windows[:, 0], windows[:, 1] + 1)
    k = np.searchsorted(w[0], t, side="right") - 1
    return (k >= 0) & (t < w[1][np.maximum(k, 0)])


def _gpu_groups(env: _Env, modeled: np.ndarray, owner_of_op: np.ndarray, unmodeled: dict[str, int],
                windows: np.ndarray) -> OpAnalysis:
    trace = env.trace
    ops, gpu, api = trace.ops, trace.gpu, trace.api
    active = gpu.kind != GpuKind.SYNC
    # steady state: a GPU row is warm-up when its launch (or, without one, its start) is
    launched_at = np.where(gpu.api >= 0, api.start_ns[np.maximum(gpu.api, 0)] if len(api) else gpu.start_ns,
                           gpu.start_ns)
    warm = _in_windows(launched_at, windows) & active
    del launched_at
    # work queued before the profiler window (the previous iteration's backlog) is no step's work
    warm |= backlog_mask(trace) & active
    use = active & ~warm
    g_owner = np.full(len(gpu), -1, dtype=owner_of_op.dtype)
    has_op = use & (gpu.op >= 0)
    g_owner[has_op] = owner_of_op[gpu.op[has_op]]
    rows = np.flatnonzero(g_owner >= 0)
    owner_time = np.zeros(len(ops), dtype=np.int64)
    if len(rows):
        owners_u, lengths = tl.union_length_by_group(g_owner[rows], gpu.start_ns[rows], gpu.end_ns[rows])
        owner_time[owners_u] = lengths
        del owners_u, lengths
    groups: list[OpGroup] = []
    members_of: list[tuple[np.ndarray, np.ndarray]] = []  # (owner op rows, gpu rows) per group
    owners = np.flatnonzero(owner_time > 0)
    if len(owners):
        inv, uk = _group_keys(ops, owners, modeled)
        grp_of_op = np.full(len(ops), -1, dtype=np.int32)
        grp_of_op[owners] = inv
        g_grp = grp_of_op[g_owner[rows]]
        del grp_of_op  # op-sized: the slices below are all that is needed of it
        row_slices = slices_by_key(g_grp, rows)
        mem_slices = slices_by_key(inv, owners)
        del g_grp, inv
        for k, (nc, ic, leaf) in enumerate(uk.tolist()):
            members = mem_slices.get(k, np.zeros(0, np.int64))
            sel = row_slices.get(k, np.zeros(0, np.int64))
            dev = modal_device(gpu.device[sel])
            groups.append(_op_group(env, nc, ic, leaf, members, owner_time, sel, dev))
            members_of.append((members, sel))
    del rows, owners
    orphan = use & (g_owner < 0)
    if orphan.any():
        graph_rows = np.flatnonzero(orphan & gpu.graph)
        if len(graph_rows):
            launch_names = np.where(gpu.api[graph_rows] >= 0, api.name[np.maximum(gpu.api[graph_rows], 0)], -1)
            for ln, by_launch in slices_by_key(launch_names, graph_rows).items():
                # one group per kernel family, so replayed work gets its family's label
                fam = env.fam_code[by_launch].astype(np.int64)
                for fc, sel in slices_by_key(fam, by_launch).items():
                    label = f"graph replay ({trace.strings[ln] or 'graph launch'}): {FAMILY_ORDER[fc]} kernels"
                    groups.append(_kernel_group(env, sel, label, "graph"))
                    members_of.append((np.zeros(0, np.int64), sel))
        bare_rows = np.flatnonzero(orphan & ~gpu.graph)
        for nc, sel in slices_by_key(gpu.name[bare_rows], bare_rows).items():
            groups.append(_kernel_group(env, sel, trace.strings[nc], "kernel"))
            members_of.append((np.zeros(0, np.int64), sel))
    groups, op_group, gpu_group = _sorted_groups(groups, members_of, len(ops), len(gpu))
    busy = tl.union_length(gpu.start_ns[use], gpu.end_ns[use])
    return OpAnalysis(groups, busy, unmodeled, owner_of_op, OwnerTimes.from_column(owner_time), g_owner, env.costs, op_group,
                      gpu_group, excluded_warmup=int(warm.sum()))


def _group_keys(ops, owners: np.ndarray, modeled: np.ndarray) -> tuple[np.ndarray, np.ndarray]:  # type: ignore[no-untyped-def]
    """Group id per owner row and the (name, inputs, modeled) key of each group."""
    inv, n_groups = group_ids(ops.name[owners].astype(np.int64), ops.inputs[owners].astype(np.int64),
                              modeled[owners].astype(np.int64))
    rep = np.zeros(n_groups, dtype=np.int64)
    rep[inv[::-1]] = owners[::-1]
    uk = np.stack([ops.name[rep].astype(np.int64), ops.inputs[rep].astype(np.int64),
                   modeled[rep].astype(np.int64)], 1)
    return inv, uk


def _sorted_groups(groups, members_of, n_ops, n_gpu):  # type: ignore[no-untyped-def]
    """Groups by descending time, with the row -> group index arrays to match."""
    order = sorted(range(len(groups)), key=lambda k: -groups[k].total_ns)
    # group numbers are far below 2**31 (one per distinct op and shapes)
    op_group = np.full(n_ops, -1, dtype=np.int32)
    gpu_group = np.full(n_gpu, -1, dtype=np.int32)
    for new, old in enumerate(order):
        ops_rows, gpu_rows = members_of[old]
        op_group[ops_rows] = new
        if gpu_rows is not None and len(gpu_rows):
            gpu_group[gpu_rows] = new
    return [groups[k] for k in order], op_group, gpu_group


def _wrappers(parent: np.ndarray, modeled: np.ndarray, pc: PairCosts) -> np.ndarray:
    """Modeled ops whose work a modeled descendant already accounts for.

    ``aten::linear`` over ``aten::addmm`` is a wrapper (the child has all its FLOPs);
    ``aten::addmm`` over a small ``aten::copy_`` is not (the child covers a sliver of it).
    A descendant covers an ancestor when it has at least half the ancestor's FLOPs, or, for
    zero-FLOP ops, half its bytes.
    """
    demoted = np.zeros(len(parent), dtype=bool)
    desc = np.flatnonzero(modeled)
    cur = parent[desc]
    while len(desc):
        live = cur >= 0
        desc, cur = desc[live], cur[live]
        if not len(desc):
            break
        pa, pd = pc.pair_of_op[cur], pc.pair_of_op[desc]
        anc_flops = pc.flops[pa]
        covers = modeled[cur] & np.where(anc_flops > 0, pc.flops[pd] >= 0.5 * anc_flops,
                                         pc.bytes[pd] >= 0.5 * pc.bytes[pa])
        del pa, pd, anc_flops
        demoted[cur[covers]] = True
        cur = parent[cur]
    return demoted


def _dominant_family(env: _Env, sel: np.ndarray | None) -> str:
    if sel is None or not len(sel):
        return ""
    return FAMILY_ORDER[int(np.bincount(env.fam_code[sel].astype(np.int64)).argmax())]


def _op_group(env: _Env, nc: int, ic: int, leaf: int, members: np.ndarray, owner_time: np.ndarray,
              gpu_sel: np.ndarray | None, dev: int) -> OpGroup:
    trace = env.trace
    ops = trace.ops
    name = trace.strings[nc]
    cost = env.costs.get((nc, ic))
    wrapper = not leaf and cost is not None
    if wrapper:
        cost = None
    inputs = trace.inputs[ic]
    count = len(members)
    total = int(owner_time[members].sum())
    per = total / count if count else 0.0
    family = _dominant_family(env, gpu_sel)
    notes = []
    flops = nbytes = None
    prec = unit = ""
    if cost is not None:
        family, prec, unit = cost.family, cost.precision, cost.unit
        flops, nbytes = cost.flops, cost.bytes
        notes.append(cost.note)
        judged = _judge(env, cost, per, dev, members, gpu_sel, count)
        point, prec, unit = judged.point, judged.precision, judged.unit
        if judged.bytes is not None:
            flops, nbytes = judged.flops, judged.bytes
        notes.extend(judged.notes)
    elif _COMM_OP.match(name) or family == "comm":
        point = dataclasses.replace(classify(0.0, 0.0, per, None, 0.0), bound=COMMUNICATION)
        family = "comm"
    elif gpu_sel is not None and len(gpu_sel) and family:
        k_mean = float((trace.gpu.end_ns[gpu_sel] - trace.gpu.start_ns[gpu_sel]).mean())
        point = heuristic_point(family, k_mean, env.limits.floor_ns)
        if point.heuristic:
            notes.append("no cost model for this op: label from its kernels' names")
    else:
        point = classify(0.0, 0.0, per, None, env.limits.floor_ns)
    if wrapper:
        notes.append("wrapper op: its FLOPs are counted in the child op that does the work; this row "
                     "holds only its own overhead")
    return OpGroup(
        name=name,
        shapes=inputs.label() if inputs is not None else "",
        dtype=_dominant_dtype(inputs) or (_inferred_dtype(env, ic) if ic in env.inferred else ""),
        kind="op",
        count=count,
        kernels=len(gpu_sel) if gpu_sel is not None else 0,
        total_ns=total,
        host_ns=int((ops.end_ns[members] - ops.start_ns[members]).sum()),
        device=dev,
        family=family,
        flops=flops,
        bytes=nbytes,
        precision=prec,
        unit=unit,
        note="; ".join(n for n in notes if n),
        point=point,
        top_kernels=_top_kernels(trace, gpu_sel) if gpu_sel is not None else (),
        inputs_code=ic,
        name_code=nc,
    )


def _judge(env: _Env, cost: costmodel.OpCost, per: float, dev: int, members: np.ndarray,
           gpu_sel: np.ndarray | None, count: int) -> roof_choice.Judged:
    """The roof the group's work ran against (see :mod:`traceclass.analysis.roof_choice`)."""
    floor, call = env.limits.floor_ns, env.limits.call_ns
    if gpu_sel is not None and len(gpu_sel):
        copied = roof_choice.copy_judgement(env.trace, gpu_sel, count, per, dev, env.roof_for, floor, call)
        if copied is not None:
            return copied if copied.unit != "vector" else dataclasses.replace(copied, precision=cost.precision)
        path = roof_choice.dominant_path(env.paths, env.fam_code, gpu_sel) if env.paths is not None else None
        return roof_choice.judge_op(cost.flops, cost.bytes, cost.precision, cost.unit, cost.family, per, dev, path,
                                    env.roof_for, floor, call)
    if dev >= 0:
        return roof_choice.judge_op(cost.flops, cost.bytes, cost.precision, cost.unit, cost.family, per, dev, None,
                                    env.roof_for, floor, call)
    return roof_choice.judge_cpu_op(env.trace, cost.flops, cost.bytes, cost.precision, cost.unit, per, members,
                                    env.roof_for, floor, call)


def _inferred_dtype(env: _Env, ic: int) -> str:
    how = env.inferred.get(ic, "")
    m = re.match(r"dtype (\w+) read", how)
    return f"{m.group(1)}?" if m else "fp32?"


def _top_kernels(trace: Trace, sel: np.ndarray, k: int = 3) -> tuple[str, ...]:
    """Names of the ``k`` kernels with most time among GPU rows ``sel`` (index array)."""
    gpu = trace.gpu
    if len(sel) == 0:
        return ()
    names = gpu.name[sel]
    dur = (gpu.end_ns[sel] - gpu.start_ns[sel]).astype(np.float64)
    u, inv = np.unique(names, return_inverse=True)
    tot = np.bincount(inv.reshape(-1), weights=dur)
    top = u[np.argsort(-tot)[:k]]
    return tuple(trace.strings[c] for c in top.tolist())


def _kernel_group(env: _Env, sel: np.ndarray, label: str, kind: str) -> OpGroup:
    trace = env.trace
    gpu = trace.gpu
    s, e = gpu.start_ns[sel], gpu.end_ns[sel]
    total = tl.union_length(s, e)
    n = len(sel)
    count = len(np.unique(gpu.api[sel])) if kind == "graph" else n
    family = _dominant_family(env, sel)
    dev = modal_device(gpu.device[sel])
    per = total / max(count, 1)
    nbytes = None
    precision = ""
    if kind == "graph":
        point = heuristic_point(family, float((e - s).mean()) if n else 0.0, env.limits.floor_ns)
        path = roof_choice.dominant_path(env.paths, env.fam_code, sel) if env.paths is not None else None
        precision = path[0] if path else ""
        note = ("kernels replayed by a graph launch, grouped by kernel family: label from the family (heuristic); "
                "per-op attribution needs the capture trace (--graph-capture)")
    else:
        point = heuristic_point(family, float((e - s).mean()) if n else 0.0, env.limits.floor_ns)
        note = "no op recorded; label from the kernel name"
    host = False
    judged = (roof_choice.copy_judgement(trace, sel, count, per, dev, env.roof_for, env.limits.floor_ns,
                                         env.limits.call_ns) if kind == "kernel" else None)
    if judged is not None:
        # copies carry their byte counts: judged against the link they crossed, measured
        point, nbytes, host = judged.point, judged.bytes, judged.unit == "link"
        note = "; ".join(judged.notes)
    return OpGroup(
        name=label,
        shapes="",
        dtype="",
        kind=kind,
        count=count,
        kernels=n,
        total_ns=total,
        host_ns=0,
        device=dev,
        family=family,
        flops=0.0 if nbytes is not None else None,
        bytes=nbytes,
        precision=precision,
        unit="link" if host else "",
        note=note,
        point=point,
        top_kernels=_top_kernels(trace, sel),
        inputs_code=-1,
        name_code=-1,
    )


def _cpu_groups(env: _Env, modeled: np.ndarray, owner_of_op: np.ndarray, unmodeled: dict[str, int],
                windows: np.ndarray) -> OpAnalysis:
    trace = env.trace
    ops = trace.ops
    n = len(ops)
    if n == 0:
        empty = np.zeros(0, np.int64)
        return OpAnalysis([], 0, unmodeled, owner_of_op, OwnerTimes.from_column(empty), empty, env.costs, empty, empty)
    dur = ops.end_ns - ops.start_ns
    child_sum = np.zeros(n, dtype=np.int64)
    has_parent = ops.parent >= 0
    np.add.at(child_sum, ops.parent[has_parent], dur[has_parent])
    self_t = np.maximum(dur - child_sum, 0)
    warm = _in_windows(ops.start_ns, windows)
    self_t = np.where(warm, 0, self_t)
    is_owner = owner_of_op == np.arange(n)
    # every op's self time goes to its owner: a work op keeps its inclusive time minus the
    # nested work ops under it
    owner_time = np.bincount(owner_of_op, weights=self_t.astype(np.float64), minlength=n)
    owner_time = np.rint(owner_time).astype(np.int64)
    owners = np.flatnonzero(is_owner & (owner_time > 0) & ~warm)
    groups: list[OpGroup] = []
    members_of: list[tuple[np.ndarray, np.ndarray]] = []
    if len(owners):
        inv, uk = _group_keys(ops, owners, modeled)
        mem_slices = slices_by_key(inv, owners)
        for k, (nc, ic, leaf) in enumerate(uk.tolist()):
            members = mem_slices[k]
            groups.append(_op_group(env, nc, ic, leaf, members, owner_time, None, -1))
            members_of.append((members, np.zeros(0, np.int64)))
    groups, op_group, gpu_group = _sorted_groups(groups, members_of, n, 0)
    top_level = (ops.parent < 0) & ~warm
    total = int(dur[top_level].sum())
    return OpAnalysis(groups, total, unmodeled, owner_of_op, OwnerTimes.from_column(owner_time), np.zeros(0, np.int64), env.costs,
                      op_group, gpu_group, excluded_warmup=int((warm & is_owner).sum()))
