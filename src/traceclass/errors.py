"""Exceptions raised by traceclass. The CLI maps them to exit codes; nothing else prints."""

from __future__ import annotations


class TraceclassError(Exception):
    """Base class. ``str(err)`` is a one-line message fit for a terminal."""


class TraceFormatError(TraceclassError):
    """The input file is unreadable, empty, truncated or not a supported format.

    The message always names the file (the CLI prints it as ``traceclass: <message>``).
    """

    def __init__(self, path: object, problem: str) -> None:
        self.path = str(path)
        self.problem = " ".join(str(problem).split())  # one line, whatever the cause said
        super().__init__(f"{self.path}: {self.problem}")


class ConfigError(TraceclassError):
    """A configuration file or option is invalid."""


class RuleError(TraceclassError):
    """A rule failed while checking a trace."""


class ExternalToolError(TraceclassError):
    """An external program (nsys, py-spy) is missing or failed."""
