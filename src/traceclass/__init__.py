"""traceclass: turn a profiling session into a bottleneck verdict.

Pipeline: ``ingest`` (file -> :class:`~traceclass.model.Trace`) -> ``analysis`` and ``rules``
(pure functions over the model) -> ``report`` (a plain-data :class:`~traceclass.report.Report`)
-> ``render`` (markdown, JSON, plots) -> ``cli``.

Python API (see README "Python API")::

    import traceclass
    trace = traceclass.load("trace.json.gz")
    result = traceclass.analyze(trace)      # or a path; config= optional
    result.findings, result.report, result.to_markdown(), result.to_json(), result.frames()

The names are imported on first use, so ``import traceclass`` (and the CLI's ``--help``)
stays cheap: no numpy, pandas or matplotlib until a trace is read.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

__all__ = ["__version__", "load", "analyze", "Result"]

if TYPE_CHECKING:
    from traceclass.api import Result, analyze, load


def __getattr__(name: str) -> Any:
    if name in ("load", "analyze", "Result"):
        from traceclass import api

        return getattr(api, name)
    raise AttributeError(f"module 'traceclass' has no attribute {name!r}")
