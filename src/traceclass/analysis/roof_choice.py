"""Which roof an op group is judged against, and what to say when a measurement beats it.

* **Matrix work** (GEMM/conv): the op's dtype names the precision the program asked for, the
  kernels that ran name the path (:mod:`traceclass.analysis.kernel_precision`): an fp32 op on
  ``cutlass_80_tensorop_s1688gemm`` kernels is judged against the TF32 tensor-core roof, one on
  ``volta_sgemm`` against the fp32 CUDA-core roof. The path of the kernels holding most of the
  group's GEMM/conv kernel time decides; none named keeps the op's precision.
* **A roof the measurement beats is the wrong roof.** An fp32 matmul faster than the fp32 roof
  whose kernel names say nothing ran on TF32 tensor cores: the TF32 roof is tried next. When
  the measurement beats every roof that could apply, the point gets no label and the note names
  the spec figure that is suspect (the peak, the memory bandwidth, the host link, the CPU
  core count), so the row says why instead of dropping out silently.
* **Copies** (op groups whose GPU work is only memcpy records) are judged by the bytes the copy
  records carry, once per side: host <-> device copies against the host link (per direction),
  device-to-device copies against device memory, where each byte is read once and written once.
* **CPU ops**: the per-core spec is scaled to the op's parallelism: the threads seen running the
  group's instances (the profiler does not record the intra-op thread count; the core count
  comes from ``--cpu NAME:CORES`` when given).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Callable

import numpy as np

from traceclass import units
from traceclass.analysis.kernel_families import FAMILY_CODE
from traceclass.analysis.kernel_precision import describe, kernel_path
from traceclass.analysis.roofline import UNCLASSIFIED, Point, Roof, classify
from traceclass.model import CopyKind, GpuKind, Trace

RoofFor = Callable[[int, str, str], Roof | None]

_HOST_COPY = (CopyKind.HTOD, CopyKind.DTOH, CopyKind.UVM_HTOD, CopyKind.UVM_DTOH)
_MATRIX_FAMILIES = ("gemm", "conv")
_MATRIX_CODES = np.array([FAMILY_CODE[f] for f in _MATRIX_FAMILIES], dtype=np.int8)


@dataclasses.dataclass(frozen=True)
class Judged:
    point: Point
    precision: str
    unit: str
    notes: tuple[str, ...]
    bytes: float | None = None  # replaces the cost model's bytes (copies: measured per side)
    flops: float | None = None


class PathCache:
    """Kernel-name code -> path, computed once per distinct name."""

    def __init__(self, trace: Trace) -> None:
        self.trace = trace
        self._paths: dict[int, tuple[str, str] | None] = {}

    def path(self, code: int) -> tuple[str, str] | None:
        if code not in self._paths:
            self._paths[code] = kernel_path(self.trace.strings[code]) if code >= 0 else None
        return self._paths[code]


def dominant_path(cache: PathCache, family_code: np.ndarray, sel: np.ndarray | None) -> tuple[str, str] | None:
    """Path of the GEMM/conv kernels holding most of the GEMM/conv kernel time among ``sel``;
    None when no kernel name says or no path holds at least half of that time (``family_code``:
    :func:`~traceclass.analysis.kernel_families.gpu_family_codes`)."""
    if sel is None or not len(sel):
        return None
    gpu = cache.trace.gpu
    main = sel[np.isin(family_code[sel], _MATRIX_CODES)]
    if not len(main):
        return None
    codes = np.where(gpu.full_name[main] >= 0, gpu.full_name[main], gpu.name[main])
    dur = (gpu.end_ns[main] - gpu.start_ns[main]).astype(np.float64)
    u, inv = np.unique(codes, return_inverse=True)
    per_name = np.bincount(inv.reshape(-1), weights=dur, minlength=len(u))
    by_path: dict[tuple[str, str], float] = {}
    for c, t in zip(u.tolist(), per_name.tolist()):
        p = cache.path(int(c))
        if p is not None:
            by_path[p] = by_path.get(p, 0.0) + t
    if not by_path:
        return None
    best = max(by_path, key=lambda p: by_path[p])
    total = float(per_name.sum())
    return best if total > 0 and by_path[best] >= 0.5 * total else None


def judge_op(flops: float, nbytes: float, precision: str, unit: str, family: str, per_ns: float, dev: int,
             path: tuple[str, str] | None, roof_for: RoofFor, floor_ns: float, call_ns: float) -> Judged:
    """Roofline point of one modeled op group on the roof its kernels ran on."""
    notes: list[str] = []
    prec, un = precision, unit
    if path is not None and family in _MATRIX_FAMILIES and unit == "matrix":
        # the kernel decides when it shows a faster path than the dtype (fp32 data on TF32 or
        # CUDA cores; 16-bit activations with fp8/int8 weights), or the same precision's unit
        if path != (prec, un) and (prec == "fp32" or path[0] == prec or path[0] in ("fp8", "int8")):
            notes.append(f"kernels ran on {describe(path)} (kernel names): judged against that roof")
            prec, un = path
    roof = roof_for(dev, prec, un)
    point = classify(flops, nbytes, per_ns, roof, floor_ns, call_ns)
    if point.over_roof and prec == "fp32" and un in ("matrix", "vector") and family in _MATRIX_FAMILIES and path is None:
        tf = roof_for(dev, "tf32", "matrix")
        if tf is not None and tf.peak_flops:
            alt = classify(flops, nbytes, per_ns, tf, floor_ns, call_ns)
            if not alt.over_roof:
                notes.append("achieved beats the fp32 roof and the kernel names do not say the path: it ran on "
                             "TF32 tensor cores, judged against the TF32 roof")
                return Judged(alt, "tf32", "matrix", tuple(notes))
            point = alt
            roof = tf
    if point.over_roof:
        notes.append(suspect_note(point, roof))
        point = dataclasses.replace(point, pct_of_roof=None, gap_ns=None, bound=UNCLASSIFIED)
    return Judged(point, prec, un, tuple(notes))


def suspect_note(point: Point, roof: Roof | None) -> str:
    """Which figure of the spec a measurement beats (so the spec, not the op, is in doubt)."""
    if roof is None:
        return "achieved exceeds the roof: no label"
    parts = []
    if point.achieved_flops_per_s and roof.peak_flops and point.achieved_flops_per_s > roof.peak_flops:
        parts.append(f"the {roof.precision} {roof.unit} peak of {roof.device} "
                     f"({units.flop_rate(roof.peak_flops)}; measured {units.flop_rate(point.achieved_flops_per_s)})")
    if point.achieved_bytes_per_s and roof.bandwidth_bps and point.achieved_bytes_per_s > roof.bandwidth_bps:
        what = "host link bandwidth" if roof.unit == "link" else "memory bandwidth"
        parts.append(f"the {what} of {roof.device} ({units.byte_rate(roof.bandwidth_bps)}; measured "
                     f"{units.byte_rate(point.achieved_bytes_per_s)} of ideal traffic)")
    if not parts:
        parts.append(f"the {roof.precision} {roof.unit} roof of {roof.device} at this intensity")
    cpu = roof.device.startswith("cpu")
    tail = (" (the profiler does not record the intra-op thread count: pass --cpu NAME:CORES)" if cpu
            else " (another device, clocks above the datasheet, or a cost model that undercounts)")
    return ("achieved beats every roof that could apply; suspect figure: " + " and ".join(parts) + tail
            + "; no label")


def copy_judgement(trace: Trace, sel: np.ndarray, count: int, per_ns: float, dev: int, roof_for: RoofFor,
                   floor_ns: float, call_ns: float) -> Judged | None:
    """Roofline point of work that is only memcpy records, or None when it is not (or a record
    lacks its byte count)."""
    gpu = trace.gpu
    kind = gpu.kind[sel] if len(sel) else np.zeros(0, np.int8)
    is_copy = kind == GpuKind.MEMCPY
    if not len(sel) or not (is_copy | (kind == GpuKind.MEMSET)).all():
        return None
    b = gpu.bytes[sel].astype(np.float64)
    if (b < 0).any():
        return None
    host = is_copy & np.isin(gpu.copy_kind[sel], _HOST_COPY)
    if host.all():
        moved = float(b.sum()) / max(count, 1)
        roof = roof_for(dev, "", "link")
        note = "host<->device copy: bytes from the copy records, once; roof = host link bandwidth per direction"
        unit = "link"
    elif not host.any():
        # a device-to-device copy reads and writes device memory; a memset only writes it
        moved = float(np.where(is_copy, 2.0 * b, b).sum()) / max(count, 1)
        roof = roof_for(dev, "", "vector")
        note = ("device-side copy/memset: bytes from the records (a copy reads and writes each byte, a memset "
                "writes it); roof = device memory bandwidth")
        unit = "vector"
    else:
        # instances crossed different links (a pinned HtoD one step, a DtoD the next): each byte
        # against its own link; the roof is the effective bandwidth of that mix
        link, mem = roof_for(dev, "", "link"), roof_for(dev, "", "vector")
        dev_bytes = float(np.where(is_copy, 2.0 * b, b)[~host].sum())
        host_bytes = float(b[host].sum())
        moved = (host_bytes + dev_bytes) / max(count, 1)
        roof = None
        if link is not None and mem is not None and link.bandwidth_bps and mem.bandwidth_bps:
            secs = host_bytes / link.bandwidth_bps + dev_bytes / mem.bandwidth_bps
            roof = Roof(device=mem.device, precision="", unit="copy", peak_flops=None,
                        bandwidth_bps=(host_bytes + dev_bytes) / secs)
        note = (f"copies over two links ({int(host.sum())} host<->device, {int((~host).sum())} on the device): "
                "bytes from the records, host copies once against the host link, device copies read + write "
                "against device memory; roof = the effective bandwidth of that mix")
        unit = "copy"
    if roof is None:
        note += " (the spec has no figure for it: no label)"
    point = classify(0.0, moved, per_ns, roof, floor_ns, call_ns)
    notes = [note]
    if point.over_roof:
        notes.append(suspect_note(point, roof))
        point = dataclasses.replace(point, pct_of_roof=None, gap_ns=None, bound=UNCLASSIFIED)
    return Judged(point, "", unit, tuple(notes), bytes=moved, flops=0.0)


def cpu_threads(trace: Trace, members: np.ndarray) -> int:
    """Distinct threads that ran the instances ``members`` (op rows)."""
    if not len(members):
        return 1
    return max(1, int(len(np.unique(trace.ops.tid[members]))))


def scaled_cpu_roof(roof: Roof | None, threads: int) -> Roof | None:
    """The per-core CPU roof for ``threads`` cores (memory bandwidth unchanged: a socket figure)."""
    if roof is None or threads <= 1 or not roof.peak_flops:
        return roof
    return dataclasses.replace(roof, peak_flops=roof.peak_flops * threads, device=f"{roof.device} x{threads} threads")


def min_cores(point: Point, roof: Roof | None) -> int | None:
    """Cores the CPU roof needs so the measurement fits it (None when FLOPs do not bind)."""
    if roof is None or not roof.peak_flops or not point.achieved_flops_per_s:
        return None
    return max(1, math.ceil(point.achieved_flops_per_s / roof.peak_flops))


def judge_cpu_op(trace: Trace, flops: float, nbytes: float, precision: str, unit: str, per_ns: float,
                 members: np.ndarray, roof_for: RoofFor, floor_ns: float, call_ns: float) -> Judged:
    """A host op group against the CPU roof for its parallelism: the threads seen running it when
    more than the spec's cores (the spec's cores come from ``--cpu NAME:CORES``; the profiler
    records no intra-op thread count)."""
    threads = cpu_threads(trace, members)
    base = roof_for(-1, precision, unit)
    cores = _spec_cores(base)
    notes: list[str] = []
    roof = base
    if base is not None and threads > cores:
        roof = scaled_cpu_roof(base, threads) if cores == 1 else dataclasses.replace(
            base, peak_flops=(base.peak_flops or 0.0) * threads / cores or None)
        notes.append(f"CPU roof for {threads} cores: the threads seen running this op")
    point = classify(flops, nbytes, per_ns, roof, floor_ns, call_ns)
    if point.over_roof:
        need = min_cores(point, base)
        n = max(threads, cores)
        basis = f"{n} core{'s' if n > 1 else ''} " + (
            "(threads seen running it)" if threads > cores else "(the CPU spec's core count)")
        if need is not None and need > n:
            notes.append(f"achieved beats the CPU roof for {basis}; the measurement needs at least {need} cores of "
                         "this CPU: the op ran intra-op threads the profiler does not record (pass --cpu "
                         "NAME:CORES); no label")
        else:
            notes.append(f"achieved beats the CPU memory roof ({units.byte_rate(roof.bandwidth_bps)} of DRAM, "
                         f"measured {units.byte_rate(point.achieved_bytes_per_s or 0)} of ideal traffic): the working "
                         "set was served from caches; suspect figure: the DRAM bandwidth for this op; no label"
                         if roof is not None else "achieved beats the CPU roof; no label")
        point = dataclasses.replace(point, pct_of_roof=None, gap_ns=None, bound=UNCLASSIFIED)
    return Judged(point, precision, unit, tuple(notes))


def _spec_cores(roof: Roof | None) -> int:
    if roof is None:
        return 1
    _, _, tail = roof.device.rpartition(":")
    return int(tail) if tail.isdigit() else 1
