"""Speed and memory of `traceclass analyze` against `json.load`, on real Kineto traces.

    .venv/bin/python benchmarks/bench_kineto.py [--size-mb 500] [--repeat 3] [--sources v100,cpu]
                                                [--stages] [--keep DIR]
    .venv/bin/python benchmarks/bench_kineto.py --stream-gb 10 [--gzip]   # larger than memory

Sources (``--sources``, default all): the corpus V100 (ResNet training, ns timestamps), H100
(TimeSformer inference), MI300X (ResNet training with activation checkpointing) and B200
(eager) GPU traces, and a CPU-only trace. Each is measured at its own size (gunzipped) and
replicated to about ``--size-mb`` MB: every copy is shifted past the previous one in time (by a
whole number of microseconds, in exact decimal arithmetic, so timestamps keep their digits) and
gets fresh External ids, correlation ids, flow ids and step numbers, so linking and stages
work as on a long run.

Each measurement runs in a fresh child process (so peak RSS is its own), ``--repeat`` times,
alternating which of the two goes first:

* ``json.load`` of the uncompressed file: wall time of the call, peak RSS;
* ``traceclass analyze FILE -o /dev/null`` (imports, read, link, analyses, every rule,
  markdown): wall time from before the CLI import to exit, peak RSS, and the stage times it
  prints with ``TRACECLASS_TIMINGS=1``. A file read in parts by forked helpers: CPU time
  includes theirs, and peak RSS is max(this process's VmHWM, its VmHWM at the last helper
  join + every helper's VmHWM), an upper bound on the process tree's peak (the helpers end at
  the join); the process tree's RSS sampled every 50 ms is printed beside it.

The table shows best and median wall seconds, the ratio of the medians (target <= 0.5x), the
same ratio in CPU seconds (user + sys of the process: steadier on a shared machine), peak RSS
over file size, and the RSS above what analyzing the smallest bundled sample needs, over file
size (target <= 2x). ``--stages`` adds the median time of every stage per source. HTA and
TraceLens run once on each plain file when importable by ``--peer-python`` (an interpreter of
an environment holding them; default this one), timed like analyze from before their import,
else the table says "not installed". At a source's own size the whole command is also timed
as a user runs it (``python -m traceclass analyze``, from starting the interpreter to its exit).

``--gzip`` also analyzes a gzip copy (compression level 1) of each replica, ``--repeat``
times, and sets its time against ``json.load`` of the plain file (the same content).

``--stream-gb N`` instead writes one N GB trace (V100 copies; ``--gzip`` compresses it on
the fly) and measures analyze's time and peak RSS on it once (json.load cannot hold it).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from decimal import Decimal
from pathlib import Path
from typing import Any, Callable, Iterable

import msgspec

from traceclass.timings import LINE as TIMING_LINE

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
CORPUS = ROOT.parent / "shared" / "corpus" / "torch"
SOURCES = {
    "v100": CORPUS / "gpu" / "v100_ns_resolution.json.gz",
    "h100": CORPUS / "gpu" / "h100_timesformer_inference.json.gz",
    "mi300x": CORPUS / "gpu" / "mi300x_resnet_act_checkpoint_train.json.gz",
    "b200": CORPUS / "gpu" / "b200_eager.json.gz",
    "cpu": CORPUS / "cpu" / "mixed_stack.step6.pt.trace.json.gz",
}
SMALLEST_SAMPLE = ROOT / "sample_traces" / "torch_cuda-event-sync_a100.json.gz"
_ID_KEYS = ("External id", "correlation", "Ev Idx", "Python id", "Python parent id")


def _load(source: Path) -> dict[str, Any]:
    """The trace with every non-integer number as a Decimal: shifting epoch-us timestamps as
    floats would round away their ns digits and make children outlive their parents."""
    with gzip.open(source, "rb") if source.suffix == ".gz" else open(source, "rb") as fh:
        return json.loads(fh.read(), parse_float=Decimal)


_ENC = msgspec.json.Encoder(decimal_format="number")
_NUMBER = (int, float, Decimal)


def replicate(trace: dict[str, Any], copies: int, write: Callable[[bytes], Any]) -> int:
    """Write ``trace`` with its events repeated ``copies`` times, each copy later in time and
    with fresh ids; returns the number of events written."""
    events = trace["traceEvents"]
    timed = [e for e in events if isinstance(e.get("ts"), _NUMBER) and e.get("ph") != "M"]
    t0 = min(e["ts"] for e in timed)
    t1 = max(e["ts"] + (e.get("dur") or 0) for e in timed)
    span = int(t1 - t0) + 1000  # whole us: shifted texts keep their digits
    max_id = 1
    for e in events:
        a = e.get("args") or {}
        for k in _ID_KEYS:
            if isinstance(a.get(k), int):
                max_id = max(max_id, a[k])
        if isinstance(e.get("id"), int):
            max_id = max(max_id, e["id"])
    head = {k: v for k, v in trace.items() if k != "traceEvents"}
    enc = _ENC
    write(enc.encode(head)[:-1] + (b"," if head else b"") + b'\n"traceEvents":[\n')
    n = 0
    for c in range(copies):
        shift, id_shift = c * span, c * (max_id + 1)
        out = []
        for e in events:
            if c and e.get("ph") == "M":
                continue
            e2 = dict(e)
            if c:
                ts = e2.get("ts")
                if isinstance(ts, _NUMBER):
                    e2["ts"] = ts + shift
                if isinstance(e2.get("id"), int):
                    e2["id"] += id_shift
                a = e2.get("args")
                if isinstance(a, dict):
                    a = dict(a)
                    for k in _ID_KEYS:
                        if isinstance(a.get(k), int) and a[k] > 0:
                            a[k] += id_shift
                    e2["args"] = a
                name = e2.get("name")
                if isinstance(name, str) and name.startswith("ProfilerStep#") and name[13:].isdigit():
                    e2["name"] = f"ProfilerStep#{int(name[13:]) + c * 1000}"
            out.append(e2)
        chunk = b",\n".join(enc.encode(e) for e in out)
        write((b",\n" if c else b"") + chunk)
        n += len(out)
    write(b"\n]}\n")
    return n


def build(source: Path, target_mb: float | None, out: Path, compress: bool = False) -> tuple[int, int]:
    """(copies, events) of ``source`` written to ``out``: one copy when ``target_mb`` is None."""
    trace = _load(source)
    if target_mb is None:
        copies = 1
    else:
        one = sum(len(_ENC.encode(e)) + 2 for e in trace["traceEvents"])
        copies = max(1, round(target_mb * 1e6 / one))
    with (gzip.open(out, "wb", compresslevel=1) if compress else open(out, "wb")) as fh:
        n = replicate(trace, copies, fh.write)
    _settle(out)
    return copies, n


def _settle(path: Path) -> None:
    """Write the generated file to disk before anything is timed: otherwise the kernel flushes
    its dirty pages (GBs for the streaming trace) while the analysis runs."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# peak RSS from VmHWM: ru_maxrss survives exec, so a child forked from this (large) process
