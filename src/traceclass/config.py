"""Configuration: one object, built once, passed down. No globals, no environment switches.

Sources, later ones winning: built-in defaults (analysis settings below; rule thresholds as
each rule declares them in ``RULE.thresholds``, listed in ``rules/thresholds.toml``), ``[tool.traceclass]`` in the ``pyproject.toml`` of the current
directory, a ``--config FILE`` (TOML, same layout as ``[tool.traceclass]``), then CLI flags.
Unknown keys are errors, so a typo never silently keeps a default.

Layout::

    [tool.traceclass]
    warmup_steps = 1
    latency_floor_us = 5.0

    [tool.traceclass.rules.TC201]        # or [tool.traceclass.TC201]
    max_kernel_us = 10

    [tool.traceclass.check]
    step_p50_pct = 5

    [tool.traceclass.budgets]
    "stage:preprocess" = "10ms"
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
import sys
from pathlib import Path
from typing import Any, Mapping

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from traceclass.errors import ConfigError


@dataclasses.dataclass(frozen=True)
class AnalysisConfig:
    #: steps reported as warm-up, apart from steady state (the first steps of a run compile,
    #: autotune and allocate; 1 is torch.profiler's usual warm-up)
    warmup_steps: int = 1
    #: GPU work whose roofline lower-bound time is below this is latency-bound: a CUDA kernel
    #: launch costs ~2-5 us of host time and a few us on the device before any roof matters
    latency_floor_us: float = 5.0
    #: the same for CPU ops: PyTorch eager dispatch costs ~1-10 us per op on the host
    cpu_latency_floor_us: float = 10.0
    #: ...and a latency-bound call must also be short: one that takes longer than this although
    #: its ideal time is tiny is an inefficient kernel (4x the floor: launch + ramp-up + tail)
    latency_call_us: float = 20.0
    cpu_latency_call_us: float = 40.0
    #: rows in the markdown op/kernel tables
    top_n: int = 15
    device: str | None = None  # --device NAME override
    cpu_device: str | None = None  # --cpu NAME override
    #: --rate HZ: sampling rate of a profile whose file does not record it (collapsed, SVG)
    sample_rate_hz: float | None = None


_ANALYSIS_KEYS = {f.name for f in dataclasses.fields(AnalysisConfig)}


@dataclasses.dataclass(frozen=True)
class Config:
    analysis: AnalysisConfig
    rules: Mapping[str, Mapping[str, Any]]  # code -> thresholds
    check: Mapping[str, Any]
    budgets: Mapping[str, int]  # stage name -> budget in ns
    sources: tuple[str, ...] = ()  # where settings came from, for the report
    select: tuple[str, ...] = ()  # rule codes or prefixes to run (empty = all)
    ignore: tuple[str, ...] = ()


def default_thresholds() -> dict[str, dict[str, Any]]:
    """Rule thresholds as the rules declare them (``RuleInfo.thresholds``), a fresh copy."""
    from traceclass.registry import default_thresholds as declared

    return {code: dict(th) for code, th in declared().items()}


DEFAULT_CHECK = {
    "step_p50_pct": 5.0,
    "step_p99_pct": 5.0,
    "gpu_busy_pct_points": 5.0,
    "peak_memory_pct": 5.0,
    "stage_p50_pct": 5.0,
}

_DURATION = re.compile(r"^\s*([+-]?[0-9]*\.?[0-9]+)\s*(ns|us|µs|ms|s)\s*$")
_UNIT_NS = {"ns": 1, "us": 1_000, "µs": 1_000, "ms": 1_000_000, "s": 1_000_000_000}
_MAX_BUDGET_NS = 1e18  # ~31 years: anything larger is a typo, and would not fit a 64-bit ns count


def parse_duration_ns(value: Any, where: str) -> int:
    """``"10ms"`` -> 10_000_000; bare numbers are milliseconds. A budget must be a finite time
    of at least 1 ns: zero, negative, non-finite and boolean values raise ConfigError."""
    ns: float | None = None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        ns = float(value) * 1e6
    elif isinstance(value, str):
        m = _DURATION.match(value)
        if m:
            ns = float(m.group(1)) * _UNIT_NS[m.group(2)]
    if ns is None:
        raise ConfigError(f"{where}: {value!r} is not a duration (examples: \"10ms\", \"250us\", 1.5)")
    if not math.isfinite(ns):
        raise ConfigError(f"{where}: {value!r} is not a finite duration (examples: \"10ms\", \"250us\", 1.5)")
    if ns > _MAX_BUDGET_NS:
        raise ConfigError(f"{where}: {value!r} is too large for a budget")
    if round(ns) < 1:
        raise ConfigError(f"{where}: a budget must be a positive duration, got {value!r}")
    return int(round(ns))


def check_threshold(value: Any, where: str) -> float:
    """A ``[tool.traceclass.check]`` threshold: a finite number >= 0 (percent or points)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(f"{where}: must be a number (percent or percentage points, e.g. 5), got {value!r}")
    v = float(value)
    if not math.isfinite(v):
        raise ConfigError(f"{where}: must be a finite number, got {value!r}")
    if v < 0:
        raise ConfigError(f"{where}: must be >= 0 (it is the allowed worsening), got {value!r}")
    return v


#: Largest config file read: settings fit in kilobytes; the bound keeps ``--config /dev/zero``
#: or a mistaken multi-GB path from being read whole.
CONFIG_MAX_BYTES = 16 << 20


