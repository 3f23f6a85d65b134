"""--graph-capture: replayed kernels mapped to the ops that captured them, or why not."""

from __future__ import annotations

import subprocess
import sys

from kineto_builder import KinetoBuilder
from traceclass import units
from traceclass.analysis.graph_capture_map import map_replays, notes
from traceclass.ingest import load
from traceclass.ingest.graph_capture import read_capture

SEQ = [("aten::mm", [[32, 4096], [4096, 6144]], "Cijk_gemm_BBS_MI16x16x1", 100_000),
       ("aten::rms_norm", [[32, 4096]], "rms_norm_kernel", 10_000),
       ("aten::mm", [[32, 4096], [4096, 4096]], "Cijk_gemm_BBS_MI16x16x1", 60_000)]


def _capture(tmp_path):
    b = KinetoBuilder()
    t = 0
    b.runtime("hipLaunchKernel", 0, 1_000)
    b.events[-1]["args"]["kernel"] = "warmup_fill_kernel"  # launched during capture, not replayed
    for layer in range(2):
        for op, dims, kernel, _ in SEQ:
            t += 10_000
            ext = b.op(op, t, 5_000, dims=dims, types=["c10::BFloat16"] * len(dims))
            b.runtime("hipLaunchKernel", t + 1_000, 2_000, ext=ext)
            b.events[-1]["args"]["kernel"] = kernel
    return b.write(tmp_path / "capture.json")


def _replay(tmp_path, kernels=None):
    b = KinetoBuilder()
    corr = b.runtime("hipGraphLaunch", 1_000, 2_000)
    t = 10_000
    for _ in range(2):
        for _, _, kernel, dur in SEQ:
            b.kernel(kernels or kernel, t, dur, corr=corr)
            t += dur + 1_000
    return b.write(tmp_path / "replay.json")


def test_replayed_kernels_map_to_capture_ops(tmp_path):
    cap = read_capture(str(_capture(tmp_path)))
    assert len(cap.kernel) == 7 and cap.op[1] == "aten::mm" and cap.shapes[1] == "[32x4096], [4096x6144]"
    (r,) = map_replays(load(_replay(tmp_path)), cap)
    assert (r.kernels, r.matched, r.reason) == (6, 6, "")
    assert r.by_op[0] == ("aten::mm [32x4096], [4096x6144]", 2, 200_000)
    assert r.by_op[1] == ("aten::mm [32x4096], [4096x4096]", 2, 120_000)
    assert r.by_op[2] == ("aten::rms_norm [32x4096]", 2, 20_000)


def test_unrelated_capture_is_not_mapped(tmp_path):
    cap = read_capture(str(_capture(tmp_path)))
    (line,) = notes(load(_replay(tmp_path, kernels="other_kernel")), cap, units.duration)
    assert "only 0 of 6 replayed kernels match the capture's launches by name" in line and "not mapped" in line


def test_cli_option_and_bad_capture_file(tmp_path):
    replay, cap = _replay(tmp_path), _capture(tmp_path)
    r = subprocess.run([sys.executable, "-m", "traceclass", "analyze", str(replay), "--graph-capture", str(cap)],
                       capture_output=True, text=True)
    assert r.returncode == 0 and "replay mapped to the capture's ops (6 of 6 kernels matched)" in r.stdout
    bad = tmp_path / "notes.txt"
    bad.write_text("hello")
    r = subprocess.run([sys.executable, "-m", "traceclass", "analyze", str(replay), "--graph-capture", str(bad)],
                       capture_output=True, text=True)
    assert r.returncode == 2 and "not a JSON trace" in r.stderr and "Traceback" not in r.stderr
