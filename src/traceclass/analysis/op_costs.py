"""FLOPs and bytes per op row from the cost models, once per distinct (op name, inputs).

Ops recorded with shapes but without dtypes (Nsight ``emit_nvtx`` ranges) take the dtype
their kernels' names show, or fp32, and the cost says so in its note.
"""

from __future__ import annotations

import dataclasses
import re

import numpy as np

from traceclass import costmodel
from traceclass.model import GpuKind, OpInputs, Trace
from traceclass.model.nesting import group_ids
from traceclass.model.table import row_index_dtype

_KERNEL_DTYPE = [
    ("bf16", re.compile(r"(?i)bf16|bfloat16")),
    ("fp8", re.compile(r"(?i)fp8|e4m3|e5m2|f8f8")),
    ("fp16", re.compile(r"(?i)fp16|half|f16|h884|h1688|h16816|hgemm|_h_|hmma")),
    ("int8", re.compile(r"(?i)int8|i8i8|imma")),
    ("fp64", re.compile(r"(?i)double|dgemm|fp64|f64")),
    ("fp32", re.compile(r"(?i)sgemm|fp32|f32|s884|s1688|s16816|tf32|float")),
]
_DTYPE_TEXT = {"bf16": "c10::BFloat16", "fp16": "c10::Half", "fp8": "c10::Float8_e4m3fn", "int8": "signed char",
               "fp64": "double", "fp32": "float"}


def _dtype_from_kernels(names: list[str]) -> str | None:
    for dtype, pat in _KERNEL_DTYPE:
        if any(pat.search(n) for n in names):
            return dtype
    return None


def _fill_dtypes(inputs: OpInputs, dtype: str) -> OpInputs:
    text = _DTYPE_TEXT[dtype]
    return dataclasses.replace(inputs, dtypes=tuple(text if d is not None and not t else t
                                                    for d, t in zip(inputs.dims, inputs.dtypes)))


@dataclasses.dataclass(frozen=True)
class PairCosts:
    """Cost per distinct (name, inputs) pair of the ops, and the pair of each op row; per-row
    values are ``ok[pair_of_op]`` etc. (per-row copies would be three op-sized arrays)."""

    costs: dict[tuple[int, int], costmodel.OpCost | None]
    pair_of_op: np.ndarray  # per op row, int32 where the table allows
    ok: np.ndarray  # per pair: a cost model applies
    flops: np.ndarray  # per pair (0 when not modeled)
    bytes: np.ndarray
    inferred: dict[int, str]


def estimate_all(trace: Trace) -> PairCosts:
    """Cost per distinct (name, inputs), and the pair of each op row."""
    ops = trace.ops
    n_ops = len(ops)
    costs: dict[tuple[int, int], costmodel.OpCost | None] = {}
    inferred: dict[int, str] = {}
    if not n_ops:
        z = np.zeros(0)
        return PairCosts(costs, np.zeros(0, np.int32), z.astype(bool), z, z, inferred)
    inv, n_pairs = group_ids(ops.name, ops.inputs)
    first = np.zeros(n_pairs, dtype=np.int64)
    first[inv[::-1]] = np.arange(n_ops)[::-1]  # a representative row per pair
    inv = inv.astype(row_index_dtype(n_pairs))
    pair = np.stack([ops.name[first].astype(np.int64), ops.inputs[first].astype(np.int64)], 1)
    ok = np.zeros(len(pair), dtype=bool)
    fl = np.zeros(len(pair))
    by = np.zeros(len(pair))
    kernel_names = _kernel_names_by_pair(trace, inv) if len(trace.gpu) else {}
    for k, (nc, ic) in enumerate(pair.tolist()):
        inputs = trace.inputs[ic]
        if inputs is not None and inputs.dims and not any(inputs.dtypes):
            # shapes without dtypes (Nsight emit_nvtx): the kernels' names usually say
            names = kernel_names.get(k, [])
            dtype = _dtype_from_kernels(names)
            how = f"dtype {dtype} read from its kernel names" if dtype else "dtype not recorded: fp32 assumed"
            inputs = _fill_dtypes(inputs, dtype or "fp32")
            inferred[ic] = how
        c = costmodel.estimate(trace.strings[nc], inputs)
        if c is not None and ic in inferred:
            c = dataclasses.replace(c, note="; ".join(x for x in (c.note, inferred[ic]) if x))
        costs[(nc, ic)] = c
        ok[k] = c is not None
        if c is not None:
            fl[k], by[k] = c.flops, c.bytes
    return PairCosts(costs, inv, ok, fl, by, inferred)


def _kernel_names_by_pair(trace: Trace, pair_of_op: np.ndarray) -> dict[int, list[str]]:
    gpu = trace.gpu
    rows = np.flatnonzero((gpu.op >= 0) & (gpu.kind == GpuKind.KERNEL))
    out: dict[int, list[str]] = {}
    if not len(rows):
        return out
    keys = pair_of_op[gpu.op[rows]]
    for k, sel in slices_by_key(keys, rows).items():
        out[k] = [trace.strings[c] for c in np.unique(gpu.name[sel]).tolist()]
    return out


def slices_by_key(keys: np.ndarray, rows: np.ndarray) -> dict[int, np.ndarray]:
    """Rows grouped by key: {key: rows with that key}, in one sort."""
    if len(rows) == 0:
        return {}
    order = np.argsort(keys, kind="stable")
    ks, rs = keys[order], rows[order]
    cut = np.flatnonzero(np.diff(ks)) + 1
    return {int(ks[lo]): rs[lo:hi] for lo, hi in zip(np.r_[0, cut], np.r_[cut, len(rs)])}
