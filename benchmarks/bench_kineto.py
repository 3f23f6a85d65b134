"""End-to-end speed and memory of `traceclass analyze` on a large Kineto GPU trace.

    .venv/bin/python benchmarks/bench_kineto.py [--size-mb 500] [--source FILE] [--keep DIR]

Builds a realistic trace of about ``--size-mb`` MB (uncompressed JSON) by replicating the
events of a real corpus trace (default: the V100 ResNet training trace, 5 steps, ns
timestamps): each copy is shifted past the previous one in time and gets fresh External ids,
correlation ids and step numbers, so linking and stages work as on a real long run. Then, in
separate child processes (so peak RSS is clean), it measures:

* ``json.load`` of the file (the baseline the targets are stated against),
* ``traceclass analyze FILE -o /dev/null`` (load + analyze + rules + markdown).

and prints wall time, peak RSS and the ratios: targets are analyze <= 1.0x json.load time and
peak RSS <= 2x the file size.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT_SOURCE = HERE.parent.parent / "shared" / "corpus" / "torch" / "gpu" / "v100_ns_resolution.json.gz"


def build(source: Path, target_mb: int, out: Path) -> tuple[int, int]:
    with gzip.open(source, "rb") if source.suffix == ".gz" else open(source, "rb") as fh:
        trace = json.load(fh)
    events = trace["traceEvents"]
    timed = [e for e in events if isinstance(e.get("ts"), (int, float)) and e.get("ph") == "X"]
    t0 = min(e["ts"] for e in timed)
    t1 = max(e["ts"] + e.get("dur", 0) for e in timed)
    span = (t1 - t0) + 1000.0
    max_id = 0
    for e in events:
        a = e.get("args") or {}
        for k in ("External id", "correlation"):
            if isinstance(a.get(k), int):
                max_id = max(max_id, a[k])
        if isinstance(e.get("id"), int):
            max_id = max(max_id, e["id"])
    one = len(json.dumps(events, indent=1))
    copies = max(1, int(target_mb * 1e6 // one))
    head = {k: v for k, v in trace.items() if k != "traceEvents"}
    n_events = 0
    with open(out, "w") as fh:
        fh.write(json.dumps(head, indent=1)[:-2] + ',\n "traceEvents": [\n')
        first = True
        for c in range(copies):
            shift = c * span
            id_shift = c * (max_id + 1)
            for e in events:
                if c and e.get("ph") == "M":
                    continue
                e2 = dict(e)
                if isinstance(e2.get("ts"), (int, float)):
                    e2["ts"] = round(e2["ts"] + shift, 3)
                if isinstance(e2.get("id"), int):
                    e2["id"] = e2["id"] + id_shift
                a = e2.get("args")
                if isinstance(a, dict):
                    a = dict(a)
                    for k in ("External id", "correlation"):
                        if isinstance(a.get(k), int) and a[k] > 0:
                            a[k] = a[k] + id_shift
                    e2["args"] = a
                if isinstance(e2.get("name"), str) and e2["name"].startswith("ProfilerStep#"):
                    e2["name"] = f"ProfilerStep#{int(e2['name'][13:]) + c * 100}"
                fh.write(("" if first else ",\n") + json.dumps(e2, indent=1))
                first = False
                n_events += 1
        fh.write("\n]}\n")
    return copies, n_events


_JSON_LOAD = """
import json, resource, sys, time
t = time.perf_counter()
with open(sys.argv[1], "rb") as fh:
    d = json.load(fh)
dt = time.perf_counter() - t
print(dt, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
"""


def measure(cmd: list[str]) -> tuple[float, int, str]:
    t = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t
    if proc.returncode != 0:
        raise SystemExit(f"command failed ({proc.returncode}): {' '.join(cmd)}\n{proc.stderr[-2000:]}")
    rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
    return wall, rss, proc.stdout


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size-mb", type=int, default=500)
    ap.add_argument("--source", type=Path, default=DEFAULT_SOURCE)
    ap.add_argument("--keep", type=Path, help="directory to keep the generated trace in")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(dir=args.keep)) if args.keep else Path(tempfile.mkdtemp())
    path = tmp / "bench_trace.json"
    t = time.perf_counter()
    copies, n = build(args.source, args.size_mb, path)
    size = path.stat().st_size
    print(f"built {path} ({size / 1e6:.0f} MB, {n:,} events, {copies} copies of {args.source.name}) "
          f"in {time.perf_counter() - t:.1f} s", flush=True)
    # json.load first, in its own child; ru_maxrss of children is a running maximum, so the
    # analyze child runs second and its peak is read from its own report
    jl_wall, jl_rss, out = measure([sys.executable, "-c", _JSON_LOAD, str(path)])
    jl_time = float(out.split()[0])
    jl_rss = int(out.split()[1])
    cmd = [sys.executable, "-c",
           "import resource, sys, time; from traceclass.cli import main; t=time.perf_counter(); "
           "rc=main(['analyze', sys.argv[1], '-o', '/dev/null']); "
           "print(time.perf_counter()-t, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss*1024); sys.exit(rc)",
           str(path)]
    an_wall, _, out = measure(cmd)
    an_time = float(out.split()[0])
    an_rss = int(out.split()[1])
    print(f"json.load:          {jl_time:6.2f} s   peak RSS {jl_rss / 1e6:7.0f} MB ({jl_rss / size:.2f}x file)")
    print(f"traceclass analyze: {an_time:6.2f} s   peak RSS {an_rss / 1e6:7.0f} MB ({an_rss / size:.2f}x file)"
          f"   [process wall incl. interpreter start {an_wall:.2f} s]")
    print(f"ratio analyze/json.load time: {an_time / jl_time:.2f}x (target <= 1.0x); "
          f"RSS/file: {an_rss / size:.2f}x (target <= 2x)")
    if not args.keep:
        os.unlink(path)
        os.rmdir(tmp)


if __name__ == "__main__":
    main()
