"""Many ranks: `traceclass analyze DIR` over N generated rank files, local workers and Dask.

    .venv/bin/python benchmarks/bench_cluster.py --ranks 100 300 1000 [--jobs 2] [--dask] [--keep DIR]

Generates one Kineto GPU rank trace of about ``--mb`` MB (uncompressed JSON: ``--steps`` steps of
``--kernels`` GEMM launches, an all-reduce with ``record_param_comms`` args and ``Seq`` per step,
ProfilerStep annotations), then writes it once per rank with that rank's ``distributedInfo.rank``,
a rank-dependent clock offset and a late arrival on rank 1 (text substitution: generating is not
what is measured). For each rank count it runs, in a fresh child process (so the RSS is the
coordinator's own, not the workers'):

* the local engine: ``traceclass analyze DIR --format json --jobs J -o OUT``;
* with ``--dask``: the same through ``--scheduler-file`` of a ``dask scheduler`` and
  ``dask worker --nworkers J --nthreads 1`` started on 127.0.0.1 (and stopped after),

and prints wall time, the coordinator's peak RSS (``ru_maxrss`` of the child itself, workers not
included), the mean summary size per rank and the verdict's straggler list.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

STEP_NS = 20_000_000
BASE = 1_700_000_000_000_000_000


def _us(ns: int) -> str:
    return f"{ns // 1000}.{ns % 1000:03d}"


def rank_template(steps: int, kernels: int, world: int) -> str:
    """One rank's trace as text with @RANK@, @OFF(ns)@ placeholders resolved per rank."""
    ev = []
    ext = corr = 0
    for s in range(steps):
        t = 1_000_000_000 + s * STEP_NS
        ev.append(f'{{"ph":"X","cat":"user_annotation","name":"ProfilerStep#{s}","pid":1,"tid":1,'
                  f'"ts":@T{t}@,"dur":{_us(STEP_NS - 1000)},"args":{{"External id":{ext}}}}}')
        g = t + 200_000
        for k in range(kernels):
            ext += 1
            corr += 1
            h = t + 100_000 + k * 10_000
            ev.append(f'{{"ph":"X","cat":"cpu_op","name":"aten::mm","pid":1,"tid":1,"ts":@T{h}@,"dur":8.000,'
                      f'"args":{{"External id":{ext},"Input Dims":[[1024,1024],[1024,1024]],'
                      f'"Input type":["c10::BFloat16","c10::BFloat16"]}}}}')
            ev.append(f'{{"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":1,"tid":1,"ts":@T{h + 1000}@,'
                      f'"dur":4.000,"args":{{"External id":{ext},"correlation":{corr},"cbid":211}}}}')
            ev.append(f'{{"ph":"X","cat":"kernel","name":"sm90_xmma_gemm_bf16bf16_bf16f32","pid":0,"tid":7,'
                      f'"ts":@T{g}@,"dur":{_us(60_000)},"args":{{"External id":{ext},"correlation":{corr},'
                      f'"device":0,"stream":7,"grid":[132,1,1],"block":[256,1,1]}}}}')
            g += 62_000
        ext += 1
        corr += 1
        args = (f'"Collective name":"allreduce","dtype":"BFloat16","In msg nelems":33554432,'
                f'"Out msg nelems":33554432,"Group size":{world},"Process Group Name":"0",'
                f'"Process Group Description":"default_pg","Seq":{s}')
        a = g + 10_000
        ev.append(f'{{"ph":"X","cat":"cpu_op","name":"record_param_comms","pid":1,"tid":1,"ts":@T{a - 50_000}@,'
                  f'"dur":10.000,"args":{{"External id":{ext},{args}}}}}')
        ev.append(f'{{"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":1,"tid":1,"ts":@T{a - 40_000}@,'
                  f'"dur":4.000,"args":{{"External id":{ext},"correlation":{corr},"cbid":211}}}}')
        ev.append(f'{{"ph":"X","cat":"kernel","name":"ncclDevKernel_AllReduce_Sum_bf16_RING_LL","pid":0,"tid":20,'
                  f'"ts":@A{a}@,"dur":@D{a}@,"args":{{"External id":{ext},"correlation":{corr},"device":0,'
                  f'"stream":20,{args}}}}}')
    top = (f'{{"schemaVersion":1,"baseTimeNanoseconds":{BASE},"deviceProperties":[{{"id":0,'
           f'"name":"NVIDIA H100 80GB HBM3","totalGlobalMem":85520809984,"computeMajor":9,"computeMinor":0,'
           f'"numSms":132}}],"distributedInfo":{{"backend":"nccl","rank":@RANK@,"world_size":{world},'
           f'"pg_config":[{{"pg_name":"0","pg_desc":"default_pg","pg_size":{world},"ranks":null}}]}},'
           f'"traceEvents":[')
    return top + ",\n".join(ev) + "]}"