# would report the parent's size
_PEAK = """
def _peak():
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
"""

_JSON_LOAD = """
import json, sys, time
_PEAK_
t, c = time.perf_counter(), time.process_time()
with open(sys.argv[1], "rb") as fh:
    d = json.load(fh)
print(time.perf_counter() - t, time.process_time() - c, _peak())
"""

# a file read in parts by forked helpers: their CPU time is added; the peak is bounded in child()
_ANALYZE = """
import resource, sys, time
_PEAK_
t, c = time.perf_counter(), time.process_time()
from traceclass.cli import main
rc = main(['analyze', sys.argv[1], '-o', '/dev/null'])
kids = resource.getrusage(resource.RUSAGE_CHILDREN)
print(time.perf_counter() - t, time.process_time() - c + kids.ru_utime + kids.ru_stime, _peak(),
      kids.ru_maxrss * 1024)
sys.exit(rc)
"""

_HTA = """
import os, shutil, sys, tempfile, time
_PEAK_
t = time.perf_counter()
from hta.trace_analysis import TraceAnalysis
d = tempfile.mkdtemp()
os.symlink(os.path.abspath(sys.argv[1]), os.path.join(d, "rank0.json"))
a = TraceAnalysis(trace_dir=d)
a.get_temporal_breakdown(visualize=False)
a.get_idle_time_breakdown(visualize=False)
shutil.rmtree(d)
print(time.perf_counter() - t, time.process_time(), _peak())
"""

