"""Build small Kineto (torch.profiler) traces with exactly known answers.

Times are given in integer nanoseconds and written as microseconds with three decimals, the
way torch 2.x writes them, so every expected value in a test is exact.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any


def _us(ns: int) -> float:
    return round(ns / 1000.0, 3)


class KinetoBuilder:
    def __init__(self, gpu_name: str | None = "NVIDIA H100 80GB HBM3", pid: int = 100, tid: int = 100,
                 base_time_ns: int | None = 1_700_000_000_000_000_000) -> None:
        self.events: list[dict[str, Any]] = []
        self.pid, self.tid = pid, tid
        self._ext = 0
        self._corr = 1000
        self.top: dict[str, Any] = {"schemaVersion": 1}
        if gpu_name:
            self.top["deviceProperties"] = [{"id": 0, "name": gpu_name, "totalGlobalMem": 85520809984,
                                            "computeMajor": 9, "computeMinor": 0, "numSms": 132}]
            self.top["cuda_runtime_version"] = 12040
        else:
            self.top["deviceProperties"] = []
        if base_time_ns is not None:
            self.top["baseTimeNanoseconds"] = base_time_ns
        self.top["record_shapes"] = 1

    # ------------------------------------------------------------------ host side
    def _x(self, cat: str, name: str, ts: int, dur: int, args: dict[str, Any], pid: int | None = None,
           tid: int | None = None) -> dict[str, Any]:
        ev = {"ph": "X", "cat": cat, "name": name, "pid": self.pid if pid is None else pid,
              "tid": self.tid if tid is None else tid, "ts": _us(ts), "dur": _us(dur), "args": args}
        self.events.append(ev)
        return ev

    def next_ext(self) -> int:
        self._ext += 1
        return self._ext

    def op(self, name: str, ts: int, dur: int, dims: list | None = None, types: list | None = None,
           strides: list | None = None, concrete: list | None = None, tid: int | None = None,
           seq: int | None = None) -> int:
        ext = self.next_ext()
        args: dict[str, Any] = {"External id": ext, "Record function id": 0, "Ev Idx": ext}
        if dims is not None:
            args["Input Dims"] = dims
            args["Input type"] = types if types is not None else ["float"] * len(dims)
            if strides is not None:
                args["Input Strides"] = strides
            if concrete is not None:
                args["Concrete Inputs"] = concrete
        if seq is not None:
            args["Sequence number"] = seq
        self._x("cpu_op", name, ts, dur, args, tid=tid)
        return ext

    def annotation(self, name: str, ts: int, dur: int, tid: int | None = None) -> int:
        ext = self.next_ext()
        self._x("user_annotation", name, ts, dur, {"External id": ext, "Record function id": 0}, tid=tid)
        return ext

    def step(self, n: int, ts: int, dur: int, tid: int | None = None) -> int:
        return self.annotation(f"ProfilerStep#{n}", ts, dur, tid=tid)

    def python(self, name: str, ts: int, dur: int, tid: int | None = None, py_id: int | None = None,
               parent_id: int | None = None) -> None:
        args: dict[str, Any] = {}
        if py_id is not None:
            args["Python id"] = py_id
            args["Python parent id"] = parent_id
        self._x("python_function", name, ts, dur, args, tid=tid)

    def runtime(self, name: str, ts: int, dur: int, ext: int | None = None, tid: int | None = None,
                corr: int | None = None) -> int:
        if corr is None:
            self._corr += 1
            corr = self._corr
        args = {"cbid": 211, "correlation": corr}
        if ext is not None:
            args["External id"] = ext
        self._x("cuda_runtime", name, ts, dur, args, tid=tid)
        return corr

    # ------------------------------------------------------------------ device side
    def kernel(self, name: str, ts: int, dur: int, corr: int | None = None, stream: int = 7, device: int = 0,
               ext: int | None = None, grid: list | None = None, block: list | None = None) -> None:
        args: dict[str, Any] = {"device": device, "stream": stream, "correlation": corr if corr is not None else -5}
        if ext is not None:
            args["External id"] = ext
        if grid is not None:
            args["grid"] = grid
        if block is not None:
            args["block"] = block
        self.events.append({"ph": "X", "cat": "kernel", "name": name, "pid": device, "tid": stream,
                            "ts": _us(ts), "dur": _us(dur), "args": args})

    def memcpy(self, direction: str, src: str, dst: str, ts: int, dur: int, nbytes: int, corr: int | None = None,
               stream: int = 7, device: int = 0) -> None:
        self.events.append({
            "ph": "X", "cat": "gpu_memcpy", "name": f"Memcpy {direction} ({src} -> {dst})", "pid": device,
            "tid": stream, "ts": _us(ts), "dur": _us(dur),
            "args": {"device": device, "stream": stream, "correlation": corr if corr is not None else -5,
                     "bytes": nbytes},
        })

    def memset(self, ts: int, dur: int, nbytes: int, corr: int | None = None, stream: int = 7, device: int = 0) -> None:
        self.events.append({
            "ph": "X", "cat": "gpu_memset", "name": "Memset (Device)", "pid": device, "tid": stream,
            "ts": _us(ts), "dur": _us(dur),
            "args": {"device": device, "stream": stream, "correlation": corr if corr is not None else -5,
                     "bytes": nbytes},
        })

    def sync(self, kind: str, ts: int, dur: int, stream: int = -1, corr: int | None = None, device: int = 0) -> None:
        self.events.append({
            "ph": "X", "cat": "cuda_sync", "name": kind, "pid": device, "tid": stream if stream >= 0 else 0,
            "ts": _us(ts), "dur": _us(dur),
            "args": {"cuda_sync_kind": kind, "stream": stream, "device": device,
                     "correlation": corr if corr is not None else -5},
        })

    # ------------------------------------------------------------------ conveniences
    def launch(self, op_ext: int | None, kernel: str, cpu_ts: int, gpu_ts: int, gpu_dur: int,
               cpu_dur: int = 2_000, stream: int = 7, api: str = "cudaLaunchKernel", tid: int | None = None,
               device: int = 0) -> int:
        """A launch call at ``cpu_ts`` and its kernel at ``gpu_ts``; returns the correlation id."""
        corr = self.runtime(api, cpu_ts, cpu_dur, ext=op_ext, tid=tid)
        self.kernel(kernel, gpu_ts, gpu_dur, corr=corr, stream=stream, ext=op_ext, device=device)
        return corr

    def window(self, ts: int, dur: int) -> None:
        self.events.append({"ph": "X", "cat": "Trace", "name": "PyTorch Profiler (0)", "pid": "Spans",
                            "tid": "PyTorch Profiler", "ts": _us(ts), "dur": _us(dur), "args": {"Op count": 0}})

    def to_dict(self) -> dict[str, Any]:
        return {**self.top, "traceEvents": list(self.events)}

    def write(self, path: str | Path, gz: bool = False) -> Path:
        p = Path(path)
        data = json.dumps(self.to_dict()).encode()
        p.write_bytes(gzip.compress(data) if gz else data)
        return p
