"""One name per collective, whatever wrote it: ``c10d::allreduce_``, ``gloo:all_reduce``,
``nccl:all_reduce``, ``allreduce`` (``Collective name``), ``ncclDevKernel_AllReduce_Sum_f32_RING_LL``
and ``multimem_all_reduce`` all normalize to ``all_reduce``."""

from __future__ import annotations

#: substring (lower case, underscores removed) -> normalized name, first match wins
_KEYS = (
    ("reducescatter", "reduce_scatter"),
    ("allreduce", "all_reduce"),
    ("allgather", "all_gather"),
    ("alltoallv", "all_to_allv"),
    ("alltoall", "all_to_all"),
    ("broadcast", "broadcast"),
    ("sendrecv", "send_recv"),
    ("send", "send"),
    ("recv", "recv"),
    ("barrier", "barrier"),
    ("reduce", "reduce"),
    ("gather", "gather"),
    ("scatter", "scatter"),
)
_PREFIXES = ("gloo:", "nccl:", "mpi:", "ucc:", "xccl:", "c10d::", "symm_mem::", "ncclDevKernel_", "ncclKernel_")
#: collectives whose data moves between two ranks only
P2P = frozenset({"send", "recv", "send_recv"})


def normalize(name: str) -> str:
    """The normalized collective name (the lower-cased name itself when it is none we know)."""
    s = name
    for p in _PREFIXES:
        if s.startswith(p):
            s = s[len(p):]
            break
    flat = s.lower().replace("_", "")
    for key, out in _KEYS:
        if key in flat:
            return out
    return s.lower()
