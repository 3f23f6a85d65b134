"""Which matmul/convolution op groups miss a GPU's tensor (matrix) cores, and the time at stake.

Inputs are the op groups of :mod:`traceclass.analysis.ops` (GPU time per op, shapes and dtype,
FLOPs and ideal bytes from the cost model) and the device's roofs (``Analysis.roof``).

* *Target precision* of a device: the cheapest change that reaches its matrix units. NVIDIA:
  TF32 when the spec has a ``matrix_tf32`` peak (compute capability >= 8.0: a flag, no new
  dtype), else fp16 (Volta/Turing tensor cores take only fp16: AMP with a grad scaler). AMD:
  bf16 autocast, which every CDNA generation's matrix cores run (MI300's XF32 path is not
  assumed). No matrix peak at all (Pascal, CPUs): no target, nothing is judged.
* *fp32 candidates*: fp32 groups; the share of their GEMM/conv kernel time on TF32 tensor-core
  kernels is read from kernel names (``tf32``, ``xf32``, ``tensorop_s``, ``s1688``/``s16816``:
  cuBLAS/CUTLASS/cuDNN TF32 kernels) and only the rest is at stake. Recoverable time =
  that time x (1 - LB_target / LB_fp32), where LB = max(FLOPs / peak, bytes / bandwidth) per
  call: the op keeps its current fraction of the roof on the faster path. Bytes halve for a
  16-bit target.
* *misaligned candidates*: fp16/bf16/fp8/int8 groups whose leading dimensions (GEMM K and N;
  convolution weight dims 0 and 1, i.e. output and input channels per group) are not multiples
  of ``align_bytes / element size``. Recoverable time = time - calls x LB / E_ref, where E_ref
  is the time-weighted fraction of the roof (LB / time per call) that aligned groups of the
  same device, precision, family and bound (compute or memory) reach in the trace; 0 without
  such a reference.
* Groups whose LB is under the analysis' latency floor are skipped: too small for any roof.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import numpy as np

from traceclass.analysis.roofline import Roof
from traceclass.model import Trace
from traceclass.model.dtypes import dtype_size

FP32, MISALIGNED = 0, 1
TF32_KERNEL = re.compile(r"(?i)tf32|xf32|tensorop_s|s1688|s16816")
LOW_PRECISION = ("fp16", "bf16", "fp8", "int8")
_GEMM_OPERANDS = {  # op -> (index of A, index of B); K = A[-1], N = B[-1] (linear: N = W[0])
    "aten::mm": (0, 1), "aten::_scaled_mm": (0, 1), "aten::_int_mm": (0, 1), "aten::bmm": (0, 1),
    "aten::matmul": (0, 1), "aten::addmm": (1, 2), "aten::baddbmm": (1, 2), "aten::linear": (0, 1),
}


@dataclasses.dataclass(frozen=True)
class Candidate:
    reason: int
    device: int
    name: str
    label: str
    count: int
    time_ns: int
    recoverable_ns: int
    kernels: tuple[str, ...]
    member: int  # one op row of the group (for its source line)
    target: str
    values: dict[str, Any]


def target_precision(spec: Any) -> str | None:
    if spec is None:
        return None
    peaks = spec.peaks
    order = ("bf16", "fp16") if spec.vendor == "amd" else ("tf32", "bf16", "fp16")
    for p in order:
        if f"matrix_{p}" in peaks:
            return p
    return None


def lower_bound_ns(flops: float, nbytes: float, roof: Roof | None) -> float | None:
    if roof is None or not roof.peak_flops or not roof.bandwidth_bps:
        return None
    return max(flops / roof.peak_flops, nbytes / roof.bandwidth_bps) * 1e9


def leading_dims(name: str, inputs: Any) -> tuple[int, ...] | None:
    """GEMM (K, N) or convolution (dim 0, dim 1 of the weight), None when not recorded."""
    if inputs is None:
        return None
    dims = inputs.dims

    def shape(i: int) -> tuple[int, ...] | None:
        return tuple(dims[i]) if i < len(dims) and dims[i] else None

    if name in _GEMM_OPERANDS:
        a, b = (shape(i) for i in _GEMM_OPERANDS[name])
        if a is None or b is None:
            return None
        return (a[-1], b[0]) if name == "aten::linear" else (a[-1], b[-1])
    w = shape(2 if "backward" in name else 1)
    return (w[0], w[1]) if w is not None and len(w) >= 3 else None


def _gpu_rows_by_group(trace: Trace, analysis: Any) -> dict[int, np.ndarray]:
    """GPU rows of each op group (index into ``analysis.ops.groups``)."""
    gg = analysis.ops.gpu_group
    rows = np.flatnonzero(gg >= 0)
    if not len(rows):
        return {}
    order = rows[np.argsort(gg[rows], kind="stable")]
    cuts = np.flatnonzero(np.diff(gg[order])) + 1
    return {int(gg[part[0]]): part for part in np.split(order, cuts)}


def _tf32_share(trace: Trace, analysis: Any, rows: np.ndarray) -> float:
    """Share of the GEMM/conv kernel time among ``rows`` spent in TF32 tensor-core kernels."""
    gpu = trace.gpu
    fam = analysis.gpu_family[rows]
    main = rows[(fam == "gemm") | (fam == "conv")]
    if not len(main):
        return 0.0
    codes = np.where(gpu.full_name[main] >= 0, gpu.full_name[main], gpu.name[main])
    is_tc = trace.strings.mask(codes, lambda s: TF32_KERNEL.search(s) is not None)
    dur = (gpu.end_ns[main] - gpu.start_ns[main]).astype(np.float64)
    return float(dur[is_tc].sum() / dur.sum()) if dur.sum() > 0 else 0.0


def candidates(trace: Trace, analysis: Any, align_bytes: int) -> dict[tuple[int, int], list[Candidate]]:
    """Candidates by (reason, device)."""
    out: dict[tuple[int, int], list[Candidate]] = {}
    floor = analysis.config.latency_floor_us * 1000.0
    groups = analysis.ops.groups
    rows_of = _gpu_rows_by_group(trace, analysis)
    members = _first_member(analysis)
    aligned_ref: dict[tuple[int, str, str, str], list[float]] = {}
    misaligned: list[tuple[int, Any, float, tuple[int, ...], tuple[int, str, str, str]]] = []
    for gi, g in enumerate(groups):
        if g.kind != "op" or g.family not in ("gemm", "conv") or not g.flops or g.device < 0 or g.count <= 0:
            continue
        rd = analysis.devices.get(g.device)
        target = target_precision(rd.spec if rd else None)
        if target is None:
            continue
        if g.precision == "fp32":
            lb_now = lower_bound_ns(g.flops, g.bytes or 0.0, analysis.roof(g.device, "fp32", "matrix"))
            scale = 1.0 if target == "tf32" else 0.5
            lb_tc = lower_bound_ns(g.flops, (g.bytes or 0.0) * scale, analysis.roof(g.device, target, "matrix"))
            if lb_now is None or lb_tc is None or lb_now < floor:
                continue
            share = _tf32_share(trace, analysis, rows_of.get(gi, np.zeros(0, np.int64)))
            at_stake = g.total_ns * (1.0 - share)
            rec = int(round(at_stake * max(0.0, 1.0 - lb_tc / lb_now)))
            if rec <= 0:
                continue
            out.setdefault((FP32, g.device), []).append(Candidate(
                FP32, g.device, g.name, f"{g.name} {g.shapes} ({g.count} calls, {share:.0%} on TF32 kernels)",
                g.count, g.total_ns, rec, g.top_kernels, members.get(gi, -1), target,
                {"flops_per_call": g.flops, "bytes_per_call": g.bytes, "lower_bound_fp32_ns": round(lb_now, 1),
                 f"lower_bound_{target}_ns": round(lb_tc, 1), "tf32_kernel_pct": round(100 * share, 1),
                 "recoverable_ns": rec}))
        elif g.precision in LOW_PRECISION:
            lb = lower_bound_ns(g.flops, g.bytes or 0.0, analysis.roof(g.device, g.precision, "matrix"))
            if lb is None or lb < floor:
                continue
            dims = leading_dims(g.name, trace.inputs[g.inputs_code])
            mult = max(1, int(align_bytes // (dtype_size(g.precision) or 1)))
            if dims is None:
                continue
            roof = analysis.roof(g.device, g.precision, "matrix")
            bound = "compute" if g.flops / roof.peak_flops >= (g.bytes or 0.0) / roof.bandwidth_bps else "memory"
            key = (g.device, g.precision, g.family, bound)
            if all(d % mult == 0 for d in dims):
                aligned_ref.setdefault(key, []).extend([lb * g.count, float(g.total_ns)])
            else:
                misaligned.append((gi, g, lb, dims, key))
    for gi, g, lb, dims, key in misaligned:
        ref = aligned_ref.get(key)
        eff = sum(ref[0::2]) / sum(ref[1::2]) if ref and sum(ref[1::2]) > 0 else None
        rec = int(max(0.0, g.total_ns - g.count * lb / eff)) if eff else 0
        mult = max(1, int(align_bytes // (dtype_size(g.precision) or 1)))
        out.setdefault((MISALIGNED, g.device), []).append(Candidate(
            MISALIGNED, g.device, g.name,
            f"{g.name} {g.shapes} (leading dims {'x'.join(map(str, dims))}, not multiples of {mult})",
            g.count, g.total_ns, rec, g.top_kernels, members.get(gi, -1), g.precision,
            {"flops_per_call": g.flops, "bytes_per_call": g.bytes, "lower_bound_ns": round(lb, 1),
             "roof_ratio": round(g.count * lb / g.total_ns, 4) if g.total_ns else None,
             "aligned_roof_ratio": round(eff, 4) if eff else None, "recoverable_ns": rec}))
    return out


def _first_member(analysis: Any) -> dict[int, int]:
    og = analysis.ops.op_group
    rows = np.flatnonzero(og >= 0)
    if not len(rows):
        return {}
    u, first = np.unique(og[rows], return_index=True)
    return {int(k): int(rows[f]) for k, f in zip(u, first)}


def tensor_core_share(trace: Trace, analysis: Any, device: int) -> float | None:
    """Percent of the device's modelled GEMM/conv op time in tensor-core precisions (fp16, bf16,
    fp8, int8, and the TF32-kernel part of fp32); None when there is none."""
    rows_of = _gpu_rows_by_group(trace, analysis)
    tc_time = total = 0.0
    for gi, g in enumerate(analysis.ops.groups):
        if g.kind != "op" or g.family not in ("gemm", "conv") or g.device != device or not g.precision:
            continue
        total += g.total_ns
        if g.precision in LOW_PRECISION:
            tc_time += g.total_ns
        elif g.precision == "fp32":
            tc_time += g.total_ns * _tf32_share(trace, analysis, rows_of.get(gi, np.zeros(0, np.int64)))
    return round(100.0 * tc_time / total, 1) if total > 0 else None
