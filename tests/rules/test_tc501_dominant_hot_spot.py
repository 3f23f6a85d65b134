"""TC501 dominant-hot-spot: exact shares on hand-built profiles, start-up left out, callers, corpus."""

from __future__ import annotations

from conftest import corpus
from ruletest import findings_for
from sampled_files import BOOT, IMPORT, collapsed, source, speedscope
from traceclass.ingest import load
from traceclass.ingest.sourcelines import attach_source_lines

APP = source({12: "total += score(x)", 13: "x = next_item()", 20: "return sum(v * v for v in vec)",
              25: "with LOCK:", 30: "main()"})
MAIN = "thread (100): MainThread;<module> (app.py:30)"


def test_hot_line_share_of_on_cpu_time_after_start_up(tmp_path):
    t = collapsed(tmp_path, [
        (f"{MAIN};loop (app.py:12)", 70),
        (f"{MAIN};loop (app.py:13)", 20),
        (f"{MAIN};score (app.py:20)", 10),
        (f"thread (100): MainThread;<module> (app.py:1);{IMPORT};<module> (numpy/__init__.py:10)", 100),
        # a thread blocked on a lock: waiting, not on-CPU, and not part of MainThread's time
        (f"thread (101): worker;{BOOT};work (app.py:25)", 150),
    ], {"app.py": APP})
    (f,) = findings_for(t, "TC501")
    assert f.location == "loop (app.py:12)"
    assert f.values["self_pct"] == 70.0  # 70 of 100 on-CPU samples after start-up (imports left out)
    assert f.values["samples_count"] == 70 and f.values["kind"] == "python"
    assert f.recoverable_ns == 70 * 10_000_000  # py-spy's default 100 Hz, collapsed stacks carry no rate
    assert "loop (app.py:12) holds 70% of the on-CPU time after start-up on thread MainThread (tid 100)" in f.message
    assert "700 ms (70 samples) of 1 s (100 samples)" in f.message
    assert f.severity == "high"  # 70 of MainThread's 200 samples
    assert f.evidence[0].source == "app.py:12" and f.evidence[0].count == 70
    assert "py-spy's default --rate 100" in f.estimate and "upper bound" in f.estimate
    assert "vectorise" in f.fix


def test_below_the_share_or_the_sample_floor_is_silent(tmp_path):
    spread = collapsed(tmp_path, [(f"{MAIN};loop (app.py:12)", 29), (f"{MAIN};loop (app.py:13)", 29),
                                  (f"{MAIN};score (app.py:20)", 29), (MAIN, 13)], {"app.py": APP})
    assert findings_for(spread, "TC501") == []  # 29 / 100 < 30 %
    assert [f.values["self_pct"] for f in findings_for(spread, "TC501", min_self_pct=29)] == [29.0] * 3
    few = collapsed(tmp_path, [(f"{MAIN};loop (app.py:12)", 19)], {"app.py": APP}, name="few.raw.txt")
    assert findings_for(few, "TC501") == []  # 100 % but 19 samples < 20
    assert len(findings_for(few, "TC501", min_samples_count=19, min_time_ms=190)) == 1


def test_library_hot_line_names_the_calling_line(tmp_path):
    t = collapsed(tmp_path, [
        (f"{MAIN};train_step (app.py:13);Module._call_impl (torch/nn/modules/module.py:1527);"
         "Linear.forward (torch/nn/modules/linear.py:134)", 60),
        (f"{MAIN};train_step (app.py:12)", 25),
        (MAIN, 15),
    ], {"app.py": APP})
    (f,) = findings_for(t, "TC501")
    assert f.location == "Linear.forward (torch/nn/modules/linear.py:134)"
    assert f.values["kind"] == "native" and f.values["caller"] == "train_step (app.py:13)"
    assert "called from train_step (app.py:13)" in f.message
    assert "torch.set_num_threads" in f.fix
    assert [e.source for e in f.evidence] == ["torch/nn/modules/linear.py:134", "app.py:13"]


def test_line_without_source_text_is_flagged_as_unverified(tmp_path):
    t = collapsed(tmp_path, [(f"{MAIN};loop (gone.py:12)", 80), (f"{MAIN};loop (gone.py:13)", 20)])
    (f,) = findings_for(t, "TC501")
    assert f.values["source_verified"] is False and f.values["kind"] == "unverified" and f.severity == "medium"
    assert f.message.startswith(
        "loop (gone.py:12): time at this line, on-CPU or blocked (the source was not found: pass --source-root DIR), "
        "80% of the time on-CPU or at lines without source after start-up on thread MainThread (tid 100) "
        "(800 ms (80 samples) of 1 s (100 samples); threshold 30%)")
    assert "on-CPU time" not in f.message
    assert f.recoverable_ns == 800_000_000  # on the critical thread: time either way
    assert "waiting less recovers it" in f.estimate and "--source-root" in f.fix
    assert f.evidence[0].what == "MainThread (tid 100): 80.0% of its time on-CPU or at lines without source after start-up"


def test_a_thread_with_lines_without_source_is_measured_with_them(tmp_path):
    # 60 samples at a known compute line, 40 at a line without source: the known line holds 60%
    # of on-CPU-or-unknown time, not 100% of the known on-CPU time
    t = collapsed(tmp_path, [(f"{MAIN};loop (app.py:12)", 60), (f"{MAIN};loop (gone.py:3)", 40)], {"app.py": APP})
    by_loc = {f.location: f for f in findings_for(t, "TC501")}
    assert set(by_loc) == {"loop (app.py:12)", "loop (gone.py:3)"}
    known = by_loc["loop (app.py:12)"]
    assert known.values["self_pct"] == 60.0 and known.values["kind"] == "python"
    assert ("holds 60% of the time on-CPU or at lines without source after start-up on thread MainThread (tid 100) "
            "(600 ms (60 samples) of 1 s (100 samples)") in known.message
    assert by_loc["loop (gone.py:3)"].values["self_pct"] == 40.0


