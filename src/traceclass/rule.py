"""The rule API: everything a rule author needs, and nothing else.

A rule is a module in ``rules/`` named ``tc<NNN>_<slug>.py`` that defines

* a docstring with the sections What it finds / Why it matters / How to fix / Example /
  Thresholds (checked by tests/rules/test_catalogue.py),
* ``RULE = RuleInfo(code="TC201", name="small-kernel-storm", family=Family.LAUNCH, summary=...,
  needs=(Need.GPU,), thresholds=(Threshold(...), ...))``: what the rule needs (the engine
  skips it with a note when the trace lacks it) and its thresholds, each with its default, unit
  and the reason for the default; a rule whose recoverable time is GPU idle time names the
  cause it claims in ``values["idle_cause"]`` (the opportunities count each cause once),
* ``check(ctx: Context, th: Thresholds) -> Iterable[Finding]``, pure: no I/O, no printing.

``Thresholds`` is the rule's declared defaults merged with user overrides
(``[tool.traceclass.rules.TCnnn]``, ``--config``), a read-only mapping with units in the key names
(``max_kernel_us``). ``rules/thresholds.toml`` is generated from the declarations.

The engine stamps ``code`` and ``name`` on every finding and caps its evidence at
:data:`MAX_EVIDENCE` rows; a rule fills in neither.

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
import enum
import functools
import hashlib
from typing import Any, Iterable, Mapping, Protocol

import numpy as np

from traceclass.facts import Facts
from traceclass.facts.analysed import AnalysedTime
from traceclass.facts.idle_causes import IdleCauses
from traceclass.model import Trace

class Severity(enum.StrEnum):
    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"
    INFO = "info"  # nothing recoverable: kept in the JSON report, folded in tables


SEVERITIES = tuple(s.value for s in Severity)


class Family(enum.StrEnum):
    """What kind of problem a rule finds (groups rules in the catalogue)."""

    COMPUTE = "compute"
    LAUNCH = "launch"
    SYNC = "sync"
    DATA = "data"
    COPY = "copy"
    LAYOUT = "layout"
    CPU = "cpu"
    UTILIZATION = "utilization"
    MEMORY = "memory"
    COMMUNICATION = "communication"


class Need(enum.StrEnum):
    """Data a rule reads; the engine skips a rule whose trace lacks it (see :func:`lacks`)."""

    GPU = "gpu"  # GPU activities (kernels, copies, sets, sync records)
    OPS = "ops"  # framework ops (torch.profiler)
    SHAPES = "shapes"  # op input shapes (record_shapes=True, emit_nvtx with shapes)
    SAMPLES = "samples"  # CPU stack samples (py-spy, nsys)
    PYTHON = "python"  # Python call stacks (with_stack=True)
    MEMORY = "memory"  # allocator events (profile_memory=True)

    @property
    def missing(self) -> str:
        """How the report says the trace lacks it."""
        return _MISSING[self]


_MISSING = {
    Need.GPU: "no GPU activity",
    Need.OPS: "no framework ops",
    Need.SHAPES: "no op input shapes",
    Need.SAMPLES: "no CPU samples",
    Need.PYTHON: "no Python stacks",
    Need.MEMORY: "no memory events",
}


def has(trace: Trace, need: Need) -> bool:
    """Whether the trace holds the data ``need`` names."""
    if need is Need.GPU:
        return len(trace.gpu) > 0
    if need is Need.OPS:
        return len(trace.ops) > 0
    if need is Need.SHAPES:
        return len(trace.ops) > 0 and "shapes" in trace.captured
    if need is Need.SAMPLES:
        return len(trace.samples) > 0
    if need is Need.PYTHON:
        return len(trace.python) > 0
    if need is Need.MEMORY:
        return len(trace.memory) > 0
    raise ValueError(need)


def lacks(trace: Trace, needs: tuple[Any, ...]) -> list[str]:
    """What the trace lacks of ``needs`` (empty: the rule can run), as report phrases."""
    out = []
    for req in needs:
        alts = tuple(Need(n) for n in (req if isinstance(req, tuple) else (req,)))
        if not any(has(trace, n) for n in alts):
            out.append(", ".join(n.missing for n in alts))
    return out


@dataclasses.dataclass(frozen=True)
class Threshold:
    """One rule threshold: its key (unit in the name), default, unit and why it has that value."""

    name: str  # "max_kernel_us"
    default: int | float | str | bool
    unit: str  # "us", "%", "count", "bytes", "ratio", "regex" ...
    reason: str  # why the default is what it is (a measurement, a peer's default...)


@dataclasses.dataclass(frozen=True)
class RuleInfo:
    code: str  # "TC201"
    name: str  # "small-kernel-storm": the pattern found, kebab-case
    family: Family
    summary: str  # one line for `traceclass rules`
    needs: tuple[Any, ...] = ()  # Need or tuple of alternative Needs, all required
    thresholds: tuple[Threshold, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "family", Family(self.family))
        object.__setattr__(self, "needs", tuple(tuple(Need(n) for n in r) if isinstance(r, tuple) else Need(r)
                                                for r in self.needs))

    def defaults(self) -> dict[str, Any]:
        return {t.name: t.default for t in self.thresholds}


#: evidence rows kept per finding (the engine cuts longer lists; rules order them worst first)
MAX_EVIDENCE = 50


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


@dataclasses.dataclass(frozen=True, kw_only=True)
class Finding:
    code: str = ""  # stamped by the engine from the rule's RULE
    name: str = ""
    severity: Severity
    message: str  # one line: measured value next to the threshold
    recoverable_ns: int  # what fixing it would save (an estimate; see `estimate`)
    estimate: str  # how recoverable_ns was estimated
    fix: str  # short advice
    location: str  # stable location for the fingerprint (op/kernel/site names, not times)
    evidence: tuple[Evidence, ...] = ()
    values: Mapping[str, Any] = dataclasses.field(default_factory=dict)  # units in key names
    # what to change and where, in a few words (<= ~80 characters): the lead line of the opportunity;
    # the message keeps the measured values
    title: str = ""

    @property
    def fingerprint(self) -> str:
        """Stable id: rule + location; the same problem in a later run matches."""
        h = hashlib.sha1(f"{self.code}|{self.location}".encode("utf-8", "replace")).hexdigest()
        return f"{self.code}-{h[:12]}"


@dataclasses.dataclass(frozen=True)
class Context:
    """What a rule may read: the trace and its facts (:class:`traceclass.facts.Facts`, each
    computed once and shared by every rule and the report)."""

    trace: Trace
    analysis: Facts  # the historical name; ``facts`` is the same object

    @property
    def facts(self) -> Facts:
        return self.analysis

    def name(self, code: int) -> str:
        return self.trace.strings[code]

    @property
    def analysed(self) -> AnalysedTime:
        """The steady-state step windows (the whole trace without steps); see ``analysed_ns``."""
        return self.analysis.analysed

    @property
    def analysed_ns(self) -> int:
        """Wall time of the steady-state steps (the synthetic whole-trace step when the trace has
        none): the one denominator of every rule's severity."""
        return self.analysed.total_ns

    @property
    def idle(self) -> IdleCauses:
        """Every GPU-idle stretch of the analysed time with its one cause (the Facts'
        ``idle_causes``, :mod:`traceclass.facts.idle_causes`): the attribution the idle-time rules
        share."""
        return self.analysis.idle_causes

    @property
    def time_word(self) -> str:
        """What ``analysed_ns`` is, for messages: "steady step time", or "the trace's time" without
        steps (no "steady step" wording in a trace that has none)."""
        return "the trace's time (no steps)" if self.analysed.synthetic else "steady step time"

    @property
    def steps_word(self) -> str:
        """Where the analysed time lies, for messages: "the steady steps", or "the trace (no steps)"."""
        return "the trace (no steps)" if self.analysed.synthetic else "the steady steps"

    def severity(self, recoverable_ns: int) -> Severity:
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

    @property
    def gpu_analysed(self) -> np.ndarray:
        """Mask over ``trace.gpu``: work launched inside the analysed windows (all work without steps)."""
        return self.analysis.gpu_analysed


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
                 high_min_ns: int = 0, medium_min_ns: int = 0, zero: str = "low") -> Severity:
    """Severity from the share of ``total_ns`` a fix would recover.

    ``high``: >= ``high_pct`` % and >= ``high_min_ns``; ``medium``: >= ``medium_pct`` % and
    >= ``medium_min_ns``; ``low`` otherwise; ``zero`` when nothing is recoverable. Rules rate
    time with :meth:`Context.severity` (the shared denominator and floors); the bare function
    serves rules whose quantities are not times (sample counts).
    """
    if recoverable_ns <= 0:
        return Severity(zero)
    if total_ns <= 0:
        return Severity.LOW
    pct = 100.0 * recoverable_ns / total_ns
    if pct >= high_pct and recoverable_ns >= high_min_ns:
        return Severity.HIGH
    if pct >= medium_pct and recoverable_ns >= medium_min_ns:
        return Severity.MEDIUM
    return Severity.LOW


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
