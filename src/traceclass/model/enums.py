"""Small integer codes stored in the model's ``kind`` columns.

The values are part of the model's contract (tables hold them as int8); never renumber.
"""

from __future__ import annotations

from enum import IntEnum, StrEnum


class Captured(StrEnum):
    """A kind of data a source recorded (``Trace.captured``).

    A ``StrEnum`` member equals and hashes like its value, so ``"gpu" in trace.captured`` holds
    and the JSON report writes the plain string."""

    OPS = "ops"
    ANNOTATIONS = "annotations"
    API = "api"
    GPU = "gpu"
    PYTHON = "python"
    MEMORY = "memory"
    SHAPES = "shapes"
    SAMPLES = "samples"


class GpuKind(IntEnum):
    """What a row of ``Trace.gpu`` is."""

    KERNEL = 0
    MEMCPY = 1
    MEMSET = 2
    SYNC = 3  # GPU-side record of a synchronization; never counted as busy time


class CopyKind(IntEnum):
    """Direction of a memcpy (CUPTI's numbering, as in nsys ``copyKind``)."""

    UNKNOWN = 0
    HTOD = 1
    DTOH = 2
    HTOA = 3
    ATOH = 4
    ATOA = 5
    ATOD = 6
    DTOA = 7
    DTOD = 8
    HTOH = 9
    PTOP = 10
    UVM_HTOD = 11
    UVM_DTOH = 12
    UVM_DTOD = 13


COPY_KIND_LABEL = {
    CopyKind.UNKNOWN: "unknown",
    CopyKind.HTOD: "HtoD",
    CopyKind.DTOH: "DtoH",
    CopyKind.HTOA: "HtoA",
    CopyKind.ATOH: "AtoH",
    CopyKind.ATOA: "AtoA",
    CopyKind.ATOD: "AtoD",
    CopyKind.DTOA: "DtoA",
    CopyKind.DTOD: "DtoD",
    CopyKind.HTOH: "HtoH",
    CopyKind.PTOP: "PtoP",
    CopyKind.UVM_HTOD: "UVM HtoD",
    CopyKind.UVM_DTOH: "UVM DtoH",
    CopyKind.UVM_DTOD: "UVM DtoD",
}


class MemKind(IntEnum):
    """Memory kind of a copy's source/destination or a memset's target (CUPTI numbering)."""

    PAGEABLE = 0
    PINNED = 1
    DEVICE = 2
    ARRAY = 3
    MANAGED = 4
    DEVICE_STATIC = 5
    MANAGED_STATIC = 6
    UNKNOWN = 7


MEM_KIND_LABEL = {
    MemKind.PAGEABLE: "pageable",
    MemKind.PINNED: "pinned",
    MemKind.DEVICE: "device",
    MemKind.ARRAY: "array",
    MemKind.MANAGED: "managed",
    MemKind.DEVICE_STATIC: "device static",
    MemKind.MANAGED_STATIC: "managed static",
    MemKind.UNKNOWN: "unknown",
}


class ApiKind(IntEnum):
    """What a runtime/driver API call does, as far as the analyses care."""

    OTHER = 0
    LAUNCH = 1  # kernel launch
    GRAPH_LAUNCH = 2  # cudaGraphLaunch / hipGraphLaunch: one call, many GPU rows
    MEMCPY_ASYNC = 3
    MEMCPY_SYNC = 4  # blocking copy API (cudaMemcpy, cuMemcpyDtoH ...)
    MEMSET_ASYNC = 5
    MEMSET_SYNC = 6
    SYNC_DEVICE = 7
    SYNC_STREAM = 8
    SYNC_EVENT = 9
    STREAM_WAIT = 10  # cudaStreamWaitEvent: GPU-side wait, does not block the host
    EVENT_QUERY = 11  # polling (cudaEventQuery / cudaStreamQuery)
    MALLOC = 12
    FREE = 13


#: API kinds during which the calling host thread blocks until the GPU catches up.
BLOCKING_API_KINDS = (
    ApiKind.MEMCPY_SYNC,
    ApiKind.MEMSET_SYNC,
    ApiKind.SYNC_DEVICE,
    ApiKind.SYNC_STREAM,
    ApiKind.SYNC_EVENT,
)


class AnnotationKind(IntEnum):
    """Role of a named range (``record_function``, ``ProfilerStep#N``, NVTX)."""

    USER = 0
    STEP = 1  # ProfilerStep#N or an equivalent iteration marker
    DATALOADER = 2
    OPTIMIZER = 3
    COMMUNICATION = 4
    MODULE = 5  # nn.Module scope
    COMPILED = 6  # torch.compile graph call
    INTERNAL = 7  # profiler bookkeeping (e.g. torch.profiler's own spans)


class Vendor(IntEnum):
    UNKNOWN = 0
    NVIDIA = 1
    AMD = 2
    CPU = 3
