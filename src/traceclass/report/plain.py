"""Plain JSON-compatible data from report dataclasses (one converter for every JSON output).

Dataclasses become dicts of their fields, tuples lists, non-finite floats ``None``, numpy
scalars Python numbers; a :class:`~traceclass.rule.Finding` also gets its ``fingerprint``; a
field whose metadata says ``omit_empty`` is left out when None or empty (the CPU section's
fields that only one profile unit has).
``hook`` lets a caller render its own types first (it returns ``NotImplemented`` to decline).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable, Mapping

from traceclass.rule import Finding

Hook = Callable[[Any], Any]


def plain(obj: Any, hook: Hook | None = None, evidence: bool = True) -> Any:
    def conv(o: Any) -> Any:
        if hook is not None:
            r = hook(o)
            if r is not NotImplemented:
                return r
        if isinstance(o, Finding):
            d = {f.name: conv(getattr(o, f.name)) for f in dataclasses.fields(o)
                 if evidence or f.name != "evidence"}
            d["fingerprint"] = o.fingerprint
            return d
        if dataclasses.is_dataclass(o) and not isinstance(o, type):
            return {f.name: conv(v) for f in dataclasses.fields(o)
                    if not ((v := getattr(o, f.name)) in (None, ()) and f.metadata.get("omit_empty"))}
        if isinstance(o, (list, tuple)):
            return [conv(x) for x in o]
        if isinstance(o, Mapping):
            return {str(k): conv(v) for k, v in o.items()}
        if isinstance(o, float):
            return o if math.isfinite(o) else None
        if hasattr(o, "item") and callable(o.item):  # numpy scalars
            return conv(o.item())
        return o

    return conv(obj)
