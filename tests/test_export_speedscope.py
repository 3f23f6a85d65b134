"""speedscope export: every written file obeys the format's rules and reads back the same.

The validator here is written from the format's rules (reference §5), not from the writer.
"""

from __future__ import annotations

import collections
import json
import math
import os

import numpy as np
import pytest

from conftest import corpus
from traceclass.analysis.cpu_profile import profile_samples
from traceclass.cli import main
from traceclass.export.speedscope import build, to_speedscope
from traceclass.ingest import load
from traceclass.model import InputsTable, Ops, SourceInfo, StringTable, Trace

SCHEMA = "https://www.speedscope.app/file-format-schema.json"
UNITS = {"none", "nanoseconds", "microseconds", "milliseconds", "seconds", "bytes"}


def validate(doc: dict) -> dict[str, collections.Counter]:
    """Check the speedscope rules; return self value per frame (name, file, line) per profile."""
    assert doc["$schema"] == SCHEMA
    frames = doc["shared"]["frames"]
    assert isinstance(frames, list)
    for f in frames:
        assert isinstance(f["name"], str)
        assert set(f) <= {"name", "file", "line", "col"}
        if "file" in f:
            assert isinstance(f["file"], str) and f["file"]
        if "line" in f:
            assert isinstance(f["line"], int) and f["line"] > 0
    assert len({(f["name"], f.get("file"), f.get("line")) for f in frames}) == len(frames)
    out: dict[str, collections.Counter] = {}
    key = [(f["name"], f.get("file"), f.get("line")) for f in frames]
    assert doc["profiles"]
    for p in doc["profiles"]:
        assert p["unit"] in UNITS and isinstance(p["name"], str)
        assert p["startValue"] <= p["endValue"]
        self_c: collections.Counter = collections.Counter()
        if p["type"] == "evented":
            stack: list[tuple[int, float]] = []
            last = -math.inf
            for ev in p["events"]:
                at = ev["at"]
                assert at >= last, "at must not decrease"
                last = at
                assert 0 <= ev["frame"] < len(frames)
                if stack:
                    self_c[key[stack[-1][0]]] += at - stack[-1][1]
                    stack[-1] = (stack[-1][0], at)
                if ev["type"] == "O":
                    stack.append((ev["frame"], at))
                else:
                    assert ev["type"] == "C"
                    assert stack and stack[-1][0] == ev["frame"], "close must match the open frame on top"
                    stack.pop()
                    if stack:
                        stack[-1] = (stack[-1][0], at)
            assert not stack, "every O needs its C"
        else:
            assert p["type"] == "sampled"
            assert len(p["samples"]) == len(p["weights"])
            for s, w in zip(p["samples"], p["weights"]):
                assert all(isinstance(i, int) and 0 <= i < len(frames) for i in s)
                assert w >= 0 and math.isfinite(w)
                if s:
                    self_c[key[s[-1]]] += w
        out[p["name"]] = self_c
    return out


def _roundtrip(tmp_path, trace):
    doc, clipped = build(trace)
    self_by_profile = validate(doc)
    p = tmp_path / "out.speedscope.json"
    p.write_text(json.dumps(doc))
    back = load(p)
    assert back.source.format == "speedscope" and back.source.producer.startswith("traceclass@")
    return doc, clipped, self_by_profile, back


def _n_intervals(trace) -> int:
    return len(trace.ops) + len(trace.annotations) + len(trace.python) + len(trace.api) + len(trace.gpu)


def _self_by_frame(trace) -> collections.Counter:
    """Self ns per (function, file, line) straight from the sample rows."""
    s, st, fr = trace.samples, trace.stacks, trace.frames
    out: collections.Counter = collections.Counter()
    for node, w in zip(s.node.tolist(), s.weight_ns.tolist()):
        if node < 0:
            continue
        f = int(st.frame[node])
        fi, ln = int(fr.file[f]), int(fr.line[f])
        out[(trace.strings[int(fr.function[f])], trace.strings[fi] if fi >= 0 else None, ln if ln > 0 else None)] += w
    return out


def _check_evented_roundtrip(doc, back, self_by_profile):
    n_open = sum(1 for p in doc["profiles"] if p["type"] == "evented" for e in p["events"] if e["type"] == "O")
    assert len(back.python) == n_open
    # self time per frame read back equals the validator's, to the nanosecond
    want: collections.Counter = collections.Counter()
    for c in self_by_profile.values():
        want.update(c)
    got = _self_by_frame(back)
    assert set(got) == {k for k, v in want.items() if v > 0}
    for k, ns in got.items():
        assert ns == pytest.approx(want[k] * 1000, abs=2), k


