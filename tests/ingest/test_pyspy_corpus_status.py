"""Every file of corpus/pyspy and corpus/speedscope: the format it loads as, or the error it gives."""

from __future__ import annotations

import pytest

from conftest import CORPUS
from traceclass.analysis.cpu_profile import profile_samples
from traceclass.errors import TraceFormatError
from traceclass.ingest import load
from traceclass.render.cpu_markdown import cpu_profile_markdown
from traceclass.report.cpu import cpu_section
from traceclass.report.plain import plain

COLLAPSED_ERR = "collapsed-stack form"

# relative path -> format it loads as, or ("error", words of the one-line message)
EXPECTED: dict[str, object] = {
    "pyspy/README.txt": ("error", COLLAPSED_ERR),
    "pyspy/workloads/cpu_lock.py": ("error", COLLAPSED_ERR),
    "pyspy/workloads/parent_spawns.py": ("error", COLLAPSED_ERR),
    "pyspy/workloads/sleep_io.py": ("error", COLLAPSED_ERR),
    "pyspy/workloads/torch_train.py": ("error", COLLAPSED_ERR),
    # py-spy's default output: the flamegraph's tree is read back from the drawing
    "pyspy/cpu_lock.default.svg": "flamegraph-svg",
    "pyspy/cpu_lock.idle_threads.svg": "flamegraph-svg",
    "pyspy/sleep_io.default.svg": "flamegraph-svg",
    "pyspy/sleep_io.idle.svg": "flamegraph-svg",
    "pyspy/torch_train.default.svg": "flamegraph-svg",
    # speedscope's invalid files: an unclosed frame is repaired (closed at endValue, noted);
    # a close that is not LIFO is rejected, as speedscope's importer does
    "speedscope/speedscope/invalid/incomplete-trace.json": "speedscope",
    "speedscope/speedscope/invalid/out-of-order-events.json": ("error", "LIFO order"),
}
for _name in ("attach_cpu_lock", "cpu_lock.default", "cpu_lock.function", "cpu_lock.gil", "cpu_lock.gil_idle_threads",
              "cpu_lock.idle", "cpu_lock.idle_threads", "cpu_lock.nolineno", "parent.nosubprocesses",
              "parent.subprocesses", "sleep_io.default", "sleep_io.idle", "torch_train.default",
              "torch_train.threads_idle"):
    EXPECTED[f"pyspy/{_name}.raw.txt"] = "collapsed"
for _name in ("cpu_lock.default", "cpu_lock.idle", "cpu_lock.idle_threads", "cpu_lock.rate10", "parent.subprocesses",
              "sleep_io.default", "sleep_io.idle_threads", "torch_train.default"):
    EXPECTED[f"pyspy/{_name}.speedscope.json"] = "pyspy-speedscope"
for _name in ("cpu_lock.default", "parent.subprocesses", "sleep_io.default", "torch_train.default"):
    EXPECTED[f"pyspy/{_name}.chrometrace.json"] = "chrome-trace"
for _name in ("0.0.1/simple-no-pretty-print.speedscope.json", "0.0.1/simple.speedscope.json",
              "0.1.2/simple-sampled.speedscope.json", "0.6.0/two-sampled.speedscope.json"):
    EXPECTED[f"speedscope/speedscope/{_name}"] = "speedscope"


def _all_files() -> list[str]:
    out = []
    for top in ("pyspy", "speedscope"):
        root = CORPUS / top
        if root.exists():
            out += sorted(str(p.relative_to(CORPUS)) for p in root.rglob("*") if p.is_file())
    return out


def _expected(rel: str) -> object:
    if rel in EXPECTED:
        return EXPECTED[rel]
    if rel.startswith("speedscope/stackcollapse/"):
        return "collapsed"
    if rel.startswith("speedscope/trace-event/"):
        return "chrome-trace"
    return None  # a file added to the corpus later: it must at least load or fail cleanly


FILES = _all_files()


def test_corpus_present():
    if not FILES:
        pytest.skip("corpus not available")
    assert len(FILES) >= 80
    assert set(EXPECTED) <= set(FILES)


@pytest.mark.parametrize("rel", FILES)
def test_file_loads_or_is_rejected_cleanly(rel):
    want = _expected(rel)
    try:
        trace = load(CORPUS / rel)
    except TraceFormatError as exc:
        msg = str(exc)
        assert "\n" not in msg and msg.startswith(str(CORPUS / rel))
        assert isinstance(want, tuple) or want is None, f"{rel} was expected to load: {msg}"
        if want is not None:
            assert want[1] in msg
        return
    assert not isinstance(want, tuple), f"{rel} was expected to be rejected"
    if want is not None:
        assert trace.source.format == want
    assert len(trace.samples) > 0
    prof = profile_samples(trace)
    assert prof.total_value > 0
    md = cpu_profile_markdown(cpu_section(prof))
    assert md.startswith("## CPU profile")
    plain(cpu_section(prof))
