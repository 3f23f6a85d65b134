"""speedscope files: py-spy's per-thread sampled profiles and the spec's own test files."""

from __future__ import annotations

import json

import numpy as np
import pytest

from conftest import corpus
from sampled_oracle import self_and_total, speedscope_sampled
from traceclass.analysis.cpu_profile import profile_samples
from traceclass.render.cpu_markdown import cpu_profile_markdown
from traceclass.render.cpu_verdict import cpu_verdict
from traceclass.report.cpu import cpu_section
from traceclass.errors import TraceFormatError
from traceclass.ingest import load
from traceclass.ingest.frametext import parse_pseudo

PYSPY_SPEEDSCOPE = [
    "cpu_lock.default.speedscope.json",
    "cpu_lock.idle.speedscope.json",
    "cpu_lock.idle_threads.speedscope.json",
    "cpu_lock.rate10.speedscope.json",
    "parent.subprocesses.speedscope.json",
    "sleep_io.default.speedscope.json",
    "sleep_io.idle_threads.speedscope.json",
    "torch_train.default.speedscope.json",
]


@pytest.mark.parametrize("name", PYSPY_SPEEDSCOPE)
def test_pyspy_profiles_match_plain_json(name):
    path = corpus("pyspy", name)
    stacks, per_profile = speedscope_sampled(path)
    want_self, want_total, grand = self_and_total(stacks)
    tr = load(path)
    assert tr.source.format == "pyspy-speedscope" and tr.source.producer == "py-spy@0.4.3"
    # one thread per profile, sample counts kept
    assert len(tr.threads) == len(per_profile)
    counts = np.bincount(tr.samples.thread, weights=tr.samples.count, minlength=len(tr.threads))
    assert sorted(counts.astype(int).tolist()) == sorted(per_profile.values())
    rate = 10 if "rate10" in name else 100
    assert tr.sampling.interval_ns == 1_000_000_000 // rate
    assert not tr.sampling.timed
    assert any("not time-aligned" in n for n in tr.notes)
    prof = profile_samples(tr)
    assert prof.unit == "ns" and prof.samples == sum(per_profile.values())
    assert prof.total_ns == pytest.approx(grand * 1e9)
    for h in prof.hot_spots:
        key = f"{h.function} ({h.file}:{h.line})" if h.line else (f"{h.function} ({h.file})" if h.file else h.function)
        assert h.self_ns == pytest.approx(want_self[key] * 1e9, abs=1), key
        assert h.total_ns == pytest.approx(want_total[key] * 1e9, abs=1), key
        assert h.self_pct == pytest.approx(100 * want_self[key] / grand)
    top_want = sorted(want_self.values(), reverse=True)[:5]
    assert [h.self_ns for h in prof.hot_spots[:5]] == pytest.approx([w * 1e9 for w in top_want], abs=1)


def test_thread_names_and_pseudo_frames_stripped():
    tr = load(corpus("pyspy", "cpu_lock.idle_threads.speedscope.json"))
    names = sorted(tr.strings[int(n)] for n in tr.threads.name)
    assert names == ["MainThread", "lock-waiter", "sleeper-io"]
    assert not any(parse_pseudo(tr.strings[int(f)]) for f in tr.frames.function)
    tr = load(corpus("pyspy", "parent.subprocesses.speedscope.json"))
    assert sorted(set(tr.threads.pid.tolist())) == [16548, 16553, 16554]
    tr = load(corpus("pyspy", "sleep_io.default.speedscope.json"))
    assert tr.strings[int(tr.threads.name[0])] == ""  # never imported threading


