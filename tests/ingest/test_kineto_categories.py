"""What the Kineto reader counts of the events it skips (flows, unknown categories and phases),
and the times it reads for the events it keeps, on a hand-written trace with every kind of
category: the same answer whether the file is read in one run or in runs of a few events, and
whether the categories fit the reader's table of distinct categories or overflow it."""

from __future__ import annotations

import json

import pytest

from traceclass.ingest import jsonstream, kineto, load

EVENTS = [
    {"ph": "M", "name": "thread_name", "pid": 1, "tid": 2, "args": {"name": "main"}},
    {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 2, "ts": 10.5, "dur": 5.25,
     "args": {"External id": 1}},
    {"ph": "s", "cat": "ac2g", "id": 1, "pid": 1, "tid": 2, "ts": 11, "name": "ac2g"},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 2, "ts": 11, "dur": 2,
     "args": {"External id": 1, "correlation": 9, "cbid": 211}},
    {"ph": "f", "cat": "ac2g", "id": 1, "pid": 0, "tid": 7, "ts": 20, "name": "ac2g", "bp": "e"},
    {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 20, "dur": 3.5,
     "args": {"device": 0, "stream": 7, "correlation": 9, "External id": 1}},
    {"ph": "s", "cat": "fwdbwd", "id": 2, "pid": 1, "tid": 2, "ts": 12, "name": "fwdbwd"},
    {"ph": "X", "cat": "gpu_user_annotation", "name": "fwd", "pid": 0, "tid": 7, "ts": 20, "dur": 4},
    {"ph": "X", "cat": "my_category", "name": "custom", "pid": 1, "tid": 2, "ts": 13, "dur": 1},
    {"ph": "X", "cat": "my_category", "name": "custom", "pid": 1, "tid": 2, "ts": 14, "dur": 1},
    {"ph": "X", "cat": 5, "name": "numbered", "pid": 1, "tid": 2, "ts": 14, "dur": 1},
    {"ph": "X", "cat": ["a", "list"], "name": "hostile", "pid": 1, "tid": 2, "ts": 14, "dur": 1},
    {"ph": "t", "cat": ["a", "list"], "id": 3, "pid": 1, "tid": 2, "ts": 15, "name": "step"},
    {"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1, "tid": 2, "ts": 16, "s": "t",
     "args": {"Bytes": 512, "Total Allocated": 1024, "Total Reserved": 2048, "Device Type": 1, "Device Id": 0}},
    {"ph": "i", "cat": "other_instant", "name": "mark", "pid": 1, "tid": 2, "ts": 16, "s": "t"},
    {"ph": "X", "cat": "mtia_ccp_events", "name": "mtia_op", "pid": 3, "tid": 1, "ts": 30, "dur": 2,
     "args": {"device": 0}},
    {"ph": "Q", "cat": "cpu_op", "name": "odd phase", "pid": 1, "tid": 2, "ts": 17, "dur": 1},
    {"ph": "X", "cat": "cpu_op", "name": "aten::relu", "pid": 1, "tid": 2, "ts": 18.001, "dur": -2},
]

#: what event_counts says: the categories kept only as counts (an instant event of another
#: category than memory is neither kept nor counted)
COUNTS = {"mtia_ccp_events": 1, "gpu_user_annotation": 1, "flow:ac2g": 2, "flow:fwdbwd": 1,
          "flow:['a', 'list']": 1}


def _write(tmp_path, events=EVENTS):
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}))
    return str(path)


def _read(path):
    t = load(path)
    counts = dict(t.meta["event_counts"])
    return t, counts


