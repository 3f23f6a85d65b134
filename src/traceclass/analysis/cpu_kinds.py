"""The kind of every CPU sample (compute, lock wait, sleep, I/O ...) from its frames, and the
lines without source settled from the profile's evidence (see
:mod:`traceclass.analysis.cpu_profile` for the rules and their limits).
"""

from __future__ import annotations

import dataclasses
import re

import numpy as np

from traceclass.analysis.frame_kinds import KIND_CODES, PRIORITY, WAITING, Classifier, default_kind, label, source_known
from traceclass.model import StackNodes, Trace
from traceclass.model.nesting import path_max
#: idle inference: a thread with at least this many samples in waiting calls, making up at
#: least IDLE_EVIDENCE_SHARE of its samples, and sampled at least IDLE_EVIDENCE_PEER times as
#: often as the busiest thread, shows that idle samples were kept
IDLE_EVIDENCE_SAMPLES = 20
UNVERIFIED = PRIORITY["unverified"]
BLOCKED = PRIORITY["blocked"]
#: "one line" evidence for a blocked thread: share of its samples (after start-up) on one
#: line without source, and how long that is (time when known, else samples: 1 s at py-spy's 100 Hz)
ONE_LINE_SHARE = 0.95
ONE_LINE_MIN_NS = 1_000_000_000
ONE_LINE_MIN_SAMPLES = 100
#: ... and the thread is sampled at least this share as often as the busiest thread
ONE_LINE_PEER = 0.5
#: words in a thread's name that say it waits (split at non-alphanumerics, lower case)
WAITING_THREAD_WORDS = frozenset(
    "io sleep sleeper sleeping wait waiter waiting idle poll poller polling listen listener "
    "watchdog heartbeat timer monitor".split()
)
_INLINE_FRAME = re.compile(r"<(listcomp|dictcomp|setcomp|genexpr|lambda)>$")


@dataclasses.dataclass(frozen=True)
class SampleKinds:
    """Kind (priority index in :data:`KIND_CODES`, ``len(KIND_CODES)`` for an empty stack) and
    leaf frame per sample row, with what settled the lines without source."""

    kind: np.ndarray
    leaf: np.ndarray  # leaf frame row, -1 for an empty stack
    #: (thread row, frame row or -1 for all its lines, reason) for rows made ``blocked``
    blocked: tuple[tuple[int, int, str], ...] = ()
    compute_basis: str = ""  # key of COMPUTE_BASIS when lines without source count as compute


_DEFAULT: list[Classifier] = []


def _default_classifier() -> Classifier:
    """One shared classifier: its per-text memo then serves every pass over the same frames
    (the profile and the hot-spot sites classify them both); renewed when the memo is big."""
    if not _DEFAULT or _DEFAULT[0].memo_size() > 1_000_000:
        _DEFAULT[:] = [Classifier()]
    return _DEFAULT[0]


def sample_kinds(trace: Trace, classifier: Classifier | None = None) -> SampleKinds:
    """Per sample row: its kind from the frames (leaf and stack rules, default kinds), then
    lines without source settled from the profile's evidence (see the module docstring)."""
    cls = classifier or _default_classifier()
    s, st = trace.samples, trace.stacks
    node = s.node.astype(np.int64)
    has_stack = (node >= 0) & (len(st) > 0)
    nsafe = np.maximum(node, 0)
    leaf_frame = np.where(has_stack, st.frame[nsafe] if len(st) else -1, -1).astype(np.int64)
    leaf_p, stack_p = _frame_priorities(trace, cls)
    node_kind = _node_kinds(st, leaf_p, stack_p)
    kind = np.where(has_stack, node_kind[nsafe] if len(st) else 0, len(KIND_CODES)).astype(np.int64)
    unv = kind == UNVERIFIED
    if not unv.any():
        return SampleKinds(kind, leaf_frame)
    sampling = trace.sampling
    basis = ""
    if sampling is not None and sampling.gil_only:
        basis = "gil"
    elif sampling is not None and sampling.includes_idle is False:
        basis = "no-idle"
    if basis:
        kind[unv] = PRIORITY["python"]
        return SampleKinds(kind, leaf_frame, compute_basis=basis)
    blocked = _infer_blocked(trace, kind, leaf_frame, has_stack)
    return SampleKinds(kind, leaf_frame, blocked=blocked)