def _read_toml(p: Path) -> dict[str, Any]:
    from traceclass.errors import TraceFormatError
    from traceclass.ingest.source import read_bytes

    try:
        return tomllib.loads(bytes(read_bytes(p, limit=CONFIG_MAX_BYTES)).decode("utf-8"))
    except TraceFormatError as exc:
        raise ConfigError(str(exc)) from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{p}: invalid TOML ({' '.join(str(exc).split())})") from None
    except RecursionError:
        raise ConfigError(f"{p}: invalid TOML (nested too deeply)") from None


def load_config(
    config_file: str | os.PathLike[str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    overrides: Mapping[str, Any] | None = None,
    table: Mapping[str, Any] | None = None,
) -> Config:
    """Defaults, then ``[tool.traceclass]`` of ``cwd``'s pyproject.toml, then ``config_file``,
    then ``table`` (the same keys as a config file, given as a dict: the Python API's
    ``config=``), then ``overrides`` (command-line options)."""
    rules = default_thresholds()
    analysis: dict[str, Any] = {}
    check = dict(DEFAULT_CHECK)
    budgets: dict[str, int] = {}
    select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    sources = ["defaults"]
    tables: list[tuple[str, Mapping[str, Any]]] = []
    pyproject = Path(cwd or os.getcwd()) / "pyproject.toml"
    if pyproject.is_file():
        data = _read_toml(pyproject)
        tool = data.get("tool", {}).get("traceclass")
        if isinstance(tool, dict):
            tables.append((f"{pyproject} [tool.traceclass]", tool))
    if config_file is not None:
        p = Path(config_file)
        if not p.exists():
            raise ConfigError(f"{p}: no such config file")
        data = _read_toml(p)
        tool = data.get("tool", {}).get("traceclass", data) if "tool" in data else data
        tables.append((str(p), tool))
    if table is not None:
        tables.append(("config=", table))
    for where, table in tables:
        sources.append(where)
        for key, value in table.items():
            if key in _ANALYSIS_KEYS:
                analysis[key] = value
            elif key == "rules" and isinstance(value, dict):
                for code, th in value.items():
                    _merge_rule(rules, code, th, where)
            elif re.fullmatch(r"TC\d{3}", key) and isinstance(value, dict):
                _merge_rule(rules, key, value, where)
            elif key in ("check", "budgets") and not isinstance(value, dict):
                raise ConfigError(f"{where}: {key} must be a table ([tool.traceclass.{key}]), got {value!r}")
            elif key == "check":
                for ck, cv in value.items():
                    if ck not in DEFAULT_CHECK:
                        raise ConfigError(f"{where}: unknown check threshold {ck!r}; known: {', '.join(DEFAULT_CHECK)}")
                    check[ck] = check_threshold(cv, f"{where}: check.{ck}")
            elif key == "budgets":
                for stage, v in value.items():
                    budgets[str(stage)] = parse_duration_ns(v, f"{where}: budgets.{stage}")
            elif key == "select":
                select = tuple(str(x) for x in (value if isinstance(value, list) else [value]))
            elif key == "ignore":
                ignore = tuple(str(x) for x in (value if isinstance(value, list) else [value]))
            else:
                raise ConfigError(f"{where}: unknown setting {key!r}")
    for key, value in (overrides or {}).items():
        if value is not None:
            analysis[key] = value
    try:
        acfg = AnalysisConfig(**analysis)
    except TypeError as exc:
        raise ConfigError(f"invalid analysis setting: {exc}") from None
    for f in dataclasses.fields(acfg):
        v = getattr(acfg, f.name)
        if isinstance(v, bool) or (f.type in ("int", "float") and not isinstance(v, (int, float))):
            raise ConfigError(f"setting {f.name} must be a number, got {v!r}")
    if acfg.warmup_steps < 0 or acfg.top_n <= 0 or any(
        not (getattr(acfg, k) >= 0 and getattr(acfg, k) < float("inf"))
        for k in ("latency_floor_us", "cpu_latency_floor_us", "latency_call_us", "cpu_latency_call_us")
    ):
        raise ConfigError("warmup_steps and latency settings must be finite and >= 0, top_n > 0")
    if acfg.sample_rate_hz is not None and not (0 < acfg.sample_rate_hz < float("inf")):
        raise ConfigError(f"sample_rate_hz (--rate) must be a finite number > 0, got {acfg.sample_rate_hz!r}")
    return Config(analysis=acfg, rules=rules, check=check, budgets=budgets,
                  sources=tuple(sources), select=select, ignore=ignore)


def _merge_rule(rules: dict[str, dict[str, Any]], code: str, th: Any, where: str) -> None:
    if code not in rules:
        raise ConfigError(f"{where}: unknown rule code {code!r}")
    if not isinstance(th, dict):
        raise ConfigError(f"{where}: thresholds for {code} must be a table")
    for k, v in th.items():
        if k not in rules[code]:
            raise ConfigError(f"{where}: unknown threshold {code}.{k}; known: {', '.join(rules[code])}")
        if type(v) is not type(rules[code][k]) and not (
            isinstance(v, (int, float)) and isinstance(rules[code][k], (int, float))
        ):
            raise ConfigError(f"{where}: {code}.{k} must be like {rules[code][k]!r}, got {v!r}")
        rules[code][k] = v
