"""Baseline files: a run's key metrics plus what makes it reproducible.

Layout (JSON, ``kind = "traceclass-baseline"``, ``schema_version = 1``)::

    kind, schema_version, traceclass_version
    saved_at             ISO 8601 UTC, when the file was written
    recorded_at          ISO 8601 UTC of the trace's first event (Kineto baseTimeNanoseconds,
                         Nsight Systems session start), or null; recorded_at_basis says which
    git                  {commit, dirty} of the current directory, or {commit: null, reason}
    source               file (base name), format, producer, format_version
    environment          gpus, hardware rows (device, reported name, spec), versions (CUDA/HIP
                         runtime and driver, CUPTI, torch, nsys, NCCL... as found in the trace),
                         profiler flags (record_shapes, with_stack, profile_memory, ...)
    metrics              what ``check`` compares (compare.gate.key_metrics), for people to read
    run                  the comparison-relevant part of the report (compare.run.report_dict):
                         ``check`` and ``diff`` rebuild the Report from it
                         (compare.run.report_from_dict), so a baseline file can stand in for the
                         trace it was made from
"""

from __future__ import annotations

import datetime
import subprocess
from typing import Any, Callable, Mapping

from traceclass import __version__
from traceclass.compare.gate import key_metrics
from traceclass.compare.match import PROFILER_FLAGS, VERSION_KEYS
from traceclass.compare.run import Run, gpu_names, run_from_dict
from traceclass.errors import TraceFormatError

KIND = "traceclass-baseline"
SCHEMA_VERSION = 1

Runner = Callable[..., "subprocess.CompletedProcess[str]"]


def git_facts(cwd: str | None = None, runner: Runner = subprocess.run) -> dict[str, Any]:
    """Commit and dirty flag of the repository around ``cwd``; never raises."""
    try:
        head = runner(["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError) as exc:
        return {"commit": None, "reason": f"git not available ({type(exc).__name__})"}
    if head.returncode != 0 or not head.stdout.strip():
        return {"commit": None, "reason": "not a git repository (or no commit yet)"}
    facts: dict[str, Any] = {"commit": head.stdout.strip(), "dirty": None}
    try:
        st = runner(["git", "status", "--porcelain", "--untracked-files=no"], cwd=cwd, capture_output=True,
                    text=True, timeout=30)
        if st.returncode == 0:
            facts["dirty"] = bool(st.stdout.strip())
    except (OSError, subprocess.SubprocessError):
        pass
    return facts


def iso_utc(epoch_ns: int | None) -> str | None:
    if epoch_ns is None:
        return None
    t = datetime.datetime.fromtimestamp(epoch_ns / 1e9, datetime.timezone.utc)
    return t.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def build_baseline(run: Run, run_dict: Mapping[str, Any], git: Mapping[str, Any], saved_at_epoch_ns: int) -> dict[str, Any]:
    versions = {label: run.meta[key] for key, label in VERSION_KEYS if key in run.meta}
    flags = {f: run.meta[f] for f in PROFILER_FLAGS if f in run.meta}
    return {
        "kind": KIND,
        "schema_version": SCHEMA_VERSION,
        "traceclass_version": __version__,
        "saved_at": iso_utc(saved_at_epoch_ns),
        "recorded_at": iso_utc(run.start_epoch_ns),
        "recorded_at_basis": run.start_epoch_basis if run.start_epoch_ns is not None else "unknown: the trace "
                             "carries no wall-clock origin",
        "git": dict(git),
        "source": {"file": run.file, "format": run.format, "producer": run.producer,
                   "format_version": run.format_version},
        "environment": {
            "gpus": list(gpu_names(run)),
            "hardware": [{"device": d, "reported_name": n, "spec": s} for d, n, s in run.hardware],
            "versions": versions,
            "profiler": flags,
            "warmup_steps": run.warmup_steps,
        },
        "metrics": key_metrics(run),
        "run": dict(run_dict),
    }


def is_baseline_dict(d: Any) -> bool:
    return isinstance(d, dict) and d.get("kind") == KIND


def run_from_baseline(d: Mapping[str, Any], path: str) -> Run:
    version = d.get("schema_version")
    if not isinstance(version, int) or version > SCHEMA_VERSION:
        raise TraceFormatError(path, f"baseline schema_version {version!r} is not supported "
                                     f"(this traceclass reads up to {SCHEMA_VERSION})")
    inner = d.get("run")
    if not isinstance(inner, dict):
        raise TraceFormatError(path, "baseline file has no 'run' block")
    return run_from_dict(inner, path)
