"""One compared figure: baseline, candidate, delta and the noise call on it."""

from __future__ import annotations

import dataclasses
from typing import Sequence

from traceclass.compare import noise
from traceclass.compare.noise import NoiseCall
#: regressions named in the verdict must move the step by at least this share of its P50
MATERIAL_PCT_OF_STEP = 1.0


@dataclasses.dataclass(frozen=True)
class Delta(noise.Change):
    baseline: float | None
    candidate: float | None
    unit: str  # "ns", "bytes", "pct" (a share; its delta is in percentage points)
    call: NoiseCall

    @property
    def label(self) -> str:
        return self.call.label


def make_delta(b_samples: Sequence[float], c_samples: Sequence[float], b: float | None, c: float | None,
               unit: str) -> Delta:
    """Times (unit ``ns``) are labelled faster/slower, other quantities higher/lower; shares
    (unit ``pct``) are judged in percentage points."""
    return Delta(b, c, unit, noise.judge(b_samples, c_samples, b, c, time_like=unit == "ns", points=unit == "pct"))

