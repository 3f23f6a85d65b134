"""Collapsed stacks (py-spy raw and other samplers): reading, thread identity, edge cases."""

from __future__ import annotations

import gzip

import numpy as np
import pytest

from conftest import corpus
from sampled_oracle import read_collapsed_lines, self_and_total, split_frame
from traceclass.analysis.cpu_profile import profile_samples
from traceclass.errors import TraceFormatError
from traceclass.ingest import load
from traceclass.ingest.frametext import parse_frame, parse_pseudo

PYSPY_RAW = [
    "attach_cpu_lock.raw.txt",
    "cpu_lock.default.raw.txt",
    "cpu_lock.function.raw.txt",
    "cpu_lock.gil.raw.txt",
    "cpu_lock.gil_idle_threads.raw.txt",
    "cpu_lock.idle.raw.txt",
    "cpu_lock.idle_threads.raw.txt",
    "cpu_lock.nolineno.raw.txt",
    "parent.nosubprocesses.raw.txt",
    "parent.subprocesses.raw.txt",
    "sleep_io.default.raw.txt",
    "sleep_io.idle.raw.txt",
    "torch_train.default.raw.txt",
    "torch_train.threads_idle.raw.txt",
]


def _names(trace, f):
    return trace.strings[int(trace.frames.function[f])]


@pytest.mark.parametrize("name", PYSPY_RAW)
def test_self_and_total_match_plain_python(name):
    path = corpus("pyspy", name)
    lines = read_collapsed_lines(path)
    want_self, want_total, grand = self_and_total(lines)
    prof = profile_samples(load(path))
    assert prof.unit == "samples" and prof.samples == grand == prof.total_value
    # every hot spot kept (top 50) equals the independent count, and the order is by self
    got = {}
    for h in prof.hot_spots:
        key = f"{h.function} ({h.location})" if h.file else h.function
        got[key] = (h.self_value, h.total_value)
        assert h.self_value == want_self[key], key
        assert h.total_value == want_total[key], key
        assert h.self_pct == pytest.approx(100.0 * want_self[key] / grand)
    assert [h.self_value for h in prof.hot_spots] == sorted((h.self_value for h in prof.hot_spots), reverse=True)
    top_want = sorted(want_self.values(), reverse=True)[: len(prof.hot_spots)]
    assert [h.self_value for h in prof.hot_spots] == top_want
    for f in prof.top_total[:10]:
        key = f"{f.function} ({f.location})" if f.file else f.function
        assert f.total_value == want_total[key], key


def test_thread_roots_become_threads_and_renamed_thread_merges():
    tr = load(corpus("pyspy", "torch_train.threads_idle.raw.txt"))
    # "thread (16346)" and "thread (16346): MainThread" are one thread
    assert len(tr.threads) == 1
    assert int(tr.threads.tid[0]) == 16346 and tr.strings[int(tr.threads.name[0])] == "MainThread"
    assert int(tr.samples.count.sum()) == sum(c for _, c in read_collapsed_lines(corpus("pyspy", "torch_train.threads_idle.raw.txt")))
    # the root-only line "thread (16346): MainThread 117" is an empty stack of that thread
    empty = tr.samples.node < 0
    assert int(tr.samples.count[empty].sum()) == 117
    # no pseudo-frame survives as a frame
    assert not any(parse_pseudo(_names(tr, f)) for f in range(len(tr.frames)))


def test_threads_of_cpu_lock_idle_threads():
    tr = load(corpus("pyspy", "cpu_lock.idle_threads.raw.txt"))
    names = {tr.strings[int(n)]: int(t) for n, t in zip(tr.threads.name, tr.threads.tid)}
    assert names == {"MainThread": 13578, "lock-waiter": 13580, "sleeper-io": 13581}
    per_thread = np.bincount(tr.samples.thread, weights=tr.samples.count)
    by_name = {tr.strings[int(tr.threads.name[i])]: int(per_thread[i]) for i in range(len(tr.threads))}
    assert by_name["lock-waiter"] == 306


