"""Inputs that are almost right: a speedscope file with one unusable profile, py-spy dump
snapshots, binary nsys reports without nsys, XLA XPlane files, Kineto JSON with a stray byte."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import corpus
from kineto_builder import KinetoBuilder
from traceclass.analysis.cpu_profile import profile_samples
from traceclass.errors import TraceFormatError
from traceclass.ingest import load

DATA = Path(__file__).resolve().parent.parent / "data" / "pyspy"


# ------------------------------------------------------------ mixed speedscope files

def _with_extra_profile(tmp_path, profile: dict) -> tuple[Path, Path]:
    src = corpus("pyspy", "cpu_lock.idle_threads.speedscope.json")
    doc = json.loads(src.read_bytes())
    doc["profiles"].insert(1, profile)
    p = tmp_path / "mixed.speedscope.json"
    p.write_text(json.dumps(doc))
    return src, p


CONTEXT_SWITCHES = {"type": "sampled", "name": "context switches", "unit": "none", "startValue": 0,
                    "endValue": 3, "samples": [{"cpu": 0, "prev": 12}, {"cpu": 1, "prev": 9}, {"cpu": 0, "prev": 3}],
                    "weights": [1, 1, 1]}


def test_unusable_profile_is_skipped_and_named(tmp_path):
    src, p = _with_extra_profile(tmp_path, CONTEXT_SWITCHES)
    whole, mixed = load(src), load(p)
    assert int(mixed.samples.count.sum()) == int(whole.samples.count.sum())
    assert len(mixed.threads) == len(whole.threads)
    skipped = [n for n in mixed.notes if n.startswith("skipped")]
    assert len(skipped) == 1 and "'context switches'" in skipped[0] and "not a list of frame indices" in skipped[0]
    a, b = profile_samples(whole), profile_samples(mixed)
    assert [(h.function, h.line, h.self_value) for h in a.hot_spots] == \
           [(h.function, h.line, h.self_value) for h in b.hot_spots]
    # the skipped profile's unit ('none') does not turn the others unitless
    assert "weight_unit" not in mixed.meta and mixed.sampling.interval_ns == 10_000_000


def test_weights_mismatch_profile_skipped_too(tmp_path):
    bad = dict(CONTEXT_SWITCHES, name="broken", samples=[[0], [1]], weights=[1.0])
    _src, p = _with_extra_profile(tmp_path, bad)
    notes = [n for n in load(p).notes if n.startswith("skipped")]
    assert notes and "'broken'" in notes[0] and "1 weights for 2 samples" in notes[0]


def test_file_with_only_unusable_profiles_is_still_rejected(tmp_path):
    doc = {"$schema": "https://www.speedscope.app/file-format-schema.json", "shared": {"frames": [{"name": "a"}]},
           "profiles": [CONTEXT_SWITCHES]}
    p = tmp_path / "only.speedscope.json"
    p.write_text(json.dumps(doc))
    with pytest.raises(TraceFormatError) as exc:
        load(p)
    assert "context switches" in str(exc.value) and "not a list of frame indices" in str(exc.value)


# ------------------------------------------------------------ py-spy dump, XPlane, nsys-rep

@pytest.mark.parametrize("name", ["cpu_lock.dump.txt", "cpu_lock.dump_locals.txt", "cpu_lock.dump.json"])
def test_pyspy_dump_says_what_it_is(name):
    with pytest.raises(TraceFormatError) as exc:
        load(DATA / name)
    msg = str(exc.value)
    assert "`py-spy dump` snapshot" in msg and "py-spy record" in msg and "\n" not in msg


def test_collapsed_text_starting_like_a_process_is_not_a_dump(tmp_path):
    p = tmp_path / "x.txt"
    p.write_text('process 12:"python a.py";main (a.py:1) 5\n')
    assert load(p).source.format == "collapsed"


def test_xplane_is_named(tmp_path):
    p = tmp_path / "host.xplane.pb"
    p.write_bytes(b"\n\x05/host\x12\x03abc" + bytes(range(256)))
    with pytest.raises(TraceFormatError) as exc:
        load(p)
    assert "JAX/XLA profile" in str(exc.value) and "not supported yet" in str(exc.value)


def _nsys_message(tmp_path, name: str) -> tuple[str, Path]:
    p = tmp_path / name
    p.write_bytes(b"QDSTRM\x00\x01\x02binary")
    env = dict(os.environ, PATH=str(tmp_path))  # no nsys there
    r = subprocess.run([sys.executable, "-m", "traceclass", "analyze", str(p)], capture_output=True, text=True, env=env)
    assert r.returncode == 2
    return r.stderr.strip(), p


@pytest.mark.parametrize("name", ["report1.nsys-rep", "my  run\tA.nsys-rep", "it's (1).qdrep"])
def test_nsys_rep_without_nsys_keeps_the_exact_export_command(tmp_path, name):
    msg, p = _nsys_message(tmp_path, name)
    cmd = msg.split("`")[3]
    assert cmd.startswith("nsys export --type sqlite --output report.sqlite ")
    # the shell reads the quoted path back byte for byte
    word = cmd[len("nsys export --type sqlite --output report.sqlite "):]
    back = subprocess.run(["bash", "-c", f"printf %s {word}"], capture_output=True).stdout.decode()
    assert back == str(p)


# ------------------------------------------------------------ invalid UTF-8 in Kineto JSON

def _kineto_bytes() -> bytes:
    b = KinetoBuilder(gpu_name=None)
    b.op("aten::mm", 0, 1_000)
    b.op("NAME_A", 2_000, 3_000)
    b.op("aten::add", 4_000, 5_000)
    return json.dumps(b.to_dict()).encode()


def test_stray_byte_in_a_name_is_replaced_and_counted(tmp_path):
    data = _kineto_bytes().replace(b"NAME_A", b"bad\xffname\xfe")
    p = tmp_path / "stray.json"
    p.write_bytes(data)
    t = load(p)
    assert t.source.format == "kineto" and len(t.ops) == 3
    names = [t.strings[c] for c in t.ops.name]
    assert "bad\ufffdname\ufffd" in names
    assert "input repaired: 2 invalid UTF-8 bytes in event strings replaced by U+FFFD" in t.notes


def test_stray_byte_in_a_category_still_loads(tmp_path):
    data = _kineto_bytes()
    i = data.index(b'"cpu_op"')
    data = data[: i + 4] + b"\xc3" + data[i + 4:]  # a lone lead byte inside "cpu_op"
    p = tmp_path / "cat.json"
    p.write_bytes(data)
    t = load(p)
    assert t.source.format == "kineto"
    assert any("1 invalid UTF-8 byte in event strings" in n for n in t.notes)
    assert len(t.ops) == 2  # the event whose category was damaged is no longer a cpu_op


def test_rejected_event_is_located_by_byte_offset(tmp_path):
    data = _kineto_bytes()
    i = data.index(b'"name": "aten::add"')
    j = data.index(b'"ts": ', i) + len(b'"ts": ')
    data = data[:j] + b"1e999" + data[j + data[j:].index(b","):]  # a ts beyond float range
    p = tmp_path / "range.json"
    p.write_bytes(data)
    with pytest.raises(TraceFormatError) as exc:
        load(p)
    msg = str(exc.value)
    start = data.rindex(b"{", 0, j)
    assert f"invalid event starting at byte {start:,} of the JSON text" in msg
    assert "near event" not in msg
