"""Hand-built Kineto traces for the cases of issue 10 (exact integer-ns times, builder time 0 =
the first event)."""

from __future__ import annotations

from pathlib import Path

from kineto_builder import KinetoBuilder
from traceclass.ingest import load
from traceclass.model import Trace

MS = 1_000_000
US = 1_000


def host_preprocessing(tmp_path: Path) -> Trace:
    """Three 10 ms steps (step 1 warm-up). Per step S:

    * Python ``pipe.py(10): preprocess`` 0-6 ms holding ``img.py(20): resize`` 1-5 ms, which holds
      ``scipy/zoom.py(30): zoom`` 2-5 ms (no op, no range: nothing named like data);
    * ``aten::mm`` at 6.0 ms launches a GEMM (call 6.000-6.002 ms) that runs 6.1-9.0 ms;
    * nothing recorded from 9.0 to 10 ms.

    Per step the GPU idles 0-6.1 ms (host window 0-6.0 host work, the launch call 2 us,
    98 us after it) and 9.0-10.0 ms (no host activity: unknown).
    """
    b = KinetoBuilder()
    for n in range(3):
        s = n * 10 * MS
        b.step(n + 1, s, 10 * MS)
        b.python("pipe.py(10): preprocess", s, 6 * MS, py_id=3 * n + 1, parent_id=0)
        b.python("img.py(20): resize", s + 1 * MS, 4 * MS, py_id=3 * n + 2, parent_id=3 * n + 1)
        b.python("scipy/zoom.py(30): zoom", s + 2 * MS, 3 * MS, py_id=3 * n + 3, parent_id=3 * n + 2)
        mm = b.op("aten::mm", s + 6 * MS, 10 * US)
        b.launch(mm, "sm90_xmma_gemm", s + 6 * MS, s + 6 * MS + 100 * US, 2_900 * US, cpu_dur=2 * US)
    return load(b.write(tmp_path / "preprocess.json"))


def sync_then_host_work(tmp_path: Path) -> Trace:
    """No steps. A GEMM 0-1 ms; ``aten::item`` 0.49-1.01 ms waits in cudaStreamSynchronize from
    0.5 ms (after a 2 us pinned DtoH copy at 1.000-1.002 ms); then ``prep.py(5): preprocess``
    1.01-4.0 ms; ``aten::mm`` launches the next GEMM at 4.0 ms (call 2 us), it runs 4.1-5.0 ms.

    The GPU idles 1.002-4.1 ms: 508 us host-sync (the wait's blocked time, 0.5-1.008 ms... bounded:
    see the test), the rest of the host window host work, the call 2 us, 98 us queue."""
    b = KinetoBuilder()
    mm = b.op("aten::mm", 0, 10 * US)
    b.launch(mm, "gemm_a", 1 * US, 0 * US + 1, 1 * MS - 1, cpu_dur=2 * US)
    b.op("aten::item", 490 * US, 520 * US)
    lsd = b.op("aten::_local_scalar_dense", 495 * US, 514 * US)
    corr = b.runtime("cudaMemcpyAsync", 496 * US, 3 * US, ext=lsd)
    b.memcpy("DtoH", "Device", "Pinned", 1 * MS, 2 * US, 4, corr=corr)
    corr = b.runtime("cudaStreamSynchronize", 500 * US, 508 * US, ext=lsd)
    b.sync("Stream Sync", 500 * US, 508 * US, stream=7, corr=corr)
    b.python("prep.py(5): preprocess", 1_010 * US, 2_990 * US, py_id=1, parent_id=0)
    mm = b.op("aten::mm", 4 * MS, 10 * US)
    b.launch(mm, "gemm_b", 4 * MS, 4 * MS + 100 * US, 900 * US, cpu_dur=2 * US)
    return load(b.write(tmp_path / "sync_host.json"))


def initialisation(tmp_path: Path) -> Trace:
    """No steps, a range ``warmup|forward`` 0-60 ms: ``cudaDeviceGetStreamPriorityRange`` 0-30 ms
    (context creation), ``cudaFree`` 30-36 ms, then ``aten::cudnn_convolution`` 36-50 ms whose
    launch call takes 36.0-49.0 ms (module loading) and whose kernel runs 49.1-55 ms; a small
    kernel at 55.0 ms launched at 54.0 ms (call 5 us) runs 55.0-56.0 ms (back to back)."""
    b = KinetoBuilder()
    b.annotation("warmup|forward", 0, 60 * MS)
    b.runtime("cudaDeviceGetStreamPriorityRange", 0, 30 * MS)
    b.runtime("cudaFree", 30 * MS, 6 * MS)
    conv = b.op("aten::cudnn_convolution", 36 * MS, 14 * MS)
    b.launch(conv, "cudnn_conv_kernel", 36 * MS, 49 * MS + 100 * US, 5_900 * US, cpu_dur=13 * MS)
    add = b.op("aten::add", 54 * MS, 10 * US)
    b.launch(add, "add_kernel", 54 * MS, 55 * MS, 1 * MS, cpu_dur=5 * US)
    return load(b.write(tmp_path / "init.json"))


