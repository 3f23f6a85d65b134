"""The rule API: everything a rule author needs, and nothing else.

A rule is a module in ``rules/`` named ``tc<NNN>_<slug>.py`` that defines

* a docstring with the sections What it finds / Why it matters / How to fix / Example /
  Thresholds (checked by tests/rules/test_catalogue.py),
* ``RULE = RuleInfo(code="TC201", name="small-kernel-storm", family="launch", summary=...)``,
* ``check(ctx: Context, th: Thresholds) -> Iterable[Finding]``, pure: no I/O, no printing.

``Thresholds`` is the rule's table from ``rules/thresholds.toml`` (merged with user
overrides), a read-only mapping with units in the key names (``max_kernel_us``).
"""

from __future__ import annotations

import dataclasses
import hashlib
from typing import Any, Iterable, Mapping, Protocol

from traceclass.analysis import Analysis
from traceclass.model import Trace

SEVERITIES = ("high", "medium", "low", "info")


@dataclasses.dataclass(frozen=True)
class RuleInfo:
    code: str  # "TC201"
    name: str  # "small-kernel-storm": the pattern found, kebab-case
    family: str  # "launch", "copy", "layout", "sync", "compute", "cpu", "utilization"
    summary: str  # one line for `traceclass rules`
    needs: tuple[str, ...] = ()  # data the rule needs: "gpu", "ops", "shapes", "samples", "python"


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


class Thresholds(Protocol):
    def __getitem__(self, key: str) -> Any: ...
    def get(self, key: str, default: Any = None) -> Any: ...


class CheckFunction(Protocol):
    def __call__(self, ctx: Context, th: Mapping[str, Any]) -> Iterable[Finding]: ...


def severity_for(recoverable_ns: int, total_ns: int, high_pct: float = 10.0, medium_pct: float = 3.0) -> str:
    """Severity from the share of the analysed time a fix would recover."""
    if total_ns <= 0:
        return "low"
    pct = 100.0 * recoverable_ns / total_ns
    if pct >= high_pct:
        return "high"
    if pct >= medium_pct:
        return "medium"
    return "low"
