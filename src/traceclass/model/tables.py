"""The tables of a :class:`~traceclass.model.trace.Trace`.

All times are integer nanoseconds on the trace's own clock; all sizes are bytes. ``-1`` means
"unknown" in integer columns (ids, indices, byte counts), ``NaN`` in float columns. Name
columns hold codes into ``Trace.strings``. Link columns (``parent``, ``op``, ``api``,
``launch``) hold row indices into the table named in their doc, or -1. Process, thread,
stream, correlation, external and sequence ids are int32 when every value of the column fits,
else int64 (``narrow`` columns, :mod:`traceclass.model.table`).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from traceclass.model.enums import AnnotationKind, ApiKind, CopyKind, GpuKind, MemKind
from traceclass.model.table import Table, column

I8, I16, I32, I64, F64, BOOL = np.int8, np.int16, np.int32, np.int64, np.float64, np.bool_


@dataclasses.dataclass(frozen=True)
class Threads(Table):
    """Host threads (and processes) seen in the trace."""

    pid: np.ndarray = column(I64, doc="OS process id", narrow=True)
    tid: np.ndarray = column(I64, doc="OS thread id", narrow=True)
    name: np.ndarray = column(I32, text=True, doc="thread name (string code)")


@dataclasses.dataclass(frozen=True)
class Ops(Table):
    """Framework operators on host threads (ATen ops, autograd nodes, NVTX op ranges)."""

    start_ns: np.ndarray = column(I64, doc="start")
    end_ns: np.ndarray = column(I64, doc="end")
    pid: np.ndarray = column(I64, narrow=True)
    tid: np.ndarray = column(I64, narrow=True)
    name: np.ndarray = column(I32, text=True, doc="op name (string code)")
    external_id: np.ndarray = column(I64, doc="profiler External id, links launches to the op", narrow=True)
    seq: np.ndarray = column(I64, doc="autograd sequence number (forward <-> backward)", narrow=True)
    inputs: np.ndarray = column(I32, doc="recorded inputs (code into Trace.inputs)")
    flops: np.ndarray = column(F64, np.nan, doc="FLOPs recorded by the profiler, if any")
    parent: np.ndarray = column(I32, doc="enclosing op on the same thread (row in Ops)")
    depth: np.ndarray = column(I16, 0, doc="nesting depth among ops of the thread (0 = top)")


@dataclasses.dataclass(frozen=True)
class Annotations(Table):
    """Named ranges: steps, ``record_function`` stages, NVTX ranges."""

    start_ns: np.ndarray = column(I64)
    end_ns: np.ndarray = column(I64)
    pid: np.ndarray = column(I64, narrow=True)
    tid: np.ndarray = column(I64, narrow=True)
    name: np.ndarray = column(I32, text=True, doc="range name (string code); NVTX: 'domain:message'")
    kind: np.ndarray = column(I8, 0, doc="AnnotationKind", enum=AnnotationKind)
    external_id: np.ndarray = column(I64, narrow=True)
    parent: np.ndarray = column(I32, doc="enclosing annotation on the same thread")
    depth: np.ndarray = column(I16, 0)


@dataclasses.dataclass(frozen=True)
class PythonFrames(Table):
    """Python call intervals (torch ``with_stack``): one row per function call."""

    start_ns: np.ndarray = column(I64)
    end_ns: np.ndarray = column(I64)
    pid: np.ndarray = column(I64, narrow=True)
    tid: np.ndarray = column(I64, narrow=True)
    name: np.ndarray = column(I32, text=True, doc="'file.py(LINE): function' or 'nn.Module: Name'")
    parent: np.ndarray = column(I32, doc="calling frame (row in PythonFrames)")
    depth: np.ndarray = column(I16, 0)


@dataclasses.dataclass(frozen=True)
class ApiCalls(Table):
    """CUDA/HIP runtime and driver API calls on host threads."""

    start_ns: np.ndarray = column(I64)
    end_ns: np.ndarray = column(I64)
    pid: np.ndarray = column(I64, narrow=True)
    tid: np.ndarray = column(I64, narrow=True)
    name: np.ndarray = column(I32, text=True, doc="API name without version suffix")
    kind: np.ndarray = column(I8, 0, doc="ApiKind", enum=ApiKind)
    correlation: np.ndarray = column(I64, doc="links to GPU rows with the same correlation", narrow=True)
    external_id: np.ndarray = column(I64, narrow=True)
    op: np.ndarray = column(I32, doc="innermost op that made the call (row in Ops)")
    annotation: np.ndarray = column(I32, doc="innermost annotation around the call")


@dataclasses.dataclass(frozen=True)
class GpuActivity(Table):
    """Work executed on a GPU: kernels, copies, memsets, and GPU-side sync records."""

    start_ns: np.ndarray = column(I64)
    end_ns: np.ndarray = column(I64)
    device: np.ndarray = column(I32, doc="device index")
    stream: np.ndarray = column(I64, doc="stream / queue id", narrow=True)
    kind: np.ndarray = column(I8, 0, doc="GpuKind", enum=GpuKind)
    name: np.ndarray = column(I32, text=True, doc="display name (short kernel name)")
    full_name: np.ndarray = column(I32, text=True, doc="full (demangled) name when it differs, else -1")
    correlation: np.ndarray = column(I64, narrow=True)
    external_id: np.ndarray = column(I64, narrow=True)
    bytes: np.ndarray = column(I64, doc="bytes copied or set")
    copy_kind: np.ndarray = column(I8, 0, doc="CopyKind (memcpy rows)", enum=CopyKind)
    src_mem: np.ndarray = column(I8, 7, doc="MemKind of the source (memcpy rows)", enum=MemKind)
    dst_mem: np.ndarray = column(I8, 7, doc="MemKind of the destination / memset target", enum=MemKind)
    grid: np.ndarray = column(I64, doc="total blocks in the grid (x*y*z)")
    block: np.ndarray = column(I64, doc="threads per block (x*y*z)")
    registers: np.ndarray = column(I32, doc="registers per thread")
    shared_mem: np.ndarray = column(I64, doc="shared memory per block, bytes")
    graph: np.ndarray = column(BOOL, False, doc="launched by a CUDA/HIP graph launch")
    api: np.ndarray = column(I32, doc="launching API call (row in ApiCalls)")
    op: np.ndarray = column(I32, doc="innermost op that launched it (row in Ops)")


@dataclasses.dataclass(frozen=True)
class MemoryEvents(Table):
    """Allocator events (torch ``profile_memory``)."""

    ts_ns: np.ndarray = column(I64)
    bytes: np.ndarray = column(I64, 0, doc="allocation (+) or free (-)")
    total_allocated: np.ndarray = column(I64)
    total_reserved: np.ndarray = column(I64)
    device_type: np.ndarray = column(I8, doc="0 CPU, 1 CUDA/HIP")
    device: np.ndarray = column(I32)


@dataclasses.dataclass(frozen=True)
class Frames(Table):
    """Distinct stack frames of sampled profiles (py-spy, speedscope, collapsed stacks)."""

    function: np.ndarray = column(I32, text=True, doc="function name (string code)")
    file: np.ndarray = column(I32, text=True, doc="file path (string code), -1 unknown")
    line: np.ndarray = column(I32, doc="line number, -1 unknown")


@dataclasses.dataclass(frozen=True)
class StackNodes(Table):
    """Stack trie: each node is one frame under a parent node (root frames have parent -1)."""

    frame: np.ndarray = column(I32, doc="row in Frames")
    parent: np.ndarray = column(I32, doc="row in StackNodes")
    depth: np.ndarray = column(I16, 0)


@dataclasses.dataclass(frozen=True)
class Samples(Table):
    """CPU stack samples, possibly aggregated (``count`` samples with the same stack)."""

    node: np.ndarray = column(I32, doc="leaf stack node (row in StackNodes), -1 empty stack")
    thread: np.ndarray = column(I32, doc="row in Threads")
    count: np.ndarray = column(I64, 1, doc="number of samples")
    weight_ns: np.ndarray = column(I64, 0, doc="time these samples stand for")
    ts_ns: np.ndarray = column(I64, doc="sample time when known")
    state: np.ndarray = column(I8, doc="thread state when known: 0 running, 1 idle/waiting")
