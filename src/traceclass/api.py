"""The Python API: load a trace, analyze it, read the result as a report or as DataFrames.

>>> import traceclass
>>> result = traceclass.analyze("trace.json.gz")            # doctest: +SKIP
>>> result.findings[0].code, result.frames()["ops"].head()   # doctest: +SKIP

The same pipeline as ``traceclass analyze`` (readers, analyses, rules, report), without the
terminal: errors are raised as :class:`~traceclass.errors.TraceclassError` subclasses.
"""

from __future__ import annotations

import dataclasses
import os
from typing import TYPE_CHECKING, Any, Mapping, Sequence

if TYPE_CHECKING:
    import pandas as pd

    from traceclass.config import Config
    from traceclass.model import Trace
    from traceclass.report.model import Report
    from traceclass.rule import Finding


def load(path: str | os.PathLike[str], format: str | None = None) -> Trace:
    """Read a trace file of any supported format (detected from its content).

    ``format``: a reader name (``traceclass.ingest.FORMATS``) to skip detection.
    """
    from traceclass.ingest import load as ingest_load

    return ingest_load(path, fmt=format)


def analyze(
    trace: Trace | str | os.PathLike[str],
    config: Config | Mapping[str, Any] | str | os.PathLike[str] | None = None,
    *,
    source_roots: Sequence[str] = (),
    format: str | None = None,
) -> Result:
    """Analyze a loaded trace or a trace file.

    ``config``: a :class:`~traceclass.config.Config`, a dict with the keys of a
    ``[tool.traceclass]`` table (``{"warmup_steps": 2, "TC201": {...}, "ignore": ["TC5"]}``),
    or the path of a TOML config file; None reads ``pyproject.toml`` of the current directory
    like the CLI. ``source_roots``: where a sampled profile's source files are (the report
    then quotes the calling lines).
    """
    from traceclass.config import Config, load_config
    from traceclass.engine import run

    if isinstance(config, Config):
        cfg = config
    elif isinstance(config, Mapping):
        cfg = load_config(table=config)
    else:
        cfg = load_config(config)
    if not _is_trace(trace):
        trace = load(trace, format=format)  # type: ignore[arg-type]
    if source_roots and len(trace.samples):  # type: ignore[union-attr]
        from traceclass.ingest.sourcelines import attach_source_lines

        trace = attach_source_lines(trace, list(source_roots))  # type: ignore[arg-type]
    analysis, report = run(trace, cfg)  # type: ignore[arg-type]
    return Result(trace=trace, analysis=analysis, report=report, config=cfg)  # type: ignore[arg-type]


def _is_trace(obj: object) -> bool:
    from traceclass.model import Trace

    return isinstance(obj, Trace)


@dataclasses.dataclass(frozen=True)
class Result:
    """One analysed trace: the :class:`~traceclass.report.model.Report` and what it came from."""

    trace: Trace
    analysis: Any  # the shared analyses the rules read
    report: Report
    config: Config

    @property
    def findings(self) -> tuple[Finding, ...]:
        """Findings, most recoverable time first."""
        return self.report.findings

    def to_markdown(self, top_n: int | None = None) -> str:
        """The markdown report (``traceclass analyze``'s output)."""
        from traceclass.render.markdown import render

        return render(self.report, self.config.analysis.top_n if top_n is None else top_n)

    def to_json(self) -> str:
        """The JSON report (``traceclass analyze --format json``)."""
        from traceclass.render.json_report import render

        return render(self.report)

    def to_dict(self) -> dict[str, Any]:
        """The JSON report as a dict."""
        from traceclass.render.json_report import to_dict

        return to_dict(self.report)

    def frames(self) -> dict[str, pd.DataFrame]:
        """The report's tables and the trace's GPU activity as pandas DataFrames
        (see :mod:`traceclass.frames` for every column)."""
        from traceclass.frames import frames

        return frames(self.trace, self.analysis, self.report)

    def _repr_markdown_(self) -> str:
        return self.to_markdown()

    def __repr__(self) -> str:
        r = self.report
        return (f"<traceclass.Result {r.source.file!r}: {len(r.findings)} findings, "
                f"{len(r.ops)} op groups, {len(r.kernels)} kernels>")
