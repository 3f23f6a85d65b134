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


def test_memory_plan_without_and_with_a_memory_resource(tmp_path):
    from traceclass.cluster.engine import MEMORY_RESOURCE, dask_memory_plan, task_memory_bytes

    big = tmp_path / "rank0.json"
    big.write_bytes(b" " * 3_000_000)  # 3 MB: 50 + 2 x 3 = 56 MB
    small = tmp_path / "rank1.tcsum.json"
    small.write_text("{}")
    paths = [str(big), str(small)]
    assert [task_memory_bytes(p) for p in paths] == [56_000_000, 50_000_000]
    # no MEMORY resource: unrestricted, a note only when a trace exceeds the smallest memory_limit
    res, notes = dask_memory_plan(paths, {"a": {"memory_limit": 50_000_000, "resources": {}},
                                          "b": {"memory_limit": 8_000_000_000, "resources": {}}})
    assert res == [None, None]
    assert notes == ["the largest trace needs about 56 MB per task; the smallest Dask worker allows 50 MB "
                     "(start workers with --resources MEMORY=<bytes> to schedule by memory)"]
    assert dask_memory_plan(paths, {"a": {"memory_limit": 0, "resources": {}}}) == ([None, None], [])
    # declared: each task asks for its estimate, capped at the largest declaration
    res, notes = dask_memory_plan(paths, {"a": {"resources": {MEMORY_RESOURCE: 50e6}},
                                          "b": {"resources": {MEMORY_RESOURCE: 45e6}}})
    assert res == [{MEMORY_RESOURCE: 50e6}, {MEMORY_RESOURCE: 50e6}]
    assert notes == ["1 of 2 Dask tasks need about 56 MB, more than the largest worker MEMORY resource (50 MB): "
                     "each runs alone on such a worker"]


def _tasks_per_worker(client) -> dict[str, int]:
    """Worker name -> distinct summarize_path tasks in its transition log."""
    ran = client.run(lambda dask_worker: (str(dask_worker.name), len({str(e[0]) for e in dask_worker.state.log
                                                                      if "summarize_path" in str(e[0])})))
    return dict(ran.values())


def test_tasks_go_only_to_workers_with_a_memory_resource(dask_cluster, tmp_path, capsys):
    """A second worker declares MEMORY smaller than one task's estimate: every task runs there (one
    at a time, capped at its declaration), none on the worker without the resource, and the
    report equals the local one apart from the scheduling notes."""
    from distributed import Client

    from traceclass.cluster.engine import task_memory_bytes

    sched_file, _ = dask_cluster
    paths = write_set(Plan(world=3, steps=4), tmp_path / "r")
    env = {**os.environ, "DASK_DISTRIBUTED__WORKER__DAEMON": "False"}
    mem = subprocess.Popen([str(DASK), "worker", "--scheduler-file", str(sched_file), "--nthreads", "2",
                            "--nworkers", "1", "--no-dashboard", "--host", "127.0.0.1", "--name", "memw",
                            "--resources", "MEMORY=30e6"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    try:
        with Client(scheduler_file=str(sched_file), timeout="60s") as c:
            c.wait_for_workers(2, timeout=120)
            before = _tasks_per_worker(c)
        assert main(["analyze", str(tmp_path / "r"), "--format", "json", "--jobs", "1"]) == 0
        local = json.loads(capsys.readouterr().out)
        assert main(["analyze", str(tmp_path / "r"), "--format", "json", "--scheduler-file", str(sched_file)]) == 0
        by_dask = json.loads(capsys.readouterr().out)
        need = max(task_memory_bytes(str(p)) for p in paths)
        assert by_dask["notes"][:2] == [
            f"3 of 3 Dask tasks need about {need / 1e6:.3g} MB, more than the largest worker MEMORY resource (30 MB): "
            "each runs alone on such a worker",
            "1 of 2 Dask workers declare no MEMORY resource and get no tasks"]
        assert {**by_dask, "notes": by_dask["notes"][2:]} == local
        with Client(scheduler_file=str(sched_file), timeout="60s") as c:
            after = _tasks_per_worker(c)
        assert {w: after[w] - before.get(w, 0) for w in after} == {w: 3 if w == "memw" else 0 for w in after}
    finally:
        mem.terminate()
        try:
            mem.wait(timeout=30)
        except subprocess.TimeoutExpired:
            mem.kill()
