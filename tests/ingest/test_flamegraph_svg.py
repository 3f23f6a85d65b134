"""Flamegraph SVGs: py-spy 0.4.3 recordings (tests/data/pyspy, made with
``py-spy record --format flamegraph`` from corpus/pyspy/workloads, each next to a separate
``--format raw`` recording of the same workload and flags), the corpus SVGs, and hand-built
flamegraph.pl-style and icicle drawings with exactly known trees."""

from __future__ import annotations

import gzip
import html
import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

from conftest import CORPUS
from svg_oracle import samples_by_thread_id, self_by_stack
from traceclass.analysis.cpu_profile import profile_samples
from traceclass.errors import TraceFormatError
from traceclass.ingest import load
from traceclass.ingest.flamegraph_svg import sniff
from traceclass.ingest.sampled import with_sample_rate

DATA = Path(__file__).resolve().parent.parent / "data" / "pyspy"
RECORDED = ["cpu_lock.default", "cpu_lock.threads", "cpu_lock.idle", "cpu_lock.function",
            "parent.subprocesses", "cpu_lock.native", "sleep_io.idle_threads"]
CORPUS_SVGS = sorted((CORPUS / "pyspy").glob("*.svg")) if (CORPUS / "pyspy").exists() else []
ALL_SVGS = [DATA / f"{n}.svg" for n in RECORDED] + CORPUS_SVGS


def _frame_text(trace, f: int) -> str:
    fn = trace.strings[int(trace.frames.function[f])]
    fi = int(trace.frames.file[f])
    ln = int(trace.frames.line[f])
    if fi < 0:
        return fn
    return f"{fn} ({trace.strings[fi]}:{ln})" if ln > 0 else f"{fn} ({trace.strings[fi]})"


def reader_self_by_stack(trace) -> dict[tuple[str, ...], int]:
    st = trace.stacks
    out: dict[tuple[str, ...], int] = defaultdict(int)
    for node, cnt in zip(trace.samples.node.tolist(), trace.samples.count.tolist()):
        names = []
        while node >= 0:
            names.append(_frame_text(trace, int(st.frame[node])))
            node = int(st.parent[node])
        out[tuple(reversed(names))] += cnt
    return dict(out)


@pytest.mark.parametrize("path", ALL_SVGS, ids=lambda p: p.name)
def test_self_per_stack_equals_independent_reading(path):
    trace = load(path)
    assert trace.source.format == "flamegraph-svg"
    want = self_by_stack(path)
    assert reader_self_by_stack(trace) == want
    assert int(trace.samples.count.sum()) == sum(want.values())


@pytest.mark.parametrize("path", ALL_SVGS, ids=lambda p: p.name)
def test_hot_spot_self_and_total_equal_independent_reading(path):
    trace = load(path)
    stacks = self_by_stack(path)
    self_of: dict[str, int] = defaultdict(int)
    total_of: dict[str, int] = defaultdict(int)
    for names, n in stacks.items():
        if names:
            self_of[names[-1]] += n
        for name in set(names):
            total_of[name] += n
    prof = profile_samples(trace)
    assert prof.hot_spots
    for h in prof.hot_spots:
        text = h.function if not h.file else (f"{h.function} ({h.file}:{h.line})" if h.line else f"{h.function} ({h.file})")
        assert h.self_value == self_of[text], text
        assert h.total_value == total_of[text], text


@pytest.mark.parametrize("name", ["cpu_lock.threads", "cpu_lock.function", "parent.subprocesses",
                                  "sleep_io.idle_threads"])
def test_threads_from_thread_roots(name):
    path = DATA / f"{name}.svg"
    trace = load(path)
    th = trace.threads
    got: dict[int, int] = defaultdict(int)
    for t, c in zip(trace.samples.thread.tolist(), trace.samples.count.tolist()):
        got[int(th.tid[t])] += c
    assert got == samples_by_thread_id(path)
    assert not any("not split by thread" in n for n in trace.notes)


def test_subprocess_roots_give_pids():
    trace = load(DATA / "parent.subprocesses.svg")
    pids = set(trace.threads.pid.tolist())
    assert len(pids) == 3 and -1 not in pids  # the parent and its two children
    names = {trace.strings[int(c)] for c in trace.threads.name}
    assert {"MainThread", "lock-waiter", "sleeper-io"} <= names


def test_py_spy_flags_from_the_title():
    assert load(DATA / "cpu_lock.default.svg").sampling.includes_idle is False
    assert load(DATA / "cpu_lock.idle.svg").sampling.includes_idle is True
    assert load(DATA / "cpu_lock.default.svg").sampling.interval_ns is None


