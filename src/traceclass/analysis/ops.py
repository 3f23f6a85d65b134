"""Op groups: where the time goes, per (op name, input shapes, dtypes), with roofline points.

Ownership. Time is attributed to *owner* ops so that no FLOP or nanosecond counts twice:

* an op is *modeled* when the cost model knows it; a modeled op with a modeled descendant
  (``aten::linear`` above ``aten::addmm``) is not an owner, its leaf-most modeled descendant is;
* every op row's owner is its nearest ancestor-or-self that is a leaf-most modeled op, or,
  when there is none, the row itself (an *unclassified* owner).

GPU traces: an owner instance's time is the union of the intervals of all GPU rows its
subtree launched (kernels on several streams are not double counted). GPU rows no op
launched are grouped by kernel name, or under the graph launch that replayed them, and get a
name-family label marked heuristic. CPU-only traces: a modeled owner's time is its inclusive
duration; an unclassified owner's time is its self time (its children are owners of their own).
"""

from __future__ import annotations

import dataclasses
from typing import Callable

import numpy as np

from traceclass import costmodel
from traceclass import timeline as tl
from traceclass.analysis.kernel_families import gpu_families
from traceclass.analysis.roofline import Point, Roof, classify, heuristic_point
from traceclass.model import CopyKind, GpuKind, Trace
from traceclass.model.dtypes import canonical_dtype
from traceclass.model.nesting import ancestors_until, group_ids

RoofFor = Callable[[int, str, str], Roof | None]  # (device index, precision, unit) -> Roof


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
class OpAnalysis:
    groups: list[OpGroup]
    total_ns: int  # denominator for shares: device busy (GPU) or op time (CPU)
    unmodeled_names: dict[str, int]  # op name -> instance count, for ops with no cost model
    owner_of_op: np.ndarray  # owner row per op row
    owner_time_ns: np.ndarray  # per op row: time attributed when the row is an owner, else 0
    gpu_owner: np.ndarray  # owner op row per gpu row (-1 none)
    costs: dict[tuple[int, int], costmodel.OpCost | None]
    op_group: np.ndarray  # per op row: index into groups when the row is an owner, else -1
    gpu_group: np.ndarray  # per gpu row: index into groups, -1 for sync rows


def _dominant_dtype(inputs) -> str:  # type: ignore[no-untyped-def]
    if inputs is None:
        return ""
    for d, t in zip(inputs.dims, inputs.dtypes):
        if d is not None:
            c = canonical_dtype(t)
            if c is not None:
                return c
    return ""


def analyze_ops(trace: Trace, roof_for: RoofFor, latency_floor_ns: float,
                cpu_latency_floor_ns: float) -> OpAnalysis:
    ops = trace.ops
    n_ops = len(ops)
    costs: dict[tuple[int, int], costmodel.OpCost | None] = {}
    modeled = np.zeros(n_ops, dtype=bool)
    flops_row = np.zeros(n_ops)
    bytes_row = np.zeros(n_ops)
    if n_ops:
        inv, n_pairs = group_ids(ops.name.astype(np.int64), ops.inputs.astype(np.int64))
        first = np.zeros(n_pairs, dtype=np.int64)
        first[inv[::-1]] = np.arange(n_ops)[::-1]  # a representative row per pair
        pair = np.stack([ops.name[first].astype(np.int64), ops.inputs[first].astype(np.int64)], 1)
        ok = np.zeros(len(pair), dtype=bool)
        fl = np.zeros(len(pair))
        by = np.zeros(len(pair))
        for k, (nc, ic) in enumerate(pair.tolist()):
            c = costmodel.estimate(trace.strings[nc], trace.inputs[ic])
            costs[(nc, ic)] = c
            ok[k] = c is not None
            if c is not None:
                fl[k], by[k] = c.flops, c.bytes
        modeled = ok[inv]
        flops_row, bytes_row = fl[inv], by[inv]
    parent = ops.parent.astype(np.int64)
    demoted = _wrappers(parent, modeled, flops_row, bytes_row)
    owner_mask = modeled & ~demoted
    owner_of_op = ancestors_until(parent, np.arange(n_ops), owner_mask) if n_ops else np.zeros(0, np.int64)
    owner_of_op = np.where(owner_of_op >= 0, owner_of_op, np.arange(n_ops))

    unmodeled: dict[str, int] = {}
    if n_ops:
        un = owner_of_op == np.arange(n_ops)
        un &= ~modeled
        codes, cnt = np.unique(ops.name[un], return_counts=True)
        unmodeled = {trace.strings[c]: int(k) for c, k in zip(codes.tolist(), cnt.tolist())}

    # a modeled op above another modeled op (aten::linear over aten::addmm) owns only what its
    # children do not: its self time and any GPU work it launched itself, without FLOPs
    if len(trace.gpu):
        return _gpu_groups(trace, costs, owner_mask, owner_of_op, roof_for, latency_floor_ns, unmodeled)
    return _cpu_groups(trace, costs, owner_mask, owner_of_op, roof_for, cpu_latency_floor_ns, unmodeled)


