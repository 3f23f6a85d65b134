"""The sampled CPU profile's numbers: per-frame, per-kind and per-thread shares.

Plain data computed by :func:`traceclass.analysis.cpu_profile.profile_samples` (the ``cpu``
fact); the report's typed CPU section (:mod:`traceclass.report.cpu`) is built from it and the
renderers write its prose (:mod:`traceclass.render.cpu_verdict`, :mod:`traceclass.render.cpu_markdown`).
"""

from __future__ import annotations

import dataclasses

from traceclass.analysis.frame_kinds import WAITING
NO_FRAMES = "none"  # kind of a sample with an empty stack
NO_FRAMES_LABEL = "empty stack (no frames recorded)"
#: why lines without source count as compute, by profile flag
COMPUTE_BASIS = {
    "gil": ("GIL-only profile (py-spy --gil): every sample holds the GIL, which sleep, lock and socket "
            "calls release, so lines without source count as Python compute"),
    "no-idle": ("recorded without idle samples: py-spy kept only samples of running threads, so lines "
                "without source count as Python compute"),
}


def frame_location(file: str, line: int | None) -> str:
    """``file:line``, the file alone when the line is unknown, "" when the file is."""
    if not file:
        return ""
    return f"{file}:{line}" if line is not None else file


@dataclasses.dataclass(frozen=True)
class FrameStat:
    """One frame (function, file, line) with its self and total time."""

    function: str
    file: str
    line: int | None
    kind: str  # code in frame_kinds.KINDS; the kind of most of its self time
    self_value: int  # in CpuProfile.unit
    total_value: int
    self_pct: float  # of all sampled time
    total_pct: float
    self_ns: int | None
    total_ns: int | None
    threads: tuple[str, ...] = ()  # threads with the most self time here, largest first

    @property
    def location(self) -> str:
        return frame_location(self.file, self.line)


@dataclasses.dataclass(frozen=True)
class KindShare:
    kind: str
    label: str
    value: int
    pct: float
    ns: int | None


@dataclasses.dataclass(frozen=True)
class ThreadProfile:
    row: int  # row in trace.threads
    pid: int
    tid: int
    name: str
    value: int
    ns: int | None
    samples: int | None  # None when rows are not samples (timed frames)
    share_pct: float  # of all sampled time
    running_pct: float  # of this thread's time
    waiting_pct: float
    no_frames_pct: float  # samples with an empty stack
    unverified_pct: float  # at Python lines without source: blocked or computing
    dominant_kind: str
    kinds: tuple[KindShare, ...]
    hot_spots: tuple[FrameStat, ...]

    @property
    def label(self) -> str:
        return _thread_label(self.name, self.pid, self.tid)


@dataclasses.dataclass(frozen=True)
class CpuProfile:
    source_format: str
    producer: str
    unit: str  # "ns", "samples" or "units" (weights that are not time)
    interval_ns: int | None
    total_value: int
    total_ns: int | None
    samples: int | None
    includes_idle: bool | None
    #: "recorded" (the reader or `record` knows), "inferred" (see idle_evidence), "unknown",
    #: "thread state" (states per sample, idle or not), "timed" (wall-clock frames, no sampling),
    #: "unitless" (values are not time: speedscope unit none or bytes)
    includes_idle_basis: str
    gil_only: bool | None
    waiting_basis: str  # "thread state" or "frames"
    running_pct: float
    waiting_pct: float
    from_intervals: bool  # values are self times of timed frames, not samples
    has_line_numbers: bool
    source_lines: int  # leaf frames whose source line the reader found
    #: share of all time in Python lines counted as compute only because their source file
    #: was not found: a line calling time.sleep or lock.acquire looks the same there
    unverified_pct: float
    threads: tuple[ThreadProfile, ...]
    hot_spots: tuple[FrameStat, ...]  # by self time, largest first
    top_total: tuple[FrameStat, ...]  # by total time, largest first
    kinds: tuple[KindShare, ...]
    notes: tuple[str, ...] = ()
    #: (thread label, waiting samples, waiting % of the thread) behind an "inferred" idle flag
    idle_evidence: tuple[str, int, float] | None = None
    #: (thread label, line location or "" for several lines, reason) for lines without source
    #: taken as blocked
    blocked_evidence: tuple[tuple[str, str, str], ...] = ()
    #: why lines without source count as compute ("gil", "no-idle"), or ""
    unverified_basis: str = ""
    #: the file's unit for values that are not time (speedscope "none", "bytes"), or ""
    weight_unit: str = ""


def _running(kind: str) -> bool:
    return kind not in WAITING and kind not in ("unverified", NO_FRAMES)


def _thread_label(name: str, pid: int, tid: int) -> str:
    ids = ", ".join(x for x in (f"pid {pid}" if pid >= 0 else "", f"tid {tid}" if tid >= 0 else "") if x)
    if name and ids:
        return f"{name} ({ids})"
    return name or ids or "all threads"
