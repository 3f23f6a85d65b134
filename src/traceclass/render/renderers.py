"""The renderers, by name: one module each with ``NAME``, ``EXTENSION`` and
``render(report, top_n=None) -> str | bytes`` (``top_n`` None: the renderer's default).

Names are listed here without importing the modules, so ``--help`` stays cheap.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from traceclass.errors import ConfigError

#: NAME -> module in :mod:`traceclass.render`; the first renderer with an extension wins it.
RENDERERS = {
    "md": "markdown",
    "json": "json_report",
    "issue": "issue",
    "plot": "plot",
}


def renderer(name: str) -> ModuleType:
    """The renderer module called ``name``."""
    if name not in RENDERERS:
        raise ConfigError(f"unknown report format {name!r}; supported: {', '.join(RENDERERS)}")
    return importlib.import_module(f"traceclass.render.{RENDERERS[name]}")


def for_path(path: str) -> ModuleType | None:
    """The first renderer whose ``EXTENSION`` ends ``path`` (case-insensitive), or None."""
    low = path.lower()
    for name in RENDERERS:
        mod = renderer(name)
        if low.endswith(mod.EXTENSION):
            return mod
    return None
