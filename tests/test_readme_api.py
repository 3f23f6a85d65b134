"""The README's "Python API" example runs and prints exactly the output shown under it."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _example() -> tuple[str, str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("## Python API", 1)[1].split("\n## ", 1)[0]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    shown = re.search(r"```text\n(.*?)```", section, re.S).group(1)
    return code, shown


def test_readme_python_api_example_prints_what_the_readme_shows():
    code, shown = _example()
    assert "traceclass.load(" in code and "traceclass.analyze(" in code and "frames()" in code
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert r.stdout.rstrip() == shown.rstrip()
