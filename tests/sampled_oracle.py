"""Independent, plain-Python readings of sampled-profile files, to check traceclass against.

Nothing here imports traceclass: each function parses the file the simplest way the format
allows and returns per-frame self and total values.
"""

from __future__ import annotations

import collections
import json
import re
from pathlib import Path

FRAME = re.compile(r"^(.*?) \(([^()]+?)(?::(\d+))?\)$")
PSEUDO = re.compile(r'^(thread \(\d+\)(: .*)?|process \d+:".*")$')


def split_frame(text: str) -> tuple[str, str, int | None]:
    m = FRAME.match(text)
    if not m:
        return text, "", None
    return m.group(1), m.group(2), int(m.group(3)) if m.group(3) else None


def read_collapsed_lines(path: Path) -> list[tuple[list[str], int]]:
    """(frames root first, count) per stack line; thread/process roots removed."""
    raw = path.read_bytes()
    if raw[:2] in (b"\xff\xfe", b"\xfe\xff"):
        text = raw.decode("utf-16")
    else:
        text = raw.decode("utf-8")
    out = []
    for line in text.splitlines():
        line = line.rstrip()
        m = re.match(r"^(.*) (\d+)$", line)
        if not m or line.startswith(("#", "//")):
            continue
        frames = m.group(1).split(";") if m.group(1) else []
        while frames and PSEUDO.match(frames[0]):
            frames.pop(0)
        out.append((frames, int(m.group(2))))
    return out


def self_and_total(stacks: list[tuple[list[str], float]]) -> tuple[collections.Counter, collections.Counter, float]:
    """Self and total (each frame once per stack) per frame text, and the grand total."""
    self_c: collections.Counter = collections.Counter()
    total_c: collections.Counter = collections.Counter()
    grand = 0.0
    for frames, w in stacks:
        grand += w
        if frames:
            self_c[frames[-1]] += w
        for f in set(frames):
            total_c[f] += w
    return self_c, total_c, grand


def speedscope_sampled(path: Path) -> tuple[list[tuple[list[str], float]], dict[str, int]]:
    """Stacks as frame texts 'name (file:line)' with weights; and samples per profile name."""
    d = json.loads(path.read_text())
    frames = d["shared"]["frames"]

    def text(i: int) -> str:
        f = frames[i]
        if f.get("file") and f.get("line"):
            return f"{f['name']} ({f['file']}:{f['line']})"
        if f.get("file"):
            return f"{f['name']} ({f['file']})"
        return f["name"]

    stacks = []
    per_profile = {}
    for p in d["profiles"]:
        per_profile[p["name"]] = len(p["samples"])
        for s, w in zip(p["samples"], p["weights"]):
            names = [text(i) for i in s if not (PSEUDO.match(frames[i]["name"]) and not frames[i].get("file"))]
            stacks.append((names, w))
    return stacks, per_profile


def chrome_naive_self(path: Path) -> collections.Counter:
    """Self time (µs) per 'name (file:line)' from well-formed B/E events in file order."""
    events = json.loads(path.read_text())
    stacks: dict[tuple, list] = collections.defaultdict(list)
    self_c: collections.Counter = collections.Counter()
    for e in events:
        key = (e["pid"], e["tid"])
        a = e.get("args") or {}
        name = e["name"]
        if PSEUDO.match(name) and not a.get("filename"):
            continue
        label = f"{name} ({a['filename']}:{a['line']})" if a.get("filename") else name
        st = stacks[key]
        if e["ph"] == "B":
            if st:
                self_c[st[-1][0]] += e["ts"] - st[-1][1]
            st.append([label, e["ts"]])
        elif e["ph"] == "E":
            top = st.pop()
            assert top[0].split(" (")[0] == name, (top, e)
            self_c[top[0]] += e["ts"] - top[1]
            if st:
                st[-1][1] = e["ts"]  # the parent resumes
    return self_c
