"""Where host work comes from, for whole columns at once: user source lines and op chains.

:func:`traceclass.analysis.source_lines.source_for_points` answers one point at a time; rules
that label thousands of copies or ops need the same answer columnar. Here every Python frame
row gets its *user frame* once (itself or the nearest caller outside torch, site-packages and
the standard library; failing that, the nearest parseable frame, as ``source_for_points``
does) by pointer jumping over the call tree, and a point resolves to the user frame of the
innermost frame containing it. Results are string codes (the frame's name), so callers group
by an integer and decode each distinct code once.

Ops without a source (autograd's backward thread has no user frames) inherit the source of their
forward op: the nearest ancestor with an autograd sequence number is matched to the outermost op
of the same sequence number whose own source is known.
"""

from __future__ import annotations

import numpy as np

from traceclass.analysis.per_trace import per_trace
from traceclass.analysis.source_lines import is_user_frame, parse_frame
from traceclass.model import Trace
from traceclass.model.nesting import ContainmentIndex, ancestors_until, lookup

def _frame_index(trace: Trace) -> ContainmentIndex:
    py = trace.python
    return per_trace(trace, "frame_index",
                      lambda: ContainmentIndex(py.pid, py.tid, py.start_ns, py.end_ns, py.depth))


def _user_frames(trace: Trace) -> np.ndarray:
    """Per Python frame row: its user frame row (see module doc), -1 when none."""
    return per_trace(trace, "user_frames", lambda: _build_user_frames(trace))


def _build_user_frames(trace: Trace) -> np.ndarray:
    py = trace.python
    rows = np.arange(len(py), dtype=np.int64)
    parent = py.parent.astype(np.int64)
    user = trace.strings.mask(py.name, is_user_frame)
    parsed = trace.strings.mask(py.name, lambda s: parse_frame(s) is not None)
    u = ancestors_until(parent, rows, user)
    p = ancestors_until(parent, rows, parsed)
    return np.where(u >= 0, u, p)


def source_codes(trace: Trace, pid: np.ndarray, tid: np.ndarray, t: np.ndarray) -> np.ndarray:
    """String code of the source frame (``'file.py(LINE): func'``) around each point; -1 none."""
    n = len(t)
    if n == 0 or len(trace.python) == 0:
        return np.full(n, -1, dtype=np.int64)
    rows = _frame_index(trace).query(pid, tid, t)
    uf = _user_frames(trace)
    f = np.where(rows >= 0, uf[np.maximum(rows, 0)], -1)
    return np.where(f >= 0, trace.python.name[np.maximum(f, 0)], -1).astype(np.int64)


def op_source_codes(trace: Trace, op_rows: np.ndarray) -> np.ndarray:
    """Source frame code per op row (-1 none); backward ops borrow their forward op's source."""
    op_rows = np.asarray(op_rows, dtype=np.int64)
    out = np.full(len(op_rows), -1, dtype=np.int64)
    ok = op_rows >= 0
    if not ok.any() or len(trace.python) == 0:
        return out
    ops = trace.ops
    r = op_rows[ok]
    codes = source_codes(trace, ops.pid[r], ops.tid[r], ops.start_ns[r])
    missing = codes < 0
    if missing.any():
        codes[missing] = _forward_source(trace, r[missing])
    out[ok] = codes
    return out


def _forward_source(trace: Trace, rows: np.ndarray) -> np.ndarray:
    """Source of the op paired (by autograd sequence number) with each row's chain: the outermost
    op of that sequence number whose own source is known (the forward op)."""
    ops = trace.ops
    parent = ops.parent.astype(np.int64)
    with_seq = ancestors_until(parent, rows, ops.seq >= 0)
    seq = np.where(with_seq >= 0, ops.seq[np.maximum(with_seq, 0)], -1)
    out = np.full(len(rows), -1, dtype=np.int64)
    cand = np.flatnonzero(ops.seq >= 0)
    if not len(cand) or not (seq >= 0).any():
        return out
    cand = cand[np.isin(ops.seq[cand], seq[seq >= 0])]
    codes = source_codes(trace, ops.pid[cand], ops.tid[cand], ops.start_ns[cand])
    cand, codes = cand[codes >= 0], codes[codes >= 0]
    order = np.lexsort((ops.depth[cand], ops.seq[cand]))  # outermost first within a sequence number
    cand, codes = cand[order], codes[order]
    hit = lookup(ops.seq[cand], seq)
    has = (seq >= 0) & (hit >= 0)
    out[has] = codes[hit[has]]
    return out


def source_label(trace: Trace, code: int) -> str | None:
    """``'file.py:LINE'`` for a frame-name code from :func:`source_codes`, None for -1."""
    if code < 0:
        return None
    parsed = parse_frame(trace.strings[int(code)])
    return f"{parsed[0]}:{parsed[1]}" if parsed else None


def op_names(trace: Trace, op_rows: np.ndarray) -> np.ndarray:
    """Name code of each op row, -1 where the row is -1."""
    op_rows = np.asarray(op_rows, dtype=np.int64)
    if len(trace.ops) == 0:
        return np.full(len(op_rows), -1, dtype=np.int64)
    return np.where(op_rows >= 0, trace.ops.name[np.maximum(op_rows, 0)], -1).astype(np.int64)


def top_level_ops(trace: Trace, op_rows: np.ndarray) -> np.ndarray:
    """The outermost op (depth 0 on its thread) above each op row (itself when top-level)."""
    op_rows = np.asarray(op_rows, dtype=np.int64)
    if len(trace.ops) == 0:
        return np.full(len(op_rows), -1, dtype=np.int64)
    parent = trace.ops.parent.astype(np.int64)
    return ancestors_until(parent, op_rows, parent < 0)


def climb_while(parent: np.ndarray, rows: np.ndarray, member: np.ndarray) -> np.ndarray:
    """For each row, the highest ancestor reachable through ancestors where ``member`` holds.

    The row itself is returned when its parent is not a member. Vectorized: one pass per level.
    """
    cur = np.asarray(rows, dtype=np.int64).copy()
    live = cur >= 0
    while live.any():
        p = np.where(live, parent[np.maximum(cur, 0)], -1)
        step = live & (p >= 0)
        step[step] = member[p[step]]
        if not step.any():
            break
        cur[step] = p[step]
        live = step
    return cur


def duration_text(ns: float) -> str:
    """``1234567`` -> ``1.23 ms`` in rule messages (plain ASCII; the report's rounding)."""
    from traceclass.units import duration

    return duration(ns)


def size_text(nbytes: float | None) -> str:
    """Bytes in rule messages (decimal units, as the report)."""
    from traceclass.units import size

    return "bytes not recorded" if nbytes is None else size(nbytes)
