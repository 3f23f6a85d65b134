"""Small valid inputs of every format traceclass reads, the starting points of the fuzzer.

Each seed is built from the hand-made builders the other tests use, so it is a real trace
with known content: a Kineto trace (plain and gzip), an nsys SQLite export, a py-spy
speedscope file and collapsed stacks, a plain Chrome trace, and a saved JSON report and
baseline (the inputs of ``diff`` and ``check``).
"""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import sys
from pathlib import Path

_TESTS = Path(__file__).resolve().parents[1]
for _p in (_TESTS, _TESTS / "ingest", _TESTS / "compare"):
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))

from kineto_builder import KinetoBuilder  # noqa: E402
from pyspy_builder import MAIN, PARSE, WORK, write_collapsed, write_speedscope  # noqa: E402

import nsys_fixtures  # noqa: E402

#: seed name -> what it is (a trace is analysed; a report or baseline is compared)
KINDS = {
    "kineto.json": "trace",
    "kineto.json.gz": "trace",
    "nsys.sqlite": "trace",
    "pyspy.speedscope.json": "trace",
    "pyspy.raw.txt": "trace",
    "chrome.json": "trace",
    "report.json": "report",
    "baseline.json": "baseline",
}


def kineto_doc() -> dict:
    b = KinetoBuilder()
    for s in range(3):
        t0 = 1_000_000 + s * 1_000_000
        b.step(s, t0, 900_000)
        e = b.op("aten::mm", t0 + 1_000, 50_000, dims=[[64, 64], [64, 64]])
        b.launch(e, "volta_sgemm_128x64_nn", t0 + 2_000, t0 + 10_000, 30_000)
        e2 = b.op("aten::add", t0 + 60_000, 20_000, dims=[[64, 64], [64, 64]])
        b.launch(e2, "vectorized_elementwise_kernel", t0 + 61_000, t0 + 70_000, 5_000)
    return b.to_dict()


def chrome_doc() -> list:
    evs = [{"name": "main", "ph": "X", "ts": 0, "dur": 1000, "pid": 1, "tid": 1}]
    for i in range(6):
        evs.append({"name": f"work{i % 3}", "ph": "X", "ts": 10 + i * 150, "dur": 120, "pid": 1, "tid": 1})
    evs.append({"name": "thread_name", "ph": "M", "pid": 1, "tid": 1, "args": {"name": "MainThread"}})
    return evs


PROFILE = {"MainThread": {(MAIN, WORK): 60, (MAIN, PARSE): 40}}


def _quiet_main(argv: list[str]) -> int:
    from traceclass.cli import main

    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        return main(argv)


def build_seeds(folder: Path) -> dict[str, Path]:
    """Write every seed into ``folder``; name -> path."""
    folder.mkdir(parents=True, exist_ok=True)
    out: dict[str, Path] = {}
    k = json.dumps(kineto_doc()).encode()
    (folder / "kineto.json").write_bytes(k)
    (folder / "kineto.json.gz").write_bytes(gzip.compress(k, mtime=0))
    nsys_fixtures.small_kernel_storm_export(folder / "nsys.sqlite", n=12)
    write_speedscope(folder / "pyspy.speedscope.json", PROFILE)
    write_collapsed(folder / "pyspy.raw.txt", PROFILE)
    (folder / "chrome.json").write_text(json.dumps(chrome_doc()))
    assert _quiet_main(["analyze", str(folder / "kineto.json"), "--format", "json",
                        "-o", str(folder / "report.json")]) == 0
    assert _quiet_main(["baseline", "save", str(folder / "kineto.json"), "-o", str(folder / "baseline.json")]) == 0
    for name in KINDS:
        out[name] = folder / name
    return out