def test_py_spy_command_line_flags():
    from traceclass.ingest.flamegraph_svg import _pyspy_flags

    assert _pyspy_flags("py-spy record -ti -r 250 -o x.svg -- python -i a.py") == \
        {"idle": True, "gil": False, "rate": 250.0}
    assert _pyspy_flags("/bin/py-spy record --gil --rate=50 --pid 12 -d 3 -f flamegraph") == \
        {"idle": False, "gil": True, "rate": 50.0}
    assert _pyspy_flags("py-spy record -r10 -o out.svg -- python a.py") == {"idle": False, "gil": False, "rate": 10.0}
    assert _pyspy_flags("perf script | flamegraph.pl") is None


def test_rate_in_the_title_gives_times(tmp_path):
    text = (DATA / "cpu_lock.threads.svg").read_text()
    text = text.replace("py-spy record --threads", "py-spy record --threads --rate 250", 1)
    p = tmp_path / "r.svg"
    p.write_text(text)
    trace = load(p)
    assert trace.sampling.interval_ns == 4_000_000
    h = profile_samples(trace).hot_spots[0]
    assert (h.function, h.line, h.self_ns) == ("fib", 8, 229 * 4_000_000)


def test_function_mode_lines_are_def_lines():
    prof = profile_samples(load(DATA / "cpu_lock.function.svg"))
    lines = {(h.function, h.line) for h in prof.hot_spots}
    # workloads/cpu_lock.py: fib defined on line 7, waiter on 17, sleeper_io on 22
    assert {("fib", 7), ("waiter", 17), ("sleeper_io", 22)} <= lines
    assert not {l for f, l in lines if f == "fib"} - {7}


def test_native_frames_have_a_library_and_no_line():
    trace = load(DATA / "cpu_lock.native.svg")
    texts = {_frame_text(trace, f) for f in range(len(trace.frames))}
    assert "clock_nanosleep (libc.so.6)" in texts


def _norm(text: str) -> str:
    # unresolved native addresses move between runs (ASLR)
    return re.sub(r"^0x[0-9a-f]+ ", "0x? ", text)


PAIRS = [(DATA / f"{n}.svg", DATA / f"{n}.raw.txt") for n in RECORDED] + [
    (CORPUS / "pyspy" / f"{n}.svg", CORPUS / "pyspy" / f"{n}.raw.txt")
    for n in ("cpu_lock.default", "cpu_lock.idle_threads", "sleep_io.idle", "torch_train.default")
    if (CORPUS / "pyspy" / f"{n}.svg").exists()
]


