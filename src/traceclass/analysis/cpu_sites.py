"""Sampled CPU time by thread role and code site, for the CPU-sample rules (TC501-TC506).

:mod:`traceclass.analysis.cpu_profile` answers "where does the time go" for the report;
the rules need the same samples cut differently: per sample row its kind, its thread
*group*, whether that group is the process's *critical thread*, the leaf frame and the
*user frame* (the innermost frame in the program's own code), all as columns.

Thread groups. A thread row of the trace is one group, except the row that collapsed stacks
without thread roots (py-spy ``-f raw`` without ``--threads``) put every thread into: there
the stacks rooted at ``threading``'s ``Thread._bootstrap`` (threads started with
``threading.Thread``) form one group, the others (the main thread's stacks, rooted at
``<module>``) another.

Critical thread, per process. The thread whose waits are the program's waits: the main
thread (named ``MainThread``, tid = pid, or most of its stacks not under
``Thread._bootstrap``), because AI programs run their loop there and feed it from DataLoader
workers, pin-memory and logging threads whose waiting costs nothing by design. When the main
thread spends most of its time handing off (``join``, ``queue.get``, ``future.result``,
``Popen.wait``: waiting for another thread or process to finish work) the work is elsewhere,
and the thread with the most on-CPU time (lines without source counted: they may compute) is
critical instead; without a recognisable main thread too. Processes started by ``multiprocessing`` (DataLoader and Pool workers, seen
with ``py-spy --subprocesses``) serve their parent and have no critical thread, unless the
profile holds nothing else. In a profile without thread roots, threads not started by
``threading.Thread`` (native threads calling into Python) cannot be told from the main one.

Time. Values are in the profile's unit; ``ns_per`` converts them. Collapsed stacks carry no
sampling rate: for py-spy's, ``ns_per`` assumes py-spy's default 100 Hz (``--rate 100``)
and says so in ``time_basis``; for other collapsed stacks it stays unknown.
"""

from __future__ import annotations

import dataclasses
import re
import sys
from typing import Any

import numpy as np

from traceclass import units
from traceclass.analysis.cpu_kinds import SampleKinds
from traceclass.analysis.cpu_profile import (
    CpuProfile,
    _thread_label,
    sample_kinds,
    usable_source,
)
from traceclass.analysis.frame_kinds import KIND_CODES, PRIORITY, RULES, WAITING, Classifier
from traceclass.model import Trace
from traceclass.model.nesting import ancestors_until
from traceclass.units import duration

#: py-spy's default sampling rate is 100 Hz (``py-spy record --rate``, default 100)
PYSPY_DEFAULT_INTERVAL_NS = 10_000_000
NONE_KIND = len(KIND_CODES)  # kind index of rows without a stack
_WAIT_IDX = np.array(sorted(PRIORITY[k] for k in WAITING), dtype=np.int64)

# --------------------------------------------------------------------------- tables

#: frames that start a ``threading.Thread`` (root of every non-main Python thread)
_BOOTSTRAP_FUNCTION = re.compile(r"(^|\.)_bootstrap(_inner)?$")
_BOOTSTRAP_FILE = re.compile(r"(^|/)threading\.py$")

#: the frame that starts a multiprocessing child (spawn and fork): a worker process
_MP_FUNCTION = re.compile(r"(^|\.)_bootstrap$")
_MP_FILE = re.compile(r"(^|/)multiprocessing/process\.py$")

#: lock-kind waits that hand off to another thread or process (not contention on a lock):
#: a frame anywhere on the stack with one of these names, or a leaf line calling one
HANDOFF_FUNCTION = re.compile(
    r"(^|\.)(_wait_for_tstate_lock|wait_for)$|^(Condition|Event|Barrier)\.wait$|"
    r"^(Thread\.join|(Simple|Lifo|Priority|Joinable)?Queue\.(get|put|join)|Future\.result|_base\.Future\.result|"
    r"Popen\.(wait|_wait|_try_wait|communicate)|Connection\.(recv|poll|_recv\w*|_poll)|"
    r"as_completed|wait)$|^(pthread_cond_(timed)?wait\w*|__pthread_cond_wait\w*)$"
)
HANDOFF_SOURCE = re.compile(r"\.(wait|join|get|put|result|communicate|recv|poll)\(|\bwait\(|\bas_completed\(")
#: GIL waits (py-spy --native): lock contention whose fix is different
GIL_FUNCTION = re.compile(r"^(take_gil|drop_gil|PyEval_RestoreThread|PyEval_AcquireThread|_PyEval_EvalFrame_gil\w*)$")