def test_torch_gpu_trace(tmp_path):
    trace = load(corpus("torch", "gpu", "h100_bert-small_inference.json.gz"))
    doc, clipped, self_by_profile, back = _roundtrip(tmp_path, trace)
    gpu = [p for p in doc["profiles"] if p["name"].startswith("GPU ")]
    streams = {(int(d), int(s)) for d, s in zip(trace.gpu.device, trace.gpu.stream)}
    assert len(gpu) == len(streams)
    n_open = sum(1 for p in doc["profiles"] for e in p.get("events", ()) if e["type"] == "O")
    assert n_open == _n_intervals(trace)
    kernels = sum(1 for p in gpu for e in p["events"] if e["type"] == "O")
    assert kernels == len(trace.gpu)
    _check_evented_roundtrip(doc, back, self_by_profile)
    # frames keep file and line of Python frames
    assert any("file" in f and f["file"].endswith(".py") and "line" in f for f in doc["shared"]["frames"])


def test_torch_cpu_trace_with_partial_nesting(tmp_path):
    trace = load(corpus("torch", "cpu", "mixed_stack.step6.pt.trace.json.gz"))
    doc, clipped, self_by_profile, back = _roundtrip(tmp_path, trace)
    assert clipped > 0  # this trace has children that outlive their parent
    assert not any(p["name"].startswith("GPU ") for p in doc["profiles"])
    _check_evented_roundtrip(doc, back, self_by_profile)


def test_pyspy_speedscope_roundtrip(tmp_path):
    trace = load(corpus("pyspy", "cpu_lock.idle_threads.speedscope.json"))
    doc, clipped, self_by_profile, back = _roundtrip(tmp_path, trace)
    assert all(p["type"] == "sampled" and p["unit"] == "seconds" for p in doc["profiles"])
    assert len(doc["profiles"]) == 3 and clipped == 0
    a, b = profile_samples(trace), profile_samples(back)
    assert a.total_ns == b.total_ns
    assert [(h.function, h.file, h.line, h.self_ns, h.total_ns) for h in a.hot_spots] == [
        (h.function, h.file, h.line, h.self_ns, h.total_ns) for h in b.hot_spots
    ]
    # written sample by sample: the rate and the per-thread sample counts survive
    assert back.sampling.interval_ns == trace.sampling.interval_ns == 10_000_000
    d = json.loads(corpus("pyspy", "cpu_lock.idle_threads.speedscope.json").read_text())
    assert sorted(len(p["samples"]) for p in d["profiles"]) == sorted(len(p["samples"]) for p in doc["profiles"])
    assert b.samples == a.samples == 931
    # and in the original order
    for orig, new in zip(sorted(d["profiles"], key=lambda p: p["name"]), sorted(doc["profiles"], key=lambda p: p["name"].split(" (")[0])):
        real = [[i for i in s if d["shared"]["frames"][i].get("file")] for s in orig["samples"]]  # no pseudo-frames
        names_o = [d["shared"]["frames"][s[-1]]["name"] if s else None for s in real]
        names_n = [doc["shared"]["frames"][s[-1]]["name"] if s else None for s in new["samples"]]
        assert names_o == names_n


def test_collapsed_roundtrip_keeps_counts(tmp_path):
    trace = load(corpus("pyspy", "torch_train.threads_idle.raw.txt"))
    doc, _, _, back = _roundtrip(tmp_path, trace)
    assert [p["unit"] for p in doc["profiles"]] == ["none"]  # no sampling rate in collapsed stacks
    a, b = profile_samples(trace), profile_samples(back)
    assert b.unit == "units" and b.total_value == a.total_value == 770
    assert [(h.function, h.line, h.self_value) for h in a.hot_spots] == [(h.function, h.line, h.self_value) for h in b.hot_spots]


def test_chrometrace_exports_frames_not_samples(tmp_path):
    trace = load(corpus("pyspy", "torch_train.default.chrometrace.json"))
    doc, clipped, self_by_profile, back = _roundtrip(tmp_path, trace)
    assert [p["type"] for p in doc["profiles"]] == ["evented"] and clipped == 0
    _check_evented_roundtrip(doc, back, self_by_profile)
    a, b = profile_samples(trace), profile_samples(back)
    assert a.total_ns == b.total_ns
    assert [(h.function, h.line, h.self_ns) for h in a.hot_spots[:10]] == [(h.function, h.line, h.self_ns) for h in b.hot_spots[:10]]


