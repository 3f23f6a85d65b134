"""``python -m traceclass`` runs the command-line interface."""

from traceclass.cli import main

raise SystemExit(main())