def backlog(tmp_path: Path) -> Trace:
    """One 10 ms step from 1 ms. Before any recorded launch the GPU runs 5 kernels of 1 ms
    (0-5 ms, no launch call in the trace: queued before the profiler started); the step's own
    ``aten::mm`` launches at 1.0 ms a GEMM that runs 5.0-8.0 ms."""
    b = KinetoBuilder()
    for i in range(5):
        b.kernel("void prev_iteration_kernel<float>(float*)", i * MS, MS, corr=-5 - i)
    b.step(1, 1 * MS, 10 * MS)
    mm = b.op("aten::mm", 1 * MS, 10 * US)
    b.launch(mm, "sm90_xmma_gemm", 1 * MS, 5 * MS, 3 * MS, cpu_dur=5 * US)
    return load(b.write(tmp_path / "backlog.json"))


def profiler_overhead(tmp_path: Path) -> Trace:
    """No steps. Inside Python ``output_code.py(40): call`` (0-1.012 ms), 10 trivial
    ``aten::empty_strided`` (1 us each) 100 us apart from 0.1 ms, each followed 1 us later by a
    4 us launch of a 5 us kernel that starts 1 us after the call returns; between the ops only
    Python frames (``triton/launcher.py(7): run``) are recorded."""
    b = KinetoBuilder()
    b.python("output_code.py(40): call", 0, 1_012 * US, py_id=1, parent_id=0)
    for i in range(10):
        t = 100 * US + i * 100 * US
        b.python("triton/launcher.py(7): run", t - 90 * US, 88 * US, py_id=10 + i, parent_id=1)
        e = b.op("aten::empty_strided", t, 1 * US)
        b.launch(e, "triton_poi_fused_0", t + 2 * US, t + 7 * US, 5 * US, cpu_dur=4 * US)
    return load(b.write(tmp_path / "overhead.json"))


def item_per_step(tmp_path: Path) -> Trace:
    """Four 5 ms steps (step 1 warm-up). Per step S: 100 launches 10 us apart from S (4 us calls)
    of 40 us kernels that run back to back from S + 10 us (busy until S + 4.01 ms); ``aten::item``
    at S + 1.05 ms copies 4 bytes (pinned DtoH at S + 4.010-4.012 ms) and waits in
    cudaStreamSynchronize S + 1.06 - 4.013 ms; the next step's first launch comes at S + 5 ms.
    One root cause: the ``.item()`` drains the queue every step."""
    b = KinetoBuilder()
    for n in range(4):
        s = n * 5 * MS
        b.step(n + 1, s, 5 * MS)
        for i in range(100):
            e = b.op("aten::mul", s + i * 10 * US, 6 * US)
            b.launch(e, "mul_kernel", s + i * 10 * US + 1 * US, s + 10 * US + i * 40 * US, 40 * US, cpu_dur=4 * US)
        b.python("train.py(99): <module>", s + 1_040 * US, 2_980 * US, py_id=n + 1, parent_id=0)
        b.op("aten::item", s + 1_050 * US, 2_965 * US)
        lsd = b.op("aten::_local_scalar_dense", s + 1_051 * US, 2_963 * US)
        corr = b.runtime("cudaMemcpyAsync", s + 1_052 * US, 5 * US, ext=lsd)
        b.memcpy("DtoH", "Device", "Pinned", s + 4_010 * US, 2 * US, 4, corr=corr)
        corr = b.runtime("cudaStreamSynchronize", s + 1_060 * US, 2_953 * US, ext=lsd)
        b.sync("Stream Sync", s + 1_060 * US, 2_953 * US, stream=7, corr=corr)
    return load(b.write(tmp_path / "item.json"))


def mtia_device(tmp_path: Path) -> Trace:
    """Two 2 ms steps (step 1 warm-up), no deviceProperties. Per step S: ``aten::mm`` launches
    through ``mtiaLaunchKernel`` (category ``mtia_runtime``, S + 0.1 ms, 5 us) a device event
    (category ``mtia_ccp_events``, device 0) that runs S + 0.2 - 1.2 ms; Python preprocessing
    ``prep.py(3): load`` S + 1.2 - 2.0 ms launches nothing."""
    b = KinetoBuilder(gpu_name=None)
    for n in range(2):
        s = n * 2 * MS
        b.step(n + 1, s, 2 * MS)
        mm = b.op("aten::mm", s + 100 * US, 10 * US)
        b.launch(mm, "mtia_matmul_kernel", s + 100 * US, s + 200 * US, 1 * MS, cpu_dur=5 * US, api="mtiaLaunchKernel")
        b.python("prep.py(3): load", s + 1_200 * US, 800 * US, py_id=n + 1, parent_id=0)
    for e in b.events:
        if e["cat"] == "kernel":
            e["cat"] = "mtia_ccp_events"
        elif e["cat"] == "cuda_runtime":
            e["cat"] = "mtia_runtime"
    return load(b.write(tmp_path / "mtia.json"))


def communication_wait(tmp_path: Path) -> Trace:
    """No steps. GEMM 0-1 ms (launched at 0); the host waits in ``record_param_comms`` 0.5-3.5 ms
    (a collective on another process: Gloo, or NCCL's host-side wait); ``aten::mm`` launches the
    next GEMM at 3.5 ms (call 2 us), it runs 3.6-4.0 ms."""
    b = KinetoBuilder()
    b.launch(b.op("aten::mm", 0, 10 * US), "gemm_a", 1 * US, 0, 1 * MS, cpu_dur=2 * US)
    b.op("record_param_comms", 500 * US, 3 * MS)
    b.launch(b.op("aten::mm", 3_500 * US, 10 * US), "gemm_b", 3_500 * US, 3_600 * US, 400 * US, cpu_dur=2 * US)
    return load(b.write(tmp_path / "comm.json"))
