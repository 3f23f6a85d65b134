"""Flamegraph SVGs (py-spy ``record``'s default output via inferno, Brendan Gregg's
``flamegraph.pl``) -> :class:`Trace`.

A flamegraph is a drawing of a merged stack tree: every node is a ``<g>`` holding
``<title>NAME (N samples, P%)</title>`` and a ``<rect>``. The rectangle's row (``y``) is the
depth, its horizontal extent (inferno's integer ``fg:x``/``fg:w`` in samples when present,
else ``x``/``width`` in pixels or percent) places it inside its parent on the row above
(flamegraphs grow up) or below (icicle graphs, py-spy's layout, grow down). The tree is
rebuilt from that geometry, one vectorized pass per depth; counts come from the titles, so a
frame's self samples are its count minus its drawn children's.

What a drawing cannot give back, said in notes: the order of samples (there are no
timestamps), the sampling rate (times are samples unless py-spy's command line in the title
shows ``--rate``, or ``--rate`` is given to traceclass), and frames narrower than the
drawing's minimum width, which the generator leaves out: their samples stay in the parent's
self count.
"""

from __future__ import annotations

import html
import re
import shlex

import numpy as np
import pandas as pd

from traceclass import units
from traceclass.errors import TraceFormatError
from traceclass.ingest.collapsed import _thread_for_roots
from traceclass.ingest.frametext import parse_frame, parse_pseudo
from traceclass.ingest.sampled import ThreadRegistry, assemble, has_line_numbers
from traceclass.ingest.source import Progress, read_bytes
from traceclass.ingest.stacks import FrameInterner, TrieBuilder, aggregate_samples, interval_nodes
from traceclass.model import SamplingInfo, StringTable, Trace

FORMAT = "flamegraph-svg"
#: the minimum drawn width (px) of inferno's and flamegraph.pl's defaults (``--minwidth``)
DEFAULT_MIN_WIDTH_PX = 0.1

# one frame: <g ...><title>TITLE</title>[<a ...>]<rect ATTRS>
_FRAME = re.compile(rb"<g\b[^>]*>\s*<title>([^<]*)</title>\s*(?:<a\b[^>]*>\s*)?<rect\b([^>]*)>")
# TITLE = NAME (COUNT UNIT, PCT%[; delta]); flamegraph.pl writes COUNT as 12,345
_TITLE = re.compile(rb"^(.*) \(([\d,]+) [^,()\n]*, [-+\d.]+%[^()\n]*\)$", re.S)
_TITLES = re.compile(rb"^(.*) \(([\d,]+) [^,()\n]*, [-+\d.]+%[^()\n]*\)$", re.M)
# the attribute order both inferno and flamegraph.pl write, read in one pass
_XYW = re.compile(rb'\sx="([^"\x00]*)"\s+y="([^"\x00]*)"\s+width="([^"\x00]*)"')
_FGXW = re.compile(rb'\sfg:x="([^"\x00]*)"\s+fg:w="([^"\x00]*)"')
_ATTR = {
    name: re.compile(rb"\s" + re.escape(name.encode()) + rb'="([^"]*)"')
    for name in ("x", "y", "width", "fg:x", "fg:w")
}
_TITLE_TEXT = re.compile(rb'<text id="title"[^>]*>([^<]*)</text>')
_FRAMES_SVG = re.compile(rb'<svg id="frames"[^>]*\swidth="([\d.]+)"')
_SVG_WIDTH = re.compile(rb'<svg\b[^>]*\swidth="([\d.]+)"')
_MARKERS = (b"<svg", b"<title>")


def sniff(head: bytes) -> bool:
    """True when the first bytes are an SVG drawn by a flamegraph generator."""
    h = head.lstrip(b" \t\r\n\xef\xbb\xbf")[:65536]
    if not h.startswith((b"<?xml", b"<svg", b"<!DOCTYPE", b"<!doctype", b"<!--")):
        return False
    if b"<svg" not in h:
        return False
    low = h.lower()
    return (
        b"jonhoo/inferno" in h
        or b"flame graph" in low
        or b"flamegraph" in low
        or any(_TITLE.match(m.group(1)) for m in _FRAME.finditer(h))
    )


