"""Streamed reading of large Chrome-trace JSON: the same trace as reading the file whole."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import msgspec
import numpy as np
import pytest

from traceclass.engine import run
from traceclass.errors import TraceFormatError
from traceclass.ingest import jsonstream, load
from traceclass.ingest.jsonstream import stream_container
from traceclass.render.markdown import render

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT.parent / "shared" / "corpus" / "torch"


def _both(path, monkeypatch, block=1 << 16, run=None):
    monkeypatch.setattr(jsonstream, "STREAM_ABOVE", 1 << 60)
    whole = load(path)
    monkeypatch.setattr(jsonstream, "STREAM_ABOVE", 0)
    monkeypatch.setattr(jsonstream, "BLOCK", block)
    if run is not None:
        monkeypatch.setattr(jsonstream, "RUN", run)
    streamed = load(path)
    return whole, streamed


def _events(n):
    evs = []
    for i in range(n):
        # nested objects and "}," inside strings: cut candidates that must be rejected
        evs.append({"ph": "X", "cat": "cpu_op", "name": f"aten::op}},{{{i}", "pid": 1, "tid": 2,
                    "ts": 1000 + 10 * i, "dur": 5,
                    "args": {"External id": i + 1, "nested": [{"a": 1}, {"b": [2, {"c": 3}]}]}})
    return evs


@pytest.mark.parametrize("block", [7, 100, 1 << 12])
def test_stream_cuts_only_between_events(tmp_path, block):
    doc = {"schemaVersion": 1, "deviceProperties": [], "traceEvents": _events(300), "traceName": "x.json"}
    p = tmp_path / "t.json"
    p.write_text(json.dumps(doc, indent=1))
    c = stream_container(str(p), block=block)
    raws = list(c.events) + [r for run_ in c.rest for r in run_]
    assert [json.loads(bytes(r)) for r in raws] == doc["traceEvents"]
    assert c.top == {"schemaVersion": 1, "deviceProperties": [], "traceName": "x.json"}
    assert c.size == p.stat().st_size


def test_stream_gzip_bare_array(tmp_path):
    evs = _events(50)
    p = tmp_path / "t.json.gz"
    with gzip.open(p, "wt") as fh:
        json.dump(evs, fh)
    c = stream_container(str(p), block=64)
    assert c.bare and c.top == {}
    assert [json.loads(bytes(r)) for r in list(c.events) + [r for x in c.rest for r in x]] == evs


@pytest.mark.parametrize("run_bytes", [None, 1 << 13])
@pytest.mark.parametrize("name", ["gpu/v100_ns_resolution.json.gz", "gpu/mi300x_resnet_act_checkpoint_train.json.gz",
                                  "cpu/mixed_stack.step6.pt.trace.json.gz"])
def test_streamed_corpus_trace_same_report(name, run_bytes, monkeypatch):
    path = CORPUS / name
    if not path.exists():
        pytest.skip("corpus not available")
    whole, streamed = _both(path, monkeypatch, run=run_bytes)
    for table in ("ops", "gpu", "api", "annotations", "python"):
        a, b = getattr(whole, table), getattr(streamed, table)
        assert len(a) == len(b) > 0 or len(a) == len(b) == 0
        assert np.array_equal(a.start_ns, b.start_ns)
    assert whole.source.size_bytes == streamed.source.size_bytes
    assert render(run(whole)[1], 15) == render(run(streamed)[1], 15)


def test_damaged_stream_falls_back_to_whole_file_errors(tmp_path, monkeypatch):
    monkeypatch.setattr(jsonstream, "STREAM_ABOVE", 0)
    monkeypatch.setattr(jsonstream, "BLOCK", 64)
    doc = json.dumps({"schemaVersion": 1, "traceEvents": _events(20)})
    p = tmp_path / "cut.json"
    p.write_text(doc[: len(doc) // 2])  # an object cut short: the whole-file path names it
    with pytest.raises(TraceFormatError, match="truncated"):
        load(p)


def test_typed_runs_are_cut_at_run_size_and_fall_back_to_raw_slices(monkeypatch):
    monkeypatch.setattr(jsonstream, "RUN", 400)
    evs = _events(40)
    buf = json.dumps(evs)[1:].encode()  # the array's content after "[", as a block holds it
    seen = []

    def decode(text):
        seen.append(len(text))
        return msgspec.json.decode(text)  # refuses a cut inside a string, as a reader's decoder does

    run_, used = jsonstream._cut(buf, 0, decode)
    assert isinstance(run_, jsonstream.DecodedRun)
    assert 0 < used <= 400 and seen[-1] == used + 2  # "[" + the cut + "]"
    assert list(run_) == evs[: len(run_)] and run_.text == b"[" + buf[:used] + b"]"

    def refuse(text):
        raise msgspec.ValidationError("not this type")

    raw, used2 = jsonstream._cut(buf, 0, refuse)  # the reader's own recovery gets the raw slices
    assert not isinstance(raw, jsonstream.DecodedRun) and used2 == used
    assert [json.loads(bytes(r)) for r in raw] == list(run_)


def test_event_larger_than_a_run_is_still_read(tmp_path, monkeypatch):
    big = {"ph": "X", "cat": "cpu_op", "name": "aten::big", "pid": 1, "tid": 2, "ts": 5, "dur": 1,
           "args": {"External id": 999, "Concrete Inputs": ["x" * 5000]}}
    doc = {"schemaVersion": 1, "traceEvents": _events(30) + [big] + _events(30)}
    p = tmp_path / "big.json"
    p.write_text(json.dumps(doc))
    monkeypatch.setattr(jsonstream, "STREAM_ABOVE", 0)
    monkeypatch.setattr(jsonstream, "BLOCK", 1024)
    monkeypatch.setattr(jsonstream, "RUN", 512)
    trace = load(p)
    assert len(trace.ops) == 61
    assert trace.ops.external_id.tolist().count(999) == 1
    assert trace.ops.external_id[trace.ops.start_ns == 5000].tolist() == [999]


def test_invalid_utf8_in_a_later_block_is_repaired_as_in_the_whole_file(tmp_path, monkeypatch):
    evs = _events(200)
    text = json.dumps({"schemaVersion": 1, "traceEvents": evs}).encode()
    cut = text.index(b"aten::op},{150")
    p = tmp_path / "bad.json"
    p.write_bytes(text[:cut] + b"\xff" + text[cut:])
    monkeypatch.setattr(jsonstream, "STREAM_ABOVE", 0)
    monkeypatch.setattr(jsonstream, "BLOCK", 2048)
    monkeypatch.setattr(jsonstream, "RUN", 1024)
    streamed = load(p)
    monkeypatch.setattr(jsonstream, "STREAM_ABOVE", 1 << 60)
    whole = load(p)
    assert len(streamed.ops) == len(whole.ops) == 200
    assert any("invalid UTF-8" in n for n in streamed.notes)
    assert np.array_equal(streamed.ops.name, whole.ops.name)