def test_every_skipped_event_is_counted_once_by_its_category(tmp_path) -> None:
    t, counts = _read(_write(tmp_path))
    notes = " | ".join(t.notes)
    assert counts == COUNTS
    # unknown categories and phases are the note's, most frequent first
    assert "events of unrecognized categories ignored: my_category (2), 5 (1), ['a', 'list'] (1), ph Q (1)" in notes
    assert "1 GPU-side annotation spans" in notes
    assert "1 events with a negative duration were read as zero-length" in notes
    assert "1 MTIA device events" in notes
    # the kept events and their exact times
    assert len(t.ops) == 2 and len(t.api) == 1 and len(t.memory) == 1
    assert sorted(t.ops.start_ns.tolist()) == [10_500, 18_001]
    relu = t.ops.start_ns.tolist().index(18_001)
    assert t.ops.end_ns[relu] == 18_001  # negative duration read as zero
    kernel = t.gpu.name.tolist().index(t.strings.code("gemm"))
    assert t.gpu.start_ns[kernel] == 20_000 and t.gpu.end_ns[kernel] == 23_500
    assert t.memory.ts_ns.tolist() == [16_000]


@pytest.mark.parametrize("run", [60, 200, 600])
def test_short_runs_count_and_time_the_same(tmp_path, monkeypatch, run) -> None:
    path = _write(tmp_path)
    whole, whole_counts = _read(path)
    monkeypatch.setattr(jsonstream, "BLOCK", 256)
    monkeypatch.setattr(jsonstream, "RUN", run)
    part, part_counts = _read(path)
    assert part_counts == whole_counts and part.notes == whole.notes
    assert part.ops.start_ns.tolist() == whole.ops.start_ns.tolist()
    assert part.gpu.end_ns.tolist() == whole.gpu.end_ns.tolist()


def test_categories_beyond_the_table_are_counted_one_by_one(tmp_path, monkeypatch) -> None:
    path = _write(tmp_path)
    whole, whole_counts = _read(path)
    # room for the known categories and one more: my_category, 5 and the list overflow it
    monkeypatch.setattr(kineto._CategoriesSeen, "LIMIT", len(kineto._CATEGORY) + 2)
    small, small_counts = _read(path)
    assert small_counts == whole_counts and small.notes == whole.notes
    assert len(small.ops) == len(whole.ops) and len(small.memory) == 1


def test_many_distinct_categories_stay_linear(tmp_path) -> None:
    # a hostile file: 20,000 categories, each once; every one is counted
    events = [{"ph": "X", "cat": f"c{i}", "name": "x", "pid": 1, "tid": 1, "ts": i, "dur": 1}
              for i in range(20_000)]
    t, _ = _read(_write(tmp_path, events))
    note = next(n for n in t.notes if n.startswith("events of unrecognized categories"))
    assert note.count("(1)") == 5  # the five named, each seen once
    assert len(t.ops) == 0


def test_epoch_times_of_kept_events_between_flows_in_a_loosely_typed_run(tmp_path) -> None:
    # one event whose args is not an object sends its run through the tolerant decoder, where
    # epoch-microsecond timestamps are re-read as text: the kept events' rows among flows and
    # metadata must still get their own texts
    raw = ('{"schemaVersion": 1, "traceEvents": ['
           '{"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "p"}},'
           '{"ph": "s", "cat": "ac2g", "id": 1, "pid": 1, "tid": 2, "ts": 1712195495519600.001, "name": "ac2g"},'
           '{"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 2, "ts": 1712195495519689.047, "dur": 1.5,'
           ' "args": 5},'
           '{"ph": "f", "cat": "ac2g", "id": 1, "pid": 1, "tid": 2, "ts": 1712195495519699.999, "name": "ac2g"},'
           '{"ph": "X", "cat": "cpu_op", "name": "b", "pid": 1, "tid": 2, "ts": 1712195495519695.813, "dur": 2}'
           ']}')
    path = tmp_path / "t.json"
    path.write_text(raw)
    t = load(str(path))
    assert sorted(t.ops.start_ns.tolist()) == [1712195495519689047, 1712195495519695813]
    assert sorted(t.ops.end_ns.tolist()) == [1712195495519690547, 1712195495519697813]
