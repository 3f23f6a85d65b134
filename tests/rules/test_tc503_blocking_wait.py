"""TC503 blocking-wait: sleep and I/O on the critical thread only; which thread is critical; corpus."""

from __future__ import annotations

from conftest import corpus
from ruletest import findings_for
from sampled_files import BOOT, collapsed, source, speedscope
from traceclass.ingest import load
from traceclass.ingest.sourcelines import attach_source_lines

APP = source({5: "time.sleep(0.1)", 6: "data = f.read()", 7: "os.fsync(f.fileno())", 10: "total += step()",
              41: "worker.join()", 50: "main()"})
MAIN = "thread (100): MainThread;<module> (app.py:50)"


def test_sleep_and_io_on_the_main_thread(tmp_path):
    t = collapsed(tmp_path, [
        (f"{MAIN};loop (app.py:10)", 50),
        (f"{MAIN};loop (app.py:10);poll (app.py:5)", 30),
        (f"{MAIN};loop (app.py:10);load (app.py:6)", 12),
        (f"{MAIN};loop (app.py:10);load (app.py:7)", 8),
    ], {"app.py": APP})
    sleep, io = findings_for(t, "TC503")
    assert sleep.location == "poll (app.py) sleep" and io.location == "load (app.py) io"
    assert sleep.values["wait_value"] == 30 and sleep.values["wait_pct_of_run"] == 30.0
    assert sleep.recoverable_ns == 300_000_000 and sleep.severity == "high"
    assert "Sleeping on thread MainThread (tid 100) (the critical thread): 300 ms (30 samples) in poll at app.py:5" \
        in sleep.message
    assert "threading.Event" in sleep.fix
    assert io.values["wait_value"] == 20 and io.values["line"] == 6  # lines 6 and 7 of one function
    assert [(e.source, e.count) for e in io.evidence] == [("app.py:6", 12), ("app.py:7", 8)]
    assert "and 1 more line" in io.message and "num_workers" in io.fix


def test_a_background_thread_that_sleeps_is_not_critical(tmp_path):
    t = collapsed(tmp_path, [
        (f"{MAIN};loop (app.py:10)", 100),
        (f"thread (101): logger;{BOOT};poll (app.py:5)", 90),
        (f"thread (101): logger;{BOOT};load (app.py:6)", 10),
    ], {"app.py": APP})
    assert findings_for(t, "TC503") == []


def test_main_thread_that_only_joins_hands_criticality_to_the_busiest_thread(tmp_path):
    t = collapsed(tmp_path, [
        (f"{MAIN};shutdown (app.py:41)", 100),  # MainThread waits for the worker: a hand-off
        (f"thread (101): worker;{BOOT};loop (app.py:10)", 60),
        (f"thread (101): worker;{BOOT};poll (app.py:5)", 40),
    ], {"app.py": APP})
    (f,) = findings_for(t, "TC503")
    assert "Sleeping on thread worker (tid 101) (the critical thread)" in f.message
    assert f.values["wait_pct_of_run"] == 40.0  # of the worker's 100 samples


def test_below_share_or_samples_is_silent(tmp_path):
    t = collapsed(tmp_path, [(f"{MAIN};loop (app.py:10)", 400), (f"{MAIN};poll (app.py:5)", 20)], {"app.py": APP})
    assert findings_for(t, "TC503") == []  # 20 of 420 = 4.8 %
    assert len(findings_for(t, "TC503", min_wait_pct=4.7)) == 1


def test_speedscope_thread_without_a_name_is_the_main_thread(tmp_path):
    t = speedscope(tmp_path, {'Thread 9 ""': [(["<module> (app.py:50)", "poll (app.py:5)"], 60),
                                             (["<module> (app.py:50)", "loop (app.py:10)"], 40)]}, {"app.py": APP})
    (f,) = findings_for(t, "TC503")
    assert f.recoverable_ns == 600_000_000 and f.values["wait_pct_of_run"] == 60.0
    assert f.evidence[0].source.endswith("app.py:5")


def _corpus(name):
    return attach_source_lines(load(corpus("pyspy", name)), [corpus("pyspy", "workloads")])


def test_corpus_sleeper_io_is_not_the_critical_thread():
    # sleeper-io sleeps and writes all run long, but MainThread computes: nothing waits on it
    for name in ("cpu_lock.idle_threads.raw.txt", "cpu_lock.idle.speedscope.json", "cpu_lock.idle.raw.txt"):
        assert findings_for(_corpus(name), "TC503") == [], name


def test_corpus_sleep_io():
    sleep, sock = findings_for(_corpus("sleep_io.idle.raw.txt"), "TC503")
    assert sleep.location == "do_sleep (sleep_io.py) sleep" and sleep.evidence[0].source == "sleep_io.py:6"
    assert sleep.values["wait_value"] == 161 and round(sleep.values["wait_pct_of_run"], 1) == 58.3  # of 276
    assert sock.location == "do_socket_wait (sleep_io.py) io" and sock.evidence[0].source == "sleep_io.py:17"
    assert sock.values["wait_value"] == 95 and round(sock.values["wait_pct_of_run"], 1) == 34.4
    # do_disk_io: 19 samples over three lines (6.9 %), under the 20-sample floor
    disk = findings_for(_corpus("sleep_io.idle.raw.txt"), "TC503", min_samples_count=19, min_time_ms=190)[2]
    assert disk.location == "do_disk_io (sleep_io.py) io" and disk.values["wait_value"] == 19
    # without --idle py-spy kept 12 samples of the 3 s run: too few to say anything
    assert findings_for(_corpus("sleep_io.default.raw.txt"), "TC503") == []
    assert findings_for(_corpus("sleep_io.default.speedscope.json"), "TC503") == []
