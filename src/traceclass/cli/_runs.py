"""Load one run for ``diff`` / ``baseline`` / ``check``: a trace of any supported format, a JSON
report of ``traceclass analyze --format json``, or a baseline file.

The kind is told by content: traceclass's own JSON documents open with ``"schema_version"``
(reports) or ``"kind"`` (baselines) as their first key. Anything else goes to the trace readers;
when they refuse a JSON file that turns out to be a report with reordered keys, it is read as a
report after all.
"""

from __future__ import annotations

import json
import os
import re
from typing import TYPE_CHECKING, Any, Sequence

from traceclass.config import Config
from traceclass.errors import TraceFormatError
from traceclass.ingest.source import read_bytes, read_head

if TYPE_CHECKING:  # compare/ needs numpy; `traceclass --help` imports this module and must not
    from traceclass.compare.run import Run

_OWN_JSON = re.compile(r'^\s*\{\s*"(schema_version|kind)"\s*:')
_FALLBACK_MAX_BYTES = 256 << 20
#: Largest decompressed report or baseline read: they hold summaries (a few MB at most), and
#: json builds Python objects several times the text's size.
DOCUMENT_MAX_BYTES = 64 << 20


def _prefix(path: str, n: int = 4096) -> str:
    return read_head(path, n).decode("utf-8", "replace")


def _number_out_of_range(text: str) -> Any:
    raise ValueError(f"number {text[:24]} is out of range (traceclass writes finite int64-range numbers)")


def _parse_int(text: str) -> int:
    if len(text) > 20 or not -(1 << 63) <= int(text) < (1 << 63):
        _number_out_of_range(text)
    return int(text)


def _parse_float(text: str) -> float:
    x = float(text)
    if not abs(x) < 2.0**63:
        _number_out_of_range(text)
    return x


def _read_json(path: str) -> Any:
    """A traceclass report or baseline, read through the same bounded reader as traces. What
    traceclass writes is finite and within int64; anything else marks a damaged file here
    rather than an overflow deep in the comparison."""
    data = read_bytes(path, limit=DOCUMENT_MAX_BYTES)
    try:
        return json.loads(bytes(data).decode("utf-8"), parse_int=_parse_int, parse_float=_parse_float,
                          parse_constant=_number_out_of_range)
    except UnicodeDecodeError as exc:
        raise TraceFormatError(path, f"unreadable JSON (not UTF-8: {exc.reason} at byte {exc.start})") from None
    except RecursionError:
        raise TraceFormatError(path, "unreadable JSON (nested too deeply)") from None
    except ValueError as exc:
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
    prefix = _prefix(path)  # names the file when it is missing, a folder or unreadable
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
