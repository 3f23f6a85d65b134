"""Issue 10: one cause per stretch of GPU idle time, exact on hand-built traces, and the rules
that claim each cause (one root cause, one high finding)."""

from __future__ import annotations

import numpy as np

import diagnosis_traces as dt
from conftest import corpus
from kineto_builder import KinetoBuilder
from ruletest import findings_for
from traceclass.analysis import analyze
from traceclass.facts import idle_causes as ic
from traceclass.config import AnalysisConfig
from traceclass.engine import run
from traceclass.ingest import load
from traceclass.rule import Context

MS, US = dt.MS, dt.US


def _idle(trace) -> ic.IdleCauses:
    return Context(trace, analyze(trace, AnalysisConfig())).idle


def _nonzero(d: dict[str, int]) -> dict[str, int]:
    return {k: v for k, v in d.items() if v}


def _base(trace) -> int:
    return int(min(trace.time_bounds()))


def test_segments_tile_the_idle_exactly_once(tmp_path):
    for make in (dt.host_preprocessing, dt.sync_then_host_work, dt.initialisation, dt.backlog,
                 dt.profiler_overhead, dt.item_per_step):
        t = make(tmp_path)
        idle = _idle(t)
        for dev in idle.devices:
            m = idle.device == dev
            s, e = idle.start_ns[m], idle.end_ns[m]
            assert (e > s).all() and (s[1:] >= e[:-1]).all(), make.__name__  # sorted, disjoint
            iv = idle.iv_device == dev
            assert int((e - s).sum()) == int((idle.iv_end_ns[iv] - idle.iv_start_ns[iv]).sum()), make.__name__
            assert idle.busy_ns[dev] + idle.idle_ns(dev) == idle.analysed_ns, make.__name__


def test_host_preprocessing_with_stacks(tmp_path):
    t = dt.host_preprocessing(tmp_path)
    idle = _idle(t)
    b = _base(t)
    # steady steps 2 and 3 (10-30 ms): per step 6 ms of host work before the GEMM's launch, its
    # 2 us launch call, 98 us until the GEMM starts, and 1 ms with nothing recorded after it
    assert _nonzero(idle.by_cause()) == {"host-work": 12 * MS, "launch-overhead": 4 * US, "unknown": 2 * 98 * US + 2 * MS}
    hw = np.flatnonzero(idle.cause == ic.HOST_WORK)
    assert (idle.start_ns[hw] - b).tolist() == [10 * MS, 20 * MS] and (idle.end_ns[hw] - b).tolist() == [16 * MS, 26 * MS]
    assert ic.covering_label(t, idle, hw) == ["pipe.py(10): preprocess"] * 2
    assert ic.host_frames(t, idle, hw) == [("scipy/zoom.py(30): zoom", 6 * MS), ("pipe.py(10): preprocess", 4 * MS),
                                           ("img.py(20): resize", 2 * MS)]
    (f,) = findings_for(t, "TC205")
    assert f.recoverable_ns == 12 * MS and f.severity == "high" and f.values["stretches_count"] == 2
    assert f.values["top_functions_ns"] == {"zoom (scipy/zoom.py:30)": 6 * MS, "preprocess (pipe.py:10)": 4 * MS,
                                            "resize (img.py:20)": 2 * MS}
    assert f.location == "host work in zoom (scipy/zoom.py:30)"
    assert "60.0% of steady step time" in f.message and "mostly in preprocess (pipe.py:10)" in f.message
    assert findings_for(t, "TC205", min_share_pct=61.0) == []
    # nothing named like data: TC204 stays silent; TC202 claims no host work
    assert findings_for(t, "TC204") == []
    assert all(f.recoverable_ns == 0 for f in findings_for(t, "TC202"))