def test_corpus_sleep_io_without_source_is_not_called_on_cpu():
    hot = findings_for(load(corpus("pyspy", "sleep_io.idle.raw.txt")), "TC501")
    assert [(f.location, f.values["samples_count"], f.values["self_pct"], f.values["kind"]) for f in hot] == [
        ("do_sleep (sleep_io.py:6)", 161, 58.55, "unverified"),
        ("do_socket_wait (sleep_io.py:17)", 95, 34.55, "unverified")]
    assert all("on-CPU or blocked" in f.message and "on-CPU time" not in f.message for f in hot)
    # with the source the lines are a sleep and a socket read: no hot spot at all
    t = attach_source_lines(load(corpus("pyspy", "sleep_io.idle.raw.txt")), [corpus("pyspy", "workloads")])
    assert findings_for(t, "TC501") == []


def test_corpus_lock_waiter_without_source_is_no_hot_spot():
    hot = findings_for(load(corpus("pyspy", "cpu_lock.idle.speedscope.json")), "TC501")
    # the lock-waiter's line is inferred blocked, the sleeper's lines too; fib stays unknown
    assert [(f.location, f.values["kind"], f.values["self_pct"]) for f in hot] == [
        ("fib (/workspace/cpu_lock.py:8)", "unverified", 77.88)]


def test_speedscope_weights_give_exact_time(tmp_path):
    t = speedscope(tmp_path, {'Thread 7 "MainThread"': [
        (["<module> (app.py:30)", "loop (app.py:12)"], 90),
        (["<module> (app.py:30)", "loop (app.py:13)"], 10),
    ]}, {"app.py": APP}, rate_hz=250)
    (f,) = findings_for(t, "TC501")
    assert f.recoverable_ns == 90 * 4_000_000 and f.values["self_pct"] == 90.0
    assert f.values["samples_count"] == 90 and "sample weights" in f.estimate
    assert f.location.startswith("loop (") and f.location.endswith("app.py:12)")
    # 180 ms at 250 Hz is below the 200 ms floor even with 45 samples
    short = speedscope(tmp_path, {'Thread 7 "MainThread"': [(["<module> (app.py:30)", "loop (app.py:12)"], 45)]},
                       rate_hz=250)
    assert findings_for(short, "TC501") == []


def test_corpus_fib_is_the_hot_spot():
    t = attach_source_lines(load(corpus("pyspy", "cpu_lock.idle_threads.raw.txt")), [corpus("pyspy", "workloads")])
    (f,) = findings_for(t, "TC501")  # lock-waiter and sleeper-io wait: no hot spot there
    assert f.location == "fib (cpu_lock.py:8)"
    assert f.values["samples_count"] == 234
    assert round(f.values["self_pct"], 2) == round(100 * 234 / 306, 2)  # MainThread: 306 on-CPU of 310
    assert f.evidence[0].source == "cpu_lock.py:8"


def test_corpus_def_lines_cannot_tell_waits_from_compute():
    # py-spy --function: every line is a def line; the blocked threads' single def line, sampled
    # as often as MainThread, is taken as blocked; MainThread's def lines stay unknown
    t = attach_source_lines(load(corpus("pyspy", "cpu_lock.function.raw.txt")), [corpus("pyspy", "workloads")])
    (f,) = findings_for(t, "TC501")
    assert f.location == "fib (cpu_lock.py:7)" and not f.values["source_verified"] and f.severity == "medium"
    assert f.recoverable_ns == 2_400_000_000  # MainThread, the critical thread
    assert f.values["self_pct"] == 76.43  # 240 of 314 samples at fib's or other lines without source


def test_corpus_torch_backward_after_start_up():
    t = load(corpus("pyspy", "torch_train.default.raw.txt"))
    (f,) = findings_for(t, "TC501")
    assert f.location == "_engine_run_backward (torch/autograd/graph.py:979)"
    assert f.values["samples_count"] == 181
    assert round(f.values["self_pct"], 1) == 55.5  # 181 of 326 on-CPU samples after 380 of imports
    assert f.values["caller"] == "train_step (torch_train.py:20)"


def test_native_hot_spot_off_the_critical_thread_recovers_nothing(tmp_path):
    t = collapsed(tmp_path, [
        (f"{MAIN};loop (app.py:12)", 25), (f"{MAIN};loop (app.py:13)", 25), (f"{MAIN};score (app.py:20)", 25),
        (MAIN, 25),
        (f"thread (101): prep;{BOOT};prep (app.py:13);matmul (numpy/core/_methods.py:40)", 80),
        (f"thread (101): prep;{BOOT};prep (app.py:12)", 20),
        (f"thread (102): py;{BOOT};work (app.py:20)", 50),
    ], {"app.py": APP})
    native, python = findings_for(t, "TC501")
    assert native.location == "matmul (numpy/core/_methods.py:40)" and native.values["self_pct"] == 80.0
    assert native.recoverable_ns == 0 and native.severity == "low"  # runs beside MainThread, not in its way
    assert python.location == "work (app.py:20)" and python.values["threads_count"] == 1
    assert python.recoverable_ns == 500_000_000  # Python holds the GIL: counted off the critical thread too