@pytest.mark.parametrize("svg, raw", PAIRS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_top_lines_agree_with_a_raw_recording(svg, raw):
    """A separate raw recording of the same workload: same top line; the SVG's top three
    lines hold shares within 15 points of the raw one's (run-to-run sampling noise)."""
    def shares(path):
        prof = profile_samples(load(path))
        tot = prof.total_value
        out: dict[str, float] = defaultdict(float)
        for h in prof.hot_spots:
            out[_norm(f"{h.function} ({h.file}:{h.line})")] += 100 * h.self_value / tot
        return out
    a, b = shares(svg), shares(raw)
    top_a = sorted(a, key=a.get, reverse=True)[:3]
    assert top_a[0] == max(b, key=b.get)
    for line in top_a:
        assert abs(a[line] - b.get(line, 0.0)) <= 15, (line, a[line], b.get(line))


# ---------------------------------------------------------------- hand-built drawings

def _gregg_svg(stacks: dict[tuple[str, ...], int], inverted: bool = False, width: int = 1200,
               minwidth: float = 0.1) -> tuple[str, dict]:
    """An SVG as flamegraph.pl draws it: pixel geometry (10 px padding), counts with thousands
    separators, names HTML-escaped, frames narrower than ``minwidth`` px left out, 'all' at the
    bottom (or at the top when inverted). Returns the text and the drawn tree's self counts."""
    total = sum(stacks.values())
    wps = (width - 20) / total
    # merge into a tree (sorted children, like flamegraph.pl)
    node: dict = {"count": 0, "kids": {}}
    for st, n in stacks.items():
        cur = node
        cur["count"] += n
        for name in st:
            cur = cur["kids"].setdefault(name, {"count": 0, "kids": {}})
            cur["count"] += n
    depth_max = max(len(s) for s in stacks) + 1
    height = 16 * depth_max + 60
    out = []
    drawn_self: dict[tuple[str, ...], int] = defaultdict(int)

    def draw(name, nd, x0, depth, path):
        w = nd["count"] * wps
        if w < minwidth:
            return False
        y = (33 + 16 * depth) if inverted else (height - 33 - 16 * (depth + 1))
        label = f"{nd['count']:,}"
        pct = 100 * nd["count"] / total
        out.append(f'<g >\n<title>{html.escape(name, quote=True)} ({label} samples, {pct:.2f}%)</title>'
                   f'<rect x="{10 + x0 * wps:.1f}" y="{y:.1f}" width="{w:.1f}" height="15.0" '
                   f'fill="rgb(230,100,10)" rx="2" ry="2" />\n<text  x="{13 + x0 * wps:.2f}" y="{y + 10.5:.1f}" ></text>\n</g>')
        x = x0
        kids_drawn = 0
        for kname in sorted(nd["kids"]):
            kid = nd["kids"][kname]
            if draw(kname, kid, x, depth + 1, path + (kname,)):
                kids_drawn += kid["count"]
            x += kid["count"]
        drawn_self[path] += nd["count"] - kids_drawn
        return True

    draw("all", node, 0, 0, ())
    svg = (f'<?xml version="1.0" standalone="no"?>\n<!DOCTYPE svg PUBLIC "-//W3C//DTD SVG 1.1//EN" '
           f'"http://www.w3.org/Graphics/SVG/1.1/DTD/svg11.dtd">\n<svg version="1.1" width="{width}" '
           f'height="{height}" onload="init(evt)" viewBox="0 0 {width} {height}" '
           f'xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink">\n'
           f'<!-- Flame graph stack visualization. See https://github.com/brendangregg/FlameGraph for latest '
           f'version, and http://www.brendangregg.com/flamegraphs.html for examples. -->\n'
           f'<g id="frames">\n' + "\n".join(out) + "\n</g>\n</svg>\n")
    return svg, {k: v for k, v in drawn_self.items() if v}


STACKS = {
    ("main (app.py:10)", "load (io.py:5)", "read (io.py:7)"): 3_000,
    ("main (app.py:10)", "train (app.py:20)", "step (<model> & co.py:3)"): 12_345,
    ("main (app.py:10)", "train (app.py:20)"): 500,
    ("main (app.py:10)", "train (app.py:20)", "tiny (app.py:99)"): 1,  # 0.06 px: not drawn
    ("gc_collect",): 154,
}


@pytest.mark.parametrize("inverted", [False, True], ids=["flamegraph.pl", "icicle"])
def test_hand_built_drawing(tmp_path, inverted):
    svg, drawn_self = _gregg_svg(STACKS, inverted=inverted)
    p = tmp_path / "profile.svg"
    p.write_text(svg)
    trace = load(p)
    assert trace.source.format == "flamegraph-svg" and trace.source.producer == "flamegraph.pl"
    got = reader_self_by_stack(trace)
    assert got == drawn_self == self_by_stack(p)
    # the 1-sample frame was left out of the drawing: its sample is train's self now
    assert got[("main (app.py:10)", "train (app.py:20)")] == 501
    assert any("left out of a flamegraph" in n for n in trace.notes)
    prof = profile_samples(trace)
    step = next(h for h in prof.hot_spots if h.function == "step")
    assert step.file == "<model> & co.py" and step.line == 3 and step.self_value == 12_345
    assert int(trace.samples.count.sum()) == sum(STACKS.values())
    assert trace.meta["flamegraph_inverted"] is inverted


def test_detected_by_content_whatever_the_name(tmp_path):
    p = tmp_path / "profile.txt"
    p.write_bytes((DATA / "cpu_lock.threads.svg").read_bytes())
    assert load(p).source.format == "flamegraph-svg"
    assert sniff(p.read_bytes()[:65536])
    gz = tmp_path / "flame.svg.gz"
    gz.write_bytes(gzip.compress(p.read_bytes()))
    assert int(load(gz).samples.count.sum()) == int(load(p).samples.count.sum()) == 310
    assert not sniff(b"<?xml version='1.0'?><svg><circle r='1'/></svg>")
    assert not sniff(b"main;foo 3\n")


def test_svg_that_is_not_a_flamegraph_is_a_clean_error(tmp_path):
    p = tmp_path / "pic.svg"
    p.write_text('<?xml version="1.0"?><svg xmlns="http://www.w3.org/2000/svg"><title>a flamegraph</title>'
                 '<rect x="1" y="2" width="3" height="4"/></svg>')
    with pytest.raises(TraceFormatError) as exc:
        load(p)
    assert "without flamegraph frames" in str(exc.value) and "\n" not in str(exc.value)


def test_rate_turns_samples_into_time():
    trace = load(DATA / "cpu_lock.threads.svg")
    plain = profile_samples(trace).hot_spots[0]
    assert plain.self_ns is None and plain.self_value == 229
    timed = with_sample_rate(trace, 100.0)
    assert timed.sampling.interval_ns == 10_000_000
    h = profile_samples(timed).hot_spots[0]
    assert (h.function, h.line, h.self_ns) == ("fib", 8, 229 * 10_000_000)
    assert not any("does not record the sampling rate" in n for n in timed.notes)


def _cli(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "traceclass", *map(str, args)], capture_output=True,
                          text=True, cwd=cwd)