def test_sync_followed_by_host_work_is_bounded_by_the_blocked_time(tmp_path):
    t = dt.sync_then_host_work(tmp_path)
    idle = _idle(t)
    b = _base(t)
    # the GPU goes idle at 1.002 ms while the host waits (blocked 0.5-1.01 ms: 510 us); the
    # host-sync part is the first 510 us of the idle, the rest of the host window host work
    hs = np.flatnonzero(idle.cause == ic.HOST_SYNC)
    assert (idle.start_ns[hs] - b).tolist() == [1_002 * US] and (idle.end_ns[hs] - b).tolist() == [1_512 * US]
    assert _nonzero(idle.by_cause()) == {"host-sync": 510 * US, "host-work": 4 * MS - 1_512 * US,
                                         "launch-overhead": 2 * US + 1, "unknown": 98 * US}
    (s,) = findings_for(t, "TC203")
    assert s.values["gpu_idle_ns"] == 4_002 * US - 1_002 * US  # from 1.002 ms to the launch call's return
    assert s.recoverable_ns == 510 * US and "recovers at most the blocked time: 510 µs" in s.message
    (h,) = findings_for(t, "TC205")
    assert h.recoverable_ns == 2_488 * US


def test_initialisation_is_not_launch_overhead(tmp_path):
    t = dt.initialisation(tmp_path)
    idle = _idle(t)
    # context creation 0-30 ms and cudaFree 30-36 ms fill the host window before the conv's launch,
    # the 13 ms launch call is module loading: 49 ms of initialisation; the 100 us after it and
    # the 4 ms after the last kernel (nothing recorded) are unknown
    assert _nonzero(idle.by_cause()) == {"initialisation": 49 * MS, "unknown": 100 * US + 4 * MS}
    for code in ("TC202", "TC601", "TC201"):
        assert all(f.recoverable_ns == 0 for f in findings_for(t, code)), code
    (f,) = findings_for(t, "TC206")
    assert f.severity == "info" and f.recoverable_ns == 0
    assert f.values["init_ns"] == 49 * MS and f.values["init_idle_ns"] == 49 * MS and f.values["calls_count"] == 3
    assert f.values["calls"] == {"cudaDeviceGetStreamPriorityRange": 1, "cudaFree": 1, "cudaLaunchKernel": 1}
    assert "schedule(wait=1, warmup=1" in f.message
    assert findings_for(t, "TC206", min_total_ms=50.0) == []


def test_previous_iteration_backlog_is_kept_out_of_the_step(tmp_path):
    t = dt.backlog(tmp_path)
    analysis, report = run(t)
    (f,) = [f for f in report.findings if f.code == "TC207"]
    assert f.values["rows_count"] == 5 and f.values["gpu_ns"] == 5 * MS and f.values["in_analysed_ns"] == 4 * MS
    assert f.severity == "info" and f.recoverable_ns == 0
    # the op groups hold the step's own GEMM only, not the mangled backlog kernels
    assert [o.name for o in report.ops] == ["aten::mm"]
    # the headline counts the step's own 3 ms, the backlog is stated apart
    assert report.idle.busy_ns[0] == 7 * MS and report.idle.backlog_busy_ns[0] == 4 * MS
    from traceclass.render.verdict import verdict_sentences

    text = " ".join(verdict_sentences(report, lambda s: s))
    assert ("busy 3 ms, 30.0% of the 10 ms of steady step time, plus 4 ms busy only with work queued before the "
            "profiler window (TC207)") in text
    assert "Trace hygiene (TC207)" in text
    # nothing else runs beside the backlog: the verdict's 4 ms is TC207's "inside the analysed time"
    assert f.values["in_analysed_alone_ns"] == 4 * MS and "4 ms of it inside the analysed time, until" in f.message