def _gpu_groups(trace, costs, modeled, owner_of_op, roof_for, floor_ns, unmodeled):  # type: ignore[no-untyped-def]
    ops, gpu = trace.ops, trace.gpu
    fam = gpu_families(trace)
    active = gpu.kind != GpuKind.SYNC
    g_owner = np.full(len(gpu), -1, dtype=np.int64)
    has_op = active & (gpu.op >= 0)
    g_owner[has_op] = owner_of_op[gpu.op[has_op]]
    # owner-instance GPU time: union of its rows' intervals
    rows = np.flatnonzero(g_owner >= 0)
    owner_time = np.zeros(len(ops), dtype=np.int64)
    if len(rows):
        owners_u, lengths = tl.union_length_by_group(g_owner[rows], gpu.start_ns[rows], gpu.end_ns[rows])
        owner_time[owners_u] = lengths
    groups: list[OpGroup] = []
    members_of: list[tuple[np.ndarray, np.ndarray]] = []  # (owner op rows, gpu rows) per group
    # op-owned groups: group id per owner op, then per GPU row through its owner
    owners = np.flatnonzero(owner_time > 0)
    if len(owners):
        inv, n_groups = group_ids(ops.name[owners].astype(np.int64), ops.inputs[owners].astype(np.int64),
                                  modeled[owners].astype(np.int64))
        rep = np.zeros(n_groups, dtype=np.int64)
        rep[inv[::-1]] = owners[::-1]
        uk = np.stack([ops.name[rep].astype(np.int64), ops.inputs[rep].astype(np.int64),
                       modeled[rep].astype(np.int64)], 1)
        grp_of_op = np.full(len(ops), -1, dtype=np.int64)
        grp_of_op[owners] = inv
        g_rows = np.flatnonzero((g_owner >= 0) & active)
        g_grp = grp_of_op[g_owner[g_rows]]
        row_slices = _slices(g_grp, g_rows)
        mem_slices = _slices(inv, owners)
        for k, (nc, ic, leaf) in enumerate(uk.tolist()):
            members = mem_slices.get(k, np.zeros(0, np.int64))
            sel = row_slices.get(k, np.zeros(0, np.int64))
            dev = int(np.bincount(gpu.device[sel]).argmax()) if len(sel) else -1
            groups.append(_make_group(trace, nc, ic, costs.get((nc, ic)) if leaf else None, members, owner_time, sel,
                                      fam, dev, roof_for, floor_ns, "op",
                                      wrapper=not leaf and costs.get((nc, ic)) is not None))
            members_of.append((members, sel))
    # GPU rows with no op: graph replays and bare kernels
    orphan = active & (g_owner < 0)
    if orphan.any():
        api = trace.api
        graph_rows = np.flatnonzero(orphan & gpu.graph)
        if len(graph_rows):
            launch_names = np.where(gpu.api[graph_rows] >= 0, api.name[np.maximum(gpu.api[graph_rows], 0)], -1)
            for ln, sel in _slices(launch_names, graph_rows).items():
                label = f"graph replay ({trace.strings[ln] or 'graph launch'})"
                groups.append(_kernel_group(trace, sel, fam, label, "graph", floor_ns, count_by_api=True))
                members_of.append((np.zeros(0, np.int64), sel))
        bare_rows = np.flatnonzero(orphan & ~gpu.graph)
        for nc, sel in _slices(gpu.name[bare_rows], bare_rows).items():
            groups.append(_kernel_group(trace, sel, fam, trace.strings[nc], "kernel", floor_ns, roof_for=roof_for))
            members_of.append((np.zeros(0, np.int64), sel))
    groups, op_group, gpu_group = _sorted_groups(groups, members_of, len(ops), len(gpu))
    busy = tl.union_length(gpu.start_ns[active], gpu.end_ns[active])
    return OpAnalysis(groups, busy, unmodeled, owner_of_op, owner_time, g_owner, costs, op_group, gpu_group)


