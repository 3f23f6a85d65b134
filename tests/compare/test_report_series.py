"""The per-step series, kernel families, memory peaks and clock origin added to the report
for comparisons (OpRow.step_ns, Report.kernel_families, Report.memory, SourceSummary.start_epoch_ns)."""

from __future__ import annotations

import datetime
import json
from pathlib import Path

import pytest

from traceclass.engine import run
from traceclass.ingest import load
from traceclass.render.json_report import to_dict

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "sample_traces"


@pytest.fixture(scope="module")
def baseline_report():
    return run(load(SAMPLES / "torch_cpu_diff_baseline.json.gz"))[1]


def _group(report, name, shapes_prefix):
    rows = [o for o in report.ops if o.name == name and o.shapes.startswith(shapes_prefix)]
    assert len(rows) == 1, [(o.name, o.shapes) for o in report.ops if o.name == name]
    return rows[0]


def test_op_step_series_matches_the_recorded_copy(baseline_report):
    # README: one 8 MiB transposing copy per step, aten::copy_ 3.55-3.73 ms; 6 steps, 1 warm-up
    assert baseline_report.step_series_steps == 5
    copy = _group(baseline_report, "aten::copy_", "[8x512x512]")
    assert len(copy.step_ns) == 5
    assert all(3_500_000 <= x <= 3_800_000 for x in copy.step_ns), copy.step_ns
    # op groups cover the steady steps only: the warm-up step's copy is left out of both
    assert copy.count == 5
    assert sum(copy.step_ns) == copy.total_ns


def test_step_series_never_exceeds_step_wall(baseline_report):
    step = next(s for s in baseline_report.stages if s.kind == "step")
    per_step = [sum(o.step_ns[k] for o in baseline_report.ops) for k in range(5)]
    for total, wall in zip(per_step, step.wall_ns):
        assert 0 < total <= wall


def test_memory_peak_and_clock_origin(baseline_report):
    (mem,) = baseline_report.memory
    assert mem.device_type == "cpu" and mem.peak_allocated_bytes > 8 * 2**20  # holds the 8 MiB copy
    assert mem.peak_reserved_bytes is None
    t = datetime.datetime.fromtimestamp(baseline_report.source.start_epoch_ns / 1e9, datetime.timezone.utc)
    assert t.date() == datetime.date(2026, 12, 2)  # README: recorded on 2026-12-02


def test_gpu_families_attribute_backward_threads_to_steps():
    # DDP sample: backward runs on the autograd thread; its kernels still belong to a step
    report = run(load(SAMPLES / "torch_ddp-nccl-train_a100.json.gz"))[1]
    assert report.step_series_steps == 2
    fams = {f.family: f for f in report.kernel_families}
    assert {"comm", "conv", "gemm", "norm"} <= set(fams)
    for f in fams.values():
        assert len(f.step_ns) == 2 and sum(f.step_ns) <= f.total_ns
    # cuDNN convolutions ~4.3 ms a step; its batch-norm kernels (cudnn::bn_*) ~10.4 ms, as norm
    assert all(4_000_000 < x < 5_000_000 for x in fams["conv"].step_ns)
    assert all(x > 10_000_000 for x in fams["norm"].step_ns)
    bwd = next(o for o in report.ops if o.name == "aten::convolution_backward")
    assert all(x > 0 for x in bwd.step_ns)


def test_json_report_carries_the_new_fields(baseline_report):
    d = json.loads(json.dumps(to_dict(baseline_report)))
    assert d["step_series_steps"] == 5
    assert d["memory"][0]["peak_allocated_bytes"] == baseline_report.memory[0].peak_allocated_bytes
    assert d["ops"][0]["step_ns"] == list(baseline_report.ops[0].step_ns)
    assert d["source"]["start_epoch_ns"] == baseline_report.source.start_epoch_ns