def write_ranks(directory: Path, n: int, steps: int, kernels: int) -> int:
    import re

    tpl = rank_template(steps, kernels, n)
    parts = re.split(r"@([TAD])(\d+)@|@RANK@", tpl)
    size = 0
    transfer = 2_000_000
    for r in range(n):
        off = (r * 7919) % 20_000 - 10_000  # clock error, ns
        late = 2_000_000 if r == 1 else (r % 13) * 1_000  # rank 1 arrives 2 ms late
        out = []
        i = 0
        while i < len(parts):
            out.append(parts[i])
            if i + 1 >= len(parts):
                break
            kind, val = parts[i + 1], parts[i + 2]
            if kind is None:
                out.append(str(r))
            else:
                t = int(val)
                if kind == "T":
                    out.append(_us(t + off))
                elif kind == "A":
                    out.append(_us(t + late + off))
                else:  # duration: everyone ends at the latest arrival + transfer
                    out.append(_us(2_500_000 + transfer - late))
            i += 3
        text = "".join(out)
        (directory / f"rank{r:05d}.json").write_text(text)
        size += len(text)
    return size // n


def _child(cmd: list[str]) -> tuple[float, int, str]:
    code = ("import resource, subprocess, sys, time\n"
            "from traceclass.cli import main\n"
            "t = time.perf_counter()\n"
            f"rc = main({cmd!r})\n"
            "print(rc, time.perf_counter() - t, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    last = p.stdout.strip().splitlines()[-1] if p.stdout.strip() else ""
    try:
        rc, wall, rss = last.split()
    except ValueError:
        raise SystemExit(f"child failed: {p.stderr[-2000:]}")
    if rc != "0":
        raise SystemExit(f"analyze exited {rc}: {p.stderr[-2000:]}")
    return float(wall), int(rss) // 1024, p.stderr


def _summary_size(directory: Path, k: int = 3) -> float:
    from traceclass.cluster.engine import summarize_path

    files = sorted(directory.glob("rank*.json"))[:k]
    return sum(len(json.dumps(summarize_path(str(f)), separators=(",", ":"))) for f in files) / len(files)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ranks", type=int, nargs="+", default=[100, 300])
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--kernels", type=int, default=40)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--dask", action="store_true")
    ap.add_argument("--keep", metavar="DIR")
    a = ap.parse_args()
    root = Path(a.keep or tempfile.mkdtemp(prefix="tc-cluster-"))
    dask_bin = Path(sys.executable).parent / "dask"
    for n in a.ranks:
        d = root / f"r{n}"
        d.mkdir(parents=True, exist_ok=True)
        t = time.perf_counter()
        per_rank = write_ranks(d, n, a.steps, a.kernels)
        gen = time.perf_counter() - t
        out = root / f"r{n}.cluster.json"
        wall, rss, _ = _child(["analyze", str(d), "--format", "json", "--jobs", str(a.jobs), "-o", str(out)])
        rep = json.loads(out.read_text())
        strag = [(s["rank"], s["cause"]) for s in rep["verdict"]["stragglers"]]
        print(f"{n} ranks x {per_rank / 1e6:.2f} MB (generated in {gen:.0f} s): local --jobs {a.jobs}: "
              f"{wall:.1f} s, {wall / n * 1000:.0f} ms/rank, coordinator peak RSS {rss} MB, "
              f"summary {_summary_size(d) / 1e3:.1f} KB/rank, stragglers {strag}", flush=True)
        if a.dask:
            sf = root / "scheduler.json"
            sf.unlink(missing_ok=True)
            procs = [subprocess.Popen([str(dask_bin), "scheduler", "--host", "127.0.0.1", "--port", "0",
                                       "--no-dashboard", "--scheduler-file", str(sf)],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
            try:
                while not (sf.exists() and sf.stat().st_size):
                    time.sleep(0.1)
                procs.append(subprocess.Popen([str(dask_bin), "worker", "--scheduler-file", str(sf), "--nworkers",
                                               str(a.jobs), "--nthreads", "1", "--no-dashboard", "--host",
                                               "127.0.0.1"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
                from distributed import Client

                with Client(scheduler_file=str(sf)) as c:
                    c.wait_for_workers(a.jobs, timeout=120)
                out2 = root / f"r{n}.dask.json"
                wall2, rss2, _ = _child(["analyze", str(d), "--format", "json", "--scheduler-file", str(sf),
                                         "-o", str(out2)])
                same = json.loads(out2.read_text()) == rep
                print(f"{n} ranks: dask {a.jobs} workers x 1 thread: {wall2:.1f} s, coordinator peak RSS {rss2} MB, "
                      f"report equal to local: {same}", flush=True)
            finally:
                for p in reversed(procs):
                    p.terminate()
                    p.wait(timeout=30)
        if not a.keep:
            shutil.rmtree(d)
    if not a.keep:
        shutil.rmtree(root)


if __name__ == "__main__":
    main()
