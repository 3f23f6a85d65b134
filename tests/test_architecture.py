"""Import direction: ingest -> model -> facts/analysis -> rules -> report -> render -> cli.

Walks every module's imports with ``ast`` (including imports inside functions) and checks
that no layer reaches a layer above it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "src" / "traceclass"
RULES = ROOT / "rules"

# layer -> traceclass subpackages/modules it must not import
FORBIDDEN = {
    "model": {"cluster", "ingest", "analysis", "facts", "report", "render", "cli", "rules", "engine", "registry", "compare",
              "costmodel", "hardware", "export"},
    "ingest": {"cluster", "analysis", "facts", "report", "render", "cli", "rules", "engine", "registry", "compare"},
    "costmodel": {"cluster", "ingest", "analysis", "facts", "report", "render", "cli", "rules", "engine", "compare"},
    "hardware": {"cluster", "ingest", "analysis", "facts", "report", "render", "cli", "rules", "engine", "compare"},
    "timeline": {"cluster", "ingest", "analysis", "facts", "report", "render", "cli", "rules", "engine", "compare"},
    "heap": {"cluster", "ingest", "analysis", "facts", "report", "render", "cli", "rules", "engine", "compare",
             "model", "timeline"},
    "keysums": {"cluster", "ingest", "analysis", "facts", "report", "render", "cli", "rules", "engine", "compare",
                "model", "timeline"},
    "analysis": {"cluster", "ingest", "report", "render", "cli", "rules", "engine", "registry", "compare"},
    "facts": {"cluster", "ingest", "report", "render", "cli", "rules", "engine", "registry", "compare"},
    "rules": {"cluster", "ingest", "report", "render", "cli", "engine", "compare", "export"},
    "report": {"cluster", "ingest", "render", "cli", "rules", "compare"},
    "render": {"cluster", "ingest", "cli", "rules", "engine", "compare", "costmodel"},
    "export": {"cluster", "facts", "report", "render", "cli", "rules", "engine", "compare"},
    "cluster": {"cli"},
}


def _modules():
    for p in sorted(PKG.rglob("*.py")):
        rel = p.relative_to(PKG)
        layer = rel.parts[0].removesuffix(".py")
        yield layer, p
    for p in sorted(RULES.glob("*.py")):
        yield "rules", p


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        else:
            continue
        for n in names:
            parts = n.split(".")
            if parts[0] == "traceclass" and len(parts) > 1:
                out.add(parts[1])
    return out


@pytest.mark.parametrize("layer, path", list(_modules()), ids=lambda x: str(x).rsplit("/", 1)[-1])
def test_no_upward_imports(layer, path):
    bad = _imports(path) & FORBIDDEN.get(layer, set())
    assert not bad, f"{path.relative_to(ROOT)} ({layer}) imports {sorted(bad)}"


def test_nothing_imports_cli():
    for layer, path in _modules():
        if layer in ("cli", "__main__"):
            continue
        assert "cli" not in _imports(path), path


def _source_texts() -> dict[Path, str]:
    return {p: p.read_text(encoding="utf-8") for p in [*PKG.rglob("*.py"), *RULES.glob("*.py")]}


def test_every_analysis_function_is_used():
    """A public function of ``analysis/`` that nothing in src/ or rules/ calls is dead code."""
    import re

    texts = _source_texts()
    unused = []
    for path in sorted((PKG / "analysis").glob("*.py")):
        for node in ast.parse(texts[path]).body:
            if isinstance(node, ast.FunctionDef) and not node.name.startswith("_"):
                word = re.compile(rf"\b{node.name}\b")
                if len(word.findall(texts[path])) == 1 and not any(
                        word.search(t) for p, t in texts.items() if p != path):
                    unused.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name}")
    assert unused == []


def test_every_rule_info_field_is_read():
    """A RuleInfo field that no code reads (``.field``) is a declaration nothing honours."""
    import dataclasses
    import re

    from traceclass.rule import RuleInfo

    texts = [t for p, t in _source_texts().items() if p.name != "rule.py"]
    unread = [f.name for f in dataclasses.fields(RuleInfo)
              if not any(re.search(rf"\.{f.name}\b", t) for t in texts)]
    assert unread == []
