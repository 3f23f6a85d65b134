"""What pyproject.toml must say for an installed traceclass to work like the checkout."""

from __future__ import annotations

import ast
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "src" / "traceclass"
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_every_package_directory_is_listed():
    listed = set(PYPROJECT["tool"]["setuptools"]["packages"])
    found = {"traceclass." + ".".join(p.parent.relative_to(PKG).parts) if p.parent != PKG else "traceclass"
             for p in PKG.rglob("__init__.py")}
    found.add("traceclass.rules")
    assert found == listed, f"pyproject packages differ: missing {sorted(found - listed)}, stale {sorted(listed - found)}"


def _requirement_name(req: str) -> str:
    for sep in "<>=!~;[ ":
        req = req.split(sep, 1)[0]
    return req.strip().lower().replace("_", "-")


#: import name -> distribution name, where they differ
_DIST = {"msgspec": "msgspec", "yaml": "pyyaml", "tomli": "tomli"}


def test_test_extra_lists_every_third_party_module_the_tests_import():
    deps = {_requirement_name(r) for r in PYPROJECT["project"]["dependencies"]}
    test_extra = {_requirement_name(r) for r in PYPROJECT["project"]["optional-dependencies"]["test"]}
    local = {p.stem for p in (ROOT / "tests").rglob("*.py")} | {p.name for p in (ROOT / "tests").rglob("*")
                                                                   if p.is_dir()}
    imported: set[str] = set()
    for path in (ROOT / "tests").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                imported |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                imported.add(node.module.split(".")[0])
    third_party = {m for m in imported if m not in sys.stdlib_module_names and m not in local
                   and m not in ("traceclass", "conftest")}
    # torch is the optional [torch] extra: tests that need it skip without it
    missing = {m for m in third_party if _DIST.get(m, m).replace("_", "-") not in deps | test_extra | {"torch"}}
    assert not missing, f"add to the [test] extra: {sorted(missing)}"