def read(path: str, progress: Progress = None) -> Trace:
    """Read a flamegraph SVG: the tree it draws, as aggregated samples per stack."""
    data = read_bytes(path, progress=progress)
    return read_flamegraph_svg(path, data)


def read_flamegraph_svg(path: str, data: bytes) -> Trace:
    size = len(data)
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    found = _FRAME.findall(data)
    titles, attrs_b = (zip(*found) if found else ((), ()))
    del found
    names_b, counts_b, keep = _split_titles(titles)
    del titles
    if keep is not None:
        attrs_b = tuple(a for a, k in zip(attrs_b, keep) if k)
    n = len(names_b)
    if not n:
        raise TraceFormatError(
            path, "SVG without flamegraph frames (no <g><title>NAME (N samples, P%)</title><rect> elements)"
        )
    count = _ints(counts_b)
    ycol, xcol, wcol = _geometry(path, attrs_b)
    del attrs_b

    name_code, name_uniq = pd.factorize(pd.Series(names_b, dtype=object), sort=False)
    del names_b
    names = [html.unescape(b.decode("utf-8", errors="replace")) for b in name_uniq]
    depth = _depths(ycol, wcol)
    parent = _parents(path, depth, xcol, names, name_code)

    # the synthetic root ("all") every generator draws is no frame of the program
    roots = np.flatnonzero(depth == 0)
    root = -1
    if len(roots) == 1 and names[name_code[roots[0]]] == "all":
        root = int(roots[0])

    child_sum = np.bincount(parent[parent >= 0], weights=count[parent >= 0], minlength=n)
    self_count = count - np.rint(child_sum).astype(np.int64)
    if (self_count < 0).any():
        bad = int(np.flatnonzero(self_count < 0)[0])
        raise TraceFormatError(
            path,
            f"frame {names[name_code[bad]][:80]!r} ({int(count[bad])} samples) has children drawn with "
            f"{int(child_sum[bad])} samples: the geometry does not nest",
        )

    strings = StringTable()
    interner = FrameInterner(strings)
    threads = ThreadRegistry(strings)
    pseudo_u = np.array([parse_pseudo(t) is not None for t in names], dtype=bool)
    thread_row, is_frame, tparent, tdepth = _threads_and_stack_parents(
        depth, parent, root, pseudo_u[name_code], names, name_code, threads, self_count > 0
    )
    # a frame id per distinct name drawn as a program frame
    fid_u = np.full(len(names), -1, dtype=np.int64)
    py_frames = 0
    for k in np.unique(name_code[is_frame]).tolist():
        f = parse_frame(names[k])
        fid_u[k] = interner.add(*f)
        if f.file is not None and (f.file.endswith(".py") or f.file.startswith("<frozen")):
            py_frames += 1
    trie = TrieBuilder()
    rows = np.flatnonzero(is_frame)
    node = np.full(n, -1, dtype=np.int64)
    if len(rows):
        local = np.full(n, -1, dtype=np.int64)
        local[rows] = np.arange(len(rows))
        lp = np.where(tparent[rows] >= 0, local[np.maximum(tparent[rows], 0)], -1)
        node[rows] = interval_nodes(trie, fid_u[name_code[rows]], lp, tdepth[rows])
    keep = self_count > 0
    samples = aggregate_samples(
        thread_row[keep], node[keep], self_count[keep], np.zeros(int(keep.sum()), dtype=np.int64)
    )
    if not len(samples):
        raise TraceFormatError(path, "flamegraph holds no samples")

    head = data[: min(len(data), 1 << 16)]
    command = _title_command(data)
    is_pyspy = "py-spy" in command or (py_frames > 0 and py_frames * 2 >= len(interner))
    flags = _pyspy_flags(command) if "py-spy" in command else None
    total = int(count[root]) if root >= 0 else int(count[depth == 0].sum())
    interval_ns = None
    notes = [
        f"flamegraph SVG: {n:,} drawn frames, {total:,} samples; the tree is rebuilt from the frames' "
        "geometry and counts from their titles (a drawing keeps no sample order or timestamps)"
    ]
    if flags is not None and flags.get("rate"):
        interval_ns = int(round(1e9 / flags["rate"]))
        # each sample stands for one interval, as in py-spy's speedscope output
        samples = samples.replace(weight_ns=samples.count.astype(np.int64) * interval_ns)
        notes.append(f"sampling rate {units.frequency(flags['rate'])} from py-spy's command line in the SVG title")
    else:
        notes.append(
            "the SVG does not record the sampling rate: values are samples"
            + (" (py-spy samples at 100 Hz unless --rate was given; pass --rate HZ for times)" if is_pyspy
               else " (pass --rate HZ for times)")
        )
    omitted = _omission_note(head, total)
    if omitted:
        notes.append(omitted)
    if root < 0 and len(roots) > 1:
        notes.append("no single root frame: the drawing's root row is read as the program's top frames")
    if not (pseudo_u[name_code] & ~is_frame).any():
        notes.append(
            "stacks are not split by thread" + (" (py-spy draws thread roots with --threads)" if is_pyspy else "")
        )
    includes_idle = gil_only = None
    if flags is not None:
        includes_idle, gil_only = flags["idle"], flags["gil"]
    elif is_pyspy:
        notes.append("whether idle samples were kept (py-spy --idle) is not recorded in the drawing")
    producer = "py-spy" if "py-spy" in command else ("inferno" if b"jonhoo/inferno" in head else "flamegraph.pl")
    sampling = SamplingInfo(
        interval_ns=interval_ns,
        includes_idle=includes_idle,
        gil_only=gil_only,
        has_line_numbers=has_line_numbers(interner),
        timed=False,
    )
    meta: dict[str, object] = {"flamegraph_frames": n, "flamegraph_inverted": bool(_inverted(ycol, wcol))}
    return assemble(
        path=path,
        fmt=FORMAT,
        producer=producer,
        size=size,
        strings=strings,
        frames=interner,
        trie=trie,
        threads=threads,
        samples=samples,
        sampling=sampling,
        notes=notes,
        meta=meta,
    )


