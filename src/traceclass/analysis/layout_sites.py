"""Layout work in a trace, grouped by site: transposing copies, format mismatches, layout kernels.

Columnar over ``trace.ops``: copy ops and convolutions are judged once per distinct (name,
inputs) signature with :mod:`traceclass.analysis.layout`, then broadcast to rows.

* A *transposing copy* is the outermost op of a chain of copy/wrapper ops (``aten::reshape >
  aten::clone > aten::copy_``) holding a copy that reorders memory. Its caller is the op above
  the chain (``aten::matmul``, ``aten::_convolution``).
* A *mismatch* is the outermost convolution op (``aten::conv2d`` over ``aten::convolution``...)
  of a chain in which some convolution's input and weight differ in memory format; the
  transposing copies and layout kernels under it are its cost.
* *Layout kernels* are GPU rows of kernel family ``layout`` launched by neither.

Time: on GPU traces, the union of the GPU rows an instance launched (its subtree's kernels); an
instance that launched nothing (a CPU tensor in a GPU trace) counts its inclusive op time on
the host, as on CPU-only traces. Device ``-1`` stands for the host.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from traceclass import costmodel
from traceclass import timeline as tl
from traceclass.analysis import layout
from traceclass.analysis.kernel_families import FAMILY_CODE
from traceclass.analysis.sites import climb_while, op_names, op_source_codes, source_label, top_level_ops
from traceclass.model import GpuKind, Trace
from traceclass.model.nesting import ancestors_until, group_ids

TRANSPOSE, MISMATCH, KERNELS = layout.TRANSPOSE, layout.MISMATCH, layout.KERNELS


@dataclasses.dataclass(frozen=True)
class LayoutSite:
    kind: int
    device: int  # -1 host
    label: str
    count: int  # instances (ops, or kernels for KERNELS)
    time_ns: int
    bytes: int | None
    first_ns: int
    last_end_ns: int
    ops: tuple[str, ...]  # outermost first
    kernels: tuple[str, ...]
    source: str | None
    strides: str = ""
    after: str = ""  # the op just before it on the thread, when a permute/transpose
    formats: str = ""  # "channels_last -> contiguous", "input contiguous, weight channels_last"


def _per_signature(trace: Trace, member: np.ndarray, judge) -> tuple[np.ndarray, dict[tuple[int, int], object]]:  # type: ignore[no-untyped-def]
    """Row mask where ``judge(name, inputs)`` is truthy, evaluated once per (name, inputs) pair."""
    ops = trace.ops
    rows = np.flatnonzero(member)
    hit = np.zeros(len(ops), dtype=bool)
    verdicts: dict[tuple[int, int], object] = {}
    if not len(rows):
        return hit, verdicts
    pair = np.stack([ops.name[rows].astype(np.int64), ops.inputs[rows].astype(np.int64)], 1)
    u, inv = np.unique(pair, axis=0, return_inverse=True)
    ok = np.zeros(len(u), dtype=bool)
    for k, (nc, ic) in enumerate(u.tolist()):
        v = judge(trace.strings[nc], trace.inputs[ic])
        verdicts[(nc, ic)] = v
        ok[k] = v is not None
    hit[rows] = ok[inv.reshape(-1)]
    return hit, verdicts


def _prev_sibling(trace: Trace, rows: np.ndarray) -> np.ndarray:
    """The op that started last before each row among ops of the same thread and parent, -1 none."""
    ops = trace.ops
    key, _ = group_ids(ops.pid, ops.tid, ops.parent.astype(np.int64))
    order = np.lexsort((ops.start_ns, key))
    pos = np.empty(len(ops), dtype=np.int64)
    pos[order] = np.arange(len(ops))
    p = pos[rows] - 1
    prev = np.where(p >= 0, order[np.maximum(p, 0)], -1)
    return np.where((prev >= 0) & (key[np.maximum(prev, 0)] == key[rows]), prev, -1)


def layout_sites(trace: Trace, family_code: np.ndarray) -> dict[tuple[int, int], list[LayoutSite]]:
    """Layout work by (kind, device), one :class:`LayoutSite` per site (``family_code``:
    :func:`~traceclass.analysis.kernel_families.gpu_family_codes`)."""
    ops, gpu = trace.ops, trace.gpu
    out: dict[tuple[int, int], list[LayoutSite]] = {}
    n = len(ops)
    parent = ops.parent
    mask = trace.strings.mask
    flagged, copy_verdicts = _per_signature(trace, mask(ops.name, lambda s: s in layout.COPY_OPS), layout.copy_layouts)
    mismatched, conv_verdicts = _per_signature(trace, mask(ops.name, lambda s: s in layout.CONV_OPS), layout.conv_formats)
    is_wrapper = mask(ops.name, lambda s: s in layout.WRAPPER_OPS)
    is_conv = mask(ops.name, lambda s: s in layout.CONV_OPS)
    flagged_rows = np.flatnonzero(flagged)
    outer, first = np.unique(climb_while(parent, flagged_rows, is_wrapper), return_index=True)
    judged = flagged_rows[first]  # a judged copy inside each outer op (its formats label the site)
    is_outer = np.zeros(n, dtype=bool)
    is_outer[outer] = True
    # GPU rows: owned by a transposing copy, else by a mismatched convolution, else bare layout kernels
    active = np.flatnonzero((gpu.kind != GpuKind.SYNC) & (gpu.op >= 0)) if len(gpu) else np.zeros(0, np.int64)
    g_copy = ancestors_until(parent, gpu.op[active], is_outer) if n else np.full(len(active), -1)
    # per-owner quantities are indexed by the owner's place among the owners (outer copies here,
    # convolutions below), not by op row: op-sized arrays add up on large traces
    copy_time, copy_dev = _union_by(trace, active, _place(outer, g_copy), len(outer))

    def inst(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """A copy's time (its GPU work's union, else its own span) and device (-1: none), for
        the given rows (outer copies) only."""
        at = np.searchsorted(outer, rows)
        on_gpu = copy_time[at] > 0
        return (np.where(on_gpu, copy_time[at], ops.end_ns[rows] - ops.start_ns[rows]),
                np.where(on_gpu, copy_dev[at], -1))
    conv_of = ancestors_until(parent, outer, mismatched) if n else outer
    conv_top = np.where(conv_of >= 0, climb_while(parent, conv_of, is_conv), -1)
    nbytes = _Bytes(trace)
    # transposing copies outside mismatched convolutions
    t_rows, t_judged = outer[conv_of < 0], judged[conv_of < 0]
    _collect(out, trace, t_rows, t_judged, *inst(t_rows), active, g_copy, copy_verdicts, nbytes)
    # layout kernels: under a mismatched convolution they are its cost, else their own finding
    lay = (g_copy < 0) & (family_code[active] == FAMILY_CODE["layout"]) if len(active) else np.zeros(0, bool)
    k_rows = active[lay]
    k_judged = ancestors_until(parent, gpu.op[k_rows].astype(np.int64), mismatched) if n else np.full(len(k_rows), -1)
    k_conv = np.where(k_judged >= 0, climb_while(parent, k_judged, is_conv), -1)
    bare = np.flatnonzero((gpu.kind == GpuKind.KERNEL) & (gpu.op < 0) & (family_code == FAMILY_CODE["layout"])) if len(gpu) else k_rows[:0]
    _collect_kernels(out, trace, np.r_[k_rows[k_conv < 0], bare].astype(np.int64))
    # mismatched convolutions: the conversion copies and layout kernels under them
    m_copy, m_top = outer[conv_of >= 0], conv_top[conv_of >= 0]
    k_top = k_conv[k_conv >= 0]
    tops, first = np.unique(np.r_[m_top, k_top].astype(np.int64), return_index=True)
    k_time, k_dev = _union_by(trace, k_rows[k_conv >= 0], np.searchsorted(tops, k_top), len(tops))
    m_time = k_time  # per top convolution: the kernels' union, plus its conversion copies' time
    m_inst_time, m_inst_dev = inst(m_copy)
    m_at = np.searchsorted(tops, m_top)
    np.add.at(m_time, m_at, m_inst_time)
    m_dev = k_dev  # the kernels' device, else the copies'
    m_dev[m_at] = np.where(m_dev[m_at] >= 0, m_dev[m_at], m_inst_dev)
    conv_judged = np.r_[conv_of[conv_of >= 0], k_judged[k_conv >= 0]].astype(np.int64)[first]
    copy_owner = np.full(len(active), -1, dtype=np.int64)
    if len(outer):
        has = g_copy >= 0
        copy_owner[has] = conv_top[np.searchsorted(outer, g_copy[has])]
    g_all = np.r_[active[copy_owner >= 0], k_rows[k_conv >= 0]].astype(np.int64)
    o_all = np.r_[copy_owner[copy_owner >= 0], k_top].astype(np.int64)
    _collect_mismatch(out, trace, tops, conv_judged, m_time, m_dev, g_all, o_all, conv_verdicts, m_top,
                      m_copy, nbytes)
    return out


def _place(owners: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Place of each row among the sorted ``owners`` (-1 for rows < 0, which own nothing)."""
    return np.where(rows >= 0, np.searchsorted(owners, rows), -1)


