"""Speed and memory of loading and analyzing a large py-spy profile (speedscope and collapsed).

    .venv/bin/python benchmarks/bench_pyspy.py [--samples 1000000] [--stacks 30000] [--depth 40]
                                               [--threads 4] [--keep DIR]

Generates a py-spy-like recording in a temporary directory: a synthetic program of call
paths (``--stacks`` distinct stacks of up to ``--depth`` frames over a few thousand
functions in a few hundred files, recursion included), sampled ``--samples`` times across
``--threads`` threads with a skewed (Zipf) popularity and py-spy's habit of repeating a stack
for consecutive samples. It writes the same recording twice, as py-spy would:

* ``-f speedscope``: one sampled profile per thread, one entry per sample, weights 0.01 s,
* ``-f raw --threads``: one collapsed line per distinct (thread, stack) with its count.

Then, each in its own child process (so the peak RSS is that run's alone), it measures
``traceclass.ingest.load`` + ``profile_samples`` + the markdown section, and ``json.load`` of
the speedscope file as a baseline, and prints wall time and peak RSS.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

_CHILD = """
import resource, sys, time
t = time.perf_counter()
from traceclass.ingest import load
from traceclass.analysis.cpu_profile import profile_samples
from traceclass.render.cpu_markdown import cpu_profile_markdown
t_import = time.perf_counter() - t
t = time.perf_counter()
trace = load(sys.argv[1])
t_load = time.perf_counter() - t
t = time.perf_counter()
prof = profile_samples(trace)
md = cpu_profile_markdown(prof)
t_an = time.perf_counter() - t
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(t_load, t_an, rss, prof.samples, len(trace.stacks), len(trace.samples), t_import)
"""

_JSON_LOAD = """
import json, resource, sys, time
t = time.perf_counter()
with open(sys.argv[1], "rb") as fh:
    d = json.load(fh)
