"""Pairing what two runs share: stages, op groups, kernel families, devices, findings, and the
differences in setup that stop a comparison from isolating one change.

Matching keys (names are compared exactly, as the trace wrote them):

* stages by name; the step stage (``ProfilerStep``, or ``(whole trace)`` when a trace has no
  steps) pairs with the other run's step stage whatever its name;
* op groups by (op name, input shapes, dtype): vendor-neutral, so an NVIDIA and an AMD trace of
  one model pair their ops although the kernels differ; groups without an op (bare kernels,
  graph replays) by their kernel/launch name. Rows with the same key (same shapes, different
  strides) are merged;
* kernel families (``gemm``, ``attention``, ...) by family;
* devices by trace index; memory rows by (device type, device);
* findings by fingerprint (rule code + location).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Iterable, TypeVar

from traceclass.compare.run import Run, gpu_names, op_key
from traceclass.report.model import KernelFamilyRow, OpRow, StageRow

T = TypeVar("T")

# source.meta keys naming software versions; a difference is called out
VERSION_KEYS = (
    ("torch_version", "torch"),
    ("cuda_runtime_version", "CUDA runtime"),
    ("cuda_driver_version", "CUDA driver"),
    ("cupti_version", "CUPTI"),
    ("hip_runtime_version", "HIP runtime"),
    ("hip_driver_version", "HIP driver"),
    ("roctracer_version", "roctracer"),
    ("nsys.product_version", "Nsight Systems"),
    ("distributed.backend", "distributed backend"),
    ("distributed.nccl_version", "NCCL"),
    ("distributed.world_size", "world size"),
)
# profiler switches that change the profiler's own overhead
PROFILER_FLAGS = ("record_shapes", "with_stack", "profile_memory", "with_modules", "with_flops")


@dataclasses.dataclass(frozen=True)
class Callout:
    topic: str  # "device", "version", "profiler", "analysis"
    what: str  # plain text: "GPU", "CUDA runtime", "with_stack"
    baseline: str
    candidate: str
    consequence: str  # why it matters, plain text


def environment_differences(b: Run, c: Run) -> list[Callout]:
    out: list[Callout] = []
    gb, gc = gpu_names(b), gpu_names(c)
    if b.has_gpu != c.has_gpu:
        out.append(Callout("device", "GPU activity", "yes" if b.has_gpu else "none", "yes" if c.has_gpu else "none",
                           "one run used a GPU and the other did not"))
    elif gb != gc:
        out.append(Callout("device", "GPU", ", ".join(gb) or "unknown", ", ".join(gc) or "unknown",
                           "different hardware: every time differs for reasons other than the change"))
    for key, label in VERSION_KEYS:
        vb, vc = b.meta.get(key), c.meta.get(key)
        if vb != vc and not (vb is None and vc is None):
            out.append(Callout("version", label, _s(vb), _s(vc), "different software versions"))
    if (b.producer, b.format) != (c.producer, c.format) and not _same_sampler(b, c):
        out.append(Callout("profiler", "profiler", f"{b.producer} ({b.format})", f"{c.producer} ({c.format})",
                           "different profilers record different events with different overheads"))
    for flag in PROFILER_FLAGS:
        vb, vc = b.meta.get(flag), c.meta.get(flag)
        if vb is not None and vc is not None and bool(vb) != bool(vc):
            out.append(Callout("profiler", flag, _s(vb), _s(vc),
                               "profiler settings differ, so does the profiler's own overhead"))
    if b.ops_time_basis and c.ops_time_basis and b.ops_time_basis != c.ops_time_basis:
        out.append(Callout("analysis", "op time basis", b.ops_time_basis, c.ops_time_basis,
                           "op times are GPU time in one run and host time in the other"))
    if b.warmup_steps is not None and c.warmup_steps is not None and b.warmup_steps != c.warmup_steps:
        out.append(Callout("analysis", "warm-up steps", str(b.warmup_steps), str(c.warmup_steps),
                           "the steady state starts at a different step"))
    out += _sampling_differences(b, c)
    if b.traceclass_version and c.traceclass_version and b.traceclass_version != c.traceclass_version:
        out.append(Callout("analysis", "traceclass version", b.traceclass_version, c.traceclass_version,
                           "the reports were analysed by different traceclass versions"))
    return out


def _same_sampler(b: Run, c: Run) -> bool:
    """One sampler saved two ways (py-spy's flamegraph SVG, raw stacks, speedscope): the same
    samples, so the output format is no difference in what was recorded."""
    name_b, name_c = b.producer.partition("@")[0], c.producer.partition("@")[0]
    return bool(name_b) and name_b == name_c and b.cpu is not None and c.cpu is not None


def _sampling_differences(b: Run, c: Run) -> list[Callout]:
    """Sampled CPU profiles recorded or analysed differently (py-spy flags, --source-root)."""
    pb, pc = b.cpu, c.cpu
    if pb is None or pc is None:
        return []
    out = []
    if pb.includes_idle is not None and pc.includes_idle is not None and pb.includes_idle != pc.includes_idle:
        out.append(Callout("profiler", "idle samples (py-spy --idle)", _yes(pb.includes_idle), _yes(pc.includes_idle),
                           "waiting threads are sampled in one run only: the shares differ for that reason alone"))
    elif (pb.includes_idle is None) != (pc.includes_idle is None):
        out.append(Callout("analysis", "idle samples (py-spy --idle)", _known(pb.includes_idle), _known(pc.includes_idle),
                           "one file says whether idle samples were kept, the other does not: lines without "
                           "source are read as compute in one run and as unverified in the other"))
    if pb.gil_only is not None and pc.gil_only is not None and pb.gil_only != pc.gil_only:
        out.append(Callout("profiler", "GIL-only sampling (py-spy --gil)", _yes(pb.gil_only), _yes(pc.gil_only),
                           "one run sampled only threads holding the GIL: the shares differ for that reason alone"))
    if pb.interval_ns and pc.interval_ns and pb.interval_ns != pc.interval_ns:
        out.append(Callout("profiler", "sampling interval", f"{pb.interval_ns / 1e6:g} ms", f"{pc.interval_ns / 1e6:g} ms",
                           "sample counts differ for that reason alone (times and shares still compare)"))
    if (pb.source_lines > 0) != (pc.source_lines > 0):
        out.append(Callout("analysis", "source lines read (--source-root)", _yes(pb.source_lines > 0),
                           _yes(pc.source_lines > 0), "a line's text tells a wait from compute in one run only: "
                           "the kinds differ for that reason alone"))
    return out


def _known(v: bool | None) -> str:
    return "not recorded" if v is None else _yes(v)


def _yes(v: bool) -> str:
    return "yes" if v else "no"


def _s(v: Any) -> str:
    return "not recorded" if v is None else str(v)


@dataclasses.dataclass(frozen=True)
class Pairing:
    """Items of both runs by key: present in both, only in the baseline, only in the candidate."""

    both: list[tuple[Any, Any]]
    only_baseline: list[Any]
    only_candidate: list[Any]


def pair(b_items: Iterable[T], c_items: Iterable[T], key) -> Pairing:  # type: ignore[no-untyped-def]
    bk = {key(x): x for x in b_items}
    ck = {key(x): x for x in c_items}
    both = [(bk[k], ck[k]) for k in bk if k in ck]
    return Pairing(both=both, only_baseline=[bk[k] for k in bk if k not in ck],
                   only_candidate=[ck[k] for k in ck if k not in bk])


def pair_stages(b: Run, c: Run) -> Pairing:
    sb, sc = b.step, c.step

    def key(s: StageRow) -> tuple[str, str]:
        if s is sb or s is sc:
            return ("step", "")
        return (s.kind if s.kind == "step" else "", s.name)

    return pair(b.stages, c.stages, key)


def merged_ops(run: Run) -> list[OpRow]:
    """Op groups with equal matching keys merged (series added element-wise)."""
    merged: dict[tuple[str, str, str, str], OpRow] = {}
    for o in run.ops:
        prev = merged.get(op_key(o))
        if prev is None:
            merged[op_key(o)] = o
            continue
        steps = tuple(a + b for a, b in zip(prev.step_ns, o.step_ns)) if len(prev.step_ns) == len(o.step_ns) else ()
        merged[op_key(o)] = dataclasses.replace(
            prev, count=prev.count + o.count, total_ns=prev.total_ns + o.total_ns, step_ns=steps,
            top_kernels=tuple(dict.fromkeys(prev.top_kernels + o.top_kernels))[:3])
    return list(merged.values())


def pair_ops(b: Run, c: Run) -> Pairing:
    return pair(merged_ops(b), merged_ops(c), op_key)


def pair_families(b: Run, c: Run) -> Pairing:
    return pair(b.families, c.families, lambda f: f.family)


def family_names(fams: Iterable[KernelFamilyRow]) -> list[str]:
    return [f.family for f in fams]
