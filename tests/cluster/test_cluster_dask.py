"""The per-rank step on a real Dask cluster (a `dask scheduler` and a `dask worker` on
127.0.0.1, started here and stopped after): the report equals the local engine's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from nccl_ranks import Plan, write_set
from traceclass.cli import main

pytest.importorskip("distributed")
DASK = Path(sys.executable).parent / "dask"


@pytest.fixture(scope="module")
def dask_cluster(tmp_path_factory):
    if not DASK.exists():
        pytest.skip("dask command not installed next to this Python")
    d = tmp_path_factory.mktemp("dask")
    sched_file = d / "scheduler.json"
    env = {**os.environ, "DASK_DISTRIBUTED__WORKER__DAEMON": "False"}
    sched = subprocess.Popen([str(DASK), "scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
                              "--scheduler-file", str(sched_file)], stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, env=env)
    procs = [sched]
    try:
        for _ in range(300):
            if sched_file.exists() and sched_file.stat().st_size:
                break
            time.sleep(0.1)
        else:
            pytest.fail("dask scheduler did not start")
        worker = subprocess.Popen([str(DASK), "worker", "--scheduler-file", str(sched_file), "--nthreads", "1",
                                   "--nworkers", "1", "--no-dashboard", "--host", "127.0.0.1",
                                   "--memory-limit", "2GB"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        procs.append(worker)
        from distributed import Client

        with Client(scheduler_file=str(sched_file), timeout="60s") as c:
            c.wait_for_workers(1, timeout=120)
        yield sched_file, json.loads(sched_file.read_text())["address"]
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in reversed(procs):
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()


def test_dask_report_equals_local(dask_cluster, tmp_path, capsys):
    sched_file, address = dask_cluster
    host = [10_000] * 4
    host[3] = 1_500_000
    write_set(Plan(world=4, steps=6, host_ns=host, ag_delay_ns=[5_000, 5_100, 5_200, 9_000]), tmp_path / "r")
    assert main(["analyze", str(tmp_path / "r"), "--format", "json", "--jobs", "1"]) == 0
    local = json.loads(capsys.readouterr().out)
    assert main(["analyze", str(tmp_path / "r"), "--format", "json", "--scheduler-file", str(sched_file),
                 "--per-rank-dir", str(tmp_path / "per")]) == 0
    by_file = json.loads(capsys.readouterr().out)
    assert main(["analyze", str(tmp_path / "r"), "--format", "json", "--scheduler", address]) == 0
    by_addr = json.loads(capsys.readouterr().out)
    assert by_file == local == by_addr
    assert [s["rank"] for s in local["verdict"]["stragglers"]] == [3]
    assert sorted(p.name for p in (tmp_path / "per").iterdir()) == [f"rank{r}.md" for r in range(4)]


def test_unreachable_scheduler_exits_2(capsys, tmp_path, monkeypatch):
    from traceclass.cluster import engine

    monkeypatch.setattr(engine, "CONNECT_TIMEOUT", "2s")
    write_set(Plan(world=2, steps=2), tmp_path / "r")
    assert main(["analyze", str(tmp_path / "r"), "--scheduler", "tcp://127.0.0.1:9"]) == 2
    assert "Dask scheduler" in capsys.readouterr().err