_TRACELENS = """
import sys, time
_PEAK_
t = time.perf_counter()
from TraceLens import TreePerfAnalyzer
a = TreePerfAnalyzer.from_file(sys.argv[1])
a.get_df_gpu_timeline()
print(time.perf_counter() - t, time.process_time(), _peak())
"""

_JSON_LOAD, _ANALYZE, _HTA, _TRACELENS = (c.replace("_PEAK_", _PEAK) for c in (_JSON_LOAD, _ANALYZE, _HTA, _TRACELENS))

PEERS = {"HTA": ("hta", _HTA), "TraceLens": ("TraceLens", _TRACELENS)}


def child(code: str, path: Path, timings: bool = False, python: str = sys.executable
          ) -> tuple[float, float, int, dict[str, float]]:
    """(wall s, CPU s, peak RSS bytes, stage seconds) of ``code`` run on ``path`` in a fresh
    process of ``python``."""
    env = dict(os.environ)
    # as an installed package runs: with compiled bytecode (this sandbox sets the variable,
    # which makes every run recompile all of traceclass, ~0.25 s)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    if timings:
        env["TRACECLASS_TIMINGS"] = "1"
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen([python, "-c", code, str(path)], stdout=out, stderr=err, text=True, env=env)
        tree = 0
        while proc.poll() is None:  # the process and its helpers together, every 50 ms
            tree = max(tree, _tree_rss(proc.pid))
            time.sleep(0.05)
        out.seek(0), err.seek(0)
        stdout, stderr = out.read(), err.read()
    if proc.returncode != 0:
        raise RuntimeError(f"failed ({proc.returncode}) on {path.name}: {stderr.strip()[-400:]}")
    values = stdout.split()
    if code is _ANALYZE:
        secs, cpu, rss, kids = values[-4:]
    else:
        (secs, cpu, rss), kids = values[-3:], "0"
    stages: dict[str, float] = {"tree peak MB": tree / 2**20}
    helpers = 0.0
    for line in stderr.splitlines():
        m = TIMING_LINE.match(line)
        if m:
            name, val, mb, now = m.groups()
            stages[name] = stages.get(name, 0.0) + float(val)
            stages["peak MB after " + name] = float(mb)
            stages["resident MB after " + name] = float(now)
            helpers += float(mb) if name == "read helper" else 0.0  # each helper's own line
    peak = int(rss)
    if helpers:
        # helpers run only until the last join: this process's peak at that point plus every
        # helper's peak bounds the tree then; after it this process is alone (its VmHWM). An
        # upper bound (pages shared since the fork count twice); needs the timing lines
        joined = stages.get("peak MB after read helper join", 0.0)
        peak = max(peak, int((joined + helpers) * 2**20))
        stages["this process + largest helper MB"] = (int(rss) + int(kids)) / 2**20
    return float(secs), float(cpu), peak, stages


def _tree_rss(pid: int) -> int:
    """Resident bytes of ``pid`` and its descendants now (0 where /proc cannot tell)."""
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        try:
            with open(f"/proc/{p}/status") as fh:
                for line in fh:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1]) * 1024
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children") as fh:
                    todo += [int(c) for c in fh.read().split()]
        except (OSError, ValueError):
            continue
    return total


