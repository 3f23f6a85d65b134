"""Tallies, masks and phrases the CPU-sample rules (TC501-TC506) share, over
:class:`~traceclass.analysis.cpu_sites.CpuSites` (the fact ``Facts.cpu_sites``)."""

from __future__ import annotations

import dataclasses
import re

import numpy as np

from traceclass.analysis.cpu_sites import GIL_FUNCTION, NONE_KIND, CpuSites, Group
from traceclass.analysis.frame_kinds import PRIORITY
from traceclass.model.nesting import ancestors_until

_MODULE_FRAME = "<module>"
_INLINE = re.compile(r"\.<locals>\.<(listcomp|dictcomp|setcomp|genexpr|lambda)>$")
_BYTECODE = re.compile(r"(^|\.)(_compile_bytecode|source_to_code|get_code)$")



@dataclasses.dataclass(frozen=True)
class Tally:
    """Values summed per key, largest first."""

    keys: np.ndarray
    value: np.ndarray
    count: np.ndarray

    def __len__(self) -> int:
        return len(self.keys)


def tally(keys: np.ndarray, value: np.ndarray, count: np.ndarray) -> Tally:
    if len(keys) == 0:
        z = np.zeros(0, dtype=np.int64)
        return Tally(z, z, z)
    uniq, inv = np.unique(keys, return_inverse=True)
    inv = inv.reshape(-1)
    v = np.bincount(inv, weights=value, minlength=len(uniq)).astype(np.int64)
    c = np.bincount(inv, weights=count, minlength=len(uniq)).astype(np.int64)
    order = np.lexsort((uniq, -v))
    return Tally(uniq[order].astype(np.int64), v[order], c[order])


def site_frames(cs: CpuSites, rows: np.ndarray) -> np.ndarray:
    """The frame each row is charged to: its user frame, else its leaf."""
    return np.where(cs.user[rows] >= 0, cs.user[rows], cs.leaf[rows])


def enclosing(function: str) -> str:
    """The function a comprehension, generator expression or lambda belongs to:
    ``Items.__getitem__.<locals>.<listcomp>`` -> ``Items.__getitem__``."""
    while True:
        short = _INLINE.sub("", function)
        if short == function or not short:
            return function
        function = short


def function_keys(cs: CpuSites, frames: np.ndarray) -> np.ndarray:
    """Per frame row: a key equal for frames of the same function in the same file (any line;
    comprehensions and lambdas count as their enclosing function)."""
    fr = cs.trace.frames
    f = np.maximum(frames, 0)
    ids: dict[str, int] = {}
    fn = cs.trace.strings.map(fr.function[f], lambda t: ids.setdefault(enclosing(t), len(ids)))
    n_str = max(len(cs.trace.strings), 1) + 1
    return np.where(frames >= 0, fn.astype(np.int64) * n_str + (fr.file[f].astype(np.int64) + 1), -1)


def import_packages(cs: CpuSites, rows: np.ndarray) -> np.ndarray:
    """Per import row: the outermost library ``<module>`` frame below its user frame (-1 none).

    For ``import torch`` on a user line that is ``torch/__init__.py``'s module frame: the
    package the line pulled in, whatever that package imports in turn.
    """
    strings = cs.trace.strings
    fr = cs.trace.frames
    mod_lib = strings.mask(fr.function, lambda t: t == _MODULE_FRAME) & _library_frames(cs)
    mod_lib &= ~strings.mask(fr.file, lambda t: t.startswith("<"))
    return outermost_below_user(cs, rows, mod_lib)