print(time.perf_counter() - t, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
"""


def generate(n_samples: int, n_stacks: int, depth: int, n_threads: int, seed: int = 1):
    """(frames as (name, file, line), stacks as lists of frame ids, per-thread sample sequences)."""
    rng = np.random.default_rng(seed)
    n_files = 300
    n_funcs = 4000
    files = [f"/srv/app/pkg{i % 17}/module_{i}.py" for i in range(n_files)]
    funcs = [(f"func_{i}" if i % 5 else f"Class{i % 97}.method_{i}", files[i % n_files]) for i in range(n_funcs)]
    frames: list[tuple[str, str, int]] = []
    frame_id: dict[tuple[str, str, int], int] = {}

    def frame(fn: int, line: int) -> int:
        key = (funcs[fn][0], funcs[fn][1], line)
        if key not in frame_id:
            frame_id[key] = len(frames)
            frames.append(key)
        return frame_id[key]

    # grow stacks as paths of a random call tree: each new stack extends a prefix of an old one
    stacks: list[list[int]] = [[frame(0, 1)]]
    while len(stacks) < n_stacks:
        base = stacks[int(rng.integers(max(0, len(stacks) - 2000), len(stacks)))]
        keep = int(rng.integers((len(base) + 1) // 2, len(base) + 1))
        new = base[:keep]
        for _ in range(int(rng.integers(1, 12))):
            if len(new) >= depth:
                break
            if rng.random() < 0.05 and len(new) > 1:
                new.append(new[-1])  # recursion
            else:
                fn = int(rng.integers(0, n_funcs))
                # a function calls out from a handful of its lines, not from anywhere
                new.append(frame(fn, 10 + (fn * 7 + int(rng.integers(0, 4))) % 300))
        stacks.append(new)
    # a long tail of stack popularity, as in real programs
    popularity = 1.0 / np.arange(1, n_stacks + 1) ** 0.9
    popularity = rng.permutation(popularity / popularity.sum())
    # runs of equal consecutive samples, as py-spy records a thread that stays put
    runs = rng.choice(n_stacks, size=n_samples, p=popularity)
    lengths = rng.geometric(0.3, size=n_samples)
    per_thread = []
    left = n_samples
    for t in range(n_threads):
        n = left // (n_threads - t)
        left -= n
        lo = t * (n_samples // n_threads)
        per_thread.append(np.repeat(runs[lo : lo + n], lengths[lo : lo + n])[:n].astype(np.int64))
    return frames, stacks, per_thread


def write_speedscope(path: Path, frames, stacks, per_thread) -> None:
    with open(path, "w") as fh:
        fh.write('{"$schema":"https://www.speedscope.app/file-format-schema.json","profiles":[')
        for t, seq in enumerate(per_thread):
            if t:
                fh.write(",")
            fh.write(json.dumps({"type": "sampled", "name": f'Thread {1000 + t} "worker-{t}"', "unit": "seconds",
                                 "startValue": 0.0, "endValue": len(seq) * 0.01})[:-1])
            fh.write(',"samples":[')
            # py-spy writes frame indices root first
            text = [json.dumps(s, separators=(",", ":")) for s in stacks]
            fh.write(",".join(text[i] for i in seq.tolist()))
            fh.write('],"weights":[' + ",".join(["0.01"] * len(seq)) + "]}")
        fh.write('],"shared":{"frames":')
        fh.write(json.dumps([{"name": n, "file": f, "line": ln, "col": None} for n, f, ln in frames]))
        fh.write('},"activeProfileIndex":null,"exporter":"py-spy@0.4.3","name":"py-spy profile"}')


def write_collapsed(path: Path, frames, stacks, per_thread) -> None:
    text = [f"{n} ({os.path.basename(f)}:{ln})" for n, f, ln in frames]
    with open(path, "w") as fh:
        for t, seq in enumerate(per_thread):
            ids, counts = np.unique(seq, return_counts=True)
            root = f"thread ({1000 + t}): worker-{t}"
            for s, c in zip(ids.tolist(), counts.tolist()):
                fh.write(root + ";" + ";".join(text[i] for i in stacks[s]) + f" {c}\n")


def run_child(code: str, path: Path) -> list[str]:
    proc = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"child failed on {path}:\n{proc.stderr[-3000:]}")
    return proc.stdout.split()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--samples", type=int, default=1_000_000)
    ap.add_argument("--stacks", type=int, default=30_000)
    ap.add_argument("--depth", type=int, default=40)
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--keep", type=Path, help="directory to keep the generated files in")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(dir=args.keep)) if args.keep else Path(tempfile.mkdtemp())
    t = time.perf_counter()
    frames, stacks, per_thread = generate(args.samples, args.stacks, args.depth, args.threads)
    ss = tmp / "bench.speedscope.json"
    raw = tmp / "bench.raw.txt"
    write_speedscope(ss, frames, stacks, per_thread)
    write_collapsed(raw, frames, stacks, per_thread)
    mean_depth = sum(len(s) for s in stacks) / len(stacks)
    print(f"generated {args.samples:,} samples, {len(stacks):,} distinct stacks (mean depth {mean_depth:.1f}), "
          f"{len(frames):,} frames, {args.threads} threads in {time.perf_counter() - t:.1f} s")
    print(f"  speedscope {ss.stat().st_size / 1e6:.1f} MB, collapsed {raw.stat().st_size / 1e6:.1f} MB "
          f"({sum(1 for _ in open(raw)):,} lines)")
    jl = run_child(_JSON_LOAD, ss)
    print(f"json.load(speedscope):             {float(jl[0]):6.2f} s   peak RSS {int(jl[1]) / 1e6:6.0f} MB")
    for label, path in (("speedscope", ss), ("collapsed", raw)):
        out = run_child(_CHILD, path)
        t_load, t_an, rss, n, nodes, rows = float(out[0]), float(out[1]), int(out[2]), int(out[3]), int(out[4]), int(out[5])
        assert n == args.samples, (n, args.samples)
        print(f"load+analyze {label:<10}: load {t_load:6.2f} s + analyze {t_an:5.2f} s = {t_load + t_an:6.2f} s"
              f"   peak RSS {rss / 1e6:6.0f} MB   ({nodes:,} trie nodes, {rows:,} sample rows)")
    if not args.keep:
        for p in (ss, raw):
            p.unlink()
        tmp.rmdir()


if __name__ == "__main__":
    main()
