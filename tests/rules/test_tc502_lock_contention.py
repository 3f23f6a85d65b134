"""TC502 lock-contention: acquire waits counted, hand-offs not; critical thread and GIL; corpus."""

from __future__ import annotations

from conftest import corpus
from ruletest import findings_for
from sampled_files import BOOT, collapsed, source
from traceclass.ingest import load
from traceclass.ingest.sourcelines import attach_source_lines

APP = source({10: "total += step()", 25: "with LOCK:", 26: "LOCK.acquire()", 40: "item = jobs.get()",
              41: "worker.join()", 50: "main()"})
MAIN = "thread (100): MainThread;<module> (app.py:50)"


def test_blocked_worker_is_reported_at_its_lock_line(tmp_path):
    t = collapsed(tmp_path, [
        (f"{MAIN};loop (app.py:10)", 90),
        (f"{MAIN};shutdown (app.py:41)", 10),  # MainThread waits 10 samples for other threads
        (f"thread (101): writer;{BOOT};flush (app.py:25)", 50),
        (f"thread (101): writer;{BOOT};flush (app.py:26)", 10),
        (f"thread (102): consumer;{BOOT};consume (app.py:40)", 100),  # queue.get: a hand-off, not contention
    ], {"app.py": APP})
    (f,) = findings_for(t, "TC502")
    assert f.location == "flush (app.py)"
    assert f.values["wait_value"] == 60 and f.values["line"] == 25
    assert f.values["wait_pct_of_run"] == 60.0  # 60 against MainThread's 100 samples
    assert f.values["wait_ns"] == 600_000_000 and f.values["critical_wait_ns"] == 0
    # off the critical thread: recoverable only up to the 10 samples MainThread waited for other threads
    assert f.values["critical_handoff_ns"] == 100_000_000 and f.recoverable_ns == 100_000_000
    assert f.severity == "high"  # 10 of 100
    assert "writer (tid 101) waits 600 ms (60 samples) to acquire a lock at app.py:25" in f.message
    assert "the critical thread does not wait here" in f.message
    assert "idle" not in f.message  # the consumer's 100 waiting samples show idle samples were kept
    assert [(e.source, e.count) for e in f.evidence] == [("app.py:25", 50), ("app.py:26", 10)]
    assert "critical section" in f.fix


def test_a_blocked_worker_nobody_waits_for_recovers_nothing(tmp_path):
    t = collapsed(tmp_path, [(f"{MAIN};loop (app.py:10)", 100), (f"thread (101): writer;{BOOT};flush (app.py:25)", 100)],
                  {"app.py": APP})
    (f,) = findings_for(t, "TC502")
    assert f.values["wait_pct_of_run"] == 100.0 and f.recoverable_ns == 0 and f.severity == "low"


def test_hand_offs_and_small_waits_are_silent(tmp_path):
    t = collapsed(tmp_path, [
        (f"{MAIN};loop (app.py:10)", 100),
        (f"{MAIN};shutdown (app.py:41)", 50),  # join: waiting for another thread's work
        (f"thread (102): consumer;{BOOT};consume (app.py:40)", 150),
        (f"thread (102): consumer;{BOOT};Queue.get (queue.py:171);Condition.wait (threading.py:320)", 150),
        (f"thread (101): writer;{BOOT};flush (app.py:25)", 8),  # 5.3 % of MainThread's 150 but 8 samples
    ], {"app.py": APP})
    assert findings_for(t, "TC502") == []
    (f,) = findings_for(t, "TC502", min_samples_count=8, min_time_ms=80)
    assert f.values["wait_value"] == 8 and round(f.values["wait_pct_of_run"], 2) == 5.33


def test_critical_thread_waiting_on_a_lock_is_high(tmp_path):
    t = collapsed(tmp_path, [
        (f"{MAIN};loop (app.py:10)", 80),
        (f"{MAIN};save (app.py:25)", 20),
    ], {"app.py": APP})
    (f,) = findings_for(t, "TC502")
    assert f.values["critical_wait_ns"] == 200_000_000 and f.severity == "high"
    assert "MainThread (tid 100) waits 200 ms (20 samples)" in f.message
    assert "the critical thread waits 200 ms (20 samples) of it" in f.message


def test_unknown_idle_sampling_is_said(tmp_path):
    t = collapsed(tmp_path, [(f"{MAIN};loop (app.py:10)", 100), (f"thread (101): writer;{BOOT};flush (app.py:25)", 20)],
                  {"app.py": APP})
    (f,) = findings_for(t, "TC502")
    assert "does not say whether idle samples were kept" in f.message


def test_gil_waits_get_the_gil_advice(tmp_path):
    t = collapsed(tmp_path, [
        (f"{MAIN};loop (app.py:10)", 100),
        (f"thread (101): parser;{BOOT};parse (app.py:10);take_gil (libpython3.11.so.1.0)", 40),
    ], {"app.py": APP})
    (f,) = findings_for(t, "TC502")
    assert f.values["gil_wait_ns"] == 400_000_000 and "GIL" in f.fix
    assert "100% is GIL waiting" in f.message


def test_corpus_lock_waiter():
    t = attach_source_lines(load(corpus("pyspy", "cpu_lock.idle_threads.raw.txt")), [corpus("pyspy", "workloads")])
    (f,) = findings_for(t, "TC502")
    assert f.location == "waiter (cpu_lock.py)" and f.values["line"] == 19
    assert f.evidence[0].source == "cpu_lock.py:19"
    assert f.values["wait_value"] == 306  # lock-waiter: every sample
    assert round(f.values["wait_pct_of_run"], 2) == round(100 * 306 / 310, 2)  # MainThread: 310 samples
    assert "lock-waiter (tid 13580)" in f.message and f.values["critical_wait_ns"] == 0
    # MainThread waits for the other threads only in its final join: 4 samples
    assert f.recoverable_ns == 40_000_000 and f.severity == "low"
    # recorded with --idle, inferred from the waiting threads: no caveat
    assert "idle" not in f.message


def test_corpus_without_idle_samples_is_below_the_floor():
    t = attach_source_lines(load(corpus("pyspy", "cpu_lock.default.raw.txt")), [corpus("pyspy", "workloads")])
    assert findings_for(t, "TC502") == []  # 13 lock samples survive without --idle
