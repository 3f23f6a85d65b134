"""``python -m traceclass`` runs the command-line interface."""

from traceclass.cli import entry

entry()