def outermost_below_user(cs: CpuSites, rows: np.ndarray, accept: np.ndarray) -> np.ndarray:
    """Per row: the outermost frame with ``accept`` (a mask over frames) between the leaf and
    the row's user frame (the whole stack when it has none); -1 where there is none."""
    st = cs.trace.stacks
    if len(rows) == 0 or len(st) == 0:
        return np.full(len(rows), -1, dtype=np.int64)
    lib = _library_frames(cs)
    frame = st.frame.astype(np.int64)
    parent = st.parent.astype(np.int64)
    uniq, inv = np.unique(cs.node[rows], return_inverse=True)
    inv = inv.reshape(-1)
    unode = ancestors_until(parent, np.maximum(uniq, 0), ~lib[frame])
    best = np.full(len(uniq), -1, dtype=np.int64)
    cur = uniq.copy()
    active = cur >= 0
    while active.any():
        idx = np.flatnonzero(active)
        c = cur[idx]
        at_user = c == unode[idx]
        f = frame[c]
        hit = ~at_user & accept[f]
        best[idx[hit]] = f[hit]  # outer hits overwrite inner ones: the outermost wins
        nxt = parent[c]
        cur[idx] = nxt
        active[idx] = (nxt >= 0) & ~at_user
    return best[inv]


def _library_frames(cs: CpuSites) -> np.ndarray:
    return cs.library


def file_mask(cs: CpuSites, pattern: re.Pattern[str]) -> np.ndarray:
    """Frames whose file matches ``pattern``."""
    fr = cs.trace.frames
    return cs.trace.strings.mask(fr.file, lambda t: bool(pattern.search(t))) & (fr.file >= 0)


def bytecode_mask(cs: CpuSites, rows: np.ndarray) -> np.ndarray:
    """Rows whose leaf compiles bytecode (no usable ``.pyc``)."""
    fr = cs.trace.frames
    comp = cs.trace.strings.mask(fr.function, lambda t: bool(_BYTECODE.search(t)))
    leaf = cs.leaf[rows]
    return (leaf >= 0) & comp[np.maximum(leaf, 0)]


def gil_mask(cs: CpuSites, rows: np.ndarray) -> np.ndarray:
    fr = cs.trace.frames
    gil = cs.trace.strings.mask(fr.function, lambda t: bool(GIL_FUNCTION.search(t)))
    leaf = cs.leaf[rows]
    return (leaf >= 0) & gil[np.maximum(leaf, 0)]


def pct(part: float, whole: float) -> float:
    return float(100.0 * part / whole) if whole else 0.0


def passes_floor(cs: CpuSites, value: int, count: int, min_time_ms: float, min_samples: int) -> bool:
    """Absolute floors: time when known, sample count when rows are samples."""
    ns = cs.ns(value)
    if ns is not None and ns < min_time_ms * 1e6:
        return False
    if cs.counts_known and count < min_samples:
        return False
    return True


def idle_note(cs: CpuSites) -> str:
    """A caveat for waiting time, or ''."""
    if cs.profile.from_intervals:
        return timed_note(cs)
    if cs.profile.waiting_basis == "thread state" or cs.includes_idle:
        return ""
    if cs.includes_idle is False:
        return " (recorded without idle samples: the real wait is longer)"
    return (" (the file does not say whether idle samples were kept, py-spy --idle: without them the real "
            "wait is longer)")


def timed_note(cs: CpuSites) -> str:
    """A caveat for py-spy's chrometrace, or ''."""
    if cs.profile.from_intervals and cs.profile.producer.startswith("py-spy"):
        return (" (py-spy chrometrace: a span lasts until the next recorded sample, so time py-spy dropped "
                "is charged to the line before it; record -f speedscope or raw for shares you can trust)")
    return ""


def run_value(cs: CpuSites, rows: np.ndarray) -> int:
    """The run's length for ``rows``: the lengths of the processes they come from (each its
    critical thread's samples)."""
    lengths = {cs.groups[g].pid: cs.groups[g].process_value for g in np.unique(cs.group[rows]).tolist()}
    return sum(lengths.values())