def _union_by(trace: Trace, gpu_rows: np.ndarray, owner: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Per owner ``0..n-1``: union of the GPU rows it owns, and their device (-1 none)."""
    gpu = trace.gpu
    time = np.zeros(n, dtype=np.int64)
    dev = np.full(n, -1, dtype=np.int64)
    ok = owner >= 0
    if ok.any():
        r, o = gpu_rows[ok], owner[ok]
        u, length = tl.union_length_by_group(o, gpu.start_ns[r], gpu.end_ns[r])
        time[u] = length
        dev[o] = gpu.device[r]
    return time, dev


def _top_kernels(trace: Trace, gpu_rows: np.ndarray, k: int = 3) -> tuple[str, ...]:
    if not len(gpu_rows):
        return ()
    gpu = trace.gpu
    u, inv = np.unique(gpu.name[gpu_rows], return_inverse=True)
    tot = np.bincount(inv.reshape(-1), weights=(gpu.end_ns[gpu_rows] - gpu.start_ns[gpu_rows]).astype(np.float64))
    return tuple(trace.strings[int(c)] for c in u[np.argsort(-tot, kind="stable")[:k]])


class _Bytes:
    """Bytes a copy op moves, once per (name, inputs) signature."""

    def __init__(self, trace: Trace) -> None:
        self.trace = trace
        self.cache: dict[tuple[int, int], int | None] = {}

    def signature(self, key: tuple[int, int]) -> int | None:
        if key not in self.cache:
            name, inputs = self.trace.strings[key[0]], self.trace.inputs[key[1]]
            cost = costmodel.estimate(name, inputs)
            if cost is not None and cost.bytes > 0:
                self.cache[key] = int(cost.bytes)
            else:
                b = layout.nbytes(inputs, 0)
                self.cache[key] = 2 * b if b is not None else None  # read once, written once
        return self.cache[key]

    def total(self, rows: np.ndarray) -> int | None:
        """Bytes of all ``rows`` (op rows), None when any signature's size is unknown."""
        if not len(rows):
            return None
        ops = self.trace.ops
        pair = np.stack([ops.name[rows].astype(np.int64), ops.inputs[rows].astype(np.int64)], 1)
        u, cnt = np.unique(pair, axis=0, return_counts=True)
        total = 0
        for (nc, ic), c in zip(u.tolist(), cnt.tolist()):
            b = self.signature((nc, ic))
            if b is None:
                return None
            total += b * c
        return int(total)


def _groups(trace: Trace, rows: np.ndarray, *keys: np.ndarray) -> tuple[np.ndarray, list[np.ndarray]]:
    """Group id per row (by op name, inputs and ``keys``) and the positions of each group."""
    ops = trace.ops
    gid, _ = group_ids(ops.name[rows].astype(np.int64), ops.inputs[rows].astype(np.int64), *keys)
    order = np.argsort(gid, kind="stable")
    cuts = np.flatnonzero(np.diff(gid[order])) + 1
    return gid, np.split(order, cuts)


def _kernels_of(trace: Trace, gid: np.ndarray, rows: np.ndarray, gpu_rows: np.ndarray,
                gpu_owner: np.ndarray, n_groups: int) -> list[tuple[str, ...]]:
    """Top kernel names per group, given each GPU row's owner op row."""
    site_of = np.full(len(trace.ops), -1, dtype=np.int64)
    site_of[rows] = gid
    ok = gpu_owner >= 0
    g_site = np.full(len(gpu_owner), -1, dtype=np.int64)
    g_site[ok] = site_of[gpu_owner[ok]]
    order = np.argsort(g_site, kind="stable")
    bounds = np.searchsorted(g_site[order], np.arange(n_groups + 1))
    return [_top_kernels(trace, gpu_rows[order[bounds[j]:bounds[j + 1]]]) for j in range(n_groups)]


def _collect(out, trace, rows, judged, time, dev, gpu_rows, gpu_owner, verdicts, nbytes) -> None:  # type: ignore[no-untyped-def]
    """Transposing copies (outermost op rows) grouped into sites."""
    if not len(rows):
        return
    ops = trace.ops
    parent = ops.parent.astype(np.int64)
    caller = parent[rows]
    src = op_source_codes(trace, rows)
    gid, groups = _groups(trace, rows, op_names(trace, caller), src, dev)
    kernels = _kernels_of(trace, gid, rows, gpu_rows, gpu_owner, len(groups))
    prev = _prev_sibling(trace, rows[[g[0] for g in groups]])
    for j, idx in enumerate(groups):
        r, k = rows[idx], int(idx[0])
        rep = int(r[0])
        name = trace.strings[int(ops.name[rep])]
        inputs = trace.inputs[int(ops.inputs[rep])]
        t = layout.tensor(inputs, 1 if name == "aten::copy_" else 0)
        strides = ",".join(str(x) for x in t[1]) if t else ""
        shape = "x".join(str(x) for x in t[0]) if t else "?"
        v = _verdict(trace, int(judged[k]), verdicts)
        fmts = f"{v[0]} -> {v[1]}" if v else ""
        pn = trace.strings[int(ops.name[prev[j]])] if prev[j] >= 0 else ""
        after = pn if pn in layout.TRANSPOSE_OPS else ""
        c = int(caller[k])
        chain = ((trace.strings[int(ops.name[c])],) if c >= 0 else ()) + (name,)
        label = (f"{name} of [{shape}] (strides {strides}{'; ' + fmts if fmts else ''})"
                 + (f" after {after}" if after else "") + (f" in {chain[0]}" if c >= 0 else ""))
        d = int(dev[k])
        out.setdefault((TRANSPOSE, d), []).append(LayoutSite(
            kind=TRANSPOSE, device=d, label=label, count=len(r), time_ns=int(time[idx].sum()),
            bytes=nbytes.total(r), first_ns=int(ops.start_ns[r].min()), last_end_ns=int(ops.end_ns[r].max()),
            ops=chain, kernels=kernels[j], source=source_label(trace, int(src[k])), strides=strides,
            after=after, formats=fmts))


def _verdict(trace: Trace, row: int, verdicts: dict) -> Any:  # type: ignore[type-arg]
    """The judge's verdict on op ``row``'s signature (formats), None when not judged."""
    return verdicts.get((int(trace.ops.name[row]), int(trace.ops.inputs[row])))


def _collect_mismatch(out, trace, tops, judged, time, dev, gpu_rows, gpu_owner, verdicts, copy_tops,  # type: ignore[no-untyped-def]
                      copy_rows, nbytes) -> None:
    """Mismatched convolutions (outermost conv op rows) grouped into sites."""
    if not len(tops):
        return
    ops = trace.ops
    src = op_source_codes(trace, tops)
    gid, groups = _groups(trace, tops, src, dev)
    kernels = _kernels_of(trace, gid, tops, gpu_rows, gpu_owner, len(groups))
    for j, idx in enumerate(groups):
        r, k = tops[idx], int(idx[0])
        name = trace.strings[int(ops.name[r[0]])]
        inputs = trace.inputs[int(ops.inputs[r[0]])]
        v = _verdict(trace, int(judged[k]), verdicts)
        roles = ("grad_output", "input", "weight") if v and len(v) == 3 else ("input", "weight")
        fmts = ", ".join(f"{w} {f}" for w, f in zip(roles, v)) if v else ""
        shapes = ", ".join("[" + "x".join(str(x) for x in d) + "]" for d in (inputs.dims if inputs else ())[:len(roles)]
                           if d is not None)
        conv_copies = copy_rows[np.isin(copy_tops, r)]
        d = int(dev[k])
        out.setdefault((MISMATCH, d), []).append(LayoutSite(
            kind=MISMATCH, device=d, label=f"{name} on {shapes} ({fmts})", count=len(r),
            time_ns=int(time[idx].sum()), bytes=nbytes.total(conv_copies),
            first_ns=int(ops.start_ns[r].min()), last_end_ns=int(ops.end_ns[r].max()), ops=(name,),
            kernels=kernels[j], source=source_label(trace, int(src[k])), formats=fmts))


def _collect_kernels(out, trace, rows) -> None:  # type: ignore[no-untyped-def]
    if not len(rows):
        return
    gpu = trace.gpu
    op = gpu.op[rows].astype(np.int64)
    top = np.where(op >= 0, top_level_ops(trace, op), -1)
    src = op_source_codes(trace, op)
    gid, _ = group_ids(gpu.name[rows].astype(np.int64), op_names(trace, op), op_names(trace, top), src,
                       gpu.device[rows].astype(np.int64))
    order = np.argsort(gid, kind="stable")
    cuts = np.flatnonzero(np.diff(gid[order])) + 1
    for idx in np.split(order, cuts):
        r = rows[idx]
        k = int(idx[0])
        names = tuple(trace.strings[int(c)] for c in (op_names(trace, np.array([top[k], op[k]]))) if c >= 0)
        names = tuple(dict.fromkeys(names))
        kname = trace.strings[int(gpu.name[r[0]])]
        dev = int(gpu.device[r[0]])
        out.setdefault((KERNELS, dev), []).append(LayoutSite(
            kind=KERNELS, device=dev,
            label=f"{len(r)}x {kname}" + (f" launched by {' > '.join(names)}" if names else " (no launching op recorded)"),
            count=len(r), time_ns=tl.union_length(gpu.start_ns[r], gpu.end_ns[r]), bytes=None,
            first_ns=int(gpu.start_ns[r].min()), last_end_ns=int(gpu.end_ns[r].max()), ops=names, kernels=(kname,),
            source=source_label(trace, int(src[k]))))