def _sorted_groups(groups, members_of, n_ops, n_gpu):  # type: ignore[no-untyped-def]
    """Groups by descending time, with the row -> group index arrays to match."""
    order = sorted(range(len(groups)), key=lambda k: -groups[k].total_ns)
    op_group = np.full(n_ops, -1, dtype=np.int64)
    gpu_group = np.full(n_gpu, -1, dtype=np.int64)
    for new, old in enumerate(order):
        ops_rows, gpu_rows = members_of[old]
        op_group[ops_rows] = new
        if gpu_rows is not None and len(gpu_rows):
            gpu_group[gpu_rows] = new
    return [groups[k] for k in order], op_group, gpu_group


def _wrappers(parent: np.ndarray, modeled: np.ndarray, flops: np.ndarray, nbytes: np.ndarray) -> np.ndarray:
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
        anc_flops = flops[cur]
        covers = modeled[cur] & np.where(anc_flops > 0, flops[desc] >= 0.5 * anc_flops,
                                         nbytes[desc] >= 0.5 * nbytes[cur])
        demoted[cur[covers]] = True
        cur = parent[cur]
    return demoted


def _slices(keys: np.ndarray, rows: np.ndarray) -> dict[int, np.ndarray]:
    """Rows grouped by key: {key: rows with that key}, in one sort."""
    if len(rows) == 0:
        return {}
    order = np.argsort(keys, kind="stable")
    ks, rs = keys[order], rows[order]
    cut = np.flatnonzero(np.diff(ks)) + 1
    return {int(ks[lo]): rs[lo:hi] for lo, hi in zip(np.r_[0, cut], np.r_[cut, len(rs)])}


def _make_group(trace, nc, ic, cost, members, owner_time, gpu_sel, fam, dev, roof_for, floor_ns, kind,  # type: ignore[no-untyped-def]
                wrapper=False):
    ops = trace.ops
    inputs = trace.inputs[ic]
    count = len(members)
    total = int(owner_time[members].sum())
    host = int((ops.end_ns[members] - ops.start_ns[members]).sum())
    kern_names = _top_kernels(trace, gpu_sel) if gpu_sel is not None else ()
    n_k = len(gpu_sel) if gpu_sel is not None else 0
    per = total / count if count else 0.0
    if cost is not None:
        roof = roof_for(dev, cost.precision, cost.unit)
        point = classify(cost.flops, cost.bytes, per, roof, floor_ns)
        family, prec, unit, note = cost.family, cost.precision, cost.unit, cost.note
        flops, nbytes = cost.flops, cost.bytes
    else:
        if gpu_sel is not None and len(gpu_sel):
            fams, w = np.unique(fam[gpu_sel], return_counts=True)
            family = str(fams[np.argmax(w)])
        else:
            family = ""
        point = classify(0.0, 0.0, per, None, floor_ns)
        prec = unit = ""
        note = ("wrapper op: its FLOPs are counted in the child op that does the work; this row "
                "holds only its own overhead") if wrapper else ""
        flops = nbytes = None
    return OpGroup(
        name=trace.strings[nc],
        shapes=inputs.label() if inputs is not None else "",
        dtype=_dominant_dtype(inputs),
        kind=kind,
        count=count,
        kernels=n_k,
        total_ns=total,
        host_ns=host,
        device=dev,
        family=family,
        flops=flops,
        bytes=nbytes,
        precision=prec,
        unit=unit,
        note=note,
        point=point,
        top_kernels=kern_names,
        inputs_code=ic,
        name_code=nc,
    )


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


