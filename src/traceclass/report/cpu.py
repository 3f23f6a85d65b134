"""The report's CPU profile section (sampled profiles: py-spy, speedscope ...), typed.

Field names are the JSON report's keys (``traceclass analyze --format json``): the JSON renderer
writes this section like every other (:mod:`traceclass.report.plain`) and
:meth:`Report.from_json` reads it back. Values are in the profile's own unit (``unit``):
``ns``, ``samples``, or ``units`` (weights that are not time); a field that only one unit has
(``self_samples``, ``self_weight`` ...) is left out of the JSON when None. Built from the
analysis' :class:`~traceclass.analysis.cpu_types.CpuProfile` by :func:`cpu_section`.
"""

from __future__ import annotations

import dataclasses

from traceclass.analysis.cpu_types import NO_FRAMES, NO_FRAMES_LABEL, CpuProfile, FrameStat, KindShare, ThreadProfile
from traceclass.analysis.cpu_types import _running, _thread_label, frame_location
from traceclass.analysis.frame_kinds import label as kind_label

#: field metadata: left out of the JSON when None (or empty), as the profile's unit has no such value
OMIT = {"omit_empty": True}


def _opt(default=None):  # type: ignore[no-untyped-def]
    return dataclasses.field(default=default, metadata=OMIT)


@dataclasses.dataclass(frozen=True)
class CpuKind:
    """A kind of time (Python compute, lock wait ...): its time, samples or weight and share."""

    kind: str  # code in analysis.frame_kinds.KINDS, or "none" (empty stack)
    label: str
    time_ns: int | None
    share_pct: float  # of all sampled time (or of the thread's, inside a thread)
    samples: int | None = _opt()  # unit "samples"
    weight: int | None = _opt()  # unit "units"

    @property
    def value(self) -> int:
        """In the profile's unit."""
        return next(v for v in (self.samples, self.weight, self.time_ns, 0) if v is not None)


@dataclasses.dataclass(frozen=True)
class CpuFrame:
    """One frame (function, file, line) with its self and total time."""

    function: str
    file: str
    line: int | None
    kind: str  # the kind of most of its self time
    kind_label: str
    self_ns: int | None
    total_ns: int | None
    self_pct: float  # of all sampled time
    total_pct: float
    self_samples: int | None = _opt()
    total_samples: int | None = _opt()
    self_weight: int | None = _opt()
    total_weight: int | None = _opt()
    threads: tuple[str, ...] = _opt(())  # threads with the most self time here, largest first

    @property
    def location(self) -> str:
        return frame_location(self.file, self.line)

    @property
    def self_value(self) -> int:
        """In the profile's unit."""
        return next(v for v in (self.self_samples, self.self_weight, self.self_ns, 0) if v is not None)


@dataclasses.dataclass(frozen=True)
class CpuThread:
    pid: int | None
    tid: int | None
    name: str
    samples: int | None  # None when values are not samples (timed frames, weights)
    time_ns: int | None
    share_pct: float  # of all sampled time
    running_pct: float  # of this thread's time
    waiting_pct: float
    no_frames_pct: float  # samples with an empty stack
    unverified_pct: float  # at Python lines without source: blocked or computing
    dominant_kind: str
    kinds: tuple[CpuKind, ...]
    hot_spots: tuple[CpuFrame, ...]
    weight: int | None = _opt()  # unit "units"

    @property
    def label(self) -> str:
        return _thread_label(self.name, -1 if self.pid is None else self.pid, -1 if self.tid is None else self.tid)


@dataclasses.dataclass(frozen=True)
class IdleEvidence:
    """Why idle samples are taken as included ("inferred"): a thread mostly in waiting calls."""

    thread: str
    waiting_samples: int
    waiting_pct: float


@dataclasses.dataclass(frozen=True)
class BlockedEvidence:
    """A line without source taken as blocked, and why."""

    thread: str
    location: str | None  # None: several lines
    reason: str