#: standard-library top-level names (files shown package-relative by py-spy -f raw)
_STDLIB = frozenset(getattr(sys, "stdlib_module_names", ())) | {"__future__", "_bootlocale"}
#: installed packages common in AI programs; frames in them are library code, not the user's
_PACKAGES = frozenset("""
torch torchgen torchvision torchaudio torchtext torchdata triton functorch pytest _pytest numpy scipy sklearn
pandas polars pyarrow
jax jaxlib flax optax tensorflow keras tf_keras transformers tokenizers datasets accelerate deepspeed peft
lightning pytorch_lightning lightning_fabric timm diffusers safetensors huggingface_hub sentencepiece tiktoken
PIL cv2 imageio skimage av decord albumentations webdataset h5py zarr numba cupy xformers flash_attn
onnx onnxruntime tensorrt apex megatron vllm sglang ray dask joblib tqdm rich click typer wandb mlflow
tensorboard tensorboardX requests urllib3 httpx httpcore aiohttp certifi idna charset_normalizer boto3
botocore s3transfer fsspec gcsfs s3fs yaml ruamel orjson ujson msgpack msgspec cloudpickle dill simplejson
google protobuf grpc setuptools pkg_resources pip _distutils_hack importlib_metadata typing_extensions
packaging filelock jinja2 markupsafe sympy mpmath networkx regex pydantic pydantic_core attr attrs six
""".split())
_LIBRARY_PATH = re.compile(
    r"(^|/)(site-packages|dist-packages)/|/lib(64)?/python\d[\d.]*/|^<|\.(so|pyd|dylib|dll)(\.[\d.]+)?$")


def is_library_file(path: str) -> bool:
    """True for files of the standard library, installed packages, frozen modules and binaries.

    Absolute paths are judged by their location (``site-packages``, ``lib/python3.x``);
    package-relative paths (py-spy's default) by their top-level name.
    """
    if not path:
        return True
    if _LIBRARY_PATH.search(path):
        return True
    if path.startswith("/") or (len(path) > 2 and path[1] == ":"):
        return False
    top = path.split("/", 1)[0]
    top = top[:-3] if top.endswith(".py") else top
    return top in _STDLIB or top in _PACKAGES


# --------------------------------------------------------------------------- result


@dataclasses.dataclass(frozen=True)
class Group:
    """One thread (or, in a profile without thread roots, the main or the other threads)."""

    index: int
    thread_row: int
    pid: int
    tid: int
    label: str
    main: bool
    critical: bool
    value: int  # all samples
    on_cpu: int  # samples with a stack, not waiting (kind, or a leaf that waits: see leaf_waits), not unverified
    startup: int  # samples in import / start-up
    steady_on_cpu: int  # on-CPU samples outside import / start-up
    #: samples at Python lines without source (kind ``unverified``: blocked or computing), outside start-up
    steady_unverified: int
    handoff: int  # lock-kind samples that hand off to another thread or process
    merged: bool = False  # part of a row that holds several threads (no thread roots)
    worker_process: bool = False  # a multiprocessing child beside a parent process in the profile
    #: the process's length: its critical thread's samples (its main thread's in a worker process)
    process_value: int = 0

    @property
    def phrase(self) -> str:
        """``thread MainThread (tid 1)``; in a profile without thread roots ``the main thread``
        or ``all threads`` (no stack shows a thread start: nothing to tell threads apart)."""
        if not self.merged:
            return f"thread {self.label}"
        return self.label if self.label == "all threads" else f"the {self.label}"


