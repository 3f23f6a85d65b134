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
  When the trace has no aligned reference, E_ref is the documented GEMM/conv fraction of the
  roof (:mod:`traceclass.analysis.achievable`), so a misaligned op is estimated from the aligned
  roofline even without an aligned sibling; a reference above that fraction is capped at it.
  ``_align1``/``_align2`` kernel names (CUTLASS tiles that load 1 or 2 elements per access)
  mark a 16-bit group as misaligned even when its dims were not recorded.
* *fp32 on CUDA cores from kernel names*: GEMM/conv kernels whose names show the fp32 CUDA-core
  path (``volta_sgemm``, ``ampere_sgemm``, ``cutlass_*_simt_sgemm``) in op groups without a
  cost model (shapes not recorded): recoverable = their time x (1 - fp32 peak / target peak),
  i.e. compute-bound at the same fraction of either roof (without shapes the bytes are unknown:
  the figure is an upper bound and says so).
* Groups whose LB is under the analysis' latency floor are skipped: too small for any roof.
* Groups inside an unfused attention pattern (:mod:`traceclass.analysis.unfused_attention`) are
  left to TC102: fusing removes them, so their time is not claimed twice.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import numpy as np

from traceclass.analysis.achievable import documented
from traceclass.analysis.kernel_families import FAMILY_CODE
from traceclass.analysis.kernel_precision import kernel_path
from traceclass.analysis.roofline import Roof
from traceclass.model import Trace
from traceclass.model.dtypes import dtype_size

FP32, MISALIGNED = 0, 1
NARROW_ALIGN = re.compile(r"_align[12](?!\d)")
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
    fam = analysis.gpu_family_code[rows]
    main = rows[(fam == FAMILY_CODE["gemm"]) | (fam == FAMILY_CODE["conv"])]
    if not len(main):
        return 0.0
    codes = np.where(gpu.full_name[main] >= 0, gpu.full_name[main], gpu.name[main])
    is_tc = trace.strings.mask(codes, lambda s: kernel_path(s) == ("tf32", "matrix"))
    dur = (gpu.end_ns[main] - gpu.start_ns[main]).astype(np.float64)
    return float(dur[is_tc].sum() / dur.sum()) if dur.sum() > 0 else 0.0