def importable(module: str, python: str) -> bool:
    proc = subprocess.run([python, "-c", f"import {module}"], capture_output=True)
    return proc.returncode == 0


def command_wall(path: Path) -> float:
    """Wall seconds of ``traceclass analyze PATH -o /dev/null`` as a user runs it: from
    starting the interpreter to the process's exit (the analyze column starts at the CLI's
    import and ends before the exit)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    t = time.perf_counter()
    subprocess.run([sys.executable, "-m", "traceclass", "analyze", str(path), "-o", os.devnull], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    return time.perf_counter() - t


def _med(xs: Iterable[float]) -> float:
    return statistics.median(list(xs))


def bench(path: Path, repeat: int, peers: dict[str, str], peer_python: str, command: bool) -> dict[str, Any]:
    jl: list[tuple[float, float, int, dict[str, float]]] = []
    an: list[tuple[float, float, int, dict[str, float]]] = []
    for r in range(repeat):
        order = ("json", "analyze") if r % 2 == 0 else ("analyze", "json")
        for what in order:
            if what == "json":
                jl.append(child(_JSON_LOAD, path))
            else:
                an.append(child(_ANALYZE, path, timings=True))
    stage_names = list(an[0][3])
    res: dict[str, Any] = {
        "json": [x[0] for x in jl], "json_cpu": [x[1] for x in jl], "json_rss": max(x[2] for x in jl),
        "analyze": [x[0] for x in an], "analyze_cpu": [x[1] for x in an], "analyze_rss": max(x[2] for x in an),
        "stages": {s: _med(a[3].get(s, 0.0) for a in an) for s in stage_names},
        "peers": {},
    }
    if command:
        res["command"] = [command_wall(path) for _ in range(repeat)]
    for name, code in peers.items():  # once each: minutes at ~500 MB
        try:
            t, _, rss, _ = child(code, path, python=peer_python)
            res["peers"][name] = (f"{t:.2f} s ({t / _med(res['analyze']):.1f}x traceclass, "
                                  f"{t / _med(res['json']):.1f}x json.load; peak RSS {rss / path.stat().st_size:.1f}x file)")
        except RuntimeError as exc:
            res["peers"][name] = f"failed: {' '.join(str(exc).split())[-120:]}"
    return res


def _stream(args: argparse.Namespace, tmp: Path) -> None:
    path = tmp / ("stream_trace.json.gz" if args.gzip else "stream_trace.json")
    t = time.perf_counter()
    trace = _load(SOURCES["v100"])
    one = sum(len(_ENC.encode(e)) + 2 for e in trace["traceEvents"])
    copies = max(1, round(args.stream_gb * 1e9 / one))
    raw = 0

    def count(b: bytes) -> None:
        nonlocal raw
        raw += len(b)
        fh.write(b)

    with (gzip.open(path, "wb", compresslevel=1) if args.gzip else open(path, "wb")) as fh:
        n = replicate(trace, copies, count)
    del trace
    _settle(path)
    print(f"built {path.name}: {raw / 1e9:.2f} GB uncompressed ({path.stat().st_size / 1e9:.2f} GB on disk), "
          f"{n:,} events, {copies} copies of {SOURCES['v100'].name}, in {time.perf_counter() - t:.0f} s", flush=True)
    secs, cpu, rss, stages = child(_ANALYZE, path, timings=True)
    tree = stages.pop("tree peak MB") * 2**20
    naive = stages.pop("this process + largest helper MB", 0.0) * 2**20
    print(f"traceclass analyze: {secs:.1f} s wall, {cpu:.1f} s CPU, peak RSS {rss / 1e9:.2f} GB ({rss / raw:.2f}x the uncompressed "
          f"size; target <= 4 GB for 10 GB)")
    if naive:
        print(f"  read in parts: the peak is max(this process's VmHWM, its VmHWM at the last helper join + every "
              f"helper's VmHWM); both peaks simply added: {naive / 1e9:.2f} GB")
    print(f"process tree (this process and its helpers) peak RSS, sampled every 50 ms: {tree / 1e9:.2f} GB")
    print("stages (s): " + ", ".join(f"{k} {v:.2f}" for k, v in stages.items() if not k.startswith(("peak", "resident"))))
    print("peak RSS (MB) after: " + ", ".join(f"{k[14:]} {v:.0f}" for k, v in stages.items()
                                             if k.startswith("peak MB after ") and not k.startswith("peak MB after rule ")))
    print("resident (MB) after: " + ", ".join(f"{k[18:]} {v:.0f}" for k, v in stages.items()
                                             if k.startswith("resident MB after ")))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size-mb", type=float, default=500, help="replicated size per source (MB; 0: skip)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--sources", default=",".join(SOURCES), help=f"comma-separated, of {','.join(SOURCES)}")
    ap.add_argument("--stages", action="store_true", help="print the median time of every stage")
    ap.add_argument("--keep", type=Path, help="directory to write the generated traces in (kept)")
    ap.add_argument("--stream-gb", type=float, help="generate one trace of this many GB and analyze it")
    ap.add_argument("--peer-python", default=sys.executable,
                    help="interpreter of an environment holding HTA / TraceLens (default: this one)")
    ap.add_argument("--gzip", action="store_true",
                    help="also analyze each replica gzip-compressed; with --stream-gb: write it gzip-compressed")
    args = ap.parse_args()
    if args.keep:
        args.keep.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=args.keep))
    try:
        if args.stream_gb:
            _stream(args, tmp)
            return
        load = os.getloadavg()
        print(f"machine: {os.cpu_count()} CPUs, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} "
              f"(1/5/15 min) at start", flush=True)
        peers = {}
        for name, (module, code) in PEERS.items():
            if importable(module, args.peer_python):
                peers[name] = code
                print(f"{name}: run by {args.peer_python}")
            else:
                print(f"{name}: not installed (for {args.peer_python})")
        smallest = [child(_ANALYZE, SMALLEST_SAMPLE) for _ in range(3)]
        whole = [command_wall(SMALLEST_SAMPLE) for _ in range(5)]
        base_rss = min(x[2] for x in smallest)
        print(f"smallest sample: analyze wall {min(x[0] for x in smallest):.2f} s best / "
              f"{_med(x[0] for x in smallest):.2f} s median, CPU {_med(x[1] for x in smallest):.2f} s median; "
              f"the whole command (interpreter start to exit) {min(whole):.2f} s best / {_med(whole):.2f} s median "
              f"(target <= 0.4 s wall)")
        print(f"baseline: peak RSS analyzing the smallest sample ({SMALLEST_SAMPLE.name}) "
              f"{base_rss / 1e6:.0f} MB", flush=True)
        rows = []
        for key in args.sources.split(","):
            src = SOURCES[key]
            for target in (None, args.size_mb or None) if args.size_mb else (None,):
                path = tmp / f"{key}{'' if target is None else f'_x{int(target)}mb'}.json"
                copies, n = build(src, target, path)
                size = path.stat().st_size
                res = bench(path, args.repeat, peers, args.peer_python, command=target is None)
                rows.append((key, size, copies, n, res))
                if args.gzip and target is not None:
                    gz = path.with_suffix(".json.gz")
                    with open(path, "rb") as src, gzip.open(gz, "wb", compresslevel=1) as dst:
                        shutil.copyfileobj(src, dst, 1 << 20)
                    _settle(gz)
                    an = [child(_ANALYZE, gz, timings=True) for _ in range(args.repeat)]
                    zres = dict(res, analyze=[x[0] for x in an], analyze_cpu=[x[1] for x in an],
                                analyze_rss=max(x[2] for x in an), peers={},
                                stages={s: _med(a[3].get(s, 0.0) for a in an) for s in an[0][3]})
                    # json.load columns: the plain file's; size: the content's
                    rows.append((f"{key} x{copies} gzip ({gz.stat().st_size / 1e6:.0f} MB)", size, 1, n, zres))
                    zm = _med(zres["analyze"])
                    print(f"{key:7s} gzip {gz.stat().st_size / 1e6:6.1f} MB  analyze {min(zres['analyze']):6.2f}/{zm:6.2f} s"
                          f"  ratio to json.load of the plain file {zm / _med(res['json']):4.2f}x  stages: "
                          + ", ".join(f"{k} {v:.2f}" for k, v in zres["stages"].items()
                                      if k in ("read split points", "read helper", "read helper join", "read")),
                          flush=True)
                    gz.unlink()
                jm, am = _med(res["json"]), _med(res["analyze"])
                print(f"{key:7s} {size / 1e6:7.1f} MB  {n:>10,} events ({copies} cop{'y' if copies == 1 else 'ies'})"
                      f"  analyze {min(res['analyze']):6.2f}/{am:6.2f} s  json.load {min(res['json']):6.2f}/"
                      f"{jm:6.2f} s  ratio {am / jm:4.2f}x (CPU {_med(res['analyze_cpu']) / _med(res['json_cpu']):4.2f}x)  peak RSS {res['analyze_rss'] / size:5.2f}x file  "
                      f"above baseline {(res['analyze_rss'] - base_rss) / size:5.2f}x file  "
                      f"(json.load {res['json_rss'] / size:4.2f}x)", flush=True)
                if "command" in res:
                    cm = _med(res["command"])
                    print(f"        the whole command (interpreter start to exit): {min(res['command']):.2f}/{cm:.2f} s, "
                          f"ratio {cm / jm:4.2f}x", flush=True)
                for name, cell in res["peers"].items():
                    print(f"        {name}: {cell}", flush=True)
                if args.stages:
                    st = res["stages"]
                    rules = sum(v for k, v in st.items() if k.startswith("rule "))
                    other = am - sum(st.get(k, 0.0) for k in ("read", "analyses", "report", "render")) - rules
                    print("        stages (median s): imports+startup ~" + f"{other:.2f}, " + ", ".join(
                        f"{k} {v:.3f}" for k, v in st.items() if v >= 0.0005 and not k.startswith(("peak", "resident", "tree", "this process"))),
                        flush=True)
                    print("        peak RSS (MB) after: " + ", ".join(
                        f"{k[14:]} {v:.0f}" for k, v in st.items() if k.startswith("peak MB after ")
                        and not k.startswith("peak MB after rule "))
                        + f"; process tree (with helpers) sampled every 50 ms: {st.get('tree peak MB', 0):.0f}", flush=True)
                path.unlink()
        print()
        print(f"| source | size MB | events | analyze s (best / median) | json.load s (best / median) "
              f"| ratio (medians) | CPU ratio (medians) | peak RSS / file | RSS above baseline / file | json.load RSS / file |"
              + "".join(f" {p} |" for p in PEERS))
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|" + "---|" * len(PEERS))
        for key, size, copies, n, res in rows:
            jm, am = _med(res["json"]), _med(res["analyze"])
            label = key if copies == 1 else f"{key} x{copies}"
            peer_cells = "".join(f" {res['peers'].get(p, '-' if p in peers else 'not installed')} |" for p in PEERS)
            print(f"| {label} | {size / 1e6:.1f} | {n:,} | {min(res['analyze']):.2f} / {am:.2f} | "
                  f"{min(res['json']):.2f} / {jm:.2f} | {am / jm:.2f}x | "
                  f"{_med(res['analyze_cpu']) / _med(res['json_cpu']):.2f}x | {res['analyze_rss'] / size:.2f}x | "
                  f"{(res['analyze_rss'] - base_rss) / size:.2f}x | {res['json_rss'] / size:.2f}x |{peer_cells}")
        load = os.getloadavg()
        print(f"\nload average at end: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; repeats: {args.repeat}")
    finally:
        if not args.keep:
            for p in tmp.iterdir():
                p.unlink()
            tmp.rmdir()


if __name__ == "__main__":
    main()
