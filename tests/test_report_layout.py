"""The report as GitHub shows it: tables that fit the 980 px column, nothing cut mid-word, and an
``--issue`` form that is the short one (issue 12).

Markdown is rendered with a CommonMark + GFM-tables parser (markdown-it-py, as cmark-gfm would)
and the cells are measured as rendered text.
"""

from __future__ import annotations

import html
import re
from pathlib import Path

import pytest

markdown_it = pytest.importorskip("markdown_it")

from traceclass.config import load_config  # noqa: E402
from traceclass.engine import run  # noqa: E402
from traceclass.ingest import load  # noqa: E402
from traceclass import units  # noqa: E402
from traceclass.render import issue, markdown, verdict  # noqa: E402
from traceclass.render.escape import shorten, text  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
GPU_SAMPLES = ["torch_cuda-event-sync_a100.json.gz", "torch_ddp-nccl-train_a100.json.gz",
               "torch_minitoy-train_mi250.json.gz"]
CORPUS = ROOT.parent / "shared" / "corpus" / "torch" / "gpu"

# GitHub: 980 px column, 14 px font (~7 px per character of prose; code is 85 % of it in a
# monospace font, ~7.2 px per character), 13 px cell padding on each side plus a border
COLUMN_PX = 980
MAX_COLUMNS = 9


def _report(path: Path):  # type: ignore[no-untyped-def]
    _analysis, report = run(load(str(path)), load_config(cwd=ROOT / "tests"))
    return report


@pytest.fixture(scope="module", params=GPU_SAMPLES)
def sample(request):  # type: ignore[no-untyped-def]
    report = _report(ROOT / "sample_traces" / request.param)
    return report, markdown.render(report), issue.render_issue(report)


def _tables(md: str) -> list[list[list[tuple[str, bool]]]]:
    """Every table as rows of cells; a cell is a list of (text, is_code) runs."""
    tokens = markdown_it.MarkdownIt("commonmark").enable("table").parse(md)
    tables, rows, cells = [], None, None
    for t in tokens:
        if t.type == "table_open":
            rows = []
        elif t.type == "table_close":
            tables.append(rows)
            rows = None
        elif t.type == "tr_open" and rows is not None:
            cells = []
        elif t.type == "tr_close" and rows is not None:
            rows.append(cells)
        elif t.type == "inline" and cells is not None and rows is not None:
            cells.append([(c.content, c.type == "code_inline") for c in (t.children or []) if c.content])
    return tables


def _min_px(cell: list[tuple[str, bool]]) -> int:
    """Width of the widest piece the browser cannot break: runs between ordinary spaces
    (a non-breaking space joins), code counted wider than prose."""
    widest = 0
    for run_text, is_code in cell:
        for word in re.split(r"[ \t]+", run_text):
            widest = max(widest, int(len(word) * (7.2 if is_code else 7)))
    return widest


def test_tables_fit_githubs_column(sample):
    _report_, md, _issue = sample
    tables = _tables(md)
    assert len(tables) >= 4
    for rows in tables:
        head = rows[0]
        header = " | ".join("".join(t for t, _ in c) for c in head)
        assert len(head) <= MAX_COLUMNS, header
        # the narrowest the table can be: each column as wide as its widest unbreakable piece
        cols = len(head)
        need = sum(max(_min_px(r[i]) for r in rows) for i in range(cols)) + 27 * cols
        assert need <= COLUMN_PX, f"{header}: needs {need} px"
        widest = max(len("".join(t for t, _ in c)) for r in rows for c in r)
        assert widest <= 320, header


def _lead_lines(md: str) -> list[str]:
    return [re.sub(r"[`*\\]", "", html.unescape(line)) for line in md.splitlines() if re.match(r"\d+\. \*\*", line)]


def test_a_lead_line_per_opportunity(sample):
    report, md, _issue = sample
    lines = _lead_lines(md)
    assert len(lines) == len(report.opportunities) > 0
    for line, op in zip(lines, report.opportunities):
        assert len(line) <= 125, line  # what to change, where, how much: one line
        assert units.duration(op.recoverable_ns) in line and op.source in line


@pytest.mark.parametrize("name", ["a100_train_rank0_of16.json.gz", "h100_timesformer_inference.json.gz",
                                  "mi300x_resnet_act_checkpoint_train.json.gz", "b200_eager.json.gz"])
