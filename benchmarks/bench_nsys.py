"""Benchmark: ``traceclass analyze`` on a large Nsight Systems SQLite export, end to end.

Writes (in a temporary folder) an export with the real tables and columns of nsys 2025.5
(schema 3.24.0): by default 1,000,000 kernels with their 1,000,000 ``cudaLaunchKernel`` calls,
plus stream syncs, memcpys, NVTX ranges in torch ``emit_nvtx`` form and user ranges. Then

* **end to end**: runs ``python -m traceclass analyze FILE -o /dev/null`` as a child process
  (interpreter start, imports, load, analysis, rules, report, render) and reports its wall
  time and peak RSS (``getrusage(RUSAGE_CHILDREN)`` in a wrapper process whose only child
  it is, so the figure is that run's alone);
* **load only**, as a breakdown: ``traceclass.ingest.load()`` in a fresh child, timed and
  with its own peak RSS.

Target (issue: 1M-kernel exports): end to end <= 10 s and < 1.5 GB peak RSS on a 2-core
machine. ``--file PATH`` measures an existing export instead of generating one.

    .venv/bin/python benchmarks/bench_nsys.py [--kernels N] [--repeat R] [--file PATH] [--check]
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

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "ingest"))

import nsys_fixtures as fx  # noqa: E402

TARGET_S = 10.0
TARGET_RSS = 1.5e9

_CHILD = r"""
import json, resource, sys, time
t0 = time.perf_counter()
from traceclass.ingest import load
t1 = time.perf_counter()
trace = load(sys.argv[1])
t2 = time.perf_counter()
print(json.dumps({
    "import_s": t1 - t0,
    "load_s": t2 - t1,
    "rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
    "kernels": int((trace.gpu.kind == 0).sum()),
    "gpu_rows": len(trace.gpu),
    "api": len(trace.api),
    "linked": int((trace.gpu.api >= 0).sum()),
    "ops": len(trace.ops),
    "annotations": len(trace.annotations),
}))
"""


def generate(path: Path, n_kernels: int, seed: int = 0) -> dict[str, int]:
    """A plausible training-loop export: one process, two launching threads, 4 streams."""
    rng = np.random.default_rng(seed)
    n_sync = max(n_kernels // 100, 1)
    n_copy = max(n_kernels // 50, 1)
    n_ops = max(n_kernels // 20, 1)
    with fx.NsysExportBuilder(path, "2025.5") as b:
        b.gpu()
        b.process("python")
        tids = (fx.TID, fx.TID + 7)
        for i, tid in enumerate(tids):
            b.thread("python" if i == 0 else "pt_autograd_0", tid=tid)
        names = [b.string(f"kernel_{i:03d}") for i in range(200)]
        demangled = [b.string(f"void ns::kernel_{i:03d}<float, {i % 7}>(float *, int)") for i in range(200)]
        launch = b.string("cudaLaunchKernel_v7000")
        sync = b.string("cudaStreamSynchronize_v3020")
        memcpy = b.string("cudaMemcpyAsync_v3020")

        # host: a launch every 3-5 us, each 2 us long; GPU: kernels of 1-6 us, each starting
        # 1 us after its launch or when the previous kernel ends (max-plus scan, vectorized)
        api_start = 1_000_000_000 + np.cumsum(rng.integers(3_000, 5_000, n_kernels))
        api_end = api_start + 2_000
        k_dur = rng.integers(1_000, 6_000, n_kernels)
        done_before = np.concatenate([[0], np.cumsum(k_dur)[:-1]])
        k_start = np.maximum.accumulate(api_end + 1_000 - done_before) + done_before
        k_end = k_start + k_dur
        which = rng.integers(0, 200, n_kernels)
        tid_of = np.where(rng.random(n_kernels) < 0.9, tids[0], tids[1])
        gtid = [fx.global_tid(fx.PID, int(t)) for t in tids]
        gtid_of = np.where(tid_of == tids[0], gtid[0], gtid[1])
        corr = np.arange(1, n_kernels + 1)
        b.insert_many(
            "CUPTI_ACTIVITY_KIND_RUNTIME",
            ("start", "end", "eventClass", "globalTid", "correlationId", "nameId", "returnValue"),
            zip(api_start.tolist(), api_end.tolist(), [0] * n_kernels, gtid_of.tolist(),
                corr.tolist(), [launch] * n_kernels, [0] * n_kernels),
        )
        gpid = fx.global_pid(fx.PID)
        b.insert_many(
            "CUPTI_ACTIVITY_KIND_KERNEL",
            ("start", "end", "deviceId", "contextId", "streamId", "correlationId", "globalPid",
             "demangledName", "shortName", "registersPerThread", "gridX", "gridY", "gridZ",
             "blockX", "blockY", "blockZ", "staticSharedMemory", "dynamicSharedMemory",
             "launchType"),
            zip(k_start.tolist(), k_end.tolist(), [0] * n_kernels, [1] * n_kernels,
                (7 + which % 4).tolist(), corr.tolist(), [gpid] * n_kernels,
                [demangled[w] for w in which.tolist()], [names[w] for w in which.tolist()],
                (32 + which % 64).tolist(), (1 + which * 13).tolist(), [1] * n_kernels,
                [1] * n_kernels, [256] * n_kernels, [1] * n_kernels, [1] * n_kernels,
                [0] * n_kernels, (which * 64).tolist(), [1] * n_kernels),
        )
        # stream syncs and async copies between launches (own correlation ids)
        at = np.sort(rng.choice(n_kernels - 1, n_sync + n_copy, replace=False))
        c = n_kernels + 1
        rt_rows, sync_rows, copy_rows = [], [], []
        for j, i in enumerate(at.tolist()):
            s = int(api_end[i]) + 300
            if j % (n_sync + n_copy) < n_sync:
                rt_rows.append((s, s + 400, 0, int(gtid_of[i]), c, sync, 0))
                sync_rows.append((s, s + 400, 0, 1, 7, c, gpid, 3, 0))
            else:
                rt_rows.append((s, s + 400, 0, int(gtid_of[i]), c, memcpy, 0))
                copy_rows.append((s + 500, s + 2_500, 0, 1, 8, c, gpid, 1 << 20, 1, 1, 2))
            c += 1
        b.insert_many("CUPTI_ACTIVITY_KIND_RUNTIME",
                      ("start", "end", "eventClass", "globalTid", "correlationId", "nameId",
                       "returnValue"), rt_rows)
        b.insert_many("CUPTI_ACTIVITY_KIND_SYNCHRONIZATION",
                      ("start", "end", "deviceId", "contextId", "streamId", "correlationId",
                       "globalPid", "syncType", "eventId"), sync_rows)
        b.insert_many("CUPTI_ACTIVITY_KIND_MEMCPY",
                      ("start", "end", "deviceId", "contextId", "streamId", "correlationId",
                       "globalPid", "bytes", "copyKind", "srcKind", "dstKind"), copy_rows)
        # NVTX: emit_nvtx op ranges around every 20th launch, and one step range per 1000
        idx = np.arange(0, n_kernels, 20)[:n_ops]
        ops = ("aten::addmm", "aten::relu", "aten::add", "aten::mul", "aten::cat")
        nvtx_rows = []
        for j, i in enumerate(idx.tolist()):
            name = ops[j % len(ops)]
            text = fx.emit_nvtx_text(name, j, j + 1, [[64, 128 + j % 8], [128 + j % 8, 32]])
            nvtx_rows.append((int(api_start[i]) - 500, int(api_end[i]) + 500, 59, text,
                              int(gtid_of[i]), 0))
        for s in range(0, n_kernels, 1000):
            e = min(s + 999, n_kernels - 1)
            nvtx_rows.append((int(api_start[s]) - 1_000, int(api_end[e]) + 1_000, 59,
                              f"ProfilerStep#{s // 1000}", gtid[0], 0))
        b.insert_many("NVTX_EVENTS", ("start", "end", "eventType", "text", "globalTid", "domainId"),
                      nvtx_rows)
        b.insert("ANALYSIS_DETAILS", globalVid=fx.HOST_VM, duration=int(k_end.max()) - 999_000_000,
                 startTime=999_000_000, stopTime=int(k_end.max()))
    return {
        "kernels": n_kernels,
        "api": n_kernels + n_sync + n_copy,
        "memcpy": n_copy,
        "nvtx": len(nvtx_rows),
    }


#: Wrapper around one ``traceclass analyze`` child: RUSAGE_CHILDREN then covers that child only.
_E2E = r"""
import json, os, resource, subprocess, sys, time
cmd = [sys.executable, "-m", "traceclass", "analyze", sys.argv[1], "-o", os.devnull]
t0 = time.perf_counter()
proc = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True)
wall = time.perf_counter() - t0
print(json.dumps({
    "wall_s": wall,
    "rss_bytes": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024,
    "rc": proc.returncode,
    "stderr": proc.stderr[-2000:],
}))
"""


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), env.get("PYTHONPATH", "")])
    return env


def _child(code: str, path: Path) -> dict:
    out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True,
                         text=True, env=_env(), check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def measure(path: Path) -> dict:
    """Load only, in a fresh interpreter: times, peak RSS and row counts."""
    return _child(_CHILD, path)


def measure_analyze(path: Path) -> dict:
    """``traceclass analyze FILE -o /dev/null`` in a child: wall time and peak RSS."""
    got = _child(_E2E, path)
    if got["rc"] != 0:
        raise SystemExit(f"bench_nsys: traceclass analyze exited {got['rc']}:\n{got['stderr']}")
    return got


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernels", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=1, help="runs of each measurement; the best time is reported")
    ap.add_argument("--file", type=Path, help="measure this export instead of generating one")
    ap.add_argument("--check", action="store_true", help="exit 1 when an end-to-end target is missed")
    args = ap.parse_args()
    repeat = max(args.repeat, 1)
    with tempfile.TemporaryDirectory(prefix="bench-nsys-") as tmp:
        if args.file is not None:
            path, made, gen_s = args.file, None, None
        else:
            path = Path(tmp) / "bench.sqlite"
            t = time.perf_counter()
            made = generate(path, args.kernels)
            gen_s = time.perf_counter() - t
        size = path.stat().st_size
        e2e = [measure_analyze(path) for _ in range(repeat)]
        loads = [measure(path) for _ in range(repeat)]
    best = min(loads, key=lambda r: r["load_s"])
    load_rss = max(r["rss_bytes"] for r in loads)
    wall = min(r["wall_s"] for r in e2e)
    rss = max(r["rss_bytes"] for r in e2e)
    assert best["linked"] == best["gpu_rows"], best
    if made is not None:
        assert best["kernels"] == made["kernels"], best
        what = (f"{made['kernels']:,} kernels + {made['api']:,} API calls + {made['memcpy']:,} memcpy + "
                f"{made['nvtx']:,} NVTX ranges ({size / 2**20:.0f} MiB, nsys 2025.5 schema)")
    else:
        what = f"{path.name}: {best['kernels']:,} kernels, {best['api']:,} API calls ({size / 2**20:.0f} MiB)"
    ok = wall <= TARGET_S and rss < TARGET_RSS
    runs = f"best of {repeat}" if repeat > 1 else "1 run"
    print(f"bench_nsys: {what}, {os.cpu_count()} CPUs"
          + (f", generated in {gen_s:.1f} s" if gen_s is not None else ""))
    print(f"  end to end (traceclass analyze -o /dev/null, {runs}): {wall:.2f} s, "
          f"peak RSS {rss / 2**20:.0f} MiB; target <= {TARGET_S:.0f} s, < {TARGET_RSS / 1e9:.1f} GB: "
          f"{'OK' if ok else 'MISSED'}")
    print(f"  load only (traceclass.ingest.load, {runs}): {best['load_s']:.2f} s "
          f"(+{best['import_s']:.2f} s import), peak RSS {load_rss / 2**20:.0f} MiB; "
          f"{best['gpu_rows']:,} GPU rows, all linked, {best['ops']:,} ops, "
          f"{best['annotations']:,} annotations")
    return 0 if ok or not args.check else 1


if __name__ == "__main__":
    raise SystemExit(main())