def test_cli_analyze_with_rate_and_export_round_trip(tmp_path):
    svg = DATA / "cpu_lock.threads.svg"
    r = _cli("analyze", svg, "--rate", "100")
    assert r.returncode == 0, r.stderr
    assert "samples at 100 Hz" in r.stdout and "TC501" in r.stdout and "cpu\\_lock.py:8" in r.stdout
    assert "| `lock-waiter (tid 8332)` | 5 | 50 ms |" in r.stdout  # per-thread view
    out = tmp_path / "x.speedscope.json"
    r = _cli("export", svg, "--rate", "100", "-o", out)
    assert r.returncode == 0, r.stderr
    back = profile_samples(load(out))
    orig = profile_samples(with_sample_rate(load(svg), 100.0))
    key = lambda p: sorted((h.function, h.file.rsplit("/", 1)[-1], h.line, h.self_value) for h in p.hot_spots)
    assert key(back) == key(orig)


def test_cli_diff_svg_against_raw_and_speedscope():
    svg = DATA / "cpu_lock.default.svg"
    for other in (DATA / "cpu_lock.default.raw.txt", DATA / "cpu_lock.idle.svg"):
        r = _cli("diff", svg, other)
        assert r.returncode == 0, r.stderr
        assert "Matched by function, file and line" in r.stdout
        assert "profiler differs" not in r.stdout
    if (CORPUS / "pyspy" / "cpu_lock.default.speedscope.json").exists():
        r = _cli("diff", svg, CORPUS / "pyspy" / "cpu_lock.default.speedscope.json", "--rate", "100")
        assert r.returncode == 0, r.stderr
        assert "fib" in r.stdout and "profiler differs" not in r.stdout


def test_broken_geometry_is_a_clean_error(tmp_path):
    svg, _ = _gregg_svg({("a", "b"): 10, ("c",): 5})
    # b claims more samples than its parent a
    svg = svg.replace("<title>b (10 samples", "<title>b (11 samples")
    p = tmp_path / "bad.svg"
    p.write_text(svg)
    with pytest.raises(TraceFormatError) as exc:
        load(p)
    assert "does not nest" in str(exc.value)


def test_large_svg_loads_in_linear_time(tmp_path):
    """About 2 MB of drawing: the reader's cost must stay proportional (the 50 MB figure is in
    the README)."""
    rng = np.random.default_rng(0)
    stacks = {}
    for i in range(3000):
        depth = int(rng.integers(1, 12))
        stacks[tuple(f"f{int(rng.integers(0, 40))} (m{j}.py:{int(rng.integers(1, 9))})" for j in range(depth))] = \
            int(rng.integers(1, 50))
    svg, drawn = _gregg_svg(stacks)
    p = tmp_path / "big.svg"
    p.write_text(svg)
    assert reader_self_by_stack(load(p)) == drawn


def test_links_differential_titles_and_no_all_root(tmp_path):
    """flamegraph.pl --nameattr wraps rects in <a>; difffolded titles end in '; +D%'; a drawing
    cut at a frame has no 'all' root."""
    rows = [
        ("main (a.py:1)", 10, 10.0, 0.0, 1180.0), ("work (a.py:5)", 7, 26.0, 0.0, 826.0),
        ("io (a.py:9)", 2, 26.0, 826.0, 236.0),
    ]
    body = "".join(
        f'<g class="func_g"><title>{n} ({c} samples, {100 * c / 10:.2f}%; +{c}.00%)</title>'
        f'<a xlink:href="https://x/{i}"><rect x="{10 + x:.1f}" y="{y:.1f}" width="{w:.1f}" height="15.0" '
        f'fill="rgb(1,2,3)" rx="2" ry="2" /></a></g>\n'
        for i, (n, c, y, x, w) in enumerate(rows)
    )
    p = tmp_path / "diff.svg"
    p.write_text('<?xml version="1.0" standalone="no"?><svg version="1.1" width="1200" height="60" '
                 'xmlns="http://www.w3.org/2000/svg"><!-- Flame graph -->' + body + "</svg>")
    trace = load(p)
    assert reader_self_by_stack(trace) == {("main (a.py:1)", "work (a.py:5)"): 7,
                                           ("main (a.py:1)", "io (a.py:9)"): 2, ("main (a.py:1)",): 1}
