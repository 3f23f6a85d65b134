"""Per op group and per kernel family: time inside each analysed (steady-state) step."""

from __future__ import annotations

import dataclasses

import numpy as np

from traceclass import timeline as tl
from traceclass.analysis.kernel_families import FAMILY_ORDER
from traceclass.analysis.ops import OpAnalysis
from traceclass.analysis.stages import Occurrences
from traceclass.model import GpuKind, Trace
from traceclass.model.table import BLOCK_ROWS

#: steady steps kept in the per-step series of op groups and kernel families
MAX_STEP_SERIES = 1_000
SERIES_BLOCK = BLOCK_ROWS  # op and GPU rows per block


@dataclasses.dataclass(frozen=True)
class StepSeries:
    steps: np.ndarray  # occurrence indices of the steps in the series, time order
    per_group: list[tuple[int, ...]]  # per op group (index into ops.groups): ns in each step
    per_family: dict[str, np.ndarray]  # per kernel family: summed kernel ns in each step

    @property
    def steps_count(self) -> int:
        return len(self.steps)


def step_series(trace: Trace, occ: Occurrences, opa: OpAnalysis, family_code: np.ndarray,
                steps: np.ndarray) -> StepSeries:
    """Per op group and per kernel family: time inside each of ``steps`` (occurrence indices, time order).

    Work belongs to the step whose wall-clock window holds its start on the host, on any
    thread (backward ops on the autograd thread count in their step): owner ops by their
    start; GPU rows by the start of their launching API call, or by their own start when no
    launch was recorded. Op-owned groups add the attributed time of their owner instances
    (as in ``total_ns``); kernel and graph groups the union of their GPU rows; kernel
    families the summed kernel durations. Work in warm-up steps or outside steps is left out.
    """
    n_groups, n_steps = len(opa.groups), len(steps)
    per_group = np.zeros((n_groups, n_steps), dtype=np.int64)
    families: dict[str, np.ndarray] = {}
    if n_steps == 0:
        return StepSeries(steps, [() for _ in range(n_groups)], families)
    w0, w1 = occ.start_ns[steps], occ.end_ns[steps]
    order = np.argsort(w0, kind="stable")
    w0, w1 = w0[order], w1[order]
    slot = order  # window position -> series position (steps are already in time order)

    def step_of(t: np.ndarray) -> np.ndarray:
        k = np.searchsorted(w0, t, side="right") - 1
        ok = (k >= 0) & (t < w1[np.maximum(k, 0)])
        return np.where(ok, slot[np.maximum(k, 0)], -1)

    # rows in blocks: each row-sized temporary is a few MB however long the trace
    ops = trace.ops
    if len(ops) and len(opa.op_group):
        for lo in range(0, len(opa.op_group), SERIES_BLOCK):
            owners = lo + np.flatnonzero(opa.op_group[lo:lo + SERIES_BLOCK] >= 0)
            k = step_of(ops.start_ns[owners])
            m = k >= 0
            np.add.at(per_group, (opa.op_group[owners[m]], k[m]), opa.owner_time.of(owners[m]))
    gpu = trace.gpu
    if len(gpu):
        op_owned = np.array([g.kind == "op" for g in opa.groups] + [True], dtype=bool)
        n_f = len(FAMILY_ORDER)
        # integer ns summed as float64: exact below 2**53 ns (104 days) in any order
        table = np.zeros(n_f * n_steps, dtype=np.float64)
        present = np.zeros(n_f, dtype=bool)  # families with rows in the steps
        bare_key, bare_rows = [], []
        for lo in range(0, len(gpu), SERIES_BLOCK):
            rows = lo + np.flatnonzero(gpu.kind[lo:lo + SERIES_BLOCK] != GpuKind.SYNC)
            api = gpu.api[rows]
            launch_t = np.where(api >= 0, trace.api.start_ns[np.maximum(api, 0)] if len(trace.api) else 0,
                                gpu.start_ns[rows])
            del api
            k = step_of(launch_t)
            del launch_t
            rows, k = rows[k >= 0], k[k >= 0]
            gg = opa.gpu_group[rows]
            bare = ~op_owned[gg]  # gpu_group -1 indexes the trailing True
            if bare.any():
                bare_key.append(gg[bare].astype(np.int64) * n_steps + k[bare])  # int32 groups: no overflow
                bare_rows.append(rows[bare])
            del gg, bare
            dur = (gpu.end_ns[rows] - gpu.start_ns[rows]).astype(np.float64)
            code = family_code[rows].astype(np.int64)
            table += np.bincount(code * n_steps + k, weights=dur, minlength=n_f * n_steps)
            present[code] = True
        if bare_key:
            key, sel = np.concatenate(bare_key), np.concatenate(bare_rows)
            uk, lengths = tl.union_length_by_group(key, gpu.start_ns[sel], gpu.end_ns[sel])
            uk = np.asarray(uk, np.int64)
            np.add.at(per_group, (uk // n_steps, uk % n_steps), np.asarray(lengths, np.int64))
        table = table.reshape(n_f, n_steps)
        for c in np.flatnonzero(present).tolist():
            families[FAMILY_ORDER[c]] = np.rint(table[c]).astype(np.int64)
    return StepSeries(steps, [tuple(int(x) for x in per_group[j].tolist()) for j in range(n_groups)], families)