def test_subprocess_roots_give_pids():
    tr = load(corpus("pyspy", "parent.subprocesses.raw.txt"))
    pids = set(tr.threads.pid.tolist())
    assert {16522, 16524, 16528} <= pids
    # the child with an empty command line still gets its own thread row
    row = [i for i in range(len(tr.threads)) if tr.threads.pid[i] == 16528]
    assert row and int(tr.threads.tid[row[0]]) == 16528


def test_empty_stack_line_and_no_thread_split():
    tr = load(corpus("pyspy", "sleep_io.default.raw.txt"))
    assert int(tr.samples.count[tr.samples.node < 0].sum()) == 1
    assert int(tr.samples.count.sum()) == 12
    assert len(tr.threads) == 1 and int(tr.threads.tid[0]) == -1
    assert any("not split by thread" in n for n in tr.notes)
    assert tr.sampling.interval_ns is None and tr.sampling.includes_idle is None


def test_nolineno_and_function_lines():
    tr = load(corpus("pyspy", "cpu_lock.nolineno.raw.txt"))
    assert (tr.frames.line == -1).all()
    assert not tr.sampling.has_line_numbers
    tr = load(corpus("pyspy", "cpu_lock.function.raw.txt"))
    fib = [int(tr.frames.line[f]) for f in range(len(tr.frames)) if _names(tr, f) == "fib"]
    assert fib == [7]  # -F: the def line, the same in every sample


@pytest.mark.parametrize(
    "text, want",
    [
        ("fib (cpu_lock.py:8)", ("fib", "cpu_lock.py", 8)),
        ("busy_python.<locals>.<genexpr> (cpu_lock.py:14)", ("busy_python.<locals>.<genexpr>", "cpu_lock.py", 14)),
        ("fib (cpu_lock.py)", ("fib", "cpu_lock.py", None)),
        ("_find_and_load (<frozen importlib._bootstrap>:1176)", ("_find_and_load", "<frozen importlib._bootstrap>", 1176)),
        ("PyEval_EvalFrameDefault (libpython3.11.so.1.0)", ("PyEval_EvalFrameDefault", "libpython3.11.so.1.0", None)),
        ("0x7f3c2a1b2c3d (libc.so.6)", ("0x7f3c2a1b2c3d", "libc.so.6", None)),
        ("foo(int) (libx.so)", ("foo(int)", "libx.so", None)),
        ("oopDesc* PSPromotionManager::copy_to_survivor_space<false>", ("oopDesc* PSPromotionManager::copy_to_survivor_space<false>", None, None)),
        ("check_events_[k]", ("check_events_[k]", None, None)),
        ("foo(int)", ("foo(int)", None, None)),
    ],
)
def test_frame_text(text, want):
    assert tuple(parse_frame(text)) == want


@pytest.mark.parametrize(
    "text, want",
    [
        ("thread (16346): MainThread", ("thread", 16346, "MainThread")),
        ("thread (16346)", ("thread", 16346, "")),
        ('process 16522:"/opt/venv/bin/python workloads/parent_spawns.py 3"', ("process", 16522, "/opt/venv/bin/python workloads/parent_spawns.py 3")),
        ('process 16528:""', ("process", 16528, "")),
        ("thread_main (x.py:3)", None),
    ],
)
def test_pseudo_frames(text, want):
    got = parse_pseudo(text)
    assert (tuple(got) if got else None) == want


SIMPLE = {"a": (0, 14), "b": (5, 14), "c": (5, 5), "d": (4, 4)}  # frame: (self, total)


