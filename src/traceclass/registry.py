"""Discovery of the rules in ``traceclass.rules`` (the top-level ``rules/`` folder).

A rule module is named ``tc<NNN>_<slug>.py`` and defines ``RULE`` and ``check``; its
thresholds are declared in ``RULE.thresholds`` (``rules/thresholds.toml`` is generated from
them by :func:`thresholds_toml`). Discovery checks that the file name matches the code and the
slug, and that codes are unique.
"""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil
import re
from functools import lru_cache
from types import ModuleType

from traceclass.errors import ConfigError, RuleError
from traceclass.rule import RuleInfo

_MODULE = re.compile(r"^tc(\d{3})_([a-z0-9_]+)$")


@dataclasses.dataclass(frozen=True)
class LoadedRule:
    info: RuleInfo
    module: ModuleType

    @property
    def doc(self) -> str:
        return (self.module.__doc__ or "").strip()


@lru_cache(maxsize=1)
def all_rules() -> tuple[LoadedRule, ...]:
    import traceclass.rules as pkg

    found: dict[str, LoadedRule] = {}
    for info in pkgutil.iter_modules(pkg.__path__):
        m = _MODULE.match(info.name)
        if not m:
            continue
        mod = importlib.import_module(f"traceclass.rules.{info.name}")
        rule = getattr(mod, "RULE", None)
        if not isinstance(rule, RuleInfo) or not callable(getattr(mod, "check", None)):
            raise RuleError(f"rules/{info.name}.py must define RULE = RuleInfo(...) and check()")
        code = f"TC{m.group(1)}"
        if rule.code != code or rule.name.replace("-", "_") != m.group(2):
            raise RuleError(f"rules/{info.name}.py: RULE says {rule.code} {rule.name}; the file name must match")
        if code in found:
            raise RuleError(f"duplicate rule code {code}")
        found[code] = LoadedRule(rule, mod)
    return tuple(found[c] for c in sorted(found))


def selected(select: tuple[str, ...] = (), ignore: tuple[str, ...] = ()) -> tuple[LoadedRule, ...]:
    """Rules whose code or name matches a ``select`` prefix (all if empty) and no ``ignore`` prefix."""

    def hit(r: LoadedRule, prefixes: tuple[str, ...]) -> bool:
        return any(r.info.code.startswith(p.upper()) or r.info.name == p for p in prefixes)

    out = [r for r in all_rules() if (not select or hit(r, select)) and not hit(r, ignore)]
    unknown = [p for p in select + ignore if not any(hit(r, (p,)) for r in all_rules())]
    if unknown:
        raise ConfigError(f"no rule matches {', '.join(unknown)} (see `traceclass rules`)")
    return tuple(out)


def find(code_or_name: str) -> LoadedRule:
    key = code_or_name.strip()
    for r in all_rules():
        if r.info.code == key.upper() or r.info.name == key:
            return r
    raise ConfigError(f"unknown rule {key!r} (see `traceclass rules`)")


def default_thresholds() -> dict[str, dict[str, object]]:
    """Rule code -> threshold name -> default, as the rules declare them."""
    return {r.info.code: r.info.defaults() for r in all_rules() if r.info.thresholds}


TOML_HEAD = """\
# Default thresholds of the built-in rules: one table per rule code, units in key names.
# Users override them in [tool.traceclass.rules.TCnnn] (pyproject.toml) or a --config file.
# Generated from each rule's RULE.thresholds by `traceclass rules --format toml > rules/thresholds.toml`
# (a test checks it); `traceclass explain CODE` prints the rule's documentation.
"""


def thresholds_toml() -> str:
    """``rules/thresholds.toml``: every rule's declared thresholds, each with its unit and reason."""
    import json
    import textwrap

    out = [TOML_HEAD]
    for r in all_rules():
        if not r.info.thresholds:
            continue
        out.append(f"\n[{r.info.code}]  # {r.info.name}\n")
        for t in r.info.thresholds:
            note = textwrap.wrap(f"{t.name} ({t.unit}): {t.reason}", 98)
            out += [f"# {line}\n" for line in note]
            value = json.dumps(t.default) if isinstance(t.default, str) else repr(t.default).lower() \
                if isinstance(t.default, bool) else repr(t.default)
            out.append(f"{t.name} = {value}\n")
    return "".join(out)