@dataclasses.dataclass(frozen=True)
class CpuSites:
    trace: Trace
    profile: CpuProfile
    unit: str  # the profile's unit: "ns", "samples"
    ns_per: int | None  # ns per value unit (None: time unknown)
    time_basis: str  # how values became time, for estimate texts
    counts_known: bool  # rows carry sample counts (False for timed frames)
    includes_idle: bool | None
    value: np.ndarray  # per sample row
    count: np.ndarray  # samples per row
    kind: np.ndarray  # kind index per row (NONE_KIND: no stack)
    leaf: np.ndarray  # leaf frame row, -1 without stack
    node: np.ndarray  # leaf stack node, -1 without stack
    user: np.ndarray  # innermost user-code frame on the stack (frame row), -1 none
    library: np.ndarray  # bool per frame row: standard library, installed package, frozen or binary
    leaf_waits: np.ndarray  # bool: the leaf frame itself is a lock/sleep/I/O wait
    handoff: np.ndarray  # bool: lock-kind row that waits for another thread/process
    group: np.ndarray  # group index per row
    critical: np.ndarray  # bool per row: the row's thread is its process's critical thread
    groups: tuple[Group, ...]

    # ---- time and labels
    def ns(self, value: int | float) -> int | None:
        return int(round(value * self.ns_per)) if self.ns_per else None

    def amount(self, value: int | float) -> str:
        """``1.2 s (120 samples)``, ``340 ms`` or ``120 samples``."""
        ns = self.ns(value)
        n = _samples(self, value)
        if ns is None:
            return f"{n} samples" if n is not None else f"{int(value)} units"
        text = _duration(ns)
        return f"{text} ({n} samples)" if n is not None and self.unit == "samples" else text

    def function(self, f: int) -> str:
        return self.trace.strings[int(self.trace.frames.function[f])] if f >= 0 else ""

    def file(self, f: int) -> str:
        fr = self.trace.frames
        return self.trace.strings[int(fr.file[f])] if f >= 0 and fr.file[f] >= 0 else ""

    def line(self, f: int) -> int | None:
        ln = int(self.trace.frames.line[f]) if f >= 0 else -1
        return ln if ln >= 0 else None

    def location(self, f: int) -> str:
        """``file:line`` (``file`` without line numbers, the function name without a file)."""
        file, line = self.file(f), self.line(f)
        if not file:
            return self.function(f)
        return f"{file}:{line}" if line is not None else file

    def frame_label(self, f: int) -> str:
        loc = self.location(f)
        fn = self.function(f)
        return f"{fn} ({loc})" if loc and loc != fn else fn

    def source_text(self, f: int) -> str:
        """Text of a leaf line when the reader found the file (classification only, never rendered)."""
        return (self.trace.meta.get("source_lines") or {}).get(int(f), "")

    def samples(self, value: int | float) -> int | None:
        return _samples(self, value)


def _samples(cs: CpuSites, value: int | float) -> int | None:
    if not cs.counts_known:
        return None
    if cs.unit == "samples":
        return int(value)
    interval = cs.profile.interval_ns
    return int(round(value / interval)) if interval else None


def _duration(ns: float) -> str:
    return duration(ns)


# --------------------------------------------------------------------------- building

def cpu_sites(trace: Trace, profile: CpuProfile | None, kinds: SampleKinds | None = None) -> CpuSites | None:
    """The per-row view, or None when the trace has no samples or values that are not time.
    Built once per trace as the fact ``Facts.cpu_sites``."""
    if profile is None or len(trace.samples) == 0 or profile.unit == "units" or profile.total_value <= 0:
        return None
    return _build(trace, profile, kinds)


