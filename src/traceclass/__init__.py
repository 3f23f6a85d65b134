"""traceclass: turn a profiling session into a bottleneck verdict.

Pipeline: ``ingest`` (file -> :class:`~traceclass.model.Trace`) -> ``analysis`` and ``rules``
(pure functions over the model) -> ``report`` (a plain-data :class:`~traceclass.report.Report`)
-> ``render`` (markdown, JSON, plots) -> ``cli``.
"""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]
