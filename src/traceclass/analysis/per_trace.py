"""Memo of derived tables per :class:`~traceclass.model.Trace` object.

Rules ask for sources and stages of a few points many times (once per storm, per gap);
rebuilding the per-frame tables each time made that O(questions x events). A derived table
is built once per trace and dropped with it. (The facts layer will own such shared tables;
this is the one place that memoizes them until then.)
"""

from __future__ import annotations

import weakref
from typing import Any, Callable

from traceclass.model import Trace

_MEMO: dict[int, tuple[weakref.ref, dict[str, Any]]] = {}


def per_trace(trace: Trace, key: str, build: Callable[[], Any]) -> Any:
    """``build()``, computed once per (trace object, key)."""
    entry = _MEMO.get(id(trace))
    if entry is None or entry[0]() is not trace:
        ref = weakref.ref(trace, lambda _r, k=id(trace): _MEMO.pop(k, None))
        entry = _MEMO[id(trace)] = (ref, {})
    memo = entry[1]
    if key not in memo:
        memo[key] = build()
    return memo[key]
