"""Domain values of reports that renderers branch on, as str-valued enums (JSON output keeps
the plain strings)."""

from __future__ import annotations

import enum


class NoiseBasis(str, enum.Enum):
    """What decided a compared figure's label (``compare.noise.judge``)."""

    TESTED = "tested"  # a significance test on the per-step samples
    NO_CHANGE = "no-change"  # the two figures are equal
    NOT_MEASURED = "not-measured"  # a run lacks the figure
    SINGLE_SAMPLE = "single-sample"  # a run has one sample: the fallback size rule decided
    ONE_VALUE_PER_RUN = "one-value-per-run"  # the figure has no samples at all
    SINGLE_RUN = "single-run"  # a whole-run figure (sampled CPU profile): fallback rule

    def __str__(self) -> str:
        return self.value
