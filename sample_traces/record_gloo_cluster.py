"""Record the bundled multi-rank set ``sample_traces/gloo_4ranks/`` (real torch.profiler traces,
gloo backend, CPU): 4 ranks, 1 warm-up + 16 profiled steps, two all-reduces per step.

Planted: rank 2 runs three times the matmul work of the others before the first all-reduce
(compute imbalance, so it arrives last there); rank 1 sleeps 15 ms between the two all-reduces
(host work, so it arrives last at the second).

    .venv/bin/python sample_traces/record_gloo_cluster.py sample_traces/gloo_4ranks
"""

from __future__ import annotations

import gzip
import os
import shutil
import socket
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

WORLD = 4
STEPS = 16
SLOW_COMPUTE_RANK = 2
SLEEPY_RANK = 1
SLEEP_S = 0.015


def _work(rank: int, world: int, port: int, out: str) -> None:
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(rank)
    a, b = torch.randn(320, 320), torch.randn(320, 320)
    grad = torch.randn(16384)
    small = torch.randn(1024)
    reps = 9 if rank == SLOW_COMPUTE_RANK else 3
    sched = torch.profiler.schedule(wait=0, warmup=1, active=STEPS, repeat=1)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], schedule=sched,
                                record_shapes=True) as prof:
        for _ in range(STEPS + 1):
            for _ in range(reps):
                c = a @ b
                c = torch.relu(c)
            grad.add_(c.sum() * 1e-9)
            dist.all_reduce(grad)
            if rank == SLEEPY_RANK:
                time.sleep(SLEEP_S)
            dist.all_reduce(small)
            prof.step()
    path = os.path.join(out, f"rank{rank}.json")
    prof.export_chrome_trace(path)
    with open(path, "rb") as src, gzip.open(path + ".gz", "wb", compresslevel=9) as dst:
        shutil.copyfileobj(src, dst)
    os.remove(path)
    dist.barrier()
    dist.destroy_process_group()


def main() -> None:
    out = sys.argv[1] if len(sys.argv) > 1 else "gloo_4ranks"
    os.makedirs(out, exist_ok=True)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(_work, args=(WORLD, port, out), nprocs=WORLD, join=True)


if __name__ == "__main__":
    main()
