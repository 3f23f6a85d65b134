"""CUDA / HIP runtime and driver API names -> :class:`ApiKind`.

Shared by the Kineto and Nsight Systems readers, so both classify a call the same way.
"""

from __future__ import annotations

import re

from traceclass.model.enums import ApiKind

_VERSION_SUFFIX = re.compile(r"_v\d{4,}$")

_EXACT: dict[str, ApiKind] = {}


def _add(kind: ApiKind, *names: str) -> None:
    for n in names:
        _EXACT[n] = kind


_add(ApiKind.GRAPH_LAUNCH, "cudaGraphLaunch", "cuGraphLaunch", "hipGraphLaunch")
_add(
    ApiKind.SYNC_DEVICE,
    "cudaDeviceSynchronize",
    "cudaThreadSynchronize",
    "cuCtxSynchronize",
    "hipDeviceSynchronize",
)
_add(ApiKind.SYNC_STREAM, "cudaStreamSynchronize", "cuStreamSynchronize", "hipStreamSynchronize")
_add(ApiKind.SYNC_EVENT, "cudaEventSynchronize", "cuEventSynchronize", "hipEventSynchronize")
_add(ApiKind.STREAM_WAIT, "cudaStreamWaitEvent", "cuStreamWaitEvent", "hipStreamWaitEvent")
_add(
    ApiKind.EVENT_QUERY,
    "cudaEventQuery",
    "cudaStreamQuery",
    "cuEventQuery",
    "cuStreamQuery",
    "hipEventQuery",
    "hipStreamQuery",
)

#: Kineto writes "INVALID" when its CUPTI build did not know the callback id.
CBID_NAMES = {409: "cudaStreamGetCaptureInfo_v2"}


def strip_version(name: str) -> str:
    """``cudaLaunchKernel_v7000`` -> ``cudaLaunchKernel``; driver ``_v2`` suffixes stay."""
    return _VERSION_SUFFIX.sub("", name)


def api_kind(name: str) -> ApiKind:
    """Classify one API name (already without ``_vNNNN`` suffix)."""
    kind = _EXACT.get(name)
    if kind is not None:
        return kind
    if "LaunchKernel" in name or "LaunchCooperativeKernel" in name or name.startswith(
        ("cudaLaunch", "cuLaunch", "hipLaunch", "hipModuleLaunch", "hipExtModuleLaunch")
    ):
        return ApiKind.LAUNCH
    if name.startswith(("cudaMemcpy", "cuMemcpy", "hipMemcpy")):
        if "Async" in name:
            return ApiKind.MEMCPY_ASYNC
        # includes hipMemcpyWithStream: HIP documents it as "akin to hipMemcpyAsync +
        # hipStreamSynchronize ... a sync API"
        return ApiKind.MEMCPY_SYNC
    if name.startswith(("cudaMemset", "cuMemset", "hipMemset")):
        return ApiKind.MEMSET_ASYNC if "Async" in name else ApiKind.MEMSET_SYNC
    if name.startswith(("cudaMalloc", "cuMemAlloc", "hipMalloc", "hipExtMalloc")):
        return ApiKind.MALLOC
    if name.startswith(("cudaFree", "cuMemFree", "hipFree")):
        return ApiKind.FREE
    return ApiKind.OTHER
