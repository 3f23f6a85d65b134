"""TC505 startup-dominated: import share, the lines and modules behind it, bytecode compilation; corpus."""

from __future__ import annotations

from conftest import corpus
from ruletest import findings_for
from sampled_files import IMPORT, collapsed, source
from traceclass.ingest import load

APP = source({1: "import torch", 2: "import numpy as np", 10: "total += step()", 50: "main()"})
MAIN = "thread (100): MainThread"
COMPILE = ("SourceFileLoader.get_code (<frozen importlib._bootstrap_external>:1074);"
           "_compile_bytecode (<frozen importlib._bootstrap_external>:729)")


def test_imports_dominate_a_short_run(tmp_path):
    t = collapsed(tmp_path, [
        (f"{MAIN};<module> (app.py:1);{IMPORT};<module> (torch/__init__.py:1235);{IMPORT};"
         "<module> (torch/_tensor.py:20)", 50),
        (f"{MAIN};<module> (app.py:1);{IMPORT};<module> (torch/__init__.py:1235);{IMPORT};{COMPILE}", 10),
        (f"{MAIN};<module> (app.py:2);{IMPORT};<module> (numpy/__init__.py:130)", 20),
        (f"{MAIN};<module> (app.py:50);main (app.py:10)", 120),
    ], {"app.py": APP})
    (f,) = findings_for(t, "TC505")
    assert f.location == "import start-up"
    assert f.values["startup_value"] == 80 and f.values["startup_pct"] == 40.0
    assert f.recoverable_ns == 800_000_000 and f.severity == "high"
    assert f.values["bytecode_compile_value"] == 10
    assert ("imports take 800 ms (80 samples), 40.0% of the critical thread's 2 s (200 samples) (threshold 20%): "
            "torch from app.py:1, 600 ms (60 samples); numpy from app.py:2, 200 ms (20 samples); "
            "12% of it compiles bytecode") in f.message
    assert [(e.source, e.count, e.values["modules"]) for e in f.evidence] == [
        ("app.py:1", 60, ["torch"]), ("app.py:2", 20, ["numpy"])]
    assert "lazy" in f.estimate and "LazyLoader" in f.fix


def test_a_long_run_is_not_start_up_dominated(tmp_path):
    t = collapsed(tmp_path, [
        (f"{MAIN};<module> (app.py:1);{IMPORT};<module> (torch/__init__.py:1235)", 60),
        (f"{MAIN};<module> (app.py:50);main (app.py:10)", 300),
    ], {"app.py": APP})
    assert findings_for(t, "TC505") == []  # 60 of 360 = 16.7 %, 600 ms
    (f,) = findings_for(t, "TC505", min_startup_pct=16)
    assert round(f.values["startup_pct"], 2) == 16.67


def test_imports_on_another_thread_are_not_the_run_s_start_up(tmp_path):
    t = collapsed(tmp_path, [
        (f"{MAIN};<module> (app.py:50);main (app.py:10)", 100),
        ("thread (101): loader;Thread._bootstrap (threading.py:1002);Thread._bootstrap_inner (threading.py:1045);"
         f"Thread.run (threading.py:982);warm (app.py:2);{IMPORT};<module> (numpy/__init__.py:130)", 100),
    ], {"app.py": APP})
    assert findings_for(t, "TC505") == []


def test_corpus_torch_train():
    (f,) = findings_for(load(corpus("pyspy", "torch_train.default.raw.txt")), "TC505")
    assert f.values["startup_value"] == 380 and f.values["run_value"] == 795
    assert round(f.values["startup_pct"], 1) == 47.8  # the measured share of `import torch` and friends
    assert f.values["bytecode_compile_value"] == 73
    lines = [(e.source, e.values["modules"][0]) for e in f.evidence[:2]]
    assert lines == [("torch_train.py:3", "torch"), ("torch_train.py:8", "torch._dynamo")]  # SGD imports dynamo
    assert [e.count for e in f.evidence[:2]] == [196, 184]
    assert f.recoverable_ns == 3_800_000_000  # at py-spy's default 100 Hz
    (g,) = findings_for(load(corpus("pyspy", "torch_train.default.speedscope.json")), "TC505")
    assert g.recoverable_ns == 3_610_000_000 and round(g.values["startup_pct"], 1) == 45.1  # 361 of 801 samples


def test_corpus_short_imports_are_silent():
    for name in ("cpu_lock.idle_threads.raw.txt", "sleep_io.idle.raw.txt", "parent.subprocesses.raw.txt"):
        assert findings_for(load(corpus("pyspy", name)), "TC505") == [], name


def test_short_start_up_below_half_a_second_is_silent(tmp_path):
    t = collapsed(tmp_path, [
        (f"{MAIN};<module> (app.py:2);{IMPORT};<module> (numpy/__init__.py:130)", 40),
        (f"{MAIN};<module> (app.py:50);main (app.py:10)", 60),
    ], {"app.py": APP})
    assert findings_for(t, "TC505") == []  # 40 % but 400 ms at 100 Hz
    assert findings_for(t, "TC505", min_time_ms=400)[0].values["startup_pct"] == 40.0
