"""Make untrusted names (kernels, ops, files) safe inside GitHub-flavoured markdown.

Names are shown as code spans: inside one, GitHub renders no HTML, no emphasis and no
@mentions. What a code span does not neutralise is handled here: pipes (they split table
cells even inside code spans, so they are escaped as ``\\|``), backticks (the fence is made
longer than any backtick run in the name), line breaks and control characters (replaced),
and length (truncated with an ellipsis; the JSON output keeps full names).
"""

from __future__ import annotations

import re

_CONTROL = re.compile(r"[\x00-\x1f\x7f\u2028\u2029]")
_BACKTICKS = re.compile(r"`+")
_BIDI = re.compile(r"[\u202a-\u202e\u2066-\u2069]")  # direction overrides can disguise text


def clean(text: str, limit: int | None = None) -> str:
    """One line, no control or bidi-override characters, optionally truncated."""
    s = str(text)
    if limit is not None:
        # cut first, with room for whitespace the join below collapses: a 10 MB name is
        # shown as its first ``limit`` characters either way, without three passes over it
        s = s[: max(8 * limit, 4096)]
    s = _CONTROL.sub(" ", s)
    s = _BIDI.sub("", s)
    s = " ".join(s.split())
    if limit is not None and len(s) > limit:
        s = s[: max(limit - 1, 1)] + "…"
    return s


def code(text: str, limit: int | None = 90, table: bool = True) -> str:
    """``text`` as an inline code span; ``table`` escapes pipes (needed in table cells only,
    where GitHub would split the cell; in prose the backslash would show)."""
    s = clean(text, limit)
    if not s:
        return "—"
    if table:
        s = s.replace("|", "\\|")
    longest = max((len(m) for m in _BACKTICKS.findall(s)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if (s.startswith("`") or s.endswith("`")) else ""
    return f"{fence}{pad}{s}{pad}{fence}"


def text(value: str, limit: int | None = 200) -> str:
    """Plain prose from an untrusted source: escape markdown and HTML, defuse @mentions."""
    s = clean(value, limit)
    s = s.replace("\\", "\\\\")
    s = s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    s = re.sub(r"([`*_\[\]|#~])", r"\\\1", s)
    # a zero-width joiner after "@" stops GitHub from linking or notifying a user or team
    s = s.replace("@", "@\u200d")
    return s
