"""Slide-ready roofline: modeled ops only, 2x resolution, and no misleading empty plot."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

pytest.importorskip("matplotlib")

from traceclass.cli import main  # noqa: E402
from traceclass.config import load_config  # noqa: E402
from traceclass.engine import run  # noqa: E402
from traceclass.ingest import load  # noqa: E402
from traceclass.render import plot  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT.parent / "shared" / "corpus" / "torch" / "gpu"


def _report(path: Path):  # type: ignore[no-untyped-def]
    return run(load(path), load_config(cwd=ROOT / "tests"))[1]


def _png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


def test_modeled_ops_only_at_twice_the_resolution():
    path = CORPUS / "mi300x_resnet_act_checkpoint_train.json.gz"
    if not path.exists():
        pytest.skip("corpus not present")
    report = _report(path)
    pts = plot.modeled_points(report)
    assert 0 < len(pts) <= plot.MAX_POINTS
    assert all(o.bound in ("compute-bound", "memory-bound", "latency-bound") and not o.heuristic and o.flops
               for o in pts)
    assert [o.total_ns for o in pts] == sorted((o.total_ns for o in pts), reverse=True)
    assert any(o.bound == "unclassified" for o in report.ops)  # present in the report, absent from the plot
    assert _png_size(plot.roofline_png(report)) == (2000, 1200)


def test_no_modeled_op_writes_no_plot_and_says_why(tmp_path, capsys):
    trace = ROOT / "sample_traces" / "torch_ddp-nccl-train_a100.json.gz"
    report = _report(trace)
    assert plot.roofline_png(report) is None
    assert "recorded without shapes" in plot.why_no_plot(report)
    out = tmp_path / "roofline.png"
    assert main(["analyze", str(trace), "--plot", str(out), "-o", str(tmp_path / "r.md")]) == 0
    assert not out.exists()
    assert f"no plot written to {out}: no op has a cost model" in capsys.readouterr().err


def test_unknown_device_writes_no_plot_and_says_why(tmp_path):
    from kineto_builder import KinetoBuilder  # tests/ is on the path (conftest)

    b = KinetoBuilder(gpu_name="Mystery Accelerator 9000")
    props = b.top["deviceProperties"][0]
    props.update(numSms=None, totalGlobalMem=None)
    for k in ("computeMajor", "computeMinor"):
        props.pop(k)
    b.step(1, 0, 300_000)
    b.op("aten::mm", 10_000, 50_000, dims=[[4096, 4096], [4096, 4096]], types=["c10::BFloat16"] * 2)
    b.launch(1, "ampere_bf16_gemm", 12_000, 100_000, 200_000)
    report = _report(b.write(tmp_path / "unknown.json"))
    assert plot.roofline_png(report) is None
    assert plot.why_no_plot(report).startswith("the device (Mystery Accelerator 9000) is not in the hardware table")
