"""Streamed reading of large Chrome-trace JSON: the same trace as reading the file whole."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest

from traceclass.engine import run
from traceclass.errors import TraceFormatError
from traceclass.ingest import jsonstream, load
from traceclass.ingest.jsonstream import stream_container
from traceclass.render.markdown import render

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT.parent / "shared" / "corpus" / "torch"


def _both(path, monkeypatch, block=1 << 16):
    monkeypatch.setattr(jsonstream, "STREAM_ABOVE", 1 << 60)
    whole = load(path)
    monkeypatch.setattr(jsonstream, "STREAM_ABOVE", 0)
    monkeypatch.setattr(jsonstream, "BLOCK", block)
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


@pytest.mark.parametrize("name", ["gpu/v100_ns_resolution.json.gz", "gpu/mi300x_resnet_act_checkpoint_train.json.gz",
                                  "cpu/mixed_stack.step6.pt.trace.json.gz"])
def test_streamed_corpus_trace_same_report(name, monkeypatch):
    path = CORPUS / name
    if not path.exists():
        pytest.skip("corpus not available")
    whole, streamed = _both(path, monkeypatch)
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
