"""Hand-built Kineto traces shared by the TC202 / TC203 / TC601 tests (exact integer-ns times)."""

from __future__ import annotations

from pathlib import Path

from kineto_builder import KinetoBuilder
from traceclass.ingest import load
from traceclass.model import Trace

STEP_NS = 1_000_000
DATALOADER = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"


def gap_causes_trace(tmp_path: Path, steps: int = 3) -> Trace:
    """``steps`` steps of 1 ms (step 1 is warm-up), each with one gap of every cause.

    Per step S (times in us from S):

    * k1 GEMM 5-105, launched by aten::mm at 1;
    * launch-overhead gap 105-156: aten::add (no kernel) runs 100-150, aten::relu 150-160 launches
      k2 (156-206) at 151;
    * host-sync gap 209-286: aten::item 200-215 (train.py:57) copies 1 byte DtoH into pinned
      memory (207-209) and waits in cudaStreamSynchronize 208-212; nothing runs until aten::mul
      (train.py:60) launches k3 (286-296) at 281;
    * data-loading gap 296-516: the DataLoader range 300-500, then aten::copy_ launches a pinned
      HtoD copy (516-526) at 511;
    * a 4 us gap 526-530 before k4 (530-600);
    * GPU-side gap 600-700: aten::mm launches k5 at 601-604, but it starts only at 700 (750 end);
    * between steps: 750 .. next step's k1 at 1005, with no host activity recorded but the
      launching aten::mm (unknown).
    """
    b = KinetoBuilder()
    for n in range(steps):
        s = n * STEP_NS
        b.step(n + 1, s, STEP_NS)
        mm = b.op("aten::mm", s, 10_000)
        b.launch(mm, "sm90_xmma_gemm", s + 1_000, s + 5_000, 100_000, cpu_dur=3_000)
        b.op("aten::add", s + 100_000, 50_000)
        relu = b.op("aten::relu", s + 150_000, 10_000)
        b.launch(relu, "relu_kernel", s + 151_000, s + 156_000, 50_000, cpu_dur=3_000)
        b.python("train.py(57): <module>", s + 199_000, 17_000)
        b.op("aten::item", s + 200_000, 15_000)
        lsd = b.op("aten::_local_scalar_dense", s + 201_000, 13_000)
        corr = b.runtime("cudaMemcpyAsync", s + 202_000, 5_000, ext=lsd)
        b.memcpy("DtoH", "Device", "Pinned", s + 207_000, 2_000, 1, corr=corr)
        corr = b.runtime("cudaStreamSynchronize", s + 208_000, 4_000, ext=lsd)
        b.sync("Stream Sync", s + 208_000, 4_000, stream=7, corr=corr)
        b.python("train.py(60): <module>", s + 279_000, 12_000)
        mul = b.op("aten::mul", s + 280_000, 10_000)
        b.launch(mul, "mul_kernel", s + 281_000, s + 286_000, 10_000, cpu_dur=3_000)
        b.annotation(DATALOADER, s + 300_000, 200_000)
        cp = b.op("aten::copy_", s + 510_000, 10_000)
        corr = b.runtime("cudaMemcpyAsync", s + 511_000, 3_000, ext=cp)
        b.memcpy("HtoD", "Pinned", "Device", s + 516_000, 10_000, 1 << 20, corr=corr)
        mm = b.op("aten::mm", s + 520_000, 10_000)
        b.launch(mm, "sm90_xmma_gemm", s + 521_000, s + 530_000, 70_000, cpu_dur=3_000)
        mm = b.op("aten::mm", s + 600_000, 10_000)
        b.launch(mm, "sm90_xmma_gemm", s + 601_000, s + 700_000, 50_000, cpu_dur=3_000)
    return load(b.write(tmp_path / "gaps.json"))


def gpu_base_ns(trace: Trace) -> int:
    """Absolute ns of builder time 0 (the first kernel of gap_causes_trace starts at 5 us)."""
    return int(trace.gpu.start_ns.min()) - 5_000
