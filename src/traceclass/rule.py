"""The rule API: everything a rule author needs, and nothing else.

A rule is a module in ``rules/`` named ``tc<NNN>_<slug>.py`` that defines

* a docstring with the sections What it finds / Why it matters / How to fix / Example /
  Thresholds (checked by tests/rules/test_catalogue.py),
* ``RULE = RuleInfo(code="TC201", name="small-kernel-storm", family="launch", summary=...)``,
* ``check(ctx: Context, th: Thresholds) -> Iterable[Finding]``, pure: no I/O, no printing.

``Thresholds`` is the rule's table from ``rules/thresholds.toml`` (merged with user
overrides), a read-only mapping with units in the key names (``max_kernel_us``).

Conventions every rule follows:

* **Severity** comes from ``ctx.severity(recoverable_ns)``: :func:`severity_for` with
  ``ctx.analysed_ns`` as the denominator, the wall time of the steady-state steps (the whole
  trace when it has no steps), the same number for every rule, so severities of different rules
  compare. A rule counts its recoverable time in that same time (``ctx.analysed``; GPU rows:
  ``ctx.gpu_analysed``). ``high`` needs >= 10 % of it *and* at least :data:`HIGH_MIN_NS` (1 ms),
  ``medium`` >= 3 % and at least :data:`MEDIUM_MIN_NS` (0.1 ms): a finding worth microseconds is
  never ``high``, however short the trace. Nothing recoverable (0 ns) is ``info``: kept in the
  JSON report, folded in tables.
* **Location** (the fingerprint) names the site: op, kernel, stage or source-line names and the
  pattern, never device indices, ranks or times, so the same problem on rank 0 and rank 7, or in
  a later run, matches; two different sites differ. ``traceclass.analysis.locations.device_tag``
  tells apart two GPUs of one process without naming their indices.
* **Messages** agree in number (:func:`plural`) and print the measured value next to the
  threshold.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
from typing import Any, Iterable, Mapping, Protocol

import numpy as np

from traceclass.analysis import Analysis
from traceclass.analysis.analysed import AnalysedTime, analysed_time, gpu_in_analysed
from traceclass.model import Trace

SEVERITIES = ("high", "medium", "low", "info")


@dataclasses.dataclass(frozen=True)
class RuleInfo:
    code: str  # "TC201"
    name: str  # "small-kernel-storm": the pattern found, kebab-case
    family: str  # "launch", "copy", "layout", "sync", "compute", "cpu", "utilization", "data",
    #              "communication", "memory"
    summary: str  # one line for `traceclass rules`
    needs: tuple[str, ...] = ()  # data the rule needs: "gpu", "ops", "shapes", "samples", "python", "memory"


@dataclasses.dataclass(frozen=True)
class Evidence:
    """One instance behind a finding (a window, an op, a kernel sequence...).

    Rules give absolute trace ns; the report rebases them on the trace's first event.
    """

    what: str  # short description, plain text (renderers escape it)
    start_ns: int | None = None
    end_ns: int | None = None
    duration_ns: int | None = None
    count: int | None = None
    bytes: int | None = None
    ops: tuple[str, ...] = ()
    kernels: tuple[str, ...] = ()
    source: str | None = None  # "file.py:123" when the trace has Python stacks
    values: Mapping[str, Any] = dataclasses.field(default_factory=dict)  # units in key names


@dataclasses.dataclass(frozen=True)
class Finding:
    code: str
    name: str
    severity: str
    message: str  # one line: measured value next to the threshold
    recoverable_ns: int  # what fixing it would save (an estimate; see `estimate`)
    estimate: str  # how recoverable_ns was estimated
    fix: str  # short advice
    location: str  # stable location for the fingerprint (op/kernel/site names, not times)
    evidence: tuple[Evidence, ...] = ()
    values: Mapping[str, Any] = dataclasses.field(default_factory=dict)  # units in key names

    @property
    def fingerprint(self) -> str:
        """Stable id: rule + location; the same problem in a later run matches."""
        h = hashlib.sha1(f"{self.code}|{self.location}".encode("utf-8", "replace")).hexdigest()
        return f"{self.code}-{h[:12]}"


@dataclasses.dataclass(frozen=True)
class Context:
    """What a rule may read: the trace and the shared analyses (computed once)."""

    trace: Trace
    analysis: Analysis

    def name(self, code: int) -> str:
        return self.trace.strings[code]

    @functools.cached_property
    def analysed(self) -> AnalysedTime:
        """The steady-state step windows (the whole trace without steps); see ``analysed_ns``."""
        return analysed_time(self.analysis)

    @property
    def analysed_ns(self) -> int:
        """Wall time of the steady-state steps (the synthetic whole-trace step when the trace has
        none): the one denominator of every rule's severity."""
        return self.analysed.total_ns

    def severity(self, recoverable_ns: int) -> str:
        """The shared scale: :func:`severity_for` against ``analysed_ns`` with the floors
        :data:`HIGH_MIN_NS` / :data:`MEDIUM_MIN_NS`; ``info`` when nothing is recoverable."""
        return severity_for(recoverable_ns, self.analysed_ns, high_min_ns=HIGH_MIN_NS, medium_min_ns=MEDIUM_MIN_NS,
                            zero="info")

    @functools.cached_property
    def unfused_attention(self) -> list[Any]:
        """Unfused attention instances with the default pattern thresholds (TC102 finds them,
        TC101 leaves their ops alone): :func:`traceclass.analysis.unfused_attention.find`."""
        from traceclass.analysis.unfused_attention import find

        return find(self.trace, self.analysis)

    @functools.cached_property
    def gpu_analysed(self) -> np.ndarray:
        """Mask over ``trace.gpu``: work launched inside the analysed windows (all work without steps)."""
        return gpu_in_analysed(self.trace, self.analysed)


