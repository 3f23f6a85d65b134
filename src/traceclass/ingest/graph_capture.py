"""The kernel launches a CUDA/HIP graph capture recorded, with the ops that issued them.

A torch.profiler trace taken while a graph is captured (``torch.cuda.graph`` / vLLM and SGLang
``capture``) holds one launch call per captured kernel (``cudaLaunchKernel``,
``hipLaunchKernel``, ``hipExtModuleLaunchKernel``, ``cuLaunchKernel``...) whose ``args.kernel``
names the kernel and whose ``External id`` is that of the op that launched it; the kernels
themselves mostly do not run. This reader keeps exactly that: launches in time order with the
kernel name and the launching op's name and recorded shapes, per thread.
"""

from __future__ import annotations

from typing import Any

import msgspec

from traceclass.errors import TraceFormatError
from traceclass.ingest.jsonload import decode_container, first_char
from traceclass.ingest.source import read_bytes
from traceclass.model.captured import CapturedLaunches


class _Event(msgspec.Struct):
    ph: str = ""
    cat: str = ""
    name: str = ""
    ts: float = 0.0
    tid: Any = 0
    args: dict[str, Any] = {}


_decode = msgspec.json.Decoder(_Event)


def read_capture(path: str) -> CapturedLaunches:
    """Launches of a capture trace; TraceFormatError when the file is not one."""
    data = read_bytes(path)
    if first_char(data) not in (b"{", b"["):
        raise TraceFormatError(path, "not a JSON trace: --graph-capture takes a torch.profiler trace of the capture")
    container = decode_container(path, data)
    launches: list[tuple[float, str, Any, int]] = []
    ops: dict[Any, tuple[str, str]] = {}
    for raw in container.events:
        try:
            e = _decode.decode(raw)
        except msgspec.DecodeError:
            continue
        if e.ph != "X":
            continue
        if e.cat == "cpu_op":
            ext = e.args.get("External id")
            if ext is not None:
                ops[ext] = (e.name, _shapes(e.args.get("Input Dims")))
        elif e.cat in ("cuda_runtime", "cuda_driver") and isinstance(e.args.get("kernel"), str):
            tid = e.tid if isinstance(e.tid, int) else 0
            launches.append((e.ts, e.args["kernel"], e.args.get("External id"), tid))
    if not launches:
        raise TraceFormatError(path, "no kernel launch with a recorded kernel name: not a graph-capture trace")
    launches.sort(key=lambda t: (t[3], t[0]))
    named = [ops.get(ext, ("", "")) for _, _, ext, _ in launches]
    return CapturedLaunches(
        path=path,
        ts_ns=tuple(int(round(t * 1000)) for t, _, _, _ in launches),
        kernel=tuple(k for _, k, _, _ in launches),
        op=tuple(n for n, _ in named),
        shapes=tuple(s for _, s in named),
        tid=tuple(t for _, _, _, t in launches),
    )


def _shapes(dims: Any) -> str:
    """``[[32, 4096], [4096, 6144]]`` -> ``[32x4096], [4096x6144]`` (tensors only)."""
    if not isinstance(dims, list):
        return ""
    parts = ["[" + "x".join(str(x) for x in d) + "]" for d in dims if isinstance(d, list) and d
             and all(isinstance(x, int) for x in d)]
    return ", ".join(parts)
