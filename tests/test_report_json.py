"""Report.to_json / Report.from_json: the report model survives a round trip unchanged."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import corpus
from ingest.nsys_fixtures import small_kernel_storm_export

import traceclass
from traceclass.render import json_report
from traceclass.report.cpu import CpuSection
from traceclass.errors import TraceFormatError
from traceclass.report.model import Report

ROOT = Path(__file__).resolve().parents[1]


def _nsys(tmp_path: Path) -> Path:
    p = tmp_path / "storm.sqlite"
    small_kernel_storm_export(p)
    return p


@pytest.mark.parametrize("which", ["gpu", "cpu-sampled", "nsys"])
def test_round_trip_gives_an_equal_report(which, tmp_path):
    path = {
        "gpu": lambda: ROOT / "sample_traces" / "torch_minitoy-train_mi250.json.gz",
        "cpu-sampled": lambda: corpus("pyspy", "cpu_lock.default.speedscope.json"),
        "nsys": lambda: _nsys(tmp_path),
    }[which]()
    report = traceclass.analyze(path).report
    text = report.to_json()
    back = Report.from_json(text)
    assert back == report
    assert Report.from_json(back.to_json()) == report  # ints held in float fields come back as floats
    assert Report.from_json(json.loads(text)) == report
    # the JSON report (``--format json``) is the model's layout plus the verdict: it reads back too
    assert Report.from_json(json_report.render(report)) == report
    if which == "gpu":
        assert report.devices and report.kernels and report.cpu_profile is None
    if which == "cpu-sampled":
        assert isinstance(back.cpu_profile, CpuSection) and back.cpu_profile.hot_spots
    if which == "nsys":
        assert report.findings and back.findings[0].fingerprint == report.findings[0].fingerprint


def test_a_document_that_is_not_a_report_is_one_line_error():
    with pytest.raises(TraceFormatError, match="not a traceclass report model"):
        Report.from_json('{"source": 3}')
