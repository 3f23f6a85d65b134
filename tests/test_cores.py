"""usable_cores: the affinity mask capped by a cgroup CPU quota (v2 cpu.max, v1 cfs files)."""

from __future__ import annotations

import os

import pytest

from traceclass import cores
from traceclass.cores import usable_cores


@pytest.fixture
def eight(monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(8)), raising=False)


def _files(tmp_path, cpu_max=None, quota=None, period="100000"):
    paths = {"cpu_max": str(tmp_path / "cpu.max"), "cfs_quota": str(tmp_path / "q"), "cfs_period": str(tmp_path / "p")}
    if cpu_max is not None:
        (tmp_path / "cpu.max").write_text(cpu_max)
    if quota is not None:
        (tmp_path / "q").write_text(quota)
        (tmp_path / "p").write_text(period)
    return paths


@pytest.mark.parametrize(("cpu_max", "quota", "want"), [
    (None, None, 8),              # no cgroup files: the affinity
    ("max 100000\n", None, 8),    # v2 without a limit
    ("200000 100000\n", None, 2),  # v2: two CPUs
    ("150000 100000\n", None, 2),  # 1.5 CPUs: rounded up
    ("50000 100000\n", None, 1),
    ("1600000 100000\n", None, 8),  # a quota above the affinity: the affinity
    (None, "-1", 8),              # v1 without a limit
    (None, "300000", 3),          # v1: three CPUs
    ("garbage", "200000", 2),     # an unreadable v2 file: v1 decides
])
def test_quota_caps_the_affinity(tmp_path, eight, cpu_max, quota, want) -> None:
    assert usable_cores(**_files(tmp_path, cpu_max, quota)) == want


def test_this_machine_has_at_least_one(tmp_path) -> None:
    assert usable_cores() >= 1 and cores.usable_cores(**_files(tmp_path)) >= 1