def _kernel_group(trace, sel, fam, label, kind, floor_ns, count_by_api=False, roof_for=None):  # type: ignore[no-untyped-def]
    gpu = trace.gpu
    s, e = gpu.start_ns[sel], gpu.end_ns[sel]
    total = tl.union_length(s, e)
    n = len(sel)
    count = len(np.unique(gpu.api[sel])) if count_by_api else n
    fams, w = np.unique(fam[sel], return_counts=True)
    family = str(fams[np.argmax(w)])
    dev = int(np.bincount(gpu.device[sel]).argmax())
    per = total / max(count, 1)
    point = heuristic_point(family if kind == "kernel" else "", (e - s).mean() if n else 0.0, floor_ns)
    nbytes = None
    note = ("no op recorded; label from the kernel name" if kind == "kernel" else
            "kernels replayed by a graph launch: per-op attribution is not in the trace")
    k = gpu.kind[sel]
    if roof_for is not None and kind == "kernel" and ((k == GpuKind.MEMCPY) | (k == GpuKind.MEMSET)).all():
        b = gpu.bytes[sel]
        if (b >= 0).all():
            # copies carry their byte counts: judge them against the link (host copies) or
            # device memory, measured rather than guessed from the name
            nbytes = float(b.sum()) / max(count, 1)
            ck = gpu.copy_kind[sel]
            host = np.isin(ck, (CopyKind.HTOD, CopyKind.DTOH, CopyKind.UVM_HTOD, CopyKind.UVM_DTOH)).all()
            roof = roof_for(dev, "", "link" if host else "vector")
            point = classify(0.0, nbytes, per, roof, floor_ns)
            note = ("bytes from the copy records; roof = host link bandwidth" if host
                    else "bytes from the copy records; roof = device memory bandwidth")
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
        family=family if kind == "kernel" else "graph",
        flops=0.0 if nbytes is not None else None,
        bytes=nbytes,
        precision="",
        unit="link" if (nbytes is not None and "host link" in note) else "",
        note=note,
        point=point if kind == "kernel" else classify(0.0, 0.0, per, None, floor_ns),
        top_kernels=_top_kernels(trace, sel),
        inputs_code=-1,
        name_code=-1,
    )


def _cpu_groups(trace, costs, modeled, owner_of_op, roof_for, floor_ns, unmodeled):  # type: ignore[no-untyped-def]
    ops = trace.ops
    n = len(ops)
    if n == 0:
        empty = np.zeros(0, np.int64)
        return OpAnalysis([], 0, unmodeled, owner_of_op, empty, empty, costs, empty, empty)
    dur = ops.end_ns - ops.start_ns
    child_sum = np.zeros(n, dtype=np.int64)
    has_parent = ops.parent >= 0
    np.add.at(child_sum, ops.parent[has_parent], dur[has_parent])
    self_t = np.maximum(dur - child_sum, 0)
    is_owner = owner_of_op == np.arange(n)
    # every op's self time goes to its owner: a work op keeps its inclusive time minus the
    # nested work ops under it
    owner_time = np.bincount(owner_of_op, weights=self_t.astype(np.float64), minlength=n)
    owner_time = np.rint(owner_time).astype(np.int64)
    owners = np.flatnonzero(is_owner & (owner_time > 0))
    groups: list[OpGroup] = []
    members_of: list[tuple[np.ndarray, np.ndarray]] = []
    if len(owners):
        inv, n_groups = group_ids(ops.name[owners].astype(np.int64), ops.inputs[owners].astype(np.int64),
                                  modeled[owners].astype(np.int64))
        rep = np.zeros(n_groups, dtype=np.int64)
        rep[inv[::-1]] = owners[::-1]
        uk = np.stack([ops.name[rep].astype(np.int64), ops.inputs[rep].astype(np.int64),
                       modeled[rep].astype(np.int64)], 1)
        mem_slices = _slices(inv, owners)
        for k, (nc, ic, leaf) in enumerate(uk.tolist()):
            members = mem_slices[k]
            groups.append(_make_group(trace, nc, ic, costs.get((nc, ic)) if leaf else None, members, owner_time, None,
                                      None, -1, roof_for, floor_ns, "op",
                                      wrapper=not leaf and costs.get((nc, ic)) is not None))
            members_of.append((members, np.zeros(0, np.int64)))
    groups, op_group, gpu_group = _sorted_groups(groups, members_of, n, 0)
    top_level = ops.parent < 0
    total = int(dur[top_level].sum())
    return OpAnalysis(groups, total, unmodeled, owner_of_op, owner_time, np.zeros(0, np.int64), costs,
                      op_group, gpu_group)
