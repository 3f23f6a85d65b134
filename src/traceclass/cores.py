"""How many CPU cores this process may use: the ones its affinity allows, capped by a cgroup
CPU quota where one is set (a container limited to 2 CPUs on a 64-core host sees 64 in its
affinity). Used to size parallel reading and the local cluster pool."""

from __future__ import annotations

import math
import os

#: cgroup v2, then v1 (quota and period in microseconds; a quota of -1 or "max": no limit)
CPU_MAX = "/sys/fs/cgroup/cpu.max"
CFS_QUOTA = "/sys/fs/cgroup/cpu/cpu.cfs_quota_us"
CFS_PERIOD = "/sys/fs/cgroup/cpu/cpu.cfs_period_us"


def usable_cores(cpu_max: str = CPU_MAX, cfs_quota: str = CFS_QUOTA, cfs_period: str = CFS_PERIOD) -> int:
    """Cores allowed by the affinity mask (``os.cpu_count`` where there is none), at most the
    cgroup quota rounded up; at least 1."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    quota = _quota(cpu_max, cfs_quota, cfs_period)
    if quota is not None:
        cores = min(cores, max(1, math.ceil(quota)))
    return max(1, cores)


def _quota(cpu_max: str, cfs_quota: str, cfs_period: str) -> float | None:
    try:
        with open(cpu_max) as fh:
            q, p = (fh.read().split() + ["100000"])[:2]
        return None if q == "max" else int(q) / int(p)
    except (OSError, ValueError, ZeroDivisionError):
        pass
    try:
        with open(cfs_quota) as fh:
            q = int(fh.read())
        with open(cfs_period) as fh:
            p = int(fh.read())
        return None if q <= 0 else q / p
    except (OSError, ValueError, ZeroDivisionError):
        return None