@dataclasses.dataclass(frozen=True)
class CpuSection:
    source_format: str
    producer: str
    unit: str  # "ns", "samples" or "units" (weights that are not time)
    interval_ns: int | None
    total_ns: int | None
    samples: int | None
    total_weight: int | None  # unit "units"
    includes_idle: bool | None
    #: "recorded", "inferred" (see idle_evidence), "unknown", "thread state", "timed", "unitless"
    includes_idle_basis: str
    idle_evidence: IdleEvidence | None
    gil_only: bool | None
    waiting_basis: str  # "thread state" or "frames"
    running_pct: float
    waiting_pct: float
    from_intervals: bool  # values are self times of timed frames, not samples
    has_line_numbers: bool
    source_lines_read: int  # leaf lines whose source text was read (--source-root)
    #: share of all time at Python lines counted as compute only because their source was not found
    unverified_pct: float
    unverified_basis: str | None  # why those lines count as compute ("gil", "no-idle"), or None
    blocked_evidence: tuple[BlockedEvidence, ...]
    weight_unit: str | None  # the file's unit for values that are not time ("none", "bytes")
    kinds: tuple[CpuKind, ...]
    threads: tuple[CpuThread, ...]
    hot_spots: tuple[CpuFrame, ...]  # by self time, largest first
    top_total: tuple[CpuFrame, ...]  # by total time, largest first
    notes: tuple[str, ...]

    @property
    def total_value(self) -> int:
        """All sampled time in the profile's unit."""
        by_unit = {"units": self.total_weight, "samples": self.samples}.get(self.unit, self.total_ns)
        return 0 if by_unit is None else by_unit

    @property
    def blocked_pct(self) -> float:
        return sum(k.share_pct for k in self.kinds if k.kind == "blocked")

    def hottest_running(self) -> CpuFrame | None:
        """The hot spot with the most self time whose kind runs on the CPU (not a wait, not a
        line without source, not an empty stack)."""
        return next((h for h in self.hot_spots if _running(h.kind)), None)


def kind_text(kind: str) -> str:
    return NO_FRAMES_LABEL if kind == NO_FRAMES else kind_label(kind)


def cpu_section(cpu: CpuProfile) -> CpuSection:
    """The report's CPU section from the analysis' profile."""
    samples, units = cpu.unit == "samples", cpu.unit == "units"

    def kind(k: KindShare) -> CpuKind:
        return CpuKind(kind=k.kind, label=k.label, time_ns=k.ns, share_pct=k.pct,
                       samples=k.value if samples else None, weight=k.value if units else None)

    def frame(f: FrameStat) -> CpuFrame:
        return CpuFrame(function=f.function, file=f.file, line=f.line, kind=f.kind, kind_label=kind_text(f.kind),
                        self_ns=f.self_ns, total_ns=f.total_ns, self_pct=f.self_pct, total_pct=f.total_pct,
                        self_samples=f.self_value if samples else None,
                        total_samples=f.total_value if samples else None,
                        self_weight=f.self_value if units else None, total_weight=f.total_value if units else None,
                        threads=f.threads)

    def thread(t: ThreadProfile) -> CpuThread:
        return CpuThread(pid=t.pid if t.pid >= 0 else None, tid=t.tid if t.tid >= 0 else None, name=t.name,
                         samples=t.samples, time_ns=t.ns, share_pct=t.share_pct, running_pct=t.running_pct,
                         waiting_pct=t.waiting_pct, no_frames_pct=t.no_frames_pct, unverified_pct=t.unverified_pct,
                         dominant_kind=t.dominant_kind, kinds=tuple(kind(k) for k in t.kinds),
                         hot_spots=tuple(frame(f) for f in t.hot_spots), weight=t.value if units else None)

    evidence = None
    if cpu.idle_evidence is not None:
        who, n, pct = cpu.idle_evidence
        evidence = IdleEvidence(thread=who, waiting_samples=n, waiting_pct=pct)
    return CpuSection(
        source_format=cpu.source_format,
        producer=cpu.producer,
        unit=cpu.unit,
        interval_ns=cpu.interval_ns,
        total_ns=cpu.total_ns,
        samples=cpu.samples,
        total_weight=cpu.total_value if units else None,
        includes_idle=cpu.includes_idle,
        includes_idle_basis=cpu.includes_idle_basis,
        idle_evidence=evidence,
        gil_only=cpu.gil_only,
        waiting_basis=cpu.waiting_basis,
        running_pct=cpu.running_pct,
        waiting_pct=cpu.waiting_pct,
        from_intervals=cpu.from_intervals,
        has_line_numbers=cpu.has_line_numbers,
        source_lines_read=cpu.source_lines,
        unverified_pct=cpu.unverified_pct,
        unverified_basis=cpu.unverified_basis or None,
        blocked_evidence=tuple(BlockedEvidence(thread=t, location=loc or None, reason=why)
                               for t, loc, why in cpu.blocked_evidence),
        weight_unit=cpu.weight_unit or None,
        kinds=tuple(kind(k) for k in cpu.kinds),
        threads=tuple(thread(t) for t in cpu.threads),
        hot_spots=tuple(frame(f) for f in cpu.hot_spots),
        top_total=tuple(frame(f) for f in cpu.top_total),
        notes=cpu.notes,
    )