def test_lead_lines_of_corpus_traces(name):
    path = CORPUS / name
    if not path.exists():
        pytest.skip("corpus not present")
    report = _report(path)
    lines = _lead_lines(markdown.render(report))
    assert lines and all(len(line) <= 125 for line in lines), lines
    # where the trace has stacks, the lead line names the file:line
    for line, op in zip(lines, report.opportunities):
        if op.where and op.where not in op.title:
            # whole, as its last two path parts, or (a hashed name that would leave the title
            # too little room) the file name's start and the line
            file = op.where.rsplit("/", 1)[-1]
            assert ("/".join(op.where.split("/")[-2:]) in line
                    or (file[:12] in line and file.rpartition(":")[2] in line)), (line, op.where)
            title = line[3:line.index(" at ")]
            assert len(title) >= min(len(op.title), verdict.MIN_TITLE - 10), line


def test_short_file():
    hashed = "/tmp/torchinductor_root/ob/cobhwrc24pdghpldxgebph5xuspi6ydi477zebl46iwvbkhoe4qu.py:132"
    assert verdict._short_file(hashed) == "…/cobhwrc24pdghpldxge….py:132"
    assert verdict._short_file("…/a/model.py:7") == "…/model.py:7"
    assert verdict._short_file("a/b/modeling_timesformer.py:200") == "…/modeling_timesformer.py:200"
    assert verdict._short_file("x/averyveryverylongmodulename_without_line") == "…/averyveryverylongmo…"


def test_conclusion_columns_come_first(sample):
    _report_, md, _issue = sample
    for rows in _tables(md):
        header = ["".join(t for t, _ in c) for c in rows[0]]
        if header[0] == "op" and "bound" in header:
            assert header[1:5] == ["bound", "% of roof", "gap to bound", "share"] or header[1] == "bound"
        if header[0] == "kernel":
            assert header[1:3] == ["share", "bound"]


def test_numbers_stay_with_their_units_in_tables(sample):
    _report_, md, _issue = sample
    for line in md.splitlines():
        if line.startswith("|") and not line.startswith("| ---"):
            prose = re.sub(r"`+[^`]*`+", "", line)
            assert not re.search(r"\d (ns|µs|ms|s|kB|MB|GB|B)\b", prose), line


@pytest.mark.parametrize("s, limit, out", [
    ("its 3.10 ms of work is dispatch overhead in the loop", 20, "its 3.10 ms of work…"),
    ("its 3.10 ms of work", 8, "its…"),
    ("(134.0 ms) before cudaMemcpyAsync", 16, "(134.0 ms)…"),
    ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64", 30, "sm90_xmma_gemm_bf16bf16_…"),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float> >", 40,
     "void at::native::vectorized_…"),
    ("[8x4x128x32] bf16, [128] bf16, [8x4x128x32] bf16", 30, "[8x4x128x32] bf16, [128] bf16…"),
])
def test_cut_ends_at_a_word_boundary(s, limit, out):
    assert shorten(s, limit) == out and len(out) <= limit


def test_nothing_cut_in_detail_sections(sample):
    report, md, iss = sample
    # every finding's message is printed whole in its ### section (long tokens may carry <wbr>)
    plain = md.replace("<wbr>", "").replace("\u00a0", " ")
    for f in report.findings:
        assert text(f.message, None) in plain
        for e in f.evidence[:markdown.EVIDENCE_ROWS]:
            assert text(e.what, None) in plain


def test_shortened_names_are_listed_in_full(sample):
    report, md, _issue = sample
    for k in report.kernels[:15]:
        full = k.full_name or k.name
        assert f"`{full}`" in md


def test_issue_is_the_short_form(sample):
    report, md, iss = sample
    assert len(iss) < len(md) and len(iss) <= issue.GITHUB_BODY_LIMIT
    summaries = re.findall(r"<summary>(.*?)</summary>", iss)
    assert len(summaries) == len(set(summaries))
    # GitHub renders no markdown inside <summary>: a backslash escape would show
    assert not [s for s in summaries if "\\" in s]
    first_fold = iss.index("<details>")
    for note in markdown.caveat_notes(report):
        assert iss.index(text(note, None)) < first_fold
    if report.memory:
        assert iss.index("## Memory") < first_fold


def test_issue_honours_top():
    report = _report(ROOT / "sample_traces" / "torch_ddp-nccl-train_a100.json.gz")
    body = issue.render_issue(report, top_n=3)
    ops = body.split("operators (roofline)</summary>")[1].split("</details>")[0]
    rows = [line for line in ops.splitlines() if line.startswith("| `")]
    assert len(rows) == 3
    assert "Top 3 GPU kernels" in body


@pytest.mark.parametrize("name", ["h100_timesformer_inference.json.gz", "v100_ns_resolution.json.gz"])
def test_issue_is_at_most_about_half_on_large_traces(name):
    path = CORPUS / name
    if not path.exists():
        pytest.skip("corpus not present")
    report = _report(path)
    md, iss = markdown.render(report), issue.render_issue(report)
    assert len(iss) <= 0.8 * len(md)
    if len(md) > 20_000:
        assert len(iss) <= 0.55 * len(md)