@pytest.mark.parametrize(
    "name", ["simple.txt", "simple-crlf.txt", "simple-utf16-le.txt", "simple-utf16-be.txt", "simple-with-invalids.txt"]
)
def test_stackcollapse_variants_read_the_same(name):
    tr = load(corpus("speedscope", "stackcollapse", name))
    prof = profile_samples(tr)
    got = {h.function: (h.self_value, h.total_value) for h in prof.top_total}
    assert got == SIMPLE
    assert prof.samples == 14
    assert tr.source.format == "collapsed" and tr.source.producer == ""
    if name == "simple-with-invalids.txt":
        assert any("1 line skipped" in n for n in tr.notes)
        assert tr.meta["comment_lines"] == 2


def test_recursion_counts_total_once():
    path = corpus("speedscope", "stackcollapse", "recursion.txt")
    lines = read_collapsed_lines(path)
    _, want_total, grand = self_and_total(lines)
    prof = profile_samples(load(path))
    got = {f.function: f.total_value for f in prof.top_total}
    assert got == dict(want_total)
    assert got["a"] <= grand and got["b"] <= grand


def test_tall_and_alternating_and_perf():
    tall = load(corpus("speedscope", "stackcollapse", "tall.txt"))
    assert int(tall.stacks.depth.max()) == 25 and len(tall.stacks) == 26
    alt = load(corpus("speedscope", "stackcollapse", "alternating.txt"))
    # duplicate lines aggregate into one row per (thread, stack)
    assert len(alt.samples) == 2 and int(alt.samples.count.sum()) == 182
    path = corpus("speedscope", "stackcollapse", "perf-vertx-stacks-01-collapsed-all.txt")
    perf = profile_samples(load(path))
    want_self, _, grand = self_and_total(read_collapsed_lines(path))
    assert perf.samples == grand
    kernel = [h for h in perf.hot_spots if h.function.endswith("_[k]")]
    assert kernel and all(h.kind == "native" for h in kernel)
    for h in perf.hot_spots:
        assert h.self_value == want_self[h.function]


def test_gzip_collapsed(tmp_path):
    src = corpus("pyspy", "cpu_lock.idle_threads.raw.txt").read_bytes()
    p = tmp_path / "x.raw.txt.gz"
    p.write_bytes(gzip.compress(src))
    assert int(load(p).samples.count.sum()) == 926


@pytest.mark.parametrize(
    "content, message",
    [
        (b"Hello world.\nThis is a README with prose.\nNothing here is a stack.\n",
         "not a recognized trace (text starting 'Hello world.'); traceclass reads torch.profiler/Kineto JSON"),
        (b"import os\n\ndef main():\n    pass\n", "not a recognized trace (Python source); traceclass reads"),
        (b"# Title\n\nSome prose.\n", "not a recognized trace (Markdown text); traceclass reads"),
        (b"Version 2\nsome text\nmore text\nand more\n", "only 1 of 4 lines"),
        (b"<?xml version='1.0'?><svg></svg>", "SVG image"),
        (b"   \n\n", "only whitespace"),
        (b"", "empty"),
        (b"\x00\x01\x02binary", "binary"),
    ],
)
def test_not_collapsed_is_a_clean_error(tmp_path, content, message):
    p = tmp_path / "random.txt"
    p.write_bytes(content)
    with pytest.raises(TraceFormatError) as exc:
        load(p)
    assert message in str(exc.value)
    assert "\n" not in str(exc.value)


def test_frame_names_with_spaces_and_huge_counts(tmp_path):
    p = tmp_path / "x.txt"
    p.write_text("main;do work (app.py:3);sleep well (app.py:9) 99999999999\nmain 1\n")
    tr = load(p)
    assert int(tr.samples.count.sum()) == 99999999999 + 1
    prof = profile_samples(tr)
    assert prof.hot_spots[0].function == "sleep well" and prof.hot_spots[0].line == 9


def test_oracle_frame_split_agrees_with_reader():
    # the oracle's regex and the reader's agree on every frame text in the corpus
    for name in PYSPY_RAW:
        for frames, _ in read_collapsed_lines(corpus("pyspy", name)):
            for f in frames:
                a = split_frame(f)
                b = parse_frame(f)
                assert (a[0], a[1] or None, a[2]) == tuple(b)
