"""Hand-built py-spy profiles (speedscope JSON and raw/collapsed text) for comparison tests.

A profile is ``{thread name: {stack: samples}}`` with stacks as tuples of
``(function, file, line)`` frames, root first. Speedscope files get py-spy's layout (one
sampled profile per thread, ``"Thread <tid> \\"<name>\\""``, weights in seconds at the given
interval); collapsed files carry no interval, so their values are sample counts.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Mapping

Frame = tuple[str, str, int]
Profile = Mapping[str, Mapping[tuple[Frame, ...], int]]

MAIN = ("<module>", "app.py", 40)
WORK = ("work", "app.py", 12)
PARSE = ("parse", "app.py", 20)
SLEEP = ("sleep_loop", "app.py", 30)
RUN = ("Thread.run", "threading.py", 982)


def write_speedscope(path: Path, profile: Profile, interval_s: float = 0.01) -> Path:
    frames: list[dict] = []
    index: dict[Frame, int] = {}

    def fid(f: Frame) -> int:
        if f not in index:
            index[f] = len(frames)
            frames.append({"name": f[0], "file": f[1], "line": f[2], "col": None})
        return index[f]

    profiles = []
    for k, (thread, stacks) in enumerate(profile.items()):
        samples, weights = [], []
        for stack, n in stacks.items():
            ids = [fid(f) for f in stack]
            samples += [ids] * n
            weights += [interval_s] * n
        profiles.append({"type": "sampled", "name": f'Thread {1000 + k} "{thread}"', "unit": "seconds",
                         "startValue": 0.0, "endValue": round(len(samples) * interval_s, 6),
                         "samples": samples, "weights": weights})
    doc = {"$schema": "https://www.speedscope.app/file-format-schema.json", "activeProfileIndex": None,
           "exporter": "py-spy@0.4.3", "name": "py-spy profile", "profiles": profiles,
           "shared": {"frames": frames}}
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


def write_collapsed(path: Path, profile: Profile) -> Path:
    """py-spy ``--format raw`` without ``--threads``: thread names are not in the file."""
    lines = []
    for stacks in profile.values():
        for stack, n in stacks.items():
            lines.append(";".join(f"{fn} ({file}:{line})" for fn, file, line in stack) + f" {n}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path
