"""Structural links every reader needs: nesting, op -> launch -> GPU work.

``link(trace)`` fills the link columns (``parent``/``depth`` of host tables, ``ApiCalls.op``,
``ApiCalls.annotation``, ``GpuActivity.api``/``op``/``graph``) wherever a reader left them
at -1. The rules, in order of trust:

1. GPU row -> API call: same ``correlation`` (readers with several processes join
   themselves, with the process, and leave the column set).
2. API call -> op: the op with the call's ``External id`` when it is on the same thread and
   contains the call; otherwise the innermost op on the same thread containing the call's
   start (2023-era Kineto files carry no usable External id on runtime events).
3. GPU row -> op: through its API call; failing that, through its own ``External id``.

Flow events (``ac2g``) are not used: many of their ends dangle (see kineto-trace.md, 5.3).
"""

from __future__ import annotations

import numpy as np

from traceclass.model.enums import ApiKind
from traceclass.model.nesting import innermost_containing, lookup, nest
from traceclass.model.trace import Trace


def link(trace: Trace) -> Trace:
    notes = list(trace.notes)
    ops, ann, py, api, gpu = trace.ops, trace.annotations, trace.python, trace.api, trace.gpu

    repaired_total = 0
    if len(ops) and (ops.parent < 0).all():
        parent, depth, repaired = nest(ops.pid, ops.tid, ops.start_ns, ops.end_ns)
        ops = ops.replace(parent=parent, depth=depth)
        repaired_total += repaired
    if len(ann) and (ann.parent < 0).all():
        parent, depth, repaired = nest(ann.pid, ann.tid, ann.start_ns, ann.end_ns)
        ann = ann.replace(parent=parent, depth=depth)
        repaired_total += repaired
    if len(py) and (py.parent < 0).all():
        parent, depth, repaired = nest(py.pid, py.tid, py.start_ns, py.end_ns)
        py = py.replace(parent=parent, depth=depth)
        repaired_total += repaired
    if repaired_total:
        notes.append(
            f"{repaired_total} host ranges overlapped a sibling without nesting; "
            "they were treated as ending with their parent"
        )

    if len(api):
        api_op = api.op.copy()
        todo = _rows_to_link(api_op)
        if todo is not None and len(ops):
            api_op[todo] = _op_for_calls(ops, api.pid[todo], api.tid[todo], api.start_ns[todo],
                                         api.external_id[todo])
        api_ann = api.annotation.copy()
        todo = _rows_to_link(api_ann)
        if todo is not None and len(ann):
            api_ann[todo] = innermost_containing(
                ann.pid, ann.tid, ann.start_ns, ann.end_ns, ann.depth,
                api.pid[todo], api.tid[todo], api.start_ns[todo],
            )
        api = api.replace(op=api_op, annotation=api_ann)

    if len(gpu):
        g_api = gpu.api.copy()
        todo = (g_api < 0) & (gpu.correlation >= 0)
        if todo.any() and len(api):
            g_api[todo] = lookup(api.correlation, gpu.correlation[todo])
        g_op = gpu.op.copy()
        has_api = (g_api >= 0) & (g_op < 0)
        if has_api.any():
            g_op[has_api] = api.op[g_api[has_api]]
        todo = (g_op < 0) & (gpu.external_id >= 0)
        if todo.any() and len(ops):
            cand = lookup(ops.external_id, gpu.external_id[todo])
            g_op[todo] = cand
        graph = gpu.graph.copy()
        if len(api):
            via = g_api >= 0
            graph[via] |= api.kind[g_api[via]] == ApiKind.GRAPH_LAUNCH
        gpu = gpu.replace(api=g_api, op=g_op, graph=graph)

    return trace.replace(ops=ops, annotations=ann, python=py, api=api, gpu=gpu, notes=tuple(notes))


def _rows_to_link(link_col: np.ndarray) -> slice | np.ndarray | None:
    """Rows still unlinked (-1): a slice when all are (Kineto), so the columns are read as
    views, not copied; None when none is."""
    todo = link_col < 0
    if todo.all():
        return slice(None)
    return todo if todo.any() else None


def _op_for_calls(ops, pid, tid, t, external_id):  # type: ignore[no-untyped-def]
    """Op row for each call: External id when consistent, else innermost containing op."""
    by_time = innermost_containing(ops.pid, ops.tid, ops.start_ns, ops.end_ns, ops.depth, pid, tid, t)
    by_ext = lookup(ops.external_id, external_id) if (external_id >= 0).any() else np.full(len(t), -1)
    ok = by_ext >= 0
    if ok.any():
        r = by_ext[ok]
        consistent = (
            (ops.pid[r] == pid[ok])
            & (ops.tid[r] == tid[ok])
            & (ops.start_ns[r] <= t[ok])
            & (ops.end_ns[r] >= t[ok])
        )
        idx = np.flatnonzero(ok)[consistent]
        # the External id names the op that was innermost when the call was made; prefer the
        # deeper of the two in case a child op without External id encloses the call
        prefer_ext = np.ones(len(idx), dtype=bool)
        bt = by_time[idx]
        has_bt = bt >= 0
        prefer_ext[has_bt] = ops.depth[bt[has_bt]] <= ops.depth[by_ext[idx][has_bt]]
        by_time[idx[prefer_ext]] = by_ext[idx[prefer_ext]]
    return by_time
