"""TC504 serialization-on-critical-thread: json frames, C codecs seen from the calling line, threads."""

from __future__ import annotations

from conftest import corpus
from ruletest import findings_for
from sampled_files import BOOT, collapsed, source
from traceclass.ingest import load

APP = source({10: "total += step()", 15: "line = json.dumps(metrics)", 16: "blob = pickle.dumps(state)",
              17: "torch.save(model.state_dict(), path)", 50: "main()"})
MAIN = "thread (100): MainThread;<module> (app.py:50)"
JSON = ("dumps (json/__init__.py:231);JSONEncoder.encode (json/encoder.py:200);"
        "JSONEncoder.iterencode (json/encoder.py:258)")


def test_json_in_the_loop(tmp_path):
    t = collapsed(tmp_path, [
        (f"{MAIN};loop (app.py:10)", 70),
        (f"{MAIN};loop (app.py:10);log (app.py:15);{JSON}", 30),
    ], {"app.py": APP})
    (f,) = findings_for(t, "TC504")
    assert f.location == "log (app.py)" and f.values["serializer"] == "json"
    assert f.values["value"] == 30 and f.values["pct_of_run"] == 30.0 and f.recoverable_ns == 300_000_000
    assert ("Serialization with json on thread MainThread (tid 100) (the critical thread): 300 ms (30 samples) "
            "in log at app.py:15 (in JSONEncoder.iterencode (json/encoder.py:258))") in f.message
    assert "orjson" in f.fix and f.evidence[0].source == "app.py:15"


def test_c_codec_is_seen_from_the_calling_line(tmp_path):
    t = collapsed(tmp_path, [
        (f"{MAIN};loop (app.py:10)", 60),
        (f"{MAIN};checkpoint (app.py:16)", 25),  # pickle.dumps runs in C: the line is the leaf
        (f"{MAIN};checkpoint (app.py:17);save (torch/serialization.py:850);_save (torch/serialization.py:1100)", 15),
    ], {"app.py": APP})
    (f,) = findings_for(t, "TC504")
    assert f.location == "checkpoint (app.py)" and f.values["value"] == 40
    assert f.values["serializer"] == "pickle"  # the larger part, 25 samples at app.py:16
    assert [(e.source, e.count) for e in f.evidence] == [("app.py:16", 25), ("app.py:17", 15)]
    assert "pickle.HIGHEST_PROTOCOL" in f.fix


def test_serializing_on_a_writer_thread_or_a_little_is_silent(tmp_path):
    t = collapsed(tmp_path, [
        (f"{MAIN};loop (app.py:10)", 96),
        (f"{MAIN};loop (app.py:10);log (app.py:15);{JSON}", 4),  # 4 % on the critical thread
        (f"thread (101): writer;{BOOT};log (app.py:15);{JSON}", 100),
    ], {"app.py": APP})
    assert findings_for(t, "TC504") == []
    (f,) = findings_for(t, "TC504", min_share_pct=4, min_samples_count=4, min_time_ms=40)
    assert f.values["value"] == 4  # the writer thread's 100 samples are not counted


def test_corpus_workloads_do_not_serialize():
    for name in ("cpu_lock.idle_threads.raw.txt", "torch_train.default.raw.txt", "sleep_io.idle.raw.txt"):
        assert findings_for(load(corpus("pyspy", name)), "TC504") == []
