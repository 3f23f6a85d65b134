"""Load time of a large flamegraph SVG as py-spy (inferno) writes it.

    .venv/bin/python benchmarks/bench_flamegraph_svg.py [--size-mb 50] [--keep DIR]

Generates an icicle SVG in inferno's layout (``<g><title>name (file.py:LINE) (N samples, P%)
</title><rect x="P%" y=".." width="P%" height="15" fill=".." fg:x="N" fg:w="N"/>...``, frames
written in shuffled order so nothing can rely on it) of a random call tree over a few thousand
functions, up to ``--size-mb`` MB. Then, in a child process (so the peak RSS is that run's
alone), it times ``traceclass.ingest.load`` (wall and CPU time: on a shared machine the CPU
time is the steadier figure) and checks the sample total against the root's.
"""

from __future__ import annotations

import argparse
import html
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

HEAD = ('<?xml version="1.0" standalone="no"?><!DOCTYPE svg PUBLIC "-//W3C//DTD SVG 1.1//EN" '
        '"http://www.w3.org/Graphics/SVG/1.1/DTD/svg11.dtd"><svg version="1.1" width="1200" height="{h}" '
        'onload="init(evt)" viewBox="0 0 1200 {h}" xmlns="http://www.w3.org/2000/svg" '
        'xmlns:xlink="http://www.w3.org/1999/xlink" xmlns:fg="http://github.com/jonhoo/inferno">'
        '<!--Flame graph stack visualization.--><text id="title" x="50.0000%" y="24.00">py-spy record '
        '-o big.svg -- python big.py</text><svg id="frames" x="10" width="1180" total_samples="{total}">')

_CHILD = """
import resource, sys, time
from traceclass.ingest import load
import traceclass.ingest.flamegraph_svg  # imports (pandas) outside the timing
import os
t, c = time.perf_counter(), time.process_time()
tr = load(sys.argv[1])
dt, dc = time.perf_counter() - t, time.process_time() - c
print(f"load {dt:.2f} s wall, {dc:.2f} s CPU (load average {os.getloadavg()[0]:.1f}); {int(tr.samples.count.sum()):,} samples, {len(tr.samples):,} sample rows, "
      f"{len(tr.stacks):,} stack nodes, {len(tr.frames):,} distinct frames; "
      f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")
"""


def generate(path: Path, size_mb: float, seed: int = 1) -> tuple[int, int]:
    rng = np.random.default_rng(seed)
    names = [html.escape(f"func_{i} (pkg/mod_{i % 300}.py:{int(rng.integers(1, 400))})") for i in range(4000)]
    total = 50_000_000
    target = int(size_mb * 1e6)
    parts: list[str] = []
    size = 0
    # depth-first: (depth, start sample, count)
    todo = [(0, 0, total, "all")]
    max_depth = 0
    while todo and size < target:
        depth, x, n, name = todo.pop()
        max_depth = max(max_depth, depth)
        s = (f'<g><title>{name} ({n} samples, {100 * n / total:.2f}%)</title><rect x="{100 * x / total:.4f}%" '
             f'y="{52 + 16 * depth}" width="{100 * n / total:.4f}%" height="15" fill="rgb(227,0,7)" '
             f'fg:x="{x}" fg:w="{n}"/><text x="{100 * x / total + 0.25:.4f}%" y="{62.5 + 16 * depth:.2f}"></text></g>\n')
        parts.append(s)
        size += len(s)
        if depth >= 60 or n < 2:
            continue
        k = int(rng.integers(1, 5))
        cuts = np.sort(rng.integers(0, n + 1, size=k))
        self_n = int(rng.integers(0, max(1, n // 10)))
        bounds = np.r_[0, cuts, n - self_n]
        bounds = np.clip(bounds, 0, n - self_n)
        picked = rng.choice(len(names), size=k + 1, replace=False)
        for j in range(len(bounds) - 1):
            w = int(bounds[j + 1] - bounds[j])
            if w > 0:
                todo.append((depth + 1, x + int(bounds[j]), w, names[picked[j]]))
    order = rng.permutation(len(parts))
    with open(path, "w") as fh:
        fh.write(HEAD.format(h=52 + 16 * (max_depth + 2), total=total))
        for i in order.tolist():
            fh.write(parts[i])
        fh.write("</svg></svg>\n")
    return len(parts), total


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size-mb", type=float, default=50.0)
    ap.add_argument("--keep", type=Path, help="directory to keep the generated file in")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        d = args.keep or Path(tmp)
        d.mkdir(parents=True, exist_ok=True)
        p = d / "big.svg"
        n, total = generate(p, args.size_mb)
        print(f"{p}: {p.stat().st_size / 1e6:.1f} MB, {n:,} frames drawn, {total:,} samples")
        out = subprocess.run([sys.executable, "-c", _CHILD, str(p)], capture_output=True, text=True)
        print(out.stdout.strip() or out.stderr.strip())


if __name__ == "__main__":
    main()