def test_sample_order_kept_as_runs():
    path = corpus("pyspy", "cpu_lock.idle.speedscope.json")
    d = json.loads(path.read_text())
    tr = load(path)
    # rows are runs of equal consecutive samples: expanding them gives the file's sequence
    prof0 = d["profiles"][0]
    t0 = [i for i in range(len(tr.threads)) if tr.threads.tid[i] == 13903][0]
    rows = np.flatnonzero(tr.samples.thread == t0)
    leaf_frames = []
    for r in rows:
        node = int(tr.samples.node[r])
        if node < 0:
            continue
        f = int(tr.stacks.frame[node])
        leaf_frames += [(tr.strings[int(tr.frames.function[f])], int(tr.frames.line[f]))] * int(tr.samples.count[r])
    frames = d["shared"]["frames"]
    want = [(frames[s[-1]]["name"], frames[s[-1]]["line"]) for s in prof0["samples"] if s]
    assert leaf_frames == want


def test_evented_spec_file():
    for name in ("simple.speedscope.json", "simple-no-pretty-print.speedscope.json"):
        tr = load(corpus("speedscope", "speedscope", "0.0.1", name))
        # unit "none" is not time: no timed frames (they would read as ns), no time bounds
        assert len(tr.python) == 0 and tr.time_bounds() is None
        # the frames' self values in event order: c 0-2, d 2-6, c 6-9, b 9-14
        s = tr.samples
        leaf = [tr.strings[int(tr.frames.function[tr.stacks.frame[n]])] for n in s.node]
        assert list(zip(leaf, s.weight_ns.tolist())) == [("c", 2), ("d", 4), ("c", 3), ("b", 5)]
        prof = profile_samples(tr)
        assert prof.unit == "units" and prof.from_intervals and prof.total_ns is None
        assert prof.weight_unit == "none" and prof.includes_idle_basis == "unitless"
        got_self = {h.function: h.self_value for h in prof.hot_spots}
        assert got_self == {"b": 5, "c": 5, "d": 4}
        assert tr.meta["weight_unit"] == "none" and tr.meta["samples_from"] == "intervals"
        md = cpu_profile_markdown(cpu_section(prof))
        assert "- Source: `speedscope` evented frames; 1 thread; 14 units of frame self value (not time)." in md
        assert " ns" not in md and "µs" not in md


def test_unknown_unit_is_read_as_none_and_bytes_kept(tmp_path):
    frames = [{"name": "a"}, {"name": "b"}]
    prof = {"type": "sampled", "name": "p", "unit": "<b>parsecs</b>", "startValue": 0, "endValue": 3,
            "samples": [[0], [0, 1]], "weights": [1, 2]}
    p = tmp_path / "u.speedscope.json"
    p.write_text(json.dumps(_doc([prof], frames)))
    tr = load(p)
    assert tr.meta["weight_unit"] == "none"
    assert "1 unit name(s) not in the speedscope spec: read as 'none'" in tr.notes
    p.write_text(json.dumps(_doc([dict(prof, unit="bytes")], frames)))
    cpu = profile_samples(load(p))
    assert cpu.weight_unit == "bytes" and cpu.unit == "units" and cpu.total_value == 3
    assert cpu_verdict(cpu_section(cpu)) == ("CPU profile: 100% of profile weight (bytes) is native/other code (not Python); "
                             "the heaviest frame is b with 67%.")
    assert "total weight 3 bytes (not time)" in cpu_profile_markdown(cpu_section(cpu))


def test_sampled_spec_files():
    tr = load(corpus("speedscope", "speedscope", "0.1.2", "simple-sampled.speedscope.json"))
    prof = profile_samples(tr)
    assert prof.unit == "ns" and prof.total_ns == 14 * 10**9
    assert tr.sampling.interval_ns is None  # unequal weights: no single rate
    assert {h.function: h.self_ns for h in prof.hot_spots} == {"c": 5 * 10**9, "b": 5 * 10**9, "d": 4 * 10**9}
    tr = load(corpus("speedscope", "speedscope", "0.6.0", "two-sampled.speedscope.json"))
    assert [tr.strings[int(n)] for n in tr.threads.name] == ["one", "two"]
    assert int(tr.samples.weight_ns.sum()) == 28 * 10**9