def module_name(path: str) -> str:
    """Dotted module of a file: ``/x/site-packages/torch/_dynamo/__init__.py`` -> ``torch._dynamo``."""
    m = re.search(r"(?:site-packages|dist-packages)/(.+)$", path) or re.search(r"/lib(?:64)?/python\d[\d.]*/(.+)$", path)
    rel = m.group(1) if m else path.rsplit("/", 1)[-1] if path.startswith("/") else path
    rel = re.sub(r"\.(py|pyc|pyw|pyx)$", "", rel)
    rel = re.sub(r"/__init__$", "", rel)
    return rel.replace("/", ".")


def by_key(keys: np.ndarray, rows: np.ndarray, cs: CpuSites, limit: int | None = None) -> list[tuple[int, np.ndarray]]:
    """(key, rows with that key) by value, largest first."""
    t = tally(keys, cs.value[rows], cs.count[rows])
    order = np.argsort(keys, kind="stable")
    sk = keys[order]
    out = []
    for k in t.keys[:limit].tolist():
        lo, hi = np.searchsorted(sk, [k, k + 1]) if sk.dtype.kind in "iu" else (0, 0)
        out.append((int(k), rows[order[lo:hi]]))
    return out


def lines(cs: CpuSites, rows: np.ndarray, limit: int = 10) -> list[tuple[int, int, int, int]]:
    """The lines ``rows`` are charged to (user frame, else leaf), per thread group:
    (frame, group, value, count), largest first."""
    f = site_frames(cs, rows)
    n_g = max(len(cs.groups), 1)
    key = f * n_g + cs.group[rows]
    t = tally(key, cs.value[rows], cs.count[rows])
    return [(int(k // n_g), int(k % n_g), int(v), int(c))
            for k, v, c in zip(t.keys[:limit].tolist(), t.value[:limit].tolist(), t.count[:limit].tolist())]


def top_leaf(cs: CpuSites, rows: np.ndarray) -> int:
    """The leaf frame holding most of ``rows``' value."""
    t = tally(cs.leaf[rows], cs.value[rows], cs.count[rows])
    return int(t.keys[0]) if len(t) else -1


def critical_sites(cs: CpuSites, kinds: tuple[str, ...], min_pct: float, min_time_ms: float,
                   min_samples: int) -> list[tuple[np.ndarray, int, int, float]]:
    """Critical-thread samples of ``kinds`` grouped by the program's function and kind, kept
    when their share of the run and the absolute floors pass: (rows, value, run, share %)."""
    wanted = np.array([PRIORITY[k] for k in kinds])
    rows = np.flatnonzero(cs.critical & np.isin(cs.kind, wanted))
    if len(rows) == 0:
        return []
    keys = function_keys(cs, site_frames(cs, rows)) * (NONE_KIND + 1) + cs.kind[rows]
    out = []
    for _, sel in by_key(keys, rows, cs):
        value, count = int(cs.value[sel].sum()), int(cs.count[sel].sum())
        run = run_value(cs, sel)
        share = pct(value, run)
        if share >= min_pct and passes_floor(cs, value, count, min_time_ms, min_samples):
            out.append((sel, value, run, share))
    return out


def critical_phrase(g: Group) -> str:
    """``the main thread``, ``all threads`` or ``thread X (the critical thread)``."""
    return g.phrase if g.merged and g.main else f"{g.phrase} (the critical thread)"


def where_phrase(cs, sel: np.ndarray, lines: list, prefix: str = "in", more: bool = True) -> str:  # type: ignore[no-untyped-def]
    """`` (in <leaf frame>) and N more lines`` after a site's location in a rule message: the
    hottest leaf under the site when it is another frame, and how many more lines there are."""
    f0 = lines[0][0]
    leaf = top_leaf(cs, sel)
    inside = f" ({prefix} {cs.frame_label(leaf)})" if leaf >= 0 and leaf != f0 else ""
    extra = ""
    if more and len(lines) > 1:
        extra = f" and {len(lines) - 1} more line{'s' if len(lines) > 2 else ''}"
    return inside + extra