def _split_titles(titles: tuple[bytes, ...]) -> tuple[list[bytes], list[bytes], list[bool] | None]:
    """(names, counts, which titles are frame titles: None when all are)."""
    joined = b"\n".join(titles)
    if joined.count(b"\n") == len(titles) - 1:
        pairs = _TITLES.findall(joined)
        if len(pairs) == len(titles):
            names, counts = zip(*pairs) if pairs else ((), ())
            return list(names), list(counts), None
    # a title with a line break, or one that is not a frame's: one by one
    matches = [_TITLE.match(t) for t in titles]
    keep = [m is not None for m in matches]
    return [m.group(1) for m in matches if m], [m.group(2) for m in matches if m], keep


def _ints(values: tuple[bytes, ...] | list[bytes]) -> np.ndarray:
    arr = np.array(values, dtype=bytes)
    if b"," in b"".join(values):  # flamegraph.pl writes 12,345
        arr = np.char.replace(arr, b",", b"")
    return arr.astype(np.int64)


def _floats(values: list[bytes]) -> np.ndarray:
    arr = np.array(values, dtype=bytes)
    arr = np.char.rstrip(arr, b"% ")
    return arr.astype(np.float64)


def _column(attrs: tuple[bytes, ...], name: str) -> list[bytes] | None:
    """The attribute's value in every rect (None when some rect lacks it)."""
    pat = _ATTR[name]
    joined = b"\x00 ".join(attrs)
    vals = pat.findall(b" " + joined)
    if len(vals) == len(attrs):
        return vals
    if not vals:
        return None
    # an odd rect (attribute missing or repeated): per rect
    out = []
    for a in attrs:
        m = pat.search(b" " + a)
        if m is None:
            return None
        out.append(m.group(1))
    return out


