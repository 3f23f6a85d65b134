"""Collective communication kernels: which collective each one runs, its message size, and how
much of it compute hides (the numbers TC701 reports).

* **communication kernel** = a kernel of family ``comm`` (``kernel_families.COMM_PATTERN``: NCCL,
  RCCL, ``ncclDevKernel_*``, symmetric-memory all-reduce kernels);
* **collective** of a kernel: the ``nccl:*`` communication range around its launch call
  (``nccl:all_reduce``), else the ``c10d::*`` / ``symm_mem::*`` op that launched it
  (``c10d::allreduce_``), else the kernel's own name (work queued before the profiler started has
  no launch call);
* **message size** of a collective: the largest tensor argument of its ``c10d::*`` /
  ``symm_mem::*`` / ``record_param_comms`` op (elements; bytes when the trace records the dtype;
  a ``TensorList`` counts its tensors together). Kineto also writes ``In msg nelems``,
  ``Out msg nelems`` and ``dtype`` on ``record_param_comms`` and on NCCL kernels, but the reader
  does not keep those arguments yet, so traces without recorded shapes have no size;
* **exposed** communication on a device = communication-kernel time overlapped by no compute
  kernel (any non-communication kernel, any stream) of the same device; copies and memsets do
  not hide it. **Overlap** = 1 - exposed / communication time: HTA's comm/compute overlap
  (overlapped time / communication time), the same definition as the device timeline's
  ``exposed_comm_ns``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from traceclass import timeline as tl
from traceclass.analysis.kernel_families import FAMILY_CODE
from traceclass.model import AnnotationKind, GpuKind, Trace
from traceclass.model.dtypes import canonical_dtype, dtype_size

_OP_PREFIXES = ("c10d::", "symm_mem::", "nccl:")
_SIZE_OPS = ("c10d::", "symm_mem::", "record_param_comms")


@dataclasses.dataclass(frozen=True)
class Collectives:
    rows: np.ndarray  # communication kernel rows of trace.gpu
    name: np.ndarray  # collective per row (object)
    elements: np.ndarray  # message elements per row, -1 unknown
    bytes: np.ndarray  # message bytes per row, -1 unknown


def comm_rows(trace: Trace, family_code: np.ndarray) -> np.ndarray:
    """Communication kernels (``family_code``: :func:`~traceclass.analysis.kernel_families.gpu_family_codes`)."""
    gpu = trace.gpu
    return np.flatnonzero((gpu.kind == GpuKind.KERNEL) & (family_code == FAMILY_CODE["comm"]))


def collectives(trace: Trace, rows: np.ndarray) -> Collectives:
    """Collective name and message size of each communication kernel row."""
    gpu, api, ann, ops = trace.gpu, trace.api, trace.annotations, trace.ops
    names = np.empty(len(rows), dtype=object)
    elements = np.full(len(rows), -1, dtype=np.int64)
    nbytes = np.full(len(rows), -1, dtype=np.int64)
    size_cache: dict[int, tuple[int, int]] = {}
    for k, r in enumerate(rows.tolist()):
        name = None
        a = int(gpu.api[r])
        cur = int(api.annotation[a]) if a >= 0 and len(api) else -1
        while cur >= 0 and name is None:
            if ann.kind[cur] == AnnotationKind.COMMUNICATION:
                name = trace.strings[int(ann.name[cur])]
            cur = int(ann.parent[cur])
        op = int(gpu.op[r])
        size_op = -1
        while op >= 0:
            op_name = trace.strings[int(ops.name[op])]
            if name is None and op_name.startswith(_OP_PREFIXES):
                name = op_name
            if size_op < 0 and op_name.startswith(_SIZE_OPS):
                size_op = op
            if name is not None and size_op >= 0 and not op_name.startswith("record_param_comms"):
                break
            op = int(ops.parent[op])
        names[k] = name if name is not None else trace.strings[int(gpu.name[r])]
        if size_op >= 0:
            code = int(ops.inputs[size_op])
            if code not in size_cache:
                size_cache[code] = _message_size(trace.inputs[code])
            elements[k], nbytes[k] = size_cache[code]
    return Collectives(rows, names, elements, nbytes)


def _message_size(inputs: Any) -> tuple[int, int]:
    """(elements, bytes) of the largest tensor argument; -1 where unknown."""
    if inputs is None:
        return -1, -1
    best_n, best_b = -1, -1
    for i, dims in enumerate(inputs.dims):
        if dims is None:
            continue
        n = _elements(dims)
        if n <= best_n:
            continue
        dt = inputs.dtypes[i] if i < len(inputs.dtypes) else ""
        size = dtype_size(canonical_dtype(dt)) if dt else None
        best_n, best_b = n, int(n * size) if size else -1
    return best_n, best_b


def _elements(dims: Any) -> int:
    """Elements of a shape, or of a list of shapes (a TensorList records nested shapes)."""
    if len(dims) and all(isinstance(d, tuple) for d in dims):
        return sum(_elements(d) for d in dims)
    n = 1
    for d in dims:
        if not isinstance(d, (int, np.integer)):
            return -1
        n *= int(d)
    return n


def compute_cover(trace: Trace, family_code: np.ndarray, device: int) -> tl.Intervals:
    """Union of the device's compute kernels (kernels that are not communication)."""
    gpu = trace.gpu
    k = (gpu.device == device) & (gpu.kind == GpuKind.KERNEL) & (family_code != FAMILY_CODE["comm"])
    return tl.merge(gpu.start_ns, gpu.end_ns, where=k)


def exposed(trace: Trace, rows: np.ndarray, cover: tl.Intervals, within: tl.Intervals | None = None) -> tuple[int, int]:
    """(communication time, exposed time) of ``rows`` (one device): unions in ns, counted inside
    ``within`` (the analysed windows) when given."""
    gpu = trace.gpu
    comm = tl.merge(gpu.start_ns[rows], gpu.end_ns[rows])
    if within is not None:
        comm = tl.intersect(comm, within)
    return tl.total(comm), tl.total(tl.subtract(comm, cover))
