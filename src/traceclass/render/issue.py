"""The short form of the report, for a GitHub issue body (GitHub's limit: 65,536 characters).

Open: header, verdict with the lead line of each opportunity, what the recording could not show,
the findings table and the memory peaks. Folded (``<details>``), one block each: the evidence of
the largest findings (2 rows each; informational findings stay in the table), stages, top
operators and kernels (``--top`` rows, 8 by default), GPU timeline, hardware, notes. The full
report keeps everything else (how each recoverable time was estimated, roofline inputs,
definitions). Every ``<summary>`` names its rule, site and time, so no two read alike; GitHub
renders no markdown there, so it is HTML-escaped only. Blocks that do not fit are left out and a
closing line says which.
"""

from __future__ import annotations

from traceclass.render import markdown as md  # other_notes only
from traceclass.render.markdown import finding_details, finding_rows, recoverable, section, table
from traceclass.render.escape import html_text, text
from traceclass.report.model import Report

NAME = "issue"
EXTENSION = ".md"

GITHUB_BODY_LIMIT = 65_536
_RESERVE = 600  # room for the "cut" line and closing text
ISSUE_EVIDENCE_ROWS = 2
ISSUE_DETAILS = 5  # findings shown with their evidence (the largest; informational ones stay in the table)
ISSUE_STAGES = 8
DEFAULT_TOP = 8


def _fold(summary: str, body: str) -> str:
    return f"<details><summary>{summary}</summary>\n\n{body.strip()}\n\n</details>"


def _summaries(report: Report) -> list[str]:
    """One summary per finding: code, name, title (the site) and time; made distinct with the
    fingerprint where two would still read alike."""
    out = []
    for f in report.findings:
        what = html_text(f.title or f.message, 90)
        out.append(f"{f.code} {html_text(f.name)}: {what} · {recoverable(f)}")
    seen: dict[str, int] = {}
    for s in out:
        seen[s] = seen.get(s, 0) + 1
    return [s + f" · {f.fingerprint}" if seen[s] > 1 else s for s, f in zip(out, report.findings)]


def render(report: Report, top_n: int | None = None) -> str:
    """The issue body; ``top_n`` rows per table (None: :data:`DEFAULT_TOP`)."""
    return render_issue(report, top_n=top_n)


def render_issue(report: Report, limit: int = GITHUB_BODY_LIMIT, top_n: int | None = None) -> str:
    top = top_n or DEFAULT_TOP
    head = [section("header", report), section("verdict", report), section("caveats", report)]
    if report.findings:
        head.append("## Findings\n\n" + table(["recoverable", "severity", "rule", "what to change"],
                                              finding_rows(list(report.findings)), "rlll"))
    if getattr(report, "memory", ()):
        head.append(section("memory", report))
    blocks: list[tuple[str, str]] = []
    detailed = [(f, s) for f, s in zip(report.findings, _summaries(report)) if f.severity != "info"]
    for f, summary in detailed[:ISSUE_DETAILS]:
        blocks.append((f"{f.code} evidence", _fold(summary, finding_details(f, ISSUE_EVIDENCE_ROWS, heading=False, estimate=False))))
    if len(detailed) > ISSUE_DETAILS:
        rest = len(detailed) - ISSUE_DETAILS
        blocks.append(("more findings", f"{rest} more finding{'s' if rest != 1 else ''} with evidence in the full report."))
    if report.stages:
        blocks.append(("stages", _fold(f"Stages ({min(len(report.stages), ISSUE_STAGES)} of {len(report.stages)})",
                                       _body(section("stages", report, limit=ISSUE_STAGES)))))
    if report.ops:
        blocks.append(("top operators", _fold(f"Top {min(top, len(report.ops))} operators (roofline)",
                                              _body(section("ops", report, top, detail=False)))))
    if report.devices:
        blocks.append(("GPU timeline", _fold("GPU timeline", _body(section("timeline", report)))))
    if report.kernels:
        blocks.append(("top kernels", _fold(f"Top {min(top, len(report.kernels))} GPU kernels",
                                            _body(section("kernels", report, top, signatures=False)))))
    if report.cpu_profile is not None:
        cpu = section("cpu", report, top)
        if cpu:
            blocks.append(("CPU profile", _fold("CPU profile", _body(cpu))))
    if report.devices or any(o.flops is not None for o in report.ops):
        blocks.append(("hardware", _fold("Hardware", _body(section("hardware", report)))))
    if md.other_notes(report) or report.rule_errors:
        blocks.append(("notes", _fold("Notes", _body(section("notes", report)))))

    out = "\n\n".join(p for p in head if p)
    if len(out) > limit - _RESERVE:
        out = out[: limit - _RESERVE].rsplit("\n", 1)[0]
        cut = ["the rest of the findings table"] + [name for name, _ in blocks]
    else:
        cut = []
        for name, block in blocks:
            if len(out) + 2 + len(block) <= limit - _RESERVE:
                out += "\n\n" + block
            else:
                cut.append(name)
    if cut:
        out += (f"\n\n**Cut to fit GitHub's {GITHUB_BODY_LIMIT:,}-character limit:** "
                + ", ".join(text(c, None) for c in cut)
                + ". Run `traceclass analyze TRACE --format json` for everything.")
    out += ("\n\n<sub>Generated by traceclass " + text(report.traceclass_version, 20)
            + " (`--issue`, the short form); `traceclass analyze TRACE` writes the full report.</sub>\n")
    assert len(out) <= limit
    return out


def _body(section: str) -> str:
    """A section without its ``##`` heading (the summary names it)."""
    lines = section.split("\n")
    return "\n".join(lines[2:] if lines and lines[0].startswith("## ") else lines)
