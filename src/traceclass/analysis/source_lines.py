"""Source file:line for host events, from the trace's Python call intervals (``with_stack``).

For an op we take the innermost Python frame on the same thread that contains the op's start,
then walk outward to the first frame in the user's code: frames of torch itself, of installed
packages (``site-packages``), builtins and ``nn.Module`` scopes are skipped, because "the copy
happens in torch/nn/functional.py" is not where a user can fix it. torch.profiler records the
first line of each Python function, so ``file.py:LINE`` names the function that issued the work
(its ``def`` line), not the statement. The columnar implementation is in
:mod:`traceclass.analysis.sites`.
"""

from __future__ import annotations

import re

import numpy as np

from traceclass.model import Trace

_FRAME = re.compile(r"^(?P<file>.+?)\((?P<line>\d+)\): (?P<func>.+)$")
_LIBRARY = re.compile(
    r"(site-packages|dist-packages|/torch/|^torch/|/lib/python\d|<frozen |^<|/threading\.py|"
    r"/contextlib\.py|/functools\.py|/runpy\.py|/asyncio/)"
)


def parse_frame(name: str) -> tuple[str, int, str] | None:
    """``'model.py(42): forward'`` -> ``('model.py', 42, 'forward')``; None for other names."""
    m = _FRAME.match(name)
    if not m:
        return None
    return m.group("file"), int(m.group("line")), m.group("func")


def is_user_frame(name: str) -> bool:
    parsed = parse_frame(name)
    if parsed is None:
        return False
    return _LIBRARY.search(parsed[0]) is None


def source_for_points(trace: Trace, pid: np.ndarray, tid: np.ndarray, t: np.ndarray) -> list[str | None]:
    """``file:line`` of the nearest user-code frame around each point (None without stacks)."""
    from traceclass.analysis.sites import source_codes, source_label

    codes = source_codes(trace, np.asarray(pid), np.asarray(tid), np.asarray(t))
    labels = {c: source_label(trace, c) for c in np.unique(codes).tolist()}
    return [labels[c] for c in codes.tolist()]
