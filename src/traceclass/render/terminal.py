"""Report -> text for a person at a terminal: no markdown escapes, tables wrapped to the width.

The CLI uses it when stdout is a terminal; files and pipes get the markdown unchanged. It is the
markdown report read back through the few constructs that renderer writes (headings, paragraphs,
lists, tables, code spans, emphasis, ``<details>``), so the two never say different things.
"""

from __future__ import annotations

import html
import re
import shutil
import textwrap

from traceclass.report.model import Report

NAME = "terminal"
EXTENSION = ".txt"

_CODE = re.compile(r"(`+) ?(.*?) ?\1")
_ESCAPED = re.compile(r"\\([\\`*_\[\]|#~<>])")
_TAG = re.compile(r"</?(?:details|summary|sub|wbr)>|<details open>")
_CELL_SPLIT = re.compile(r"(?<!\\)\|")


def render(report: Report, top_n: int | None = None, width: int | None = None, issue: bool = False) -> str:
    """The report (``issue``: its short form) as terminal text, ``width`` columns wide (default:
    the terminal's)."""
    if issue:
        from traceclass.render.issue import render as render_md
    else:
        from traceclass.render.markdown import render as render_md
    md = render_md(report, top_n)
    return from_markdown(md, width or shutil.get_terminal_size((100, 24)).columns)


def _inline(s: str) -> str:
    """One line of our markdown as plain text: code spans keep their text, escapes and emphasis go."""
    out, last = [], 0
    for m in _CODE.finditer(s):
        out.append(_prose(s[last:m.start()]))
        out.append(m.group(2).replace("\\|", "|"))
        last = m.end()
    out.append(_prose(s[last:]))
    return "".join(out).replace("\u00a0", " ").replace("\u200d", "")


def _prose(s: str) -> str:
    s = _TAG.sub("", s)
    s = s.replace("**", "")  # bold (ours only: escaped asterisks are "\\*")
    s = re.sub(r"(?<![\w\\])\*(\S(?:.*?\S)?)\*(?!\w)", r"\1", s)
    s = _ESCAPED.sub(r"\1", s)
    return html.unescape(s)


def _wrap(s: str, width: int, indent: str = "", hang: str = "") -> list[str]:
    return textwrap.wrap(s, width=max(width, 20), initial_indent=indent, subsequent_indent=hang or indent,
                         break_on_hyphens=False) or [indent.rstrip()]


def _table(lines: list[str], width: int) -> list[str]:
    rows = []
    for ln in lines:
        cells = [c.strip() for c in _CELL_SPLIT.split(ln.strip().strip("|"))]
        if all(re.fullmatch(r":?-{3,}:?", c) for c in cells):
            continue
        rows.append([_inline(c) for c in cells])
    n = max(len(r) for r in rows)
    rows = [r + [""] * (n - len(r)) for r in rows]
    natural = [max(len(r[i]) for r in rows) for i in range(n)]
    widths = natural[:]
    room = width - 2 * (n - 1)
    # shrink the widest column until the table fits; a column keeps at least its header's longest word
    floor = [max(8, max((len(w) for w in rows[0][i].split()), default=1)) for i in range(n)]
    while sum(widths) > room:
        i = max(range(n), key=lambda k: widths[k] - floor[k])
        if widths[i] <= floor[i]:
            break
        widths[i] -= 1
    out = []
    for k, r in enumerate(rows):
        wrapped = [textwrap.wrap(c, widths[i], break_on_hyphens=False) or [""] for i, c in enumerate(r)]
        for j in range(max(len(w) for w in wrapped)):
            out.append("  ".join((w[j] if j < len(w) else "").ljust(widths[i]) for i, w in enumerate(wrapped)).rstrip())
        if k == 0:
            out.append("  ".join("-" * w for w in widths))
    return out


def from_markdown(md: str, width: int = 100) -> str:
    out: list[str] = []
    lines = md.split("\n")
    i = 0
    while i < len(lines):
        ln = lines[i]
        if ln.startswith("|"):
            j = i
            while j < len(lines) and lines[j].startswith("|"):
                j += 1
            out += _table(lines[i:j], width)
            i = j
            continue
        m = re.match(r"(#{1,3}) (.*)", ln)
        if m:
            title = _inline(m.group(2))
            out.append(title)
            if len(m.group(1)) < 3:
                out.append(("=" if len(m.group(1)) == 1 else "-") * min(len(title), width))
        elif ln.startswith("<details"):
            s = re.search(r"<summary>(.*?)</summary>", ln)
            if s:
                out.append("▸ " + _inline(s.group(1)))
        elif ln.strip() in ("</details>", ""):
            if ln.strip() == "" and out and out[-1] != "":
                out.append("")
        else:
            lm = re.match(r"(\s*)([-*]|\d+\.) (.*)", ln)
            if lm:
                lead = lm.group(1) + lm.group(2) + " "
                out += _wrap(_inline(lm.group(3)), width, lead, " " * len(lead))
            else:
                out += _wrap(_inline(ln), width)
        i += 1
    return "\n".join(out).strip() + "\n"
