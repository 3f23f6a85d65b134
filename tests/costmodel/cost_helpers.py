"""Building op inputs for cost-model tests: by hand, or recorded from real torch calls."""

from __future__ import annotations

import math
import os
import tempfile
from typing import Any, Callable

from traceclass.model.strings import OpInputs

RECORDED = {
    "fp64": "double", "fp32": "float", "fp16": "c10::Half", "bf16": "c10::BFloat16",
    "fp8": "c10::Float8_e4m3fn", "int64": "long int", "int32": "int", "int8": "signed char",
    "uint8": "unsigned char", "bool": "bool",
}


class T:
    """A tensor argument: ``T("bf16", 4, 8)``; ``strides=`` for non-contiguous views."""

    def __init__(self, dtype: str, *shape: int, strides: tuple[int, ...] | None = None) -> None:
        self.dtype, self.shape = dtype, tuple(shape)
        self.strides = strides if strides is not None else _contiguous(self.shape)


def _contiguous(shape: tuple[int, ...]) -> tuple[int, ...]:
    out, acc = [], 1
    for d in reversed(shape):
        out.append(acc)
        acc *= d
    return tuple(reversed(out))


def ops(*args: Any, concrete: bool = True, strides: bool = True) -> OpInputs:
    """OpInputs as torch.profiler records them: tensors, scalars, lists, None.

    ``concrete=False`` / ``strides=False`` mimic traces recorded before those fields existed.
    """
    dims: list[Any] = []
    types: list[str] = []
    st: list[Any] = []
    conc: list[str] = []
    for a in args:
        if isinstance(a, T):
            dims.append(a.shape)
            types.append(RECORDED[a.dtype])
            st.append(a.strides)
            conc.append("")
        elif a is None:
            dims.append(None)
            types.append("")
            st.append(())
            conc.append("")
        elif isinstance(a, (list, tuple)):
            dims.append(None)
            types.append("ScalarList")
            st.append(())
            conc.append("[" + ", ".join(str(x) for x in a) + "]")
        else:
            dims.append(None)
            types.append("Scalar")
            st.append(())
            conc.append(str(a))
    return OpInputs(
        dims=tuple(dims),
        dtypes=tuple(types),
        strides=tuple(st) if strides else None,
        concrete=tuple(conc) if concrete else None,
    )


def nbytes(dtype: str, *shape: int) -> int:
    size = {"fp64": 8, "fp32": 4, "fp16": 2, "bf16": 2, "fp8": 1, "int64": 8, "int32": 4, "int8": 1,
            "uint8": 1, "bool": 1}[dtype]
    return size * math.prod(shape)


# --------------------------------------------------------------------------- torch


def recorded_ops(fn: Callable[[], Any]) -> list[tuple[str, OpInputs]]:
    """Run ``fn`` under torch.profiler(record_shapes=True) and read the exported trace back.

    Goes through the real Chrome-trace export and the traceclass Kineto reader, so the inputs
    are exactly what estimate() sees for a trace.
    """
    from torch.profiler import profile

    from traceclass.ingest import load

    with profile(record_shapes=True) as prof:
        fn()
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "trace.json")
        prof.export_chrome_trace(path)
        trace = load(path)
    names = trace.strings.decode(trace.ops.name)
    return [(str(n), trace.inputs[ic]) for n, ic in zip(names, trace.ops.inputs.tolist())]


def recorded(fn: Callable[[], Any], name: str) -> OpInputs:
    """Inputs of the first ``name`` op ``fn`` ran."""
    for n, inp in recorded_ops(fn):
        if n == name and inp is not None:
            return inp
    raise AssertionError(f"{name} was not recorded")


def torch_flops(fn: Callable[[], Any]) -> dict[str, int]:
    """FLOPs per op as torch.utils.flop_counter.FlopCounterMode counts them (``aten::mm`` keys)."""
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as mode:
        fn()
    return {str(k).replace("aten.", "aten::"): int(v) for k, v in mode.get_flop_counts()["Global"].items()}