def test_backlog_beside_the_steps_own_work_is_set_apart_by_the_part_it_alone_covers(tmp_path):
    # dt.backlog plus a sixth backlog kernel on another stream, 4.5-5.5 ms, beside the GEMM
    # (5-8 ms): 4.5 ms of backlog inside the step, 4 ms of it with nothing else running
    b = KinetoBuilder()
    for i in range(5):
        b.kernel("void prev_iteration_kernel<float>(float*)", i * MS, MS, corr=-5 - i)
    b.kernel("void prev_iteration_kernel<float>(float*)", 4 * MS + 500 * US, MS, corr=-20, stream=8)
    b.step(1, 1 * MS, 10 * MS)
    mm = b.op("aten::mm", 1 * MS, 10 * US)
    b.launch(mm, "sm90_xmma_gemm", 1 * MS, 5 * MS, 3 * MS, cpu_dur=5 * US)
    t = load(b.write(tmp_path / "backlog2.json"))
    analysis, report = run(t)
    (f,) = [f for f in report.findings if f.code == "TC207"]
    assert f.values["in_analysed_ns"] == 4 * MS + 500 * US and f.values["in_analysed_alone_ns"] == 4 * MS
    assert report.idle.backlog_busy_ns[0] == 4 * MS and report.idle.busy_ns[0] == 7 * MS
    assert ("4.5 ms of it inside the analysed time (4 ms of that with no other work running, the part the verdict "
            "sets apart from the step's busy time)") in f.message
    from traceclass.render.verdict import verdict_sentences

    text = " ".join(verdict_sentences(report, lambda s: s))
    assert "busy 3 ms, 30.0% of the 10 ms of steady step time, plus 4 ms busy only with work queued" in text


def test_profiler_overhead_is_suspected_not_claimed(tmp_path):
    t = dt.profiler_overhead(tmp_path)
    idle = _idle(t)
    # 10 kernels of 5 us; before each launch ~90 us of Python frames and a 1 us op, launch calls of
    # 4 us: host windows >= 20 x the median launch call, ops < 25 % of them. The first window
    # runs from 0 to the first launch (102 us), the others from a kernel's end to the next
    # launch (90 us); each launch call is launch overhead, the 1 us after it the queue
    assert _nonzero(idle.by_cause()) == {"profiler-overhead": 102 * US + 9 * 90 * US, "launch-overhead": 40 * US,
                                         "unknown": 10 * US}
    (f,) = findings_for(t, "TC202")
    assert f.values["cause"] == "profiler-overhead" and f.recoverable_ns == 0 and f.values["gaps_count"] == 9
    assert "(suspected)" in f.message
    assert "launch calls take a median 4 µs on the launching thread while the 9 windows before the launches " \
        "average 90 µs" in f.message


def test_one_root_cause_one_high_finding(tmp_path):
    """A planted .item() per step: before issue 10, TC202, TC203, TC303 and TC601 were all high."""
    t = dt.item_per_step(tmp_path)
    _, report = run(t)
    high = [f for f in report.findings if f.severity == "high"]
    assert [f.code for f in high] == ["TC203"]
    (s,) = high
    # three steady steps; the GPU drains during the wait (copy ends at S + 4.012 ms) and stays
    # idle until the next step starts at S + 5 ms: 988 us of host-sync per step (within the
    # 2.953 ms wait); the last step's idle is followed by no work, so it causes nothing
    assert s.values["syncs_count"] == 3 and s.recoverable_ns == 2 * 988 * US
    for code in ("TC303", "TC601"):
        (f,) = [f for f in report.findings if f.code == code]
        assert f.recoverable_ns == 0 and "TC203" in f.message
    assert all(f.recoverable_ns == 0 for f in report.findings if f.code == "TC202")


def test_opportunities_are_additive(tmp_path):
    for make in (dt.host_preprocessing, dt.sync_then_host_work, dt.item_per_step):
        t = make(tmp_path)
        _, report = run(t)
        idle_total = sum(sum(c.values()) for c in report.idle.idle_by_cause_ns.values())
        opp = report.opportunities
        assert sum(o.recoverable_ns for o in opp) <= report.idle.analysed_ns, make.__name__
        assert sum(o.recoverable_ns for o in opp if o.idle_cause) <= idle_total, make.__name__
        causes = [o.idle_cause for o in opp if o.idle_cause]
        assert len(causes) == len(set(causes)), make.__name__


