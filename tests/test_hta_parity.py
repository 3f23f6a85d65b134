"""GPU temporal breakdown against HTA 0.5.0 on the corpus traces.

HTA's numbers (tests/data/hta_0.5.0_temporal_breakdown.json) were recorded with
benchmarks/hta_parity.py. HTA differs from us by definition in three ways; applying its rules
to our tables must reproduce its idle and compute shares within 1 percentage point, which
shows the interval logic agrees where the definitions do:

1. HTA rounds ns-resolution timestamps: start up to the next whole µs, end down (ceil/floor);
2. it keeps only GPU rows whose correlation matches a runtime event (work queued before the
   profiling window is dropped), and it counts ``cuda_sync`` rows that carry a stream as
   non-compute busy time;
3. its communication pattern misses symmetric-memory all-reduce kernels
   (``multimem_all_reduce_kernel``), which it counts as compute.

Our default output keeps exact ns, pre-window work, excludes sync rows and counts (3) as
communication; the exact figures are asserted too, so a change in either shows up.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from conftest import CORPUS
from traceclass import timeline as tl
from traceclass.analysis.gpu_timeline import device_timelines
from traceclass.analysis.kernel_families import gpu_families
from traceclass.ingest import load
from traceclass.model import GpuKind

HTA = json.loads((Path(__file__).parent / "data" / "hta_0.5.0_temporal_breakdown.json").read_text())
CASES = sorted(k for k, v in HTA.items() if isinstance(v, list))


def _hta_rules(trace):
    g = trace.gpu
    fam = gpu_families(trace)
    keep = (g.api >= 0) & ((g.kind != GpuKind.SYNC) | (g.stream != -1))
    s, e = g.start_ns[keep], g.end_ns[keep]
    if ((s % 1000) != 0).any() or ((e % 1000) != 0).any():
        s = -(-s // 1000) * 1000
        e = (e // 1000) * 1000
    names = trace.strings.decode(g.name[keep])
    comm_hta = np.array([n.lower().startswith("nccl") or "ncclkernel" in n.lower() for n in names], dtype=bool)
    compute = (g.kind[keep] == GpuKind.KERNEL) & ~comm_hta
    window = int(e.max() - s.min())
    idle = window - tl.union_length(s, e)
    comp = tl.union_length(s[compute], e[compute])
    del fam
    return 100.0 * idle / window, 100.0 * comp / window


@pytest.mark.parametrize("name", CASES)
def test_hta_definitions_reproduce_hta_numbers(name):
    path = CORPUS / "torch" / "gpu" / name
    if not path.exists():
        pytest.skip("corpus not available")
    idle, comp = _hta_rules(load(path))
    ref = HTA[name][0]
    assert idle == pytest.approx(ref["idle_time_pctg"], abs=1.0)
    assert comp == pytest.approx(ref["compute_time_pctg"], abs=1.0)


# our exact figures (idle %, compute %) with our definitions, and the largest reason for the
# difference to HTA
EXACT = {
    "a100_train_rank0_of16.json.gz": (64.40, 17.13),  # 872 GPU rows queued before the window
    "h100_bert-small_inference.json.gz": (92.08, 7.86),  # HTA loses up to 2 µs per 4 µs kernel
    "mi210_gpu_only.json.gz": (10.64, 89.36),  # 562 kernels x ~1 µs lost by HTA's ceil/floor
    "v100_ns_resolution.json.gz": (1.58, 97.53),
    "b200_eager.json.gz": (86.27, 10.24),  # multimem all-reduce counted as communication
}


@pytest.mark.parametrize("name", sorted(EXACT))
def test_exact_breakdown(name):
    path = CORPUS / "torch" / "gpu" / name
    if not path.exists():
        pytest.skip("corpus not available")
    t = device_timelines(load(path))[0]
    idle, comp = EXACT[name]
    assert 100.0 * t.idle_ns / t.window_ns == pytest.approx(idle, abs=0.01)
    assert 100.0 * t.compute_ns / t.window_ns == pytest.approx(comp, abs=0.01)