def _infer_blocked(trace: Trace, kind: np.ndarray, leaf: np.ndarray, has_stack: np.ndarray) -> tuple[tuple[int, int, str], ...]:
    """Turn ``unverified`` rows into ``blocked`` where the profile shows the thread waits
    (in place); the evidence per thread."""
    s, st, th = trace.samples, trace.stacks, trace.threads
    strings = trace.strings
    thread = s.thread.astype(np.int64)
    n_threads = max(len(th), int(thread.max()) + 1 if len(thread) else 0)
    timed = trace.meta.get("samples_from") == "intervals"
    weighted = bool((s.weight_ns > 0).any()) and not trace.meta.get("weight_unit")
    value = s.weight_ns.astype(np.int64) if weighted else s.count.astype(np.int64)
    names = _thread_names(trace, n_threads)
    pids = [int(th.pid[t]) if t < len(th) else -1 for t in range(n_threads)]
    tids = [int(th.tid[t]) if t < len(th) else -1 for t in range(n_threads)]
    # how often each thread was sampled (time for timed frames: they carry no sample counts)
    per_thread = np.bincount(thread, weights=value if timed else s.count, minlength=n_threads)
    sampled = np.flatnonzero(per_thread > 0)
    busiest = float(per_thread.max()) if len(per_thread) else 0.0
    unv = kind == UNVERIFIED
    steady = has_stack & (kind != PRIORITY["import"])
    steady_t = np.bincount(thread[steady], weights=value[steady], minlength=n_threads)
    callers = np.zeros(len(trace.frames), dtype=bool)
    if len(st):
        par = st.parent.astype(np.int64)
        callers[st.frame.astype(np.int64)[par[par >= 0]]] = True
    out: list[tuple[int, int, str]] = []
    for t in sampled.tolist():
        rows_t = unv & (thread == t)
        if not rows_t.any():
            continue
        name = names[t]
        if not name and tids[t] < 0:
            continue  # stacks of all threads together (no thread roots): nothing to tell them by
        main = name == "MainThread" or (pids[t] >= 0 and tids[t] == pids[t])
        one_line = False
        if not main and len(sampled) >= 2 and per_thread[t] >= ONE_LINE_PEER * busiest:
            f_rows = np.flatnonzero(rows_t)
            fr, inv = np.unique(leaf[f_rows], return_inverse=True)
            v = np.bincount(inv.reshape(-1), weights=value[f_rows], minlength=len(fr))
            c = np.bincount(inv.reshape(-1), weights=s.count[f_rows], minlength=len(fr))
            i = int(np.argmax(v))
            f = int(fr[i])
            long_enough = bool(v[i] >= ONE_LINE_MIN_NS) if (weighted or timed) else bool(c[i] >= ONE_LINE_MIN_SAMPLES)
            if not timed:
                long_enough = long_enough and c[i] >= IDLE_EVIDENCE_SAMPLES
            fn = strings[int(trace.frames.function[f])]
            if (v[i] >= ONE_LINE_SHARE * steady_t[t] and long_enough and not callers[f]
                    and not _INLINE_FRAME.search(fn)):
                kind[f_rows[leaf[f_rows] == f]] = BLOCKED
                share = 100.0 * v[i] / steady_t[t] if steady_t[t] else 100.0
                what = "one line" if int(trace.frames.line[f]) >= 0 else "one function (no line numbers)"
                if timed:
                    held = f"{share:.0f}% of its time after start-up ({v[i] / 1e9:.3g} s)"
                else:
                    held = f"{share:.0f}% of its samples after start-up ({int(c[i]):,} samples)"
                out.append((t, f, f"{what} holds {held} while it was sampled about as often as the busiest "
                                  "thread, and calls no Python function"))
                rows_t = rows_t & (kind == UNVERIFIED)
                one_line = True
        words = set(w for w in re.split(r"[^0-9a-z]+", name.lower()) if w)
        said = sorted(words & WAITING_THREAD_WORDS)
        if said and rows_t.any():
            kind[rows_t] = BLOCKED
            which = "its other lines without source" if one_line else "its lines without source"
            out.append((t, -1, f"{which}: the thread's name has " + ", ".join(repr(w) for w in said)))
    return tuple(out)


# --------------------------------------------------------------------------- pieces


def _frame_priorities(trace: Trace, cls: Classifier) -> tuple[np.ndarray, np.ndarray]:
    """Leaf and stack kind priority per frame; a leaf no rule matches gets its default kind
    (Python compute, a Python line without source, or code that is not Python)."""
    fr = trace.frames
    n = len(fr)
    leaf = np.zeros(n, dtype=np.int64)
    stack = np.full(n, -1, dtype=np.int64)
    src = usable_source(trace)
    strings = trace.strings
    for f in range(n):
        fn = strings[int(fr.function[f])]
        fi = strings[int(fr.file[f])] if fr.file[f] >= 0 else ""
        text = src.get(f, "")
        lp, sp = cls.frame(fn, fi, text)
        leaf[f] = lp if lp >= 0 else PRIORITY[default_kind(fi, text)]
        stack[f] = sp
    return leaf, stack


def usable_source(trace: Trace) -> dict[int, str]:
    """Leaf line text per frame row, where it tells what the line does.

    A ``def`` line tells nothing when it is the only line py-spy shows for its function
    (``py-spy --function`` reports every frame at its def line, hiding the line that waits);
    where the function also shows other lines, a sample at its def line is the call's start
    and the text is kept (it matches no rule: Python compute).
    """
    src: dict[int, str] = trace.meta.get("source_lines") or {}
    if not src:
        return {}
    defs = [f for f, text in src.items() if not source_known(text)]
    if not defs:
        return src
    fr = trace.frames
    key = fr.function.astype(np.int64) * (len(trace.strings) + 1) + fr.file.astype(np.int64) + 1
    lines_per_key: dict[int, set[int]] = {}
    for k, ln in zip(key.tolist(), fr.line.tolist()):
        lines_per_key.setdefault(k, set()).add(ln)
    out = dict(src)
    for f in defs:
        if len(lines_per_key.get(int(key[f]), ())) < 2:
            del out[f]
    return out


def _node_kinds(st: StackNodes, leaf_p: np.ndarray, stack_p: np.ndarray) -> np.ndarray:
    """Kind priority per trie node: the best of its leaf kind and its ancestors' stack kinds."""
    n = len(st)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    frame = st.frame.astype(np.int64)
    # the max over the whole path, by pointer jumping: log2(depth) passes, never one per level
    ctx = path_max(st.parent.astype(np.int64), stack_p[frame])
    return np.maximum(leaf_p[frame], ctx)


def _thread_names(trace: Trace, n: int) -> list[str]:
    th = trace.threads
    return [trace.strings[int(th.name[t])] if t < len(th) and th.name[t] >= 0 else "" for t in range(n)]
