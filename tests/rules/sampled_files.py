"""Hand-built py-spy profiles for the CPU-sample rules (TC501-TC506).

Stacks are written root first, frames ``function (file:line)`` as ``py-spy -f raw`` writes
them; a stack that starts with a ``thread (TID): name`` root belongs to that thread (py-spy
``--threads``). Sources are written next to the profile, where the reader looks for the
leaf lines' text (waits are told from compute by it).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterable, Mapping, Sequence

from traceclass.ingest import load
from traceclass.model import Trace

BOOT = "Thread._bootstrap (threading.py:1002);Thread._bootstrap_inner (threading.py:1045);Thread.run (threading.py:982)"
IMPORT = ("_find_and_load (<frozen importlib._bootstrap>:1176);_find_and_load_unlocked (<frozen importlib._bootstrap>:1147);"
          "_load_unlocked (<frozen importlib._bootstrap>:690);_LoaderBasics.exec_module (<frozen importlib._bootstrap_external>:940);"
          "_call_with_frames_removed (<frozen importlib._bootstrap>:241)")


def source(lines: Mapping[int, str]) -> str:
    """A source file with the given text on the given (1-based) lines, ``pass`` elsewhere."""
    n = max(lines)
    return "\n".join(lines.get(i, "pass") for i in range(1, n + 1)) + "\n"


def collapsed(tmp_path: Path, stacks: Iterable[tuple[str, int]], sources: Mapping[str, str] | None = None,
              name: str = "profile.raw.txt") -> Trace:
    """Write ``stack COUNT`` lines (and source files) into ``tmp_path`` and load the profile."""
    for file, text in (sources or {}).items():
        (tmp_path / file).write_text(text)
    p = tmp_path / name
    p.write_text("".join(f"{s} {n}\n" for s, n in stacks))
    return load(p)


def speedscope(tmp_path: Path, threads: Mapping[str, Sequence[tuple[Sequence[str], int]]],
               sources: Mapping[str, str] | None = None, rate_hz: int = 100) -> Trace:
    """A py-spy speedscope file: per thread ``'Thread TID "name"'`` a list of (stack, samples)."""
    for file, text in (sources or {}).items():
        (tmp_path / file).write_text(text)
    frames: list[dict] = []
    index: dict[str, int] = {}

    def fid(text: str) -> int:
        if text not in index:
            fn, _, rest = text.partition(" (")
            file, _, line = rest.rstrip(")").rpartition(":")
            path = str(tmp_path / file) if file.endswith(".py") and "/" not in file else file
            index[text] = len(frames)
            frames.append({"name": fn, "file": path, "line": int(line), "col": None})
        return index[text]

    profiles = []
    for name, stacks in threads.items():
        samples = [[fid(f) for f in stack] for stack, n in stacks for _ in range(n)]
        profiles.append({"type": "sampled", "name": name, "unit": "seconds", "startValue": 0.0,
                         "endValue": len(samples) / rate_hz, "samples": samples,
                         "weights": [1.0 / rate_hz] * len(samples)})
    doc = {"$schema": "https://www.speedscope.app/file-format-schema.json", "profiles": profiles,
           "shared": {"frames": frames}, "activeProfileIndex": None, "exporter": "py-spy@0.4.3",
           "name": "py-spy profile"}
    p = tmp_path / "profile.speedscope.json"
    p.write_text(json.dumps(doc))
    return load(p)