def test_nsys_export(tmp_path):
    path = corpus("nsys", "SamuelAmsih_CUDA__report14.sqlite")
    try:
        trace = load(path)
    except Exception as exc:  # noqa: BLE001 - the nsys reader is another module, maybe not landed
        pytest.skip(f"nsys reader not available yet: {type(exc).__name__}: {exc}")
    doc, clipped, self_by_profile, back = _roundtrip(tmp_path, trace)
    assert sum(1 for p in doc["profiles"] if p["name"].startswith("GPU ")) >= 1
    n_open = sum(1 for p in doc["profiles"] for e in p.get("events", ()) if e["type"] == "O")
    assert n_open == _n_intervals(trace)
    _check_evented_roundtrip(doc, back, self_by_profile)


def _ops_trace(rows):
    strings = StringTable()
    start, end, names = zip(*rows)
    return Trace(
        source=SourceInfo(path="t.json", format="kineto"),
        strings=strings,
        inputs=InputsTable(),
        ops=Ops.build(len(rows), start_ns=start, end_ns=end, pid=[1] * len(rows), tid=[2] * len(rows),
                      name=strings.intern_many(list(names))),
    )


def test_writer_repairs_partial_nesting_and_orders_equal_times():
    # b outlives a; c starts exactly when a ends; d is zero-length at a's end; e nests in c
    trace = _ops_trace([(0, 100, "a"), (50, 150, "b"), (100, 200, "c"), (100, 100, "d"), (120, 130, "e")])
    doc, clipped = build(trace)
    validate(doc)
    assert clipped == 1
    ev = [(e["type"], e["at"], doc["shared"]["frames"][e["frame"]]["name"]) for e in doc["profiles"][0]["events"]]
    # close-before-open at equal times: a and b close at 0.1 µs before c and d open
    assert ev.index(("C", 0.1, "a")) < ev.index(("O", 0.1, "c"))
    assert ("C", 0.1, "b") in ev  # clipped to a's end
    assert to_speedscope(trace)["exporter"].startswith("traceclass@")