def test_invalid_files_decided():
    # an O never closed: repaired, closed at the profile's endValue, and said so
    tr = load(corpus("speedscope", "speedscope", "invalid", "incomplete-trace.json"))
    # unit none: the frame left open is closed at the profile's end, 100 units
    assert len(tr.python) == 0 and tr.samples.weight_ns.tolist() == [100]
    assert any("never closed" in n for n in tr.notes)
    # closing a frame that is not on top: rejected, as speedscope does
    with pytest.raises(TraceFormatError, match="LIFO"):
        load(corpus("speedscope", "speedscope", "invalid", "out-of-order-events.json"))


def _doc(profiles, frames=({"name": "a"}, {"name": "b"})):
    return {
        "$schema": "https://www.speedscope.app/file-format-schema.json",
        "shared": {"frames": list(frames)},
        "profiles": profiles,
    }


@pytest.mark.parametrize(
    "doc, message",
    [
        (_doc([{"type": "sampled", "name": "p", "unit": "seconds", "startValue": 0, "endValue": 1,
                "samples": [[0, 1], [0]], "weights": [1]}]), "1 weights for 2 samples"),
        (_doc([{"type": "sampled", "name": "p", "unit": "seconds", "startValue": 0, "endValue": 1,
                "samples": [[0, 7]], "weights": [1]}]), "refers to frame 7"),
        (_doc([{"type": "sampled", "name": "p", "unit": "seconds", "startValue": 0, "endValue": 1,
                "samples": [[0]], "weights": [-1]}]), "negative"),
        (_doc([{"type": "sampled", "name": "p", "unit": "seconds", "startValue": 0, "endValue": 1,
                "samples": [["x"]], "weights": [1]}]), "not a list of frame indices"),
        (_doc([{"type": "evented", "name": "p", "unit": "none", "startValue": 0, "endValue": 9,
                "events": [{"type": "O", "frame": 0, "at": 5}, {"type": "C", "frame": 0, "at": 4}]}]), "back in time"),
        (_doc([{"type": "evented", "name": "p", "unit": "none", "startValue": 0, "endValue": 9,
                "events": [{"type": "C", "frame": 0, "at": 1}]}]), "no frame is open"),
        (_doc([{"type": "evented", "name": "p", "unit": "none", "startValue": 0, "endValue": 9,
                "events": [{"type": "X", "frame": 0, "at": 1}]}]), "expected 'O' or 'C'"),
        (_doc([]), 'no "profiles"'),
        ({"$schema": "https://www.speedscope.app/file-format-schema.json", "profiles": [{}]}, "shared.frames"),
        (_doc([{"type": "sampled", "name": "p", "unit": "seconds", "startValue": 0, "endValue": 0,
                "samples": [], "weights": []}]), "no samples and no events"),
    ],
)
def test_hostile_speedscope(tmp_path, doc, message):
    p = tmp_path / "x.speedscope.json"
    p.write_text(json.dumps(doc))
    with pytest.raises(TraceFormatError) as exc:
        load(p)
    assert message in str(exc.value)


def test_truncated_speedscope_is_clean(tmp_path):
    data = corpus("pyspy", "cpu_lock.default.speedscope.json").read_bytes()
    p = tmp_path / "cut.json"
    p.write_bytes(data[: len(data) // 2])
    with pytest.raises(TraceFormatError):
        load(p)


def test_pretty_printed_samples_decode(tmp_path):
    d = json.loads(corpus("pyspy", "cpu_lock.idle.speedscope.json").read_text())
    p = tmp_path / "pretty.json"
    p.write_text(json.dumps(d, indent=3))
    a = profile_samples(load(corpus("pyspy", "cpu_lock.idle.speedscope.json")))
    b = profile_samples(load(p))
    assert [(h.function, h.line, h.self_ns) for h in a.hot_spots] == [(h.function, h.line, h.self_ns) for h in b.hot_spots]
