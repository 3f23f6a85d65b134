"""Discovery of the rules in ``traceclass.rules`` (the top-level ``rules/`` folder).

A rule module is named ``tc<NNN>_<slug>.py`` and defines ``RULE`` and ``check``; its
thresholds are declared in ``RULE.thresholds`` (``rules/thresholds.toml`` is generated from
them by :func:`thresholds_toml`). Discovery checks that the file name matches the code and the
slug, and that codes are unique.

The cluster rules (TC8nn, :mod:`traceclass.cluster.rules`) need two or more ranks, so the
per-trace engine never runs them; :func:`catalogue` adds them to what the catalogue, ``explain``,
the generated files and the config's threshold checks see.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import pkgutil
import re
from functools import lru_cache
from types import ModuleType
from typing import Any, Callable

from traceclass.errors import ConfigError, RuleError
from traceclass.rule import RuleInfo

_MODULE = re.compile(r"^tc(\d{3})_([a-z0-9_]+)$")


@dataclasses.dataclass(frozen=True)
class LoadedRule:
    info: RuleInfo
    module: ModuleType
    check: Callable[..., Any] | None = None  # a cluster rule's function (per-trace rules: module.check)
    cluster: bool = False  # needs two or more ranks: run by the cluster report only

    @property
    def doc(self) -> str:
        if self.check is not None:
            return inspect.getdoc(self.check) or ""
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


@lru_cache(maxsize=1)
def cluster_rules() -> tuple[LoadedRule, ...]:
    """The cluster rules, in code order."""
    mod = importlib.import_module("traceclass.cluster.rules")
    return tuple(LoadedRule(info, mod, check, cluster=True) for info, check in mod.CLUSTER_RULES)


def catalogue() -> tuple[LoadedRule, ...]:
    """Every rule: the per-trace ones, then the cluster ones."""
    rules = all_rules() + cluster_rules()
    codes = [r.info.code for r in rules]
    if len(codes) != len(set(codes)):
        raise RuleError(f"duplicate rule code among {', '.join(codes)}")
    return rules


def _hit(info: RuleInfo, prefixes: tuple[str, ...]) -> bool:
    return any(info.code.startswith(p.upper()) or info.name == p for p in prefixes)


def check_selection(select: tuple[str, ...] = (), ignore: tuple[str, ...] = (), one_trace: bool = True) -> None:
    """:class:`ConfigError` for a ``select``/``ignore`` entry that matches no rule of the catalogue,
    and, on one trace (``one_trace``), for a ``select`` that matches cluster rules only: they need
    two or more ranks, so nothing would run. Ignoring a cluster rule on one trace is no error (it
    does not run there anyway), and a cluster run takes any catalogue rule: per-trace selections
    apply to its per-rank step, cluster ones to :func:`selected_cluster`."""
    every = catalogue()
    unknown = [p for p in select + ignore if not any(_hit(r.info, (p,)) for r in every)]
    if unknown:
        raise ConfigError(f"no rule matches {', '.join(unknown)} (see `traceclass rules`)")
    if one_trace and select and not any(_hit(r.info, select) for r in all_rules()):
        codes = [r.info.code for r in cluster_rules() if _hit(r.info, select)]
        what = f"{codes[0]} is a cluster rule: it needs" if len(codes) == 1 else \
            f"{', '.join(codes)} are cluster rules: they need"
        raise ConfigError(f"{what} two or more ranks (`traceclass analyze DIR`, a glob or FILE FILE ...); "
                          "select a per-trace rule for one trace")


def selected(select: tuple[str, ...] = (), ignore: tuple[str, ...] = (),
             one_trace: bool = True) -> tuple[LoadedRule, ...]:
    """Per-trace rules whose code or name matches a ``select`` prefix (all if empty) and no
    ``ignore`` prefix; ``one_trace=False`` in the per-rank step of a cluster run (see
    :func:`check_selection`)."""
    check_selection(select, ignore, one_trace)
    return tuple(r for r in all_rules() if (not select or _hit(r.info, select)) and not _hit(r.info, ignore))


def selected_cluster(select: tuple[str, ...] = (), ignore: tuple[str, ...] = ()) -> tuple[LoadedRule, ...]:
    """Cluster rules chosen by the same ``select``/``ignore`` matching as :func:`selected`."""
    check_selection(select, ignore, one_trace=False)
    return tuple(r for r in cluster_rules() if (not select or _hit(r.info, select)) and not _hit(r.info, ignore))


def find(code_or_name: str) -> LoadedRule:
    key = code_or_name.strip()
    for r in catalogue():
        if r.info.code == key.upper() or r.info.name == key:
            return r
    raise ConfigError(f"unknown rule {key!r} (see `traceclass rules`)")


def default_thresholds() -> dict[str, dict[str, object]]:
    """Rule code -> threshold name -> default, as the rules declare them."""
    return {r.info.code: r.info.defaults() for r in catalogue() if r.info.thresholds}


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
    for r in catalogue():
        if not r.info.thresholds:
            continue
        scope = " (cluster rule: two or more ranks)" if r.cluster else ""
        out.append(f"\n[{r.info.code}]  # {r.info.name}{scope}\n")
        for t in r.info.thresholds:
            note = textwrap.wrap(f"{t.name} ({t.unit}): {t.reason}", 98)
            out += [f"# {line}\n" for line in note]
            value = json.dumps(t.default) if isinstance(t.default, str) else repr(t.default).lower() \
                if isinstance(t.default, bool) else repr(t.default)
            out.append(f"{t.name} = {value}\n")
    return "".join(out)
