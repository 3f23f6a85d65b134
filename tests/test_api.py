"""The Python API: traceclass.load / analyze / Result, its DataFrames, and cheap imports."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

import traceclass
from traceclass.config import Config
from traceclass.render.json_report import render as render_json
from traceclass.render.markdown import render as render_md

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "sample_traces" / "torch_minitoy-train_mi250.json.gz"


@pytest.fixture(scope="module")
def result():
    return traceclass.analyze(traceclass.load(SAMPLE))


def test_analyze_a_trace_or_a_path_gives_the_cli_report(result):
    by_path = traceclass.analyze(str(SAMPLE))
    assert by_path.to_markdown() == result.to_markdown() == render_md(result.report)
    assert result.to_json() == render_json(result.report)
    assert result.findings == result.report.findings and len(result.findings) > 0
    assert result._repr_markdown_() == result.to_markdown()
    assert json.loads(result.to_json())["source"]["file"] == SAMPLE.name


def test_config_as_dict_or_config(result):
    fewer = traceclass.analyze(result.trace, config={"ignore": ["TC2"]})
    assert {f.code for f in result.findings if f.code.startswith("TC2")}
    assert not [f for f in fewer.findings if f.code.startswith("TC2")]
    assert isinstance(fewer.config, Config) and fewer.config.ignore == ("TC2",)
    same = traceclass.analyze(result.trace, config=result.config)
    assert same.to_json() == result.to_json()


def test_frames_hold_the_json_numbers(result):
    frames = result.frames()
    assert {"ops", "kernels", "gpu", "stages", "findings", "devices"} <= set(frames)
    assert all(isinstance(f, pd.DataFrame) for f in frames.values())
    d = json.loads(result.to_json())
    for name in ("ops", "kernels", "stages", "devices"):
        df = frames[name]
        assert len(df) == len(d[name]) > 0
        for col in ("name", "total_ns", "count") if name != "devices" else ("device", "busy_ns", "idle_ns"):
            assert df[col].tolist() == [row[col] for row in d[name]], (name, col)
    fd = frames["findings"]
    assert fd["code"].tolist() == [f["code"] for f in d["findings"]]
    assert fd["recoverable_ns"].tolist() == [f["recoverable_ns"] for f in d["findings"]]
    assert fd["fingerprint"].tolist() == [f["fingerprint"] for f in d["findings"]]


def test_gpu_frame_names_are_text_and_add_up_to_the_kernel_rows(result):
    gpu = result.frames()["gpu"]
    assert len(gpu) == len(result.trace.gpu) == 16
    assert set(gpu["kind"]) <= {"kernel", "memcpy", "memset", "sync"}
    assert all(isinstance(n, str) and n for n in gpu["name"])
    assert (gpu["dur_ns"] == gpu["end_ns"] - gpu["start_ns"]).all()
    # every GPU activity but sync records, summed by name, is the report's kernel table
    active = gpu[gpu["kind"] != "sync"].groupby("name")["dur_ns"].agg(["count", "sum"])
    d = json.loads(result.to_json())
    assert {k["name"]: (k["count"], k["total_ns"]) for k in d["kernels"]} == \
        {n: (int(r["count"]), int(r["sum"])) for n, r in active.iterrows()}


def test_table_to_pandas_decodes_names_with_the_string_table(result):
    t = result.trace
    raw = t.ops.to_pandas()
    named = t.ops.to_pandas(t.strings)
    assert raw["name"].dtype.kind == "i"
    assert named["name"].tolist() == [t.strings[c] for c in t.ops.name]


def test_import_traceclass_and_cli_help_stay_cheap():
    code = ("import sys, traceclass\n"
            "from traceclass.cli import main\n"
            "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
            "for cmd in ('analyze', 'diff', 'check', 'baseline', 'record', 'export'):\n"
            "    try:\n        main([cmd, '--help'])\n    except SystemExit:\n        pass\n"
            "print(sorted(m for m in ('numpy', 'pandas', 'matplotlib') if m in sys.modules), file=sys.stderr)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert r.stderr.strip().splitlines()[-1] == "[]"
