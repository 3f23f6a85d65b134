"""Kernel launches recorded while a CUDA/HIP graph was captured (see ``ingest.graph_capture``)."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class CapturedLaunches:
    """One entry per launch call of the capture trace, per thread in time order."""

    path: str
    ts_ns: tuple[int, ...]
    kernel: tuple[str, ...]  # the launch's ``args.kernel``
    op: tuple[str, ...]  # name of the op with the launch's External id, "" when none
    shapes: tuple[str, ...]  # that op's "Input Dims" as text, "" when not recorded
    tid: tuple[int, ...]