def _build(trace: Trace, prof: CpuProfile, kinds: SampleKinds | None) -> CpuSites:
    s, st, fr = trace.samples, trace.stacks, trace.frames
    n_rows = len(s)
    value = s.weight_ns.astype(np.int64) if prof.unit == "ns" else s.count.astype(np.int64)
    count = s.count.astype(np.int64)
    node = s.node.astype(np.int64)
    has = (node >= 0) & (len(st) > 0)
    node = np.where(has, node, -1)
    nsafe = np.maximum(node, 0)
    frame_of_node = st.frame.astype(np.int64)
    parent = st.parent.astype(np.int64)
    leaf = np.where(has, frame_of_node[nsafe] if len(st) else -1, -1)

    # the same kinds as the profile: rules, default kinds, lines without source settled by evidence
    kind = (kinds if kinds is not None else sample_kinds(trace)).kind

    strings = trace.strings
    src = trace.meta.get("source_lines") or {}
    n_frames = len(fr)
    fn_text = [strings[int(c)] for c in fr.function] if n_frames else []
    file_text = [strings[int(c)] if c >= 0 else "" for c in fr.file] if n_frames else []

    # user frames: innermost frame in the program's own code, on each row's stack
    lib_by_file: dict[str, bool] = {}
    is_user = np.zeros(n_frames, dtype=bool)
    for f in range(n_frames):
        name = file_text[f]
        if name not in lib_by_file:
            lib_by_file[name] = is_library_file(name)
        is_user[f] = not lib_by_file[name]
    user_node = ancestors_until(parent, node, is_user[frame_of_node]) if len(st) else np.full(n_rows, -1)
    user = np.where(user_node >= 0, frame_of_node[np.maximum(user_node, 0)] if len(st) else -1, -1)

    # the leaf's own kind (leaf rules only): a wait under a data-loading stack is still a wait
    leaf_only = Classifier([r for r in RULES if r.scope == "leaf"])
    leaf_wait_f = np.zeros(n_frames, dtype=bool)
    usable = usable_source(trace)
    for f in np.unique(leaf[leaf >= 0]).tolist():
        p, _ = leaf_only.frame(fn_text[f], file_text[f], usable.get(f, ""))
        leaf_wait_f[f] = p >= 0 and KIND_CODES[p] in WAITING
    leaf_waits = has & leaf_wait_f[np.maximum(leaf, 0)]

    # lock waits that hand off (join, queue.get, future.result...) vs contention on a lock
    lock = kind == PRIORITY["lock"]
    handoff = np.zeros(n_rows, dtype=bool)
    if lock.any():
        h_frame = np.array([bool(HANDOFF_FUNCTION.search(t)) for t in fn_text], dtype=bool)
        h_leaf = h_frame.copy()
        for f, text in src.items():
            if 0 <= f < n_frames and HANDOFF_SOURCE.search(text):
                h_leaf[f] = True
        on_stack = ancestors_until(parent, node[lock], h_frame[frame_of_node]) >= 0
        handoff[lock] = on_stack | h_leaf[leaf[lock]]

    # thread groups
    threads = trace.threads
    n_threads = max(len(threads), int(s.thread.max()) + 1 if n_rows else 0)
    t_row = s.thread.astype(np.int64)
    root_node = ancestors_until(parent, node, parent < 0) if len(st) else np.full(n_rows, -1)
    root_f = np.where(root_node >= 0, frame_of_node[np.maximum(root_node, 0)] if len(st) else -1, -1)
    boot_f = np.array([bool(_BOOTSTRAP_FUNCTION.search(fn_text[f]) and _BOOTSTRAP_FILE.search(file_text[f]))
                       for f in range(n_frames)], dtype=bool)
    booted = (root_f >= 0) & boot_f[np.maximum(root_f, 0)]
    names = [strings[int(threads.name[t])] if t < len(threads) and threads.name[t] >= 0 else "" for t in range(n_threads)]
    pids = [int(threads.pid[t]) if t < len(threads) else -1 for t in range(n_threads)]
    tids = [int(threads.tid[t]) if t < len(threads) else -1 for t in range(n_threads)]
    merged_t = np.array([tids[t] < 0 and not names[t] for t in range(n_threads)], dtype=bool)
    sub = (merged_t[t_row] & booted).astype(np.int64)
    gkey = t_row * 2 + sub
    uniq, group = np.unique(gkey, return_inverse=True)
    group = group.reshape(-1).astype(np.int64)
    n_groups = len(uniq)

    def per_group(mask: np.ndarray) -> np.ndarray:
        return np.bincount(group[mask], weights=value[mask], minlength=n_groups).astype(np.int64)

    # waiting: a lock/sleep/I/O kind, or a leaf that waits under a data or import stack
    waiting = np.isin(kind, _WAIT_IDX) | leaf_waits
    g_value = per_group(np.ones(n_rows, dtype=bool))
    unverified = kind == PRIORITY["unverified"]
    g_cpu = per_group(has & ~waiting & ~unverified)
    g_start = per_group(kind == PRIORITY["import"])
    g_steady = per_group(has & ~waiting & ~unverified & (kind != PRIORITY["import"]))
    g_unverified = per_group(has & unverified & ~leaf_waits)
    g_hand = per_group(handoff)
    g_unbooted = per_group(has & ~booted)
    g_stacked = per_group(has)

    booted_t = np.bincount(t_row[booted], minlength=n_threads) > 0
    raw: list[dict[str, Any]] = []
    for g, key in enumerate(uniq.tolist()):
        t, part = divmod(int(key), 2)
        name, pid, tid = names[t], pids[t], tids[t]
        if merged_t[t]:
            main_rank = 1 if part == 0 else 0
            # no thread roots in the file (py-spy without --threads): split by the stacks' roots
            if part:
                label = "threading.Thread threads (merged)"
            else:
                label = "main thread" if booted_t[t] else "all threads"
        else:
            explicit = name == "MainThread" or (pid >= 0 and tid == pid)
            by_root = g_stacked[g] > 0 and 2 * g_unbooted[g] > g_stacked[g]
            main_rank = 2 if explicit else (1 if by_root else 0)
            label = _thread_label(name, pid, tid)
        raw.append(dict(index=g, thread_row=t, pid=pid, tid=tid, label=label, main_rank=main_rank,
                        merged=bool(merged_t[t])))

    # multiprocessing children (DataLoader workers, Pool workers) serve their parent: their
    # loading and waiting is what they are for, so they get no critical thread when the
    # profile holds a process that is not one (py-spy --subprocesses)
    mp_frame = np.array([bool(_MP_FUNCTION.search(fn_text[f]) and _MP_FILE.search(file_text[f]))
                         for f in range(n_frames)], dtype=bool)
    under_mp = ancestors_until(parent, node, mp_frame[frame_of_node]) >= 0 if len(st) else np.zeros(n_rows, bool)
    g_mp = per_group(has & under_mp)
    critical_g = np.zeros(n_groups, dtype=bool)
    main_g = np.zeros(n_groups, dtype=bool)
    length_of_pid: dict[int, int] = {}
    chosen: dict[int, tuple[int, bool]] = {}
    for pid in sorted({r["pid"] for r in raw}):
        members = [r["index"] for r in raw if r["pid"] == pid]
        best = max(members, key=lambda g: (raw[g]["main_rank"], g_value[g], -g))
        if raw[best]["main_rank"] > 0:
            main_g[best] = True
        crit = best
        if raw[best]["main_rank"] == 0 or 2 * g_hand[best] > g_value[best]:
            # lines without source may be compute: they count here (waits recognised or inferred do not)
            crit = max(members, key=lambda g: (g_cpu[g] + g_unverified[g], raw[g]["main_rank"], -g))
        chosen[pid] = (crit, pid >= 0 and 2 * g_mp[best] > g_stacked[best])
        length_of_pid[pid] = int(g_value[crit])
    worker_pids = {pid for pid, (_, worker) in chosen.items() if worker}
    if len(worker_pids) == len(chosen):
        worker_pids = set()  # only workers were recorded (py-spy -p on a worker): judge them as runs
    for pid, (crit, _) in chosen.items():
        if pid not in worker_pids:
            critical_g[crit] = True

    groups = tuple(
        Group(index=r["index"], thread_row=r["thread_row"], pid=r["pid"], tid=r["tid"], label=r["label"],
              main=bool(main_g[r["index"]]), critical=bool(critical_g[r["index"]]),
              value=int(g_value[r["index"]]), on_cpu=int(g_cpu[r["index"]]), startup=int(g_start[r["index"]]),
              steady_on_cpu=int(g_steady[r["index"]]), steady_unverified=int(g_unverified[r["index"]]),
              handoff=int(g_hand[r["index"]]), merged=r["merged"], worker_process=r["pid"] in worker_pids,
              process_value=length_of_pid[r["pid"]])
        for r in raw
    )

    ns_per: int | None
    if prof.unit == "ns":
        ns_per, basis = 1, "sample weights in the file"
    elif prof.interval_ns:
        ns_per, basis = int(prof.interval_ns), f"{units.duration(prof.interval_ns)} per sample (the file's interval)"
    elif prof.producer == "py-spy":
        ns_per = PYSPY_DEFAULT_INTERVAL_NS
        basis = ("10 ms per sample: py-spy's default --rate 100, assumed because collapsed stacks and "
                 "flamegraphs carry no rate (give --rate HZ, or record with --format speedscope for exact time)")
    else:
        ns_per, basis = None, "sampling interval unknown: amounts are sample counts"
    if prof.from_intervals:
        basis = "self time of timed frames (wall clock between recorded samples, not CPU time)"

    return CpuSites(
        trace=trace, profile=prof, unit=prof.unit, ns_per=ns_per, time_basis=basis,
        counts_known=not prof.from_intervals, includes_idle=prof.includes_idle,
        value=value, count=count, kind=kind, leaf=leaf, node=node, user=user, library=~is_user, leaf_waits=leaf_waits,
        handoff=handoff, group=group, critical=critical_g[group], groups=groups,
    )
