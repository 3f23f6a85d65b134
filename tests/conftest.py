"""Shared test fixtures and paths."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CORPUS = (ROOT.parent / "shared" / "corpus").resolve()
sys.path.insert(0, str(Path(__file__).resolve().parent))


def corpus(*parts: str) -> Path:
    p = CORPUS.joinpath(*parts)
    if not p.exists():
        pytest.skip(f"corpus file not available: {p}")
    return p


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--update-snapshots", action="store_true", help="rewrite tests/snapshots/*")


@pytest.fixture
def update_snapshots(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption("--update-snapshots"))
