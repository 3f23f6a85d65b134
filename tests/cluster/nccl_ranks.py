"""Hand-built NCCL rank sets with exactly known cluster answers.

Each rank runs ``steps`` steps of ``STEP_NS``; in step s (true time, before clock offsets):

* a compute kernel from ``step start + 100 us`` for ``compute_ns[r]``;
* the rank reaches the all-reduce at ``compute end + host_ns[r]`` (its arrival); the all-reduce
  kernel runs from the arrival to ``max arrival + transfer_ns`` (everyone ends together);
* then an all-gather: arrival = all-reduce end + ``ag_delay_ns[r]``, end = max arrival +
  ``ag_transfer_ns``.

Rank r's trace shows every time shifted by ``offset_ns[r]`` (its clock error). Collectives carry
``record_param_comms`` args (group "0", ``Seq``) on the op and copied on the kernel, as Kineto
writes them; ``comms_id=True`` adds ``Comms Id``, ``seq=False`` drops ``Seq``.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Sequence

from kineto_builder import KinetoBuilder

STEP_NS = 10_000_000
T0 = 1_000_000_000
BASE = 1_700_000_000_000_000_000
AR_NELEMS = 4_000_000  # fp32: 16 MB
AG_IN_NELEMS = 1_000_000  # bf16 per rank; output = world x this


@dataclasses.dataclass
class Plan:
    world: int = 8
    steps: int = 10
    compute_ns: Sequence[int] = ()
    host_ns: Sequence[int] = ()
    offset_ns: Sequence[int] = ()
    ag_delay_ns: Sequence[int] = ()
    transfer_ns: int = 400_000
    ag_transfer_ns: int = 250_000
    comms_id: bool = False
    seq: bool = True
    skip_first: Sequence[int] = ()  # ranks whose profile misses the first all-reduce and all-gather
    ag_size_override: dict = dataclasses.field(default_factory=dict)  # (rank, step) -> in nelems

    def __post_init__(self) -> None:
        n = self.world
        self.compute_ns = list(self.compute_ns) or [3_000_000 + 1_000 * r for r in range(n)]
        self.host_ns = list(self.host_ns) or [10_000] * n
        self.offset_ns = list(self.offset_ns) or [0] * n
        self.ag_delay_ns = list(self.ag_delay_ns) or [5_000 + 100 * r for r in range(n)]

    # the true (offset-free) schedule -------------------------------------------------------
    def step_start(self, s: int) -> int:
        return T0 + s * STEP_NS

    def ar_arrival(self, s: int, r: int) -> int:
        return self.step_start(s) + 100_000 + self.compute_ns[r] + self.host_ns[r]

    def ar_end(self, s: int) -> int:
        return max(self.ar_arrival(s, r) for r in range(self.world)) + self.transfer_ns

    def ag_arrival(self, s: int, r: int) -> int:
        return self.ar_end(s) + self.ag_delay_ns[r]

    def ag_end(self, s: int) -> int:
        return max(self.ag_arrival(s, r) for r in range(self.world)) + self.ag_transfer_ns


def _comm_args(name: str, in_n: int, out_n: int, dtype: str, world: int, seq: int | None, comms_id: int | None,
               rank: int | None = None) -> dict[str, Any]:
    a: dict[str, Any] = {"Collective name": name, "dtype": dtype, "In msg nelems": in_n, "Out msg nelems": out_n,
                         "Group size": world, "In split size": "[]", "Out split size": "[]",
                         "Process Group Name": "0", "Process Group Description": "default_pg",
                         "Process Group Ranks": "[" + ", ".join(str(i) for i in range(world)) + "]",
                         "Global rank start": 0, "Global rank stride": 1}
    if seq is not None:
        a["Seq"] = seq
    if comms_id is not None:
        a["Comms Id"] = comms_id
    if rank is not None:
        a["Rank"] = rank
    return a


def build_rank(plan: Plan, r: int, distributed_info: bool = True) -> KinetoBuilder:
    b = KinetoBuilder(base_time_ns=BASE)
    if distributed_info:
        b.top["distributedInfo"] = {"backend": "nccl", "rank": r, "world_size": plan.world, "pg_count": 1,
                                    "pg_config": [{"pg_name": "0", "pg_desc": "default_pg", "pg_size": plan.world,
                                                   "ranks": list(range(plan.world))}]}
    off = plan.offset_ns[r]
    seq = 0
    for s in range(plan.steps):
        st = plan.step_start(s) + off
        b.step(s, st, STEP_NS - 1_000)
        ext = b.op("aten::mm", st + 50_000, 20_000)
        b.launch(ext, "sm90_xmma_gemm_bf16", st + 55_000, st + 100_000, plan.compute_ns[r], stream=7)
        for kind in ("ar", "ag"):
            if s == 0 and r in plan.skip_first:
                seq += 1
                continue
            if kind == "ar":
                arr, end = plan.ar_arrival(s, r) + off, plan.ar_end(s) + off
                args = _comm_args("allreduce", AR_NELEMS, AR_NELEMS, "Float", plan.world,
                                  seq if plan.seq else None, 1000 + seq if plan.comms_id else None,
                                  rank=None if distributed_info else r)
                kname = "ncclDevKernel_AllReduce_Sum_f32_RING_LL"
            else:
                arr, end = plan.ag_arrival(s, r) + off, plan.ag_end(s) + off
                in_n = plan.ag_size_override.get((r, s), AG_IN_NELEMS)
                args = _comm_args("_allgather_base", in_n, in_n * plan.world, "BFloat16", plan.world,
                                  seq if plan.seq else None, 1000 + seq if plan.comms_id else None,
                                  rank=None if distributed_info else r)
                kname = "ncclDevKernel_AllGather_RING_LL"
            seq += 1
            ext = b.next_ext()
            b._x("cpu_op", "record_param_comms", arr - 30_000, 10_000, {"External id": ext, **args})
            corr = b.runtime("cudaLaunchKernel", arr - 25_000, 5_000, ext=ext)
            b.kernel(kname, arr, end - arr, corr=corr, stream=20, ext=ext)
            b.events[-1]["args"].update(args)
    return b


def write_set(plan: Plan, directory: Path, distributed_info: bool = True) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    return [build_rank(plan, r, distributed_info).write(directory / f"rank{r}.json") for r in range(plan.world)]
