"""The normalized, columnar model every reader produces and every analysis reads."""

from traceclass.model.comms import Comms
from traceclass.model.enums import (
    AnnotationKind,
    ApiKind,
    Captured,
    CopyKind,
    GpuKind,
    MemKind,
    Vendor,
)
from traceclass.model.strings import InputsTable, OpInputs, StringTable
from traceclass.model.tables import (
    Annotations,
    ApiCalls,
    Frames,
    GpuActivity,
    MemoryEvents,
    Ops,
    PythonFrames,
    Samples,
    StackNodes,
    Threads,
)
from traceclass.model.trace import HOST_DEVICE, DeviceInfo, SamplingInfo, SourceInfo, Trace

__all__ = [
    "HOST_DEVICE",
    "AnnotationKind",
    "Annotations",
    "ApiCalls",
    "ApiKind",
    "Captured",
    "Comms",
    "CopyKind",
    "DeviceInfo",
    "Frames",
    "GpuActivity",
    "GpuKind",
    "InputsTable",
    "MemKind",
    "MemoryEvents",
    "OpInputs",
    "Ops",
    "PythonFrames",
    "Samples",
    "SamplingInfo",
    "SourceInfo",
    "StackNodes",
    "StringTable",
    "Threads",
    "Trace",
    "Vendor",
]