def test_corpus_timesformer_is_host_bound():
    path = corpus("torch", "gpu", "h100_timesformer_inference.json.gz")
    _, report = run(load(path))
    (f,) = [f for f in report.findings if f.code == "TC205"]
    # 218 ms of the 383 ms step: the HF pipeline's video decode and normalisation before the first kernel
    assert f.recoverable_ns == 217_953_898 and f.severity == "high"
    assert list(f.values["top_functions_ns"])[:2] == ["normalize (transformers/image_transforms.py:390)",
                                                      "<built-in method astype of numpy.ndarray object>"]
    assert report.opportunities[0].source == "TC205"
    # named by the pipeline phase that holds the stretch, with file:line
    assert "mostly in preprocess (transformers/pipelines/video_classification.py:129)" in f.message
    from traceclass.render.verdict import verdict_sentences

    text = " ".join(verdict_sentences(report, lambda s: s))
    assert "was busy 158 ms, 41.4% of the 383 ms of steady step time" in text
    assert "The step is host-bound" in text
    assert sum(o.recoverable_ns for o in report.opportunities) <= report.idle.analysed_ns


def test_mtia_device_events_are_a_device_timeline(tmp_path):
    t = dt.mtia_device(tmp_path)
    assert len(t.gpu) == 2 and any("MTIA device events analysed" in n for n in t.notes)
    analysis, report = run(t)
    (tl_row,) = analysis.timelines
    assert tl_row.busy_ns == 2 * MS
    idle = report.idle
    # steady step 2 (2-4 ms): busy 1 ms; idle 0.2 ms before the device event (host window 0.1 ms,
    # the 5 us call, 95 us queue) and 0.8 ms of Python after it (under 1 ms: dispatch path, and
    # no op in it, so no suspicion of profiler overhead)
    assert idle.busy_ns == {0: 1 * MS}
    assert _nonzero(idle.idle_by_cause_ns[0]) == {"launch-overhead": 905 * US, "unknown": 95 * US}
    assert [o.name for o in report.ops] == ["aten::mm"]


def test_communication_wait(tmp_path):
    t = dt.communication_wait(tmp_path)
    idle = _idle(t)
    # idle 1.0-3.6 ms: host window 1.0-3.5 ms inside record_param_comms (100 %), the call, the queue
    assert _nonzero(idle.by_cause()) == {"communication": 2_500 * US, "launch-overhead": 2 * US, "unknown": 98 * US}
    # the gap is mostly communication: not TC202's launch overhead, not TC205's host work
    assert findings_for(t, "TC202") == [] and findings_for(t, "TC205") == []


def test_no_steady_step_wording_without_steps(tmp_path):
    from traceclass.render.markdown import render

    t = dt.sync_then_host_work(tmp_path)
    _, report = run(t)
    text = render(report)
    verdict = text.split("## Findings")[0]
    assert "busy 1.9 ms, 38.0% of the trace's analysed time (no steps)" in verdict
    assert "steady step" not in verdict and "training" not in text
    assert "additive, no time counted twice: together 3 ms of the 5 ms analysed" in verdict


def test_a_long_later_launch_is_a_full_queue_not_initialisation(tmp_path):
    """The same kernel launched twice, each launch call 2 ms: the first is module loading
    (initialisation), the second (GPU idle while it blocks) is not."""
    from kineto_builder import KinetoBuilder

    b = KinetoBuilder()
    b.launch(b.op("aten::add", 0, 2_100 * US), "add_kernel", 0, 2_100 * US, 1 * MS, cpu_dur=2 * MS)
    b.launch(b.op("aten::add", 3 * MS, 2_100 * US), "add_kernel", 3 * MS, 5_100 * US, 1 * MS, cpu_dur=2 * MS)
    t = load(b.write(tmp_path / "relaunch.json"))
    mask = ic.init_api_mask(t)
    assert mask.tolist() == [True, False]
    idle = _idle(t)
    # 0-2.1 ms idle: the first call (0-2 ms) is initialisation, 100 us queue; 3.1-5.1 ms idle: the
    # second call (3.0-5.0 ms) covers 3.1-5.0 ms: launch overhead, then 100 us queue
    assert _nonzero(idle.by_cause()) == {"initialisation": 2 * MS, "launch-overhead": 1_900 * US,
                                         "unknown": 200 * US}


