"""Pure analyses over a :class:`~traceclass.model.Trace`; no analysis prints, plots or reads files.

The shared results are facts (:mod:`traceclass.facts`): ``analysis.analyze`` and ``Analysis``
are the same :func:`traceclass.facts.analyze` / :class:`traceclass.facts.Facts`.
"""

from __future__ import annotations

from typing import Any


def __getattr__(name: str) -> Any:
    # resolved on use: traceclass.facts imports the modules of this package
    if name in ("Analysis", "analyze"):
        from traceclass.facts import Facts, analyze

        return {"Analysis": Facts, "analyze": analyze}[name]
    raise AttributeError(f"module 'traceclass.analysis' has no attribute {name!r}")