def test_cli_export(tmp_path, capsys):
    src = corpus("pyspy", "cpu_lock.default.raw.txt")
    out = tmp_path / "x.speedscope.json"
    assert main(["export", "--to", "speedscope", str(src), "-o", str(out)]) == 0
    validate(json.loads(out.read_text()))
    assert "wrote" in capsys.readouterr().err
    assert sorted(os.listdir(tmp_path)) == ["x.speedscope.json"]  # no temporary file left
    # default name in the current directory
    cwd = os.getcwd()
    try:
        os.chdir(tmp_path)
        assert main(["export", str(src)]) == 0
        assert (tmp_path / "cpu_lock.default.raw.speedscope.json").exists()
    finally:
        os.chdir(cwd)
    # bad input: exit 2 with one line
    capsys.readouterr()
    bad = tmp_path / "bad.txt"
    bad.write_text("not a profile\n")
    assert main(["export", str(bad), "-o", str(tmp_path / "y.json")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("traceclass: ")
    assert not (tmp_path / "y.json").exists()
    # never overwrite the input
    assert main(["export", str(out), "-o", str(out)]) == 2


def test_unitless_evented_profile_keeps_its_unit_and_values(tmp_path):
    """speedscope's unit "none" is not time: the export keeps "none" and the values (no /1000)."""
    trace = load(corpus("speedscope", "speedscope", "0.0.1", "simple.speedscope.json"))
    doc, _, self_by_profile, back = _roundtrip(tmp_path, trace)
    (p,) = doc["profiles"]
    names = [f["name"] for f in doc["shared"]["frames"]]
    assert p["type"] == "sampled" and p["unit"] == "none" and p["endValue"] == 14.0
    assert [[names[i] for i in s] for s in p["samples"]] == [["a", "b", "c"], ["a", "b", "d"], ["a", "b", "c"], ["a", "b"]]
    assert p["weights"] == [2.0, 4.0, 3.0, 5.0]  # event order, the file's own values
    assert self_by_profile[p["name"]] == {("b", None, None): 5, ("c", None, None): 5, ("d", None, None): 4}
    again = profile_samples(back)
    assert again.unit == "units" and again.weight_unit == "none" and again.total_value == 14


def test_profile_names_are_readable(tmp_path):
    doc, _ = build(load(corpus("torch", "gpu", "cuda_event_sync.json.gz")))
    assert [p["name"] for p in doc["profiles"]] == [
        "thread 948300 (python3.10) (pid 948300)", "GPU 0 stream 7", "GPU 0 sync events", "GPU 0 stream 7 sync events"]
    doc, _ = build(load(corpus("torch", "gpu", "a100_nccl_collectives.json.gz")))
    # Kineto's runtime-callback thread id is a 32-bit id written signed (-549452224)
    assert [p["name"] for p in doc["profiles"]] == [
        "pid 2910249, tid 3745515072", "thread 2910249 (pt_main_thread) (pid 2910249)",
        "thread 2919752 (pt_autograd_0) (pid 2910249)", "GPU 0 stream 7", "GPU 0 stream 40"]
    for p in doc["profiles"]:
        assert "-" not in p["name"].replace("pt_", "")


def test_sync_records_without_a_stream_get_their_own_profile():
    try:
        trace = load(corpus("nsys", "p4arth_cuda-perf-sandbox__report1.sqlite"))
    except Exception as exc:  # noqa: BLE001 - the nsys reader is another module
        pytest.skip(f"nsys reader not usable here: {exc}")
    doc, _ = build(trace)
    names = [p["name"] for p in doc["profiles"]]
    assert names == ["vecAdd (pid 1246, tid 1246)", "GPU 0 stream 7", "GPU 0 sync events",
                     "vecAdd (pid 1246, tid 1246) samples", "[NSys] (pid 1246, tid 1276)",
                     "[NSys Comms] (pid 1246, tid 1277)", "CUPTI worker thread (pid 1246, tid 1280)"]
    assert not any("4294967295" in n for n in names)


def test_labels():
    from traceclass.export.speedscope import gpu_label, host_label

    assert host_label("", -1, -1) == "all threads"
    assert host_label("main", -1, 5) == "main (tid 5)"
    assert host_label("", 7, -549452224) == "pid 7, tid 3745515072"
    assert host_label("thread 8 (python)", 7, 8) == "thread 8 (python) (pid 7)"
    assert host_label("worker", 7, 8) == "worker (pid 7, tid 8)"
    assert gpu_label(0, 4294967295, True) == "GPU 0 sync events"
    assert gpu_label(0, -1, False) == "GPU 0 (no stream)"
    assert gpu_label(1, 13, True) == "GPU 1 stream 13 sync events"


def test_mixed_sampled_and_timed_frames_are_not_written_twice(tmp_path):
    frames = [{"name": "a", "file": "/x/a.py", "line": 1}, {"name": "b", "file": "/x/a.py", "line": 2}]
    doc_in = {"$schema": SCHEMA, "shared": {"frames": frames}, "profiles": [
        {"type": "sampled", "name": "s", "unit": "milliseconds", "startValue": 0, "endValue": 3,
         "samples": [[0], [0, 1], [0, 1]], "weights": [1, 1, 1]},
        {"type": "evented", "name": "e", "unit": "milliseconds", "startValue": 0, "endValue": 4,
         "events": [{"type": "O", "at": 0, "frame": 0}, {"type": "O", "at": 1, "frame": 1},
                    {"type": "C", "at": 3, "frame": 1}, {"type": "C", "at": 4, "frame": 0}]},
    ]}
    p = tmp_path / "m.speedscope.json"
    p.write_text(json.dumps(doc_in))
    trace = load(p)
    assert trace.meta["samples_from"] == "mixed" and trace.meta["interval_rows"] == [2, 4]
    doc, _ = build(trace)
    validate(doc)
    kinds = [(q["type"], q["name"]) for q in doc["profiles"]]
    assert kinds == [("evented", "e (tid 1)"), ("sampled", "s (tid 0)")]
    (sampled,) = [q for q in doc["profiles"] if q["type"] == "sampled"]
    # the 3 samples of the sampled profile only (the evented one's derived rows are not repeated)
    assert sampled["weights"] == [0.001, 0.001, 0.001] and sampled["unit"] == "seconds"


def test_cli_export_of_a_unitless_file(tmp_path, capsys):
    out = tmp_path / "u.speedscope.json"
    src = corpus("speedscope", "speedscope", "0.0.1", "simple.speedscope.json")
    assert main(["export", "--to", "speedscope", str(src), "-o", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert [(p["unit"], p["weights"]) for p in doc["profiles"]] == [("none", [2.0, 4.0, 3.0, 5.0])]
    assert "wrote" in capsys.readouterr().err