def test_first_cuda_allocation_is_initialisation(tmp_path):
    """Corpus cuda_event_sync's shape: ``aten::ones`` -> ``aten::empty`` takes 2 ms before any GPU
    work (the first CUDA allocation creates the context), then a kernel is launched."""
    from kineto_builder import KinetoBuilder

    b = KinetoBuilder()
    b.step(1, 0, 4 * MS)
    b.op("aten::ones", 100 * US, 2_100 * US)
    b.op("aten::empty", 110 * US, 2 * MS)
    b.launch(b.op("aten::fill_", 2_200 * US, 10 * US), "fill_kernel", 2_201 * US, 2_210 * US, 90 * US, cpu_dur=5 * US)
    t = load(b.write(tmp_path / "first_alloc.json"))
    idle = _idle(t)
    # idle 0-2.21 ms: host window 0-2.201 ms, 2 ms of it in the first allocation: initialisation;
    # the 5 us call, 4 us queue; then 2.3-4 ms with nothing recorded (1.7 ms, >= 1 ms): unknown
    assert _nonzero(idle.by_cause()) == {"initialisation": 2_201 * US, "launch-overhead": 5 * US,
                                         "unknown": 4 * US + 1_700 * US}
    (f,) = findings_for(t, "TC206")
    assert f.values["init_ns"] == 2 * MS and f.values["calls"] == {"aten::empty": 1}
    assert findings_for(t, "TC205") == []


def test_unknown_idle_with_work_queued_is_told_apart_and_located(tmp_path):
    # add_kernel is launched at 21-23 us on stream 8 but starts at 5.1 ms (a dependency the
    # trace does not show) while the host sits in a 5 ms aten::copy_: the GPU idles 100 us ->
    # 5.1 ms with its next work already queued. Before gemm_a (launch call 1-3 us, start 5 us)
    # the queue part 3-5 us is queued too.
    b = KinetoBuilder()
    b.launch(b.op("aten::mm", 0, 10 * US), "gemm_a", 1 * US, 5 * US, 95 * US)
    b.launch(b.op("aten::add", 20 * US, 10 * US), "add_kernel", 21 * US, 5_100 * US, 100 * US, stream=8)
    b.op("aten::copy_", 40 * US, 5_010 * US)
    t = load(b.write(tmp_path / "queued.json"))
    analysis, report = run(t)
    idle = Context(t, analysis).idle
    q = idle.queued(t)
    assert sorted(idle.length_ns[q].tolist()) == [2 * US, 5_000 * US]
    assert (idle.cause[q] == ic.UNKNOWN).all()
    assert report.idle.idle_by_cause_ns[0]["unknown"] == 5_002 * US
    # the 2 us before gemm_a is start-up latency (< 20 us), the 5 ms a wait
    assert report.idle.unknown_queued_ns == {0: 5_000 * US} and report.idle.unknown_latency_ns == {0: 2 * US}
    assert report.idle.longest_queued == {0: (5_000 * US, "add_kernel", 8, "op aten::copy_", "")}
    from traceclass.render.verdict import verdict_sentences

    text = " ".join(verdict_sentences(report, lambda s: f"`{s}`"))
    assert ("Of the unknown 5 ms, for 5 ms the GPU had its next work queued and did not start it, 20 µs or more at a "
            "time: a stream or event dependency, or a wait on work the trace does not show (the longest stretch, 5 ms, "
            "before `add_kernel` on stream 8, while the host was in op aten::copy_); 2 µs is start-up latency, "
            "stretches under 20 µs from a launch call's return to its work's start.") in text