def _geometry(path: str, attrs: tuple[bytes, ...]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(y, x, width) per frame; x/width in samples when inferno wrote fg:x/fg:w (exact)."""
    joined = b"\x00 " + b"\x00 ".join(attrs)
    xyw = _XYW.findall(joined)
    fg = _FGXW.findall(joined)
    del joined
    try:
        if len(xyw) == len(attrs):
            x, y, w = (list(c) for c in zip(*xyw))
        else:
            y, x, w = _column(attrs, "y"), _column(attrs, "x"), _column(attrs, "width")
        if y is None:
            raise TraceFormatError(path, "flamegraph frame without a y position: cannot tell its depth")
        if len(fg) == len(attrs):
            fx, fw = (list(c) for c in zip(*fg))
        else:
            fx, fw = _column(attrs, "fg:x"), _column(attrs, "fg:w")
        if fx is not None and fw is not None:
            return _floats(y), _ints(fx).astype(np.float64), _ints(fw).astype(np.float64)
        if x is None or w is None:
            raise TraceFormatError(path, "flamegraph frame without x/width: cannot place it")
        return _floats(y), _floats(x), _floats(w)
    except ValueError:
        raise TraceFormatError(path, "flamegraph frame with a non-numeric position or width") from None


def _inverted(y: np.ndarray, w: np.ndarray) -> bool:
    """Icicle (root row on top) when the top row is wider in total than the bottom row."""
    top, bottom = y.min(), y.max()
    return bool(w[y == top].sum() >= w[y == bottom].sum())


def _depths(y: np.ndarray, w: np.ndarray) -> np.ndarray:
    rows, rank = np.unique(y, return_inverse=True)
    rank = rank.astype(np.int64)
    return rank if _inverted(y, w) else (len(rows) - 1 - rank)


def _parents(path: str, depth: np.ndarray, x: np.ndarray, names: list[str], code: np.ndarray) -> np.ndarray:
    """Parent of each frame: the frame one row closer to the root whose extent starts at or
    before the child's start (children lie inside their parent; siblings do not overlap)."""
    n = len(depth)
    parent = np.full(n, -1, dtype=np.int64)
    order = np.argsort(depth, kind="stable")
    d_sorted = depth[order]
    bounds = np.r_[0, np.flatnonzero(np.diff(d_sorted)) + 1, n]
    prev: np.ndarray | None = None
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        rows = order[lo:hi]
        if prev is not None:
            px = x[prev]
            srt = np.argsort(px, kind="stable")
            k = np.searchsorted(px[srt], x[rows], side="right") - 1
            if (k < 0).any():
                bad = int(rows[np.flatnonzero(k < 0)[0]])
                raise TraceFormatError(
                    path, f"flamegraph frame {names[code[bad]][:80]!r} lies outside every frame of the row "
                    "below it: not a flamegraph's geometry"
                )
            parent[rows] = prev[srt[k]]
        prev = rows
    return parent


def _threads_and_stack_parents(
    depth: np.ndarray,
    parent: np.ndarray,
    root: int,
    pseudo: np.ndarray,
    names: list[str],
    code: np.ndarray,
    threads: ThreadRegistry,
    has_self: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Thread row per frame, whether it is a program frame, and its parent and depth in the
    stack once the root and py-spy's thread/process root frames are taken out."""
    n = len(depth)
    thread_row = np.full(n, -1, dtype=np.int64)
    is_frame = np.ones(n, dtype=bool)
    head = np.zeros(n, dtype=bool)  # the root or a thread/process root frame under it
    tparent = np.full(n, -1, dtype=np.int64)
    tdepth = np.zeros(n, dtype=np.int64)
    roots_of: dict[int, tuple[str, ...]] = {}
    default = -1
    order = np.argsort(depth, kind="stable")
    d_sorted = depth[order]
    bounds = np.r_[0, np.flatnonzero(np.diff(d_sorted)) + 1, n]
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        rows = order[lo:hi]
        p = parent[rows]
        has_p = p >= 0
        pp = np.maximum(p, 0)
        p_head = has_p & head[pp]
        # a thread/process frame counts as such only above every program frame
        new_head = pseudo[rows] & (~has_p | p_head)
        if root >= 0:
            new_head |= rows == root
        head[rows] = new_head
        is_frame[rows] = ~new_head
        inherit = has_p & ~p_head & ~new_head
        thread_row[rows[inherit]] = thread_row[p[inherit]]
        tparent[rows[inherit]] = p[inherit]
        tdepth[rows[inherit]] = tdepth[p[inherit]] + 1
        for i in rows[~inherit].tolist():
            # a head frame or a frame right under one: few (threads x processes), in Python
            pi = int(parent[i])
            chain = roots_of.get(pi, ()) if pi >= 0 else ()
            if head[i]:
                chain = chain + ((names[code[i]],) if i != root else ())
                roots_of[i] = chain
                if not has_self[i]:
                    continue  # a thread only when samples end on this root frame itself
            if chain:
                thread_row[i] = _thread_for_roots(threads, chain)
            else:
                if default < 0:
                    default = threads.get(-1, -1, "", key="all")
                thread_row[i] = default
    return thread_row, is_frame, tparent, tdepth


def _title_command(data: bytes) -> str:
    m = _TITLE_TEXT.search(data, 0, 1 << 17)
    return html.unescape(m.group(1).decode("utf-8", errors="replace")) if m else ""


def _pyspy_flags(command: str) -> dict[str, object] | None:
    """--idle, --gil and --rate from ``py-spy record ...`` as the SVG's title shows it."""
    try:
        argv = shlex.split(command)
    except ValueError:
        return None
    if "record" not in argv:
        return None
    argv = argv[argv.index("record") + 1:]
    if "--" in argv:
        argv = argv[: argv.index("--")]
    out: dict[str, object] = {"idle": False, "gil": False, "rate": None}
    i = 0
    while i < len(argv):
        a = argv[i]
        value = None
        if a.startswith("--"):
            key, _, value = a[2:].partition("=")
            if key == "idle":
                out["idle"] = True
            elif key == "gil":
                out["gil"] = True
            elif key == "rate":
                if not value and i + 1 < len(argv):
                    i += 1
                    value = argv[i]
                out["rate"] = _rate(value)
        elif a.startswith("-") and len(a) > 1:
            for j, ch in enumerate(a[1:], 1):
                if ch == "i":
                    out["idle"] = True
                elif ch == "g":
                    out["gil"] = True
                elif ch == "r":
                    value = a[j + 1:]
                    if not value and i + 1 < len(argv):
                        i += 1
                        value = argv[i]
                    out["rate"] = _rate(value)
                    break
                elif ch in "opdf":
                    # options taking a value (-o FILE, -p PID, -d SECS, -f FMT): skip it
                    if j == len(a) - 1:
                        i += 1
                    break
        i += 1
    return out


def _rate(text: str | None) -> float | None:
    try:
        r = float(text or "")
    except ValueError:
        return None
    return r if r > 0 and r < float("inf") else None


def _omission_note(head: bytes, total: int) -> str:
    """Frames narrower than the minimum width are not drawn: say how many samples that is."""
    m = _FRAMES_SVG.search(head)
    padding = 0.0
    if m is None:
        m = _SVG_WIDTH.search(head)
        padding = 20.0  # flamegraph.pl draws inside 10 px of padding on each side
    if m is None or total <= 0:
        return ""
    width_px = float(m.group(1)) - padding
    if width_px <= 0:
        return ""
    px_per_sample = width_px / total
    if px_per_sample >= DEFAULT_MIN_WIDTH_PX:
        return ""  # one sample is wider than the minimum: nothing can have been left out
    below = int(np.ceil(DEFAULT_MIN_WIDTH_PX / px_per_sample)) - 1
    return (
        f"frames narrower than the drawing's minimum width ({DEFAULT_MIN_WIDTH_PX} px by default, "
        f"{below:,} samples or fewer here) are left out of a flamegraph: their samples count as "
        "their parent's self samples"
    )


__all__ = ["FORMAT", "sniff", "read", "read_flamegraph_svg"]
