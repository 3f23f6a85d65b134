"""Non-Kineto Chrome trace events: py-spy chrometrace and speedscope's 31 edge cases."""

from __future__ import annotations

import json

import pytest

from conftest import corpus
from sampled_oracle import chrome_naive_self
from traceclass.analysis.cpu_profile import profile_samples
from traceclass.errors import TraceFormatError
from traceclass.ingest import load


def _frames(path):
    tr = load(path)
    py = tr.python
    return tr, sorted(
        (tr.strings[int(n)], int(s) // 1000, int(e) // 1000, int(d))
        for n, s, e, d in zip(py.name, py.start_ns, py.end_ns, py.depth)
    )


def _te(name):
    return corpus("speedscope", "trace-event", name)


SIMPLE = [("alpha", 0, 14, 0), ("beta", 1, 13, 1), ("epsilon", 7, 11, 2), ("gamma", 2, 7, 2)]

# (file, timed frames as (name, start µs, end µs, depth)); semantics of speedscope's importer
EXPECTED = {
    "simple.json": SIMPLE,
    "simple-partial.json": SIMPLE,
    "simple-partial-trailing-comma.json": SIMPLE,
    "simple-partial-whitespace.json": SIMPLE,
    "simple-object.json": [("(unnamed)", 7, 11, 2), ("alpha", 0, 14, 0), ("beta", 1, 13, 1)],
    "zero-duration-events.json": [("A", 0, 10, 0), ("B", 1, 1, 1), ("C", 2, 2, 1), ("D", 3, 3, 1)],
    "out-of-order.json": [("A", 0, 10, 0), ("B", 1, 9, 1), ("C", 2, 8, 2)],
    # an E naming a frame that is not on top is dropped; what stays open closes at the end
    "unbalanced-name.json": [("alpha", 0, 10, 0), ("beta", 1, 10, 1)],
    "out-of-order-unbalanced-name.json": [("alpha", 0, 10, 0), ("beta", 1, 10, 1)],
    "mismatched-name.json": [("alpha", 0, 10, 0)],
    "mismatched-args.json": [("A", 0, 10, 0)],
    "unbalanced-args.json": [("A", 0, 10, 0), ("A", 1, 9, 1)],
    "too-many-end-events.json": [("alpha", 0, 14, 0), ("beta", 1, 13, 1)],
    "end-event-with-empty-stack.json": [("alpha", 0, 1, 0)],
    "only-begin-events.json": [("A", 0, 2, 0), ("B", 1, 2, 1), ("C", 2, 2, 2)],
    "not-enough-end-events.json": [("A", 0, 11, 0), ("A", 1, 11, 1), ("A", 10, 11, 2)],
    "end-non-top-of-stack.json": [("A", 0, 11, 0), ("B", 1, 11, 1), ("Z", 10, 11, 2)],
    # overlapping X without nesting: the second stays open inside the first
    "invalid-x-nesting.json": [("alpha", 0, 15, 0), ("beta", 5, 15, 1)],
    "matching-x.json": [("alpha", 0, 10, 0), ("beta", 1, 2, 1), ("beta", 5, 6, 2), ("gamma", 1, 2, 2), ("gamma", 5, 6, 1)],
    "event-reordering-name-match.json": [("alpha", 0, 10, 0), ("beta", 1, 2, 1), ("gamma", 1, 2, 2)],
    "must-retain-original-order.json": [
        ("A", 0, 3, 0), ("A", 4, 7, 0), ("B", 0, 2, 1), ("B", 5, 7, 1), ("C", 0, 1, 2), ("C", 6, 7, 2), ("X", 7, 10, 0)
    ],
    "x-events-matching-start.json": [
        ("alpha", 0, 20, 0), ("beta", 1, 3, 1), ("beta", 5, 6, 2), ("beta", 9, 10, 2), ("beta", 13, 15, 1),
        ("gamma", 1, 2, 2), ("gamma", 5, 7, 1), ("gamma", 9, 11, 1), ("gamma", 13, 14, 2),
    ],
    "x-events-matching-end.json": [
        ("alpha", 0, 20, 0), ("beta", 1, 3, 1), ("beta", 6, 7, 2), ("beta", 9, 11, 1), ("beta", 15, 16, 2),
        ("gamma", 2, 3, 2), ("gamma", 5, 7, 1), ("gamma", 10, 11, 2), ("gamma", 14, 16, 1),
    ],
    "bex-interaction.json": [
        ("A", 0, 2, 0), ("B", 0, 2, 1), ("C", 10, 12, 1), ("D", 10, 12, 0), ("E", 20, 21, 1), ("F", 20, 22, 0),
        ("G", 30, 32, 0), ("H", 30, 31, 1), ("I", 41, 42, 1), ("J", 40, 42, 0), ("K", 50, 52, 0), ("L", 51, 52, 1),
    ],
    "simultaneous-anonymous-calls.json": [
        ("anonymous", 0, 5, 0), ("anonymous", 1, 3, 1), ("anonymous", 1, 3, 3), ("anonymous", 3, 5, 1),
        ("anonymous", 3, 5, 2), ("function1", 1, 3, 2),
    ],
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_trace_event_edge_cases(name):
    tr, got = _frames(_te(name))
    assert got == EXPECTED[name]
    assert tr.source.format == "chrome-trace"
    # the samples-equivalent rows hold exactly the self time of the frames
    assert int(tr.samples.weight_ns.sum()) == sum(
        e - s for (_, s, e, d) in got if d == 0
    ) * 1000


def test_partial_files_say_they_were_repaired():
    tr = load(_te("simple-partial-trailing-comma.json"))
    assert any("truncated" in n for n in tr.notes)


def test_unbalanced_events_are_noted():
    tr = load(_te("too-many-end-events.json"))
    assert any("E not matching the open frame, dropped (2)" in n for n in tr.notes)
    tr = load(_te("only-begin-events.json"))
    assert any("closed at the thread's end (3)" in n for n in tr.notes)


def test_multiprocess_threads_and_names():
    tr = load(_te("multiprocess.json"))
    names = {(int(p), int(t)): tr.strings[int(n)] for p, t, n in zip(tr.threads.pid, tr.threads.tid, tr.threads.name)}
    assert names[(0, 0)] == "p0: p0t0" and names[(1, 1)] == "p1: p1t1"
    assert names[(2, 0)] == "p2t0" and names[(3, 0)] == "p3"
    assert len(tr.python) == 8 and len(tr.threads) == 8


def test_hermes_args_give_file_and_line():
    tr = load(_te("simple-hermes.json"))
    prof = profile_samples(tr)
    beta = [h for h in prof.hot_spots if h.function == "beta"][0]
    assert beta.file.endswith("require.js") and beta.line == 54
    assert beta.self_ns == 12_000


def test_sample_sections_with_string_ts_and_tid():
    tr = load(_te("simple-with-samples.json"))
    assert tr.sampling.timed and tr.meta["samples_from"] == "samples"
    assert len(tr.samples) == 7 and int(tr.threads.tid[0]) == 7695
    assert tr.strings[int(tr.threads.name[0])] == "mqt_js"
    # ts "11552125241" µs is parsed exactly
    assert int(tr.samples.ts_ns.min()) == 11552125241000
    # V8-style names are split into function, file and line
    funcs = {tr.strings[int(f)]: int(ln) for f, ln in zip(tr.frames.function, tr.frames.line)}
    assert funcs["function3"] == 17 and funcs["[GC Young Gen]"] == -1
    prof = profile_samples(tr)
    assert prof.samples == 7 and prof.interval_ns == tr.sampling.interval_ns
    tr = load(_te("multi-thread-with-samples.json"))
    assert sorted(tr.threads.tid.tolist()) == [1, 2]
    assert len(tr.python) == 2  # the X events are kept as timed frames


@pytest.mark.parametrize(
    "name", ["cpu_lock.default.chrometrace.json", "sleep_io.default.chrometrace.json",
             "torch_train.default.chrometrace.json", "parent.subprocesses.chrometrace.json"]
)
def test_pyspy_chrometrace_self_times_match_file_order_parse(name):
    path = corpus("pyspy", name)
    want = chrome_naive_self(path)
    tr = load(path)
    assert tr.source.producer == "py-spy"
    assert any("upper bounds" in n for n in tr.notes)
    assert not any("unbalanced" in n for n in tr.notes)  # py-spy's events pair up exactly
    prof = profile_samples(tr)
    assert prof.from_intervals and prof.unit == "ns" and prof.samples is None
    assert prof.total_ns == sum(want.values()) * 1000
    for h in prof.hot_spots:
        key = f"{h.function} ({h.file}:{h.line})" if h.file else h.function
        assert h.self_ns == want[key] * 1000, key


def test_pyspy_chrometrace_thread_names_from_pseudo_frames():
    tr = load(corpus("pyspy", "parent.subprocesses.chrometrace.json"))
    names = sorted(tr.strings[int(n)] for n in tr.threads.name)
    assert "lock-waiter" in names and "sleeper-io" in names
    assert not any(tr.strings[int(n)].startswith(("thread (", "process ")) for n in tr.python.name)


@pytest.mark.parametrize(
    "events, message",
    [
        ([{"ph": "M", "name": "thread_name", "pid": 1, "tid": 1, "args": {"name": "x"}}], "nothing to profile"),
        ([{"ph": "i", "name": "mark", "pid": 1, "tid": 1, "ts": 5}], "nothing to profile"),
        ([{"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": "soon", "dur": 3}], "nothing to profile"),
    ],
)
def test_hopeless_chrome_files(tmp_path, events, message):
    p = tmp_path / "t.json"
    p.write_text(json.dumps(events))
    with pytest.raises(TraceFormatError, match=message):
        load(p)


def test_odd_fields_are_tolerated(tmp_path):
    events = [
        {"ph": "B", "name": "a", "pid": "main", "tid": "worker-1", "ts": "1.5", "args": "not an object"},
        {"ph": "X", "name": 7, "pid": "main", "tid": "worker-1", "ts": 2, "dur": "1", "args": {"line": "x"}},
        {"ph": "E", "pid": "main", "tid": "worker-1", "ts": 10},
        {"ph": "X", "name": "huge", "pid": 1, "tid": 2, "ts": 1.7e15, "dur": 2.5},
        {"ph": "C", "name": "counter", "pid": 1, "tid": 2, "ts": 3, "args": {"v": 1}},
    ]
    p = tmp_path / "t.json"
    p.write_text(json.dumps(events))
    tr, got = _frames(p)
    assert ("a", 1, 10, 0) in got and ("7", 2, 3, 1) in got
    assert any("synthetic ids" in n for n in tr.notes)
    assert any("C (1)" in n for n in tr.notes)
    huge = [s for s, n in zip(tr.python.start_ns, tr.python.name) if tr.strings[int(n)] == "huge"][0]
    assert int(huge) == 1_700_000_000_000_000_000