def test_unknown_idle_of_a_quiet_host_is_said_to_be_so(tmp_path):
    # kernels start as their launch calls return (nothing queued); between them 2.9 ms in which
    # the host records nothing: a host phase of its own, unknown
    b = KinetoBuilder()
    b.launch(b.op("aten::mm", 0, 10 * US), "gemm_a", 1 * US, 3 * US, 97 * US)
    b.launch(b.op("aten::add", 3_000 * US, 10 * US), "add_kernel", 3_001 * US, 3_003 * US, 100 * US)
    t = load(b.write(tmp_path / "quiet.json"))
    analysis, report = run(t)
    assert not Context(t, analysis).idle.queued(t).any()
    assert report.idle.idle_by_cause_ns[0]["unknown"] == 2_901 * US and report.idle.unknown_queued_ns == {}
    from traceclass.render.verdict import verdict_sentences

    text = " ".join(verdict_sentences(report, lambda s: s))
    assert ("In the unknown 2.9 ms the host thread that launches the next work was active (ops, Python, runtime "
            "calls) for less than half of the stretch, or no host thread is known: the trace does not show what the "
            "process did.") in text


def test_unknown_idle_without_launch_calls_is_not_said_to_be_queued(tmp_path):
    # GPU rows only (no runtime calls recorded): nothing shows the GPU had its next work
    # before it started, so the 5 ms between the kernels is not a queued wait
    b = KinetoBuilder()
    b.kernel("gemm_a", 0, 100 * US, corr=1)
    b.kernel("gemm_b", 5_100 * US, 100 * US, corr=2)
    b.op("aten::mm", 0, 5_200 * US)
    t = load(b.write(tmp_path / "nolaunch.json"))
    analysis, report = run(t)
    assert not Context(t, analysis).idle.queued(t).any()
    assert report.idle.idle_by_cause_ns[0]["unknown"] == 5_000 * US and report.idle.unknown_queued_ns == {}


def _runtime_only_trace(tmp_path, with_ops: bool):
    """Three kernels launched 300 us and 2 ms apart by a thread that records only its launch
    calls (an MI210-style GPU-only trace), or the same launches inside CPU ops."""
    b = KinetoBuilder()
    for i, cpu in enumerate((0, 300 * US, 2_300 * US)):
        ext = b.op("aten::add", cpu, 10 * US) if with_ops else None
        b.launch(ext, f"k{i}", cpu + 2 * US, cpu + 20 * US, 10 * US)
    path = b.write(tmp_path / f"runtime_{with_ops}.json")
    return load(str(path))


def test_runtime_calls_only_is_said(tmp_path):
    """The attribution cannot see host work between launches without ops or Python: the report
    says so, and what it calls the stretches (launch overhead under 1 ms, unknown above)."""
    t = _runtime_only_trace(tmp_path, with_ops=False)
    _, report = run(t)
    (note,) = [n for n in report.notes if n.startswith("CPU ops and Python functions not recorded")]
    assert "launch overhead when the host's stretch before the launch is under 1 ms and as unknown when longer" in note
    # launch calls at 2, 302 and 2302 us (2 us each), kernels at 20, 320 and 2320 us (10 us):
    # launch overhead = the three calls + the 2 us before the first + the 272 us host stretch
    # 30 -> 302 us; unknown = the 1972 us stretch 330 -> 2302 us (over 1 ms, nothing recorded)
    # + 3 x 16 us queued between each call's return and its kernel
    assert _nonzero(_idle(t).by_cause()) == {"launch-overhead": 278 * US, "unknown": 2020 * US}
    t = _runtime_only_trace(tmp_path, with_ops=True)
    _, report = run(t)
    assert not [n for n in report.notes if "not recorded (runtime calls only)" in n]
