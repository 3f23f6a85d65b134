"""Where the map step runs: local worker processes (standard library) or a Dask cluster.

Only paths go to the workers and only summaries come back (a few KB to a few hundred KB per
rank), never traces: the coordinator's memory follows the number of ranks times the summary size,
not the trace sizes. Both engines call :func:`summarize_path` and return the summaries in input
order, so their reports are equal.

Local workers: ``--jobs N``, else min(cores, files, available memory / (peak RSS per trace)),
the peak RSS per trace estimated as ``RSS_BASE_MB + RSS_PER_TRACE_MB`` x the largest file's size
in MB (measured with ``benchmarks/bench_cluster.py``; gzip files are counted at
``GZIP_RATIO`` x their size).

Dask: each task is submitted with that estimate (bytes) as its ``MEMORY`` resource when the
workers declare one (``dask worker --resources MEMORY=<bytes>``): the scheduler then runs at
once on a worker only the tasks whose estimates fit its declared memory. Without the resource,
Dask cannot honour a per-task memory need; the report notes when the largest estimate exceeds
the smallest worker's ``memory_limit``.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any, Callable, Sequence

import numpy as np

from traceclass.cores import usable_cores
from traceclass.errors import TraceclassError, TraceFormatError
from traceclass import units

#: peak RSS of one summarize call = base + per-MB x the uncompressed trace size. Measured (VmHWM
#: of a fresh process, every Kineto file streamed): generated rank traces (bench_cluster.py's
#: write_ranks, 200 kernels per step) of 2.35 / 14.2 / 71.4 MB peak at 49 / 68 / 154 MB, i.e.
#: ~46 MB + 1.55 per MB; real corpus replicas need less (V100 12.1 MB: 55 MB, 97.7 MB: 118 MB,
#: 503.5 MB: 381 MB). The constants keep a margin over the generated traces, the worst seen.
RSS_BASE_MB = 50.0
RSS_PER_TRACE_MB = 2.0
#: uncompressed / gzip size: 18.4-20.3 on the bundled gloo set; the upper end, to be safe
GZIP_RATIO = 20.0
SUMMARY_SUFFIX = ".tcsum.json"
#: the Dask worker resource that carries memory (bytes), as in Dask's own resources example
MEMORY_RESOURCE = "MEMORY"
#: how long to try reaching a Dask scheduler
CONNECT_TIMEOUT = "30s"


def is_summary(path: str) -> bool:
    return path.endswith(SUMMARY_SUFFIX)


def summarize_path(path: str, config: Any = None, per_rank_dir: str | None = None) -> dict[str, Any]:
    """The summary of one rank file (a trace, or a saved ``.tcsum.json``); errors come back as
    ``{"error": "file: problem"}`` so one bad rank names itself instead of sinking the pool."""
    try:
        if is_summary(path):
            return load_summary(path)
        from traceclass.cluster.summary import summarize
        from traceclass.engine import run
        from traceclass.ingest import load

        trace = load(path)
        analysis, report = run(trace, config, one_trace=False)
        out = summarize(trace, analysis, report)
        if per_rank_dir:
            from traceclass.render.markdown import render as render_md

            name = os.path.basename(path)
            for ext in (".gz", ".json", ".sqlite"):
                name = name[: -len(ext)] if name.endswith(ext) else name
            top_n = config.analysis.top_n if config is not None else 15
            _write_atomic(os.path.join(per_rank_dir, f"{name}.md"), render_md(report, top_n))
        return out
    except TraceclassError as exc:
        return {"error": str(exc), "file": os.path.basename(path)}
    except (OSError, ValueError, MemoryError) as exc:
        return {"error": f"{path}: {type(exc).__name__}: {exc}", "file": os.path.basename(path)}


def compact(summary: dict[str, Any]) -> dict[str, Any]:
    """The coordinator's copy of a summary: integer columns as int64 arrays, strings interned
    (about 5x smaller than the decoded JSON lists: 1,000 ranks stay within a few MB)."""
    if "error" in summary:
        return summary
    out = dict(summary)
    for part in ("collectives", "steps"):
        cols = {}
        for k, v in summary.get(part, {}).items():
            if v and isinstance(v[0], str):
                cols[k] = [sys.intern(x) for x in v]
            else:
                try:
                    cols[k] = np.asarray(v, dtype=np.int64)
                except (TypeError, ValueError, OverflowError):
                    cols[k] = v
        out[part] = cols
    return out


def load_summary(path: str) -> dict[str, Any]:
    from traceclass.cluster.summary import SCHEMA

    try:
        with open(path, "rb") as fh:
            data = json.loads(fh.read())
    except (OSError, ValueError) as exc:
        raise TraceFormatError(path, f"not a readable summary ({exc})") from None
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise TraceFormatError(path, f"not a traceclass summary (expected schema {SCHEMA})")
    return data


def _write_atomic(path: str, text: str) -> None:
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(text)
    os.replace(tmp, path)


def estimated_rss_mb(path: str) -> float:
    size = os.path.getsize(path) / 1e6
    if path.endswith(".gz"):
        size *= GZIP_RATIO
    return RSS_BASE_MB + RSS_PER_TRACE_MB * size


def task_memory_bytes(path: str) -> int:
    """Estimated peak RSS of :func:`summarize_path` on ``path``: a summary file costs the base only."""
    return int((RSS_BASE_MB if is_summary(path) else estimated_rss_mb(path)) * 1e6)


def dask_memory_plan(paths: Sequence[str], workers: dict[str, dict[str, Any]]
                     ) -> tuple[list[dict[str, float] | None], list[str]]:
    """Per path, the Dask ``resources`` to submit its task with (None: unrestricted), and notes.
    ``workers``: ``Client.scheduler_info()["workers"]``. Workers that declare a ``MEMORY``
    resource get each task's estimate as its need (capped at the largest declaration, so a task
    too big for every worker still runs, alone, on the largest one, with a note); otherwise no
    restriction and a note when the largest estimate exceeds the smallest ``memory_limit``."""
    need = [task_memory_bytes(p) for p in paths]
    notes: list[str] = []
    declared = [float((w.get("resources") or {}).get(MEMORY_RESOURCE) or 0) for w in workers.values()]
    with_mem = [d for d in declared if d > 0]
    if with_mem:
        top = max(with_mem)
        over = [n for n in need if n > top]
        if over:
            notes.append(f"{len(over)} of {len(need)} Dask tasks need about {units.size(max(over))}, more than the largest "
                         f"worker {MEMORY_RESOURCE} resource ({units.size(top)}): each runs alone on such a worker")
        if len(with_mem) < len(declared):
            notes.append(f"{len(declared) - len(with_mem)} of {len(declared)} Dask workers declare no "
                         f"{MEMORY_RESOURCE} resource and get no tasks")
        return [{MEMORY_RESOURCE: float(min(n, top))} for n in need], notes
    limits = [w.get("memory_limit") or 0 for w in workers.values()]
    traces = [n for p, n in zip(paths, need) if not is_summary(p)]
    if traces and limits and min(limits) > 0 and max(traces) > min(limits):
        notes.append(f"the largest trace needs about {units.size(max(traces))} per task; the smallest Dask worker "
                     f"allows {units.size(min(limits))} (start workers with --resources {MEMORY_RESOURCE}=<bytes> "
                     f"to schedule by memory)")
    return [None] * len(paths), notes


def available_memory_mb() -> float | None:
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") / 1e6
    except (ValueError, OSError, AttributeError):
        return None


def local_workers(paths: Sequence[str], jobs: int | None = None) -> int:
    if jobs:
        return max(1, min(jobs, len(paths)))
    cores = usable_cores()
    n = min(cores, len(paths))
    avail = available_memory_mb()
    traces = [p for p in paths if not is_summary(p)]
    if avail and traces:
        need = max(estimated_rss_mb(p) for p in traces)
        n = min(n, max(1, int(avail // need)))
    return max(1, n)


def run_local(paths: Sequence[str], config: Any = None, jobs: int | None = None, per_rank_dir: str | None = None,
              progress: Callable[[int, int], None] | None = None) -> list[dict[str, Any]]:
    n = local_workers(paths, jobs)
    if n == 1 or len(paths) == 1:
        out = []
        for k, p in enumerate(paths):
            out.append(compact(summarize_path(p, config, per_rank_dir)))
            if progress:
                progress(k + 1, len(paths))
        return out
    import concurrent.futures as cf
    import multiprocessing as mp

    results: list[dict[str, Any] | None] = [None] * len(paths)
    with cf.ProcessPoolExecutor(max_workers=n, mp_context=mp.get_context("spawn")) as pool:
        futs = {pool.submit(summarize_path, p, config, per_rank_dir): k for k, p in enumerate(paths)}
        for done, fut in enumerate(cf.as_completed(futs), 1):
            # drop our reference at once: a finished Future keeps its (uncompacted) result
            results[futs.pop(fut)] = compact(fut.result())
            del fut
            if progress:
                progress(done, len(paths))
    return results  # type: ignore[return-value]


def run_dask(paths: Sequence[str], config: Any = None, address: str | None = None, scheduler_file: str | None = None,
             per_rank_dir: str | None = None) -> tuple[list[dict[str, Any]], list[str]]:
    """Summaries computed on a Dask cluster: one task per path (workers read a shared filesystem).
    Returns (summaries, notes)."""
    try:
        from distributed import Client
    except ImportError:
        raise TraceclassError("--scheduler needs Dask: pip install 'traceclass[dask]'") from None
    notes: list[str] = []
    try:
        client = Client(address=address, scheduler_file=scheduler_file, timeout=CONNECT_TIMEOUT)
    except (OSError, TimeoutError, ValueError) as exc:
        raise TraceclassError(f"cannot reach the Dask scheduler {address or scheduler_file}: {exc}") from None
    try:
        workers = client.scheduler_info(n_workers=-1).get("workers", {})
        paths = [os.path.abspath(p) for p in paths]
        resources, notes = dask_memory_plan(paths, workers)
        from distributed import as_completed

        futs = [client.submit(summarize_path, p, config=config, per_rank_dir=per_rank_dir, pure=False, resources=res)
                for p, res in zip(paths, resources)]
        index = {f.key: k for k, f in enumerate(futs)}
        results: list[dict[str, Any] | None] = [None] * len(futs)
        for fut in as_completed(futs):  # compact each summary as it arrives
            results[index[fut.key]] = compact(fut.result())
            fut.release()
    finally:
        client.close()
    return list(results), notes
