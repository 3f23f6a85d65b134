"""The renderer reads what decided a noise call from a typed field, not from its prose."""

from __future__ import annotations

import json

from traceclass.compare.noise import judge
from traceclass.render.diff_markdown import test_text as noise_text
from traceclass.report.enums import NoiseBasis
from traceclass.report.plain import plain


def test_each_fallback_has_its_basis():
    assert judge([100.0], [150.0], 100.0, 150.0).basis == NoiseBasis.SINGLE_SAMPLE
    assert judge([], [], 100.0, 150.0).basis == NoiseBasis.ONE_VALUE_PER_RUN
    assert judge([1.0, 2.0], [1.0, 2.0], 100.0, 150.0, single_run=True).basis == NoiseBasis.SINGLE_RUN
    assert judge([], [], None, 150.0).basis == NoiseBasis.NOT_MEASURED
    assert judge([1.0, 2.0], [1.0, 2.0], 5.0, 5.0).basis == NoiseBasis.NO_CHANGE
    tested = judge([100.0, 101.0, 99.0, 100.5] * 3, [150.0, 151.0, 149.0, 150.5] * 3, 100.0, 150.0)
    assert tested.basis == NoiseBasis.TESTED and tested.label == "slower"


def test_renderer_branches_on_the_basis_and_json_keeps_plain_strings():
    d = plain(judge([100.0], [150.0], 100.0, 150.0))
    assert json.loads(json.dumps(d))["basis"] == "single-sample"
    assert noise_text({"noise": d}) == "noise unknown (1 vs 1 samples)"
    reworded = dict(d, reason="one sample each, so the spread is unknown")
    assert noise_text({"noise": reworded}) == "noise unknown (1 vs 1 samples)"
