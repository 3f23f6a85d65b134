"""An independent reading of a flamegraph SVG for the reader's tests.

Parsed with the standard XML parser (not regular expressions), nested by pairwise containment
(not sorted search), counts from the titles: a frame's self samples = its count minus the
counts of the frames drawn directly on it.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections import defaultdict

_TITLE = re.compile(r"^(.*) \(([\d,]+) samples?, [\d.]+%\)$", re.S)
_PSEUDO = re.compile(r'^(thread \(\d+\)(: .*)?|process \d+:".*")$', re.S)
_FG = "{http://github.com/jonhoo/inferno}"


def read_svg(path) -> list[dict]:
    frames = []
    for g in ET.parse(path).iter("{http://www.w3.org/2000/svg}g"):
        title = g.find("{http://www.w3.org/2000/svg}title")
        rect = g.find("{http://www.w3.org/2000/svg}rect")
        if title is None or rect is None:
            continue
        m = _TITLE.match(title.text or "")
        if m is None:
            continue
        if rect.get(_FG + "x") is not None:
            x, w = float(rect.get(_FG + "x")), float(rect.get(_FG + "w"))
        else:
            x, w = float(rect.get("x").rstrip("%")), float(rect.get("width").rstrip("%"))
        frames.append({"name": m.group(1), "count": int(m.group(2).replace(",", "")),
                       "y": float(rect.get("y")), "x": x, "w": w})
    return frames


def tree(frames: list[dict]) -> None:
    """Adds ``parent`` (index or None) and ``self`` to each frame."""
    ys = sorted({f["y"] for f in frames})
    top = sum(f["w"] for f in frames if f["y"] == ys[0])
    bottom = sum(f["w"] for f in frames if f["y"] == ys[-1])
    step = 1 if top >= bottom else -1  # icicle: children one row down
    row = {y: k for k, y in enumerate(ys)}
    by_row: dict[int, list[int]] = defaultdict(list)
    for j, p in enumerate(frames):
        by_row[row[p["y"]]].append(j)
    for f in frames:
        f["parent"] = None
        for j in by_row.get(row[f["y"]] - step, ()):
            p = frames[j]
            if p["x"] - 1e-9 <= f["x"] < p["x"] + p["w"] - 1e-9:
                f["parent"] = j
                break
    for f in frames:
        f["self"] = f["count"]
    for f in frames:
        if f["parent"] is not None:
            frames[f["parent"]]["self"] -= f["count"]


def self_by_stack(path) -> dict[tuple[str, ...], int]:
    """Self samples per program stack (root first; the 'all' root and thread/process roots
    left out), summed over threads."""
    frames = read_svg(path)
    tree(frames)
    out: dict[tuple[str, ...], int] = defaultdict(int)
    for i, f in enumerate(frames):
        if f["self"] <= 0:
            continue
        names = []
        k = i
        while k is not None:
            names.append(frames[k]["name"])
            k = frames[k]["parent"]
        names.reverse()
        if names and names[0] == "all":
            names = names[1:]
        while names and _PSEUDO.match(names[0]):
            names = names[1:]
        out[tuple(names)] += f["self"]
    return dict(out)


def samples_by_thread_id(path) -> dict[int, int]:
    """Samples per OS thread id from py-spy's 'thread (TID)...' root frames."""
    out: dict[int, int] = defaultdict(int)
    for f in read_svg(path):
        m = re.match(r"^thread \((\d+)\)", f["name"])
        if m:
            out[int(m.group(1))] += f["count"]
    return dict(out)