def candidates(trace: Trace, analysis: Any, align_bytes: int,
               exclude: frozenset[int] = frozenset()) -> dict[tuple[int, int], list[Candidate]]:
    """Candidates by (reason, device); ``exclude``: op group indices another finding claims."""
    out: dict[tuple[int, int], list[Candidate]] = {}
    floor = analysis.config.latency_floor_us * 1000.0
    groups = analysis.ops.groups
    rows_of = _gpu_rows_by_group(trace, analysis)
    members = _first_member(analysis)
    aligned_ref: dict[tuple[int, str, str, str], list[float]] = {}
    misaligned: list[tuple[int, Any, float, tuple[int, ...], tuple[int, str, str, str]]] = []
    for gi, g in enumerate(groups):
        if gi in exclude:
            continue
        if g.kind == "op" and g.flops is None and g.family in ("gemm", "conv") and g.device >= 0:
            _cuda_core_by_name(trace, analysis, gi, g, rows_of.get(gi), members.get(gi, -1), out)
            continue
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
            narrow = _narrow_align_share(trace, rows_of.get(gi)) >= 0.5
            if dims is None and not narrow:
                continue
            dims = dims or ()
            roof = analysis.roof(g.device, g.precision, "matrix")
            bound = "compute" if g.flops / roof.peak_flops >= (g.bytes or 0.0) / roof.bandwidth_bps else "memory"
            key = (g.device, g.precision, g.family, bound)
            if dims and all(d % mult == 0 for d in dims) and not narrow:
                aligned_ref.setdefault(key, []).extend([lb * g.count, float(g.total_ns)])
            else:
                misaligned.append((gi, g, lb, dims, key))
    for gi, g, lb, dims, key in misaligned:
        ref = aligned_ref.get(key)
        ceiling = documented(g.family, "compute" if key[3] == "compute" else "memory-bound").fraction
        eff = sum(ref[0::2]) / sum(ref[1::2]) if ref and sum(ref[1::2]) > 0 else None
        basis = "aligned op groups of this trace" if eff else "documented fraction of the roof"
        eff = min(eff, ceiling) if eff else ceiling
        rec = int(max(0.0, g.total_ns - g.count * lb / eff))
        mult = max(1, int(align_bytes // (dtype_size(g.precision) or 1)))
        why = (f"leading dims {'x'.join(map(str, dims))}, not multiples of {mult}" if dims and any(d % mult for d in dims)
               else "kernels load 1-2 elements per access (_align1/_align2)")
        out.setdefault((MISALIGNED, g.device), []).append(Candidate(
            MISALIGNED, g.device, g.name, f"{g.name} {g.shapes} ({why})",
            g.count, g.total_ns, rec, g.top_kernels, members.get(gi, -1), g.precision,
            {"flops_per_call": g.flops, "bytes_per_call": g.bytes, "lower_bound_ns": round(lb, 1),
             "roof_ratio": round(g.count * lb / g.total_ns, 4) if g.total_ns else None,
             "aligned_roof_ratio": round(eff, 4), "aligned_ratio_basis": basis, "recoverable_ns": rec}))
    return out


def _narrow_align_share(trace: Trace, rows: np.ndarray | None) -> float:
    """Share of the GPU time among ``rows`` in ``_align1``/``_align2`` kernels."""
    if rows is None or not len(rows):
        return 0.0
    gpu = trace.gpu
    codes = np.where(gpu.full_name[rows] >= 0, gpu.full_name[rows], gpu.name[rows])
    narrow = trace.strings.mask(codes, lambda s: NARROW_ALIGN.search(s) is not None)
    dur = (gpu.end_ns[rows] - gpu.start_ns[rows]).astype(np.float64)
    return float(dur[narrow].sum() / dur.sum()) if dur.sum() > 0 else 0.0


def _cuda_core_by_name(trace: Trace, analysis: Any, gi: int, g: Any, rows: np.ndarray | None, member: int,
                       out: dict[tuple[int, int], list[Candidate]]) -> None:
    """fp32 CUDA-core GEMM/conv kernels of a group without shapes, from their names."""
    if rows is None or not len(rows):
        return
    rd = analysis.devices.get(g.device)
    spec = rd.spec if rd else None
    target = target_precision(spec)
    if target is None:
        return
    fp32 = analysis.roof(g.device, "fp32", "vector")
    fast = analysis.roof(g.device, target, "matrix")
    if fp32 is None or fast is None or not fp32.peak_flops or not fast.peak_flops:
        return
    gpu = trace.gpu
    codes = np.where(gpu.full_name[rows] >= 0, gpu.full_name[rows], gpu.name[rows])
    simt = trace.strings.mask(codes, lambda s: kernel_path(s) == ("fp32", "vector"))
    if not simt.any():
        return
    dur = (gpu.end_ns[rows] - gpu.start_ns[rows]).astype(np.int64)
    time = int(dur[simt].sum())
    rec = int(round(time * max(0.0, 1.0 - fp32.peak_flops / fast.peak_flops)))
    if rec <= 0:
        return
    names = tuple(dict.fromkeys(trace.strings[int(c)] for c in gpu.name[rows[simt]].tolist()))[:3]
    out.setdefault((FP32, g.device), []).append(Candidate(
        FP32, g.device, g.name,
        f"{g.name} (shapes not recorded; {int(simt.sum())} fp32 CUDA-core kernels by name: {names[0]})",
        g.count, time, rec, names, member, target,
        {"flops_per_call": None, "bytes_per_call": None, "cuda_core_kernel_ns": time,
         "peak_fp32_flops_per_s": fp32.peak_flops, f"peak_{target}_flops_per_s": fast.peak_flops,
         "estimate": "upper bound: compute-bound assumed (no shapes, bytes unknown)", "recoverable_ns": rec}))


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
