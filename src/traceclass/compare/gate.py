"""The regression gate behind ``traceclass check``: a few key metrics against thresholds, and
per-stage budgets.

Metrics (baseline vs candidate) and when each fails, thresholds from ``[tool.traceclass.check]``:

* ``step_p50_pct`` — step P50 wall time: fails when it grew by more than the threshold **and**
  the step samples differ significantly (the test of :mod:`~traceclass.compare.noise`,
  p < 0.05); with a single step in a run the noise is unknown and the threshold alone decides;
* ``step_p99_pct`` — step P99: fails above the threshold (a tail statistic; with few steps it is
  close to the slowest step, so no test is applied);
* ``gpu_busy_pct_points`` — GPU busy share of the steady steps (busy ÷ wall): fails when it fell
  by more than this many percentage points, significantly, while the step did not get faster
  beyond noise (a faster GPU also lowers the share; that is not a regression). Not applied to
  runs without step markers, whose "step" is the profiler window: busy ÷ a fixed window falls
  when the GPU work gets faster;
* ``peak_memory_pct`` — peak allocated memory (the GPU with the largest peak, else the host):
  fails above the threshold (one value per run);
* ``stage_p50_pct`` — P50 of every other stage present in both runs, as for the step P50.

Budgets (``[tool.traceclass.budgets]``, e.g. ``preprocess = "10ms"``): the candidate's P50 of
that stage must not exceed the budget. A budget names a stage exactly, or by the part after its
last ``:`` (``preprocess`` matches ``stage:preprocess``), or ``step`` for the step stage; a
budget that matches no stage of the candidate fails (a renamed stage must not pass silently).

Outcome: ``fail`` (exit 1) when a row regressed, is over budget or missing; ``nothing
comparable`` (exit 2) when no row could be compared at all — no step, stage, GPU busy share
or memory peak measured in both runs and no budget (two sampled CPU profiles, say): a gate
that checked nothing must not pass; else ``pass`` (exit 0).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Mapping

from traceclass.compare import noise
from traceclass.compare.match import Callout, environment_differences, pair_stages
from traceclass.compare.noise import NoiseCall
from traceclass.compare.run import Run
from traceclass.report.model import StageRow

GATE_RULE = (
    f"a P50 (step or stage) fails when it grew by more than its threshold and the per-occurrence samples "
    f"differ significantly (two-sided Mann-Whitney U, or Welch's t-test when there are too few samples for "
    f"Mann-Whitney to reach p < {noise.ALPHA:g}; {noise.CONFIDENCE_PCT}% confidence); with a single step in a run "
    f"the threshold alone decides; step P99 and peak memory fail on the threshold alone; the GPU busy share fails "
    f"when it fell by more than its points, significantly, while the step did not get faster beyond noise"
)

OK, REGRESSED, IMPROVED, OVER_BUDGET, MISSING, NOT_APPLICABLE = (
    "ok", "regressed", "improved", "over budget", "missing", "n/a")
FAILING = (REGRESSED, OVER_BUDGET, MISSING)
PASS, FAIL, NOTHING_COMPARABLE = "pass", "fail", "nothing comparable"


@dataclasses.dataclass(frozen=True)
class CheckRow(noise.Change):
    metric: str  # "step P50", "step P99", "GPU busy share", "peak memory", "stage P50", "budget"
    name: str  # stage name (untrusted) for stage and budget rows, device label for memory, else ""
    baseline: float | None
    candidate: float | None
    unit: str  # "ns", "pct" (delta in percentage points), "bytes"
    limit: str  # the rule, plain text: "+5% (step_p50_pct)"
    status: str
    noise: NoiseCall | None
    note: str = ""
    budget_ns: int | None = None  # budget rows: the budget


@dataclasses.dataclass(frozen=True)
class CheckResult:
    rows: tuple[CheckRow, ...]
    callouts: tuple[Callout, ...]
    thresholds: dict[str, float]
    budgets_ns: dict[str, int]
    method: str

    nothing_comparable: str = ""  # why no metric could be compared ("" when one could)

    @property
    def failed(self) -> bool:
        return any(r.status in FAILING for r in self.rows)

    @property
    def comparable(self) -> bool:
        """Whether any row compared something (a budget row judges the candidate alone)."""
        return any(r.status != NOT_APPLICABLE for r in self.rows)

    @property
    def outcome(self) -> str:
        if self.failed:
            return FAIL
        return PASS if self.comparable else NOTHING_COMPARABLE

    @property
    def exit_code(self) -> int:
        """1 on a failure; 2 when nothing could be compared (a gate that checked nothing must not
        pass: for CI that is bad input, like an unreadable file); else 0."""
        return {FAIL: 1, NOTHING_COMPARABLE: 2}.get(self.outcome, 0)


def key_metrics(run: Run) -> dict[str, Any]:
    """The figures the gate compares, as plain data (also written into baseline files)."""
    st = run.step
    busy = gpu_busy_share(st) if (st is not None and run.has_gpu) else None
    peak = peak_memory(run)
    return {
        "step_p50_ns": st.p50_ns if st else None,
        "step_p99_ns": st.p99_ns if st else None,
        "steady_steps": st.count if st else 0,
        "gpu_busy_pct": busy[0] if busy else None,
        "peak_memory": {"device": peak[0], "bytes": peak[1]} if peak else None,
        "stages": {s.name: {"kind": s.kind, "count": s.count, "p50_ns": s.p50_ns, "p99_ns": s.p99_ns}
                   for s in run.stages},
    }


def gpu_busy_share(st: StageRow) -> tuple[float, list[float]] | None:
    """(busy ÷ wall over the steady steps in %, per-step shares) or None without GPU data."""
    if not st.gpu_busy_each_ns or not st.wall_ns or len(st.gpu_busy_each_ns) != len(st.wall_ns):
        return None
    wall = sum(st.wall_ns)
    if wall <= 0:
        return None
    each = [100.0 * b / w for b, w in zip(st.gpu_busy_each_ns, st.wall_ns) if w > 0]
    return 100.0 * sum(st.gpu_busy_each_ns) / wall, each


def peak_memory(run: Run) -> tuple[str, int] | None:
    gpu = [m for m in run.memory if m.device_type == "gpu"]
    if gpu:
        m = max(gpu, key=lambda m: m.peak_allocated_bytes)
        return f"GPU {m.device}", m.peak_allocated_bytes
    host = [m for m in run.memory if m.device_type == "cpu"]
    if host:
        return "host", max(m.peak_allocated_bytes for m in host)
    return None


def _limit(key: str, th: float, unit: str = "%") -> str:
    return f"+{th:g}{unit} ({key})"


def _time_row(metric: str, name: str, sb: StageRow, sc: StageRow, key: str, th: float, tested: bool = True) -> CheckRow:
    b = sb.p50_ns if metric.endswith("P50") else sb.p99_ns
    c = sc.p50_ns if metric.endswith("P50") else sc.p99_ns
    call = noise.judge(sb.wall_ns, sc.wall_ns, b, c) if tested else None
    if b is None or c is None or not math.isfinite(b) or not math.isfinite(c):
        return CheckRow(metric, name, b, c, "ns", _limit(key, th), NOT_APPLICABLE, call, "not measured in both runs")
    pct = 100.0 * (c - b) / b if b else (math.inf if c > b else 0.0)
    significant = call is None or not call.noise_known or (call.p_value is not None and call.p_value < noise.ALPHA)
    note = ""
    if call is not None and not call.noise_known:
        note = "single sample: noise unknown, threshold alone"
    elif call is not None and abs(pct) > th and not significant:
        note = f"beyond the threshold but within noise ({call.test}, {call.reason})"
    status = OK
    if pct > th and significant:
        status = REGRESSED
    elif pct < -th and significant:
        status = IMPROVED
    return CheckRow(metric, name, b, c, "ns", _limit(key, th), status, call, note)


def check(b: Run, c: Run, thresholds: Mapping[str, float], budgets_ns: Mapping[str, int]) -> CheckResult:
    rows: list[CheckRow] = []
    sb, sc = b.step, c.step
    th = {k: float(v) for k, v in thresholds.items()}
    step_row = None
    if sb is not None and sc is not None:
        step_row = _time_row("step P50", "", sb, sc, "step_p50_pct", th["step_p50_pct"])
        p99_row = _time_row("step P99", "", sb, sc, "step_p99_pct", th["step_p99_pct"], tested=False)
        if b.step_synthetic or c.step_synthetic:
            who = "either run" if (b.step_synthetic and c.step_synthetic) else \
                "the baseline" if b.step_synthetic else "the candidate"
            why = f"no step markers in {who}: the profiler window stands in for the step"
            step_row, p99_row = (dataclasses.replace(r, note="; ".join(x for x in (r.note, why) if x))
                                 for r in (step_row, p99_row))
        rows += [step_row, p99_row]
    else:
        for m, k in (("step P50", "step_p50_pct"), ("step P99", "step_p99_pct")):
            rows.append(CheckRow(m, "", None, None, "ns", _limit(k, th[k]), NOT_APPLICABLE, None,
                                 f"no steps or ranges in {_which(sb is None, sc is None)}"))
    rows.append(_busy_row(b, c, th["gpu_busy_pct_points"], step_row))
    rows.append(_memory_row(b, c, th["peak_memory_pct"]))
    p = pair_stages(b, c)
    for s_b, s_c in p.both:
        if s_b.kind == "step" and (s_b is sb):
            continue
        rows.append(_time_row("stage P50", s_b.name, s_b, s_c, "stage_p50_pct", th["stage_p50_pct"]))
    for s_b in p.only_baseline:
        rows.append(CheckRow("stage P50", s_b.name, s_b.p50_ns, None, "ns", _limit("stage_p50_pct", th["stage_p50_pct"]),
                             NOT_APPLICABLE, None, "not in the candidate"))
    for s_c in p.only_candidate:
        rows.append(CheckRow("stage P50", s_c.name, None, s_c.p50_ns, "ns", _limit("stage_p50_pct", th["stage_p50_pct"]),
                             NOT_APPLICABLE, None, "new in the candidate"))
    for name, budget in budgets_ns.items():
        rows.append(_budget_row(name, budget, b, c))
    result = CheckResult(rows=tuple(rows), callouts=tuple(environment_differences(b, c)), thresholds=th,
                         budgets_ns=dict(budgets_ns), method=GATE_RULE)
    if not result.comparable:
        result = dataclasses.replace(result, nothing_comparable=_why_nothing(b, c))
    return result


def _which(no_b: bool, no_c: bool) -> str:
    return "either run" if no_b and no_c else "the baseline" if no_b else "the candidate"


def _why_nothing(b: Run, c: Run) -> str:
    """Plain text: what each metric lacked, and what to do instead."""
    parts = []
    if b.step is None or c.step is None:
        parts.append(f"no steps or ranges in {_which(b.step is None, c.step is None)}")
    if not (b.has_gpu and c.has_gpu):
        parts.append(f"no GPU activity in {_which(not b.has_gpu, not c.has_gpu)}")
    elif b.step is not None and c.step is not None:
        parts.append("no per-step GPU busy time")
    pb, pc = peak_memory(b), peak_memory(c)
    if pb is None or pc is None:
        parts.append(f"no memory events in {_which(pb is None, pc is None)}")
    elif pb[0] != pc[0]:
        parts.append("memory peaks of different devices")
    if b.stages and c.stages:
        parts.append("no stage in common")
    text = "; ".join(parts) or "no metric was measured in both runs"
    if b.cpu is not None and c.cpu is not None:
        text += " (sampled CPU profiles: `traceclass diff` compares their hot spots, kinds and threads)"
    return text + " — the gate checked nothing"


def _busy_row(b: Run, c: Run, points: float, step_row: CheckRow | None) -> CheckRow:
    limit = f"−{points:g} pp (gpu_busy_pct_points)"
    if not (b.has_gpu and c.has_gpu and b.step and c.step):
        return CheckRow("GPU busy share", "", None, None, "pct", limit, NOT_APPLICABLE, None,
                        "no GPU activity in " + ("either run" if not (b.has_gpu or c.has_gpu) else "one run"))
    if b.step_synthetic or c.step_synthetic:
        # busy ÷ a fixed-length window rises when GPU work gets slower and falls when it gets
        # faster: without steps the share cannot tell a regression from a speed-up
        return CheckRow("GPU busy share", "", None, None, "pct", limit, NOT_APPLICABLE, None,
                        "no step markers: a share of the profiler window does not tell slower GPU work "
                        "from less idle time")
    xb, xc = gpu_busy_share(b.step), gpu_busy_share(c.step)
    if xb is None or xc is None:
        return CheckRow("GPU busy share", "", None, None, "pct", limit, NOT_APPLICABLE, None,
                        "no per-step GPU busy time")
    call = noise.judge(xb[1], xc[1], xb[0], xc[0], time_like=False, points=True)
    drop = xb[0] - xc[0]
    significant = not call.noise_known or (call.p_value is not None and call.p_value < noise.ALPHA)
    faster = step_row is not None and step_row.noise is not None and step_row.noise.label == noise.FASTER
    status, note = OK, ""
    if drop > points and significant:
        if faster:
            note = "share fell but the step got faster (GPU work shrank): not a regression"
        else:
            status = REGRESSED
    elif drop < -points and significant:
        status = IMPROVED
    if not call.noise_known:
        note = (note + "; " if note else "") + "single sample: noise unknown, threshold alone"
    return CheckRow("GPU busy share", "", xb[0], xc[0], "pct", limit, status, call, note)


def _memory_row(b: Run, c: Run, th: float) -> CheckRow:
    limit = _limit("peak_memory_pct", th)
    pb, pc = peak_memory(b), peak_memory(c)
    if pb is None or pc is None:
        where = _which(pb is None, pc is None)
        torch = any(r.cpu is None and r.format == "kineto" for r, p in ((b, pb), (c, pc)) if p is None)
        return CheckRow("peak memory", "", None, None, "bytes", limit, NOT_APPLICABLE, None,
                        f"no memory events in {where}" + (" (record with profile_memory=True)" if torch else ""))
    if pb[0] != pc[0] and not (pb[0].startswith("GPU") and pc[0].startswith("GPU")):
        return CheckRow("peak memory", f"{pb[0]} / {pc[0]}", pb[1], pc[1], "bytes", limit, NOT_APPLICABLE, None,
                        "peaks of different devices")
    pct = 100.0 * (pc[1] - pb[1]) / pb[1] if pb[1] else 0.0
    status = REGRESSED if pct > th else IMPROVED if pct < -th else OK
    return CheckRow("peak memory", pc[0], pb[1], pc[1], "bytes", limit, status, None, "one value per run")


def find_stage(run: Run, name: str) -> StageRow | None:
    exact = [s for s in run.stages if s.name == name]
    if exact:
        return exact[0]
    if name.lower() == "step" and run.step is not None:
        return run.step
    tail = [s for s in run.stages if s.name.rsplit(":", 1)[-1] == name]
    return tail[0] if len(tail) == 1 else None


def _budget_row(name: str, budget: int, b: Run, c: Run) -> CheckRow:
    limit = "candidate P50 ≤ budget"
    sc = find_stage(c, name)
    sb = find_stage(b, name)
    if sc is None:
        known = ", ".join(s.name for s in c.stages[:12])
        return CheckRow("budget", name, sb.p50_ns if sb else None, None, "ns", limit, MISSING, None,
                        f"no stage named {name!r} in the candidate (stages: {known or 'none'})", budget)
    status = OVER_BUDGET if (sc.p50_ns is not None and sc.p50_ns > budget) else OK
    note = "" if sc.name == name else f"budget {name!r} matched stage {sc.name!r}"
    return CheckRow("budget", sc.name, sb.p50_ns if sb else None, sc.p50_ns, "ns", limit, status, None, note, budget)


def to_dict(result: CheckResult, baseline_facts: Mapping[str, Any] | None = None,
            candidate_file: str = "") -> dict[str, Any]:
    def row(r: CheckRow) -> dict[str, Any]:
        d = {f.name: getattr(r, f.name) for f in dataclasses.fields(r) if f.name != "noise"}
        d["delta"] = r.delta
        d["delta_pct"] = r.delta_pct
        d["noise"] = dataclasses.asdict(r.noise) if r.noise else None
        return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in d.items()}

    return {
        "kind": "traceclass-check",
        "schema_version": 1,
        "passed": result.outcome == PASS,
        "outcome": result.outcome,
        "nothing_comparable": result.nothing_comparable or None,
        "exit_code": result.exit_code,
        "candidate": candidate_file,
        "baseline": dict(baseline_facts or {}),
        "callouts": [dataclasses.asdict(c) for c in result.callouts],
        "thresholds": result.thresholds,
        "budgets_ns": result.budgets_ns,
        "method": result.method,
        "rows": [row(r) for r in result.rows],
    }