class Thresholds(Protocol):
    def __getitem__(self, key: str) -> Any: ...
    def get(self, key: str, default: Any = None) -> Any: ...


class CheckFunction(Protocol):
    def __call__(self, ctx: Context, th: Mapping[str, Any]) -> Iterable[Finding]: ...


#: ``high`` needs at least 1 ms recoverable: the cost of ~100 eager kernel launches, well above
#: the few microseconds per event the profiler itself adds and the 0.4-2.3 % spread between the
#: steady steps of the corpus training traces on steps of tens of ms; below it a fix cannot be
#: "the first thing to do", whatever share of a short trace it is.
HIGH_MIN_NS = 1_000_000
#: ``medium`` needs at least 0.1 ms: the reporting floor of the copy rules (TC301), ten launches.
MEDIUM_MIN_NS = 100_000


def severity_for(recoverable_ns: int, total_ns: int, high_pct: float = 10.0, medium_pct: float = 3.0, *,
                 high_min_ns: int = 0, medium_min_ns: int = 0, zero: str = "low") -> str:
    """Severity from the share of ``total_ns`` a fix would recover.

    ``high``: >= ``high_pct`` % and >= ``high_min_ns``; ``medium``: >= ``medium_pct`` % and
    >= ``medium_min_ns``; ``low`` otherwise; ``zero`` when nothing is recoverable. Rules rate
    time with :meth:`Context.severity` (the shared denominator and floors); the bare function
    serves rules whose quantities are not times (sample counts).
    """
    if recoverable_ns <= 0:
        return zero
    if total_ns <= 0:
        return "low"
    pct = 100.0 * recoverable_ns / total_ns
    if pct >= high_pct and recoverable_ns >= high_min_ns:
        return "high"
    if pct >= medium_pct and recoverable_ns >= medium_min_ns:
        return "medium"
    return "low"


def plural(n: int, word: str, many: str | None = None) -> str:
    """``1 copy``, ``2 copies``: the count and the word in agreement (``many`` for irregular plurals;
    default: ``word + "s"``, ``-y`` -> ``-ies``, ``-s/-x/-ch/-sh`` -> ``-es``)."""
    if n == 1:
        return f"{n} {word}"
    if many is None:
        if word.endswith("y") and word[-2:-1] not in "aeiou":
            many = word[:-1] + "ies"
        elif word.endswith(("s", "x", "ch", "sh")):
            many = word + "es"
        else:
            many = word + "s"
    return f"{n:,} {many}"
