"""Load one run for ``diff`` / ``baseline`` / ``check``: a trace of any supported format, a JSON
report of ``traceclass analyze --format json``, or a baseline file.

The kind is told by content: traceclass's own JSON documents open with ``"schema_version"``
(reports) or ``"kind"`` (baselines) as their first key. Anything else goes to the trace readers;
when they refuse a JSON file that turns out to be a report with reordered keys, it is read as a
report after all.
"""

from __future__ import annotations

import gzip
import json
import os
import re
from typing import TYPE_CHECKING, Any, Sequence

from traceclass.config import Config
from traceclass.errors import TraceFormatError

if TYPE_CHECKING:  # compare/ needs numpy; `traceclass --help` imports this module and must not
    from traceclass.compare.run import Run

_OWN_JSON = re.compile(r'^\s*\{\s*"(schema_version|kind)"\s*:')
_FALLBACK_MAX_BYTES = 256 << 20


def _prefix(path: str, n: int = 4096) -> str:
    with open(path, "rb") as fh:
        head = fh.read(2)
        fh.seek(0)
        raw = gzip.GzipFile(fileobj=fh).read(n) if head == b"\x1f\x8b" else fh.read(n)
    return raw.decode("utf-8", "replace")


def _read_json(path: str) -> Any:
    try:
        with open(path, "rb") as fh:
            data = fh.read()
        if data[:2] == b"\x1f\x8b":
            data = gzip.decompress(data)
        return json.loads(data.decode("utf-8"))
    except (OSError, EOFError, UnicodeDecodeError, ValueError) as exc:
        raise TraceFormatError(path, f"unreadable JSON ({type(exc).__name__}: {exc})") from None


def _from_doc(doc: Any, path: str) -> tuple[Run, dict[str, Any], dict[str, Any] | None] | None:
    from traceclass.compare.baseline import is_baseline_dict, run_from_baseline
    from traceclass.compare.run import is_report_dict, run_from_dict

    if is_baseline_dict(doc):
        run = run_from_baseline(doc, path)
        return run, doc["run"], doc
    if is_report_dict(doc):
        return run_from_dict(doc, path), doc, None
    if isinstance(doc, dict) and str(doc.get("kind", "")).startswith("traceclass-"):
        raise TraceFormatError(path, f"a {doc['kind']} document is not a run; give a trace, a JSON report "
                                     "(traceclass analyze --format json) or a baseline file")
    return None


def load_run(path: str, cfg: Config, source_roots: Sequence[str] = ()) -> tuple[Run, dict[str, Any], dict[str, Any] | None]:
    """(run, its plain report dict, the baseline document when the file is a baseline).

    ``source_roots`` (``--source-root``): where a sampled profile's source files are; the
    trace readers attach the calling lines' text (see ``analyze``). Reports and baselines
    were analysed already and keep what they hold."""
    if not os.path.isfile(path):
        raise TraceFormatError(path, "no such file")
    try:
        prefix = _prefix(path)
    except (OSError, EOFError) as exc:
        raise TraceFormatError(path, f"unreadable ({type(exc).__name__}: {exc})") from None
    if _OWN_JSON.match(prefix):
        got = _from_doc(_read_json(path), path)
        if got is not None:
            return got
    from traceclass.cli.analyze import load_and_report

    try:
        _trace, _analysis, report = load_and_report(path, cfg, list(source_roots))
    except TraceFormatError:
        if prefix.lstrip().startswith("{") and os.path.getsize(path) <= _FALLBACK_MAX_BYTES:
            try:
                got = _from_doc(_read_json(path), path)
            except TraceFormatError:
                got = None
            if got is not None:
                return got
        raise
    from traceclass.compare.run import report_dict, run_from_report

    return run_from_report(report), report_dict(report), None
