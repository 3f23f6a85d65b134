"""What a stack sample was doing, from frame names: the pattern table and its evaluation.

Each rule names a kind, the part of a frame it looks at and a regular expression. ``leaf``
rules look at the innermost frame only (where the time is spent); ``stack`` rules look at
every frame of the stack (time spent anywhere under ``import`` is start-up, whatever the leaf).
A sample gets the kind of highest priority among its leaf match and its stack matches. A
leaf that no rule matches gets a *default* kind from what is known about it:

* ``python`` (Python compute): a Python line whose text was read and matched nothing;
* ``unverified`` (blocked or computing, source unavailable): a Python line whose text is
  unknown (file not found, no line numbers, or a ``def`` line from ``py-spy --function``).
  Without ``--native`` a thread blocked in ``time.sleep``, ``lock.acquire`` or ``sock.recv``
  shows as the Python line that made the call, so such a line may be compute or a wait;
* ``other`` (native/other code, not Python): a frame without a Python file (perf, nsys,
  Java or JavaScript stacks, bare symbol names).

``blocked`` is never given by a rule: :mod:`traceclass.analysis.cpu_profile` gives it to an
``unverified`` line when the profile itself shows the thread waits there (see
``sample_kinds``), and says why.

Fields: ``function`` (qualified name as py-spy writes it, ``Condition.wait``), ``file`` (path
as written: package-relative ``threading.py`` or absolute), ``source`` (text of the leaf line,
when the reader found the file: without ``--native`` a line blocked in ``time.sleep`` or
``lock.acquire`` is a Python line calling C, and only its text tells it from compute).

A sample counts as *waiting* when its kind is lock wait, sleep or I/O; py-spy records no
thread state, so this frame-based split is the estimate of idle vs on-CPU time.
"""

from __future__ import annotations

import dataclasses
import enum
import re
from typing import Iterable


class FrameKind(enum.StrEnum):
    """What a sample's time went to; members in priority order (later wins when several rules
    match a stack). A member equals and hashes like its code, which is what the JSON writes."""

    PYTHON = "python"
    OTHER = "other"
    UNVERIFIED = "unverified"
    BLOCKED = "blocked"
    NATIVE = "native"
    ALLOC = "alloc"
    IO = "io"
    SLEEP = "sleep"
    LOCK = "lock"
    SERIALIZATION = "serialization"
    DATA = "data"
    GC = "gc"
    IMPORT = "import"


#: kind -> label, in priority order
KINDS: dict[FrameKind, str] = {
    FrameKind.PYTHON: "Python compute",
    FrameKind.OTHER: "native/other code (not Python)",
    FrameKind.UNVERIFIED: "blocked or computing (source unavailable)",
    FrameKind.BLOCKED: "likely blocked (inferred, no source)",
    FrameKind.NATIVE: "native/extension compute",
    FrameKind.ALLOC: "allocation and copying",
    FrameKind.IO: "file or socket I/O",
    FrameKind.SLEEP: "sleep",
    FrameKind.LOCK: "lock or condition wait",
    FrameKind.SERIALIZATION: "serialization",
    FrameKind.DATA: "data loading and decoding",
    FrameKind.GC: "garbage collection",
    FrameKind.IMPORT: "import and start-up",
}
KIND_CODES: tuple[FrameKind, ...] = tuple(FrameKind)
PRIORITY = {k: i for i, k in enumerate(KIND_CODES)}
WAITING = frozenset({FrameKind.LOCK, FrameKind.SLEEP, FrameKind.IO, FrameKind.BLOCKED})
#: kinds no rule gives: the default of a leaf that matched nothing, and the inferred wait
DEFAULT_KINDS = frozenset({FrameKind.PYTHON, FrameKind.OTHER, FrameKind.UNVERIFIED, FrameKind.BLOCKED})
#: a ``def`` line: py-spy ``--function`` reports each frame at its function's first line
DEF_LINE = re.compile(r"^(async\s+)?(def|class)\s")
_PY_FILE = (".py", ".pyw", ".pyx")


def python_file(path: str) -> bool:
    """A Python source file, or a pseudo-file of Python code (``<frozen os>``, ``<string>``)."""
    return path.endswith(_PY_FILE) or path.startswith("<")


def source_known(text: str) -> bool:
    """True when a Python leaf line's own text tells what it does (not a def line)."""
    return bool(text) and not DEF_LINE.match(text)


@dataclasses.dataclass(frozen=True)
class Rule:
    kind: FrameKind  # or its code
    scope: str  # "leaf" or "stack"
    field: str  # "function", "file" or "source"
    pattern: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", FrameKind(self.kind))  # an unknown code raises here


_SO = r"\.so(\.[\d.]+)?$|\.dylib$|\.dll$|\.pyd$"
_EXT_PKG = r"(^|/)(torch|numpy|scipy|sklearn|pandas|jax|jaxlib|tensorflow|cupy|numba|triton|xformers|flash_attn|torchvision|torchaudio|onnxruntime|pyarrow|polars)/"

RULES: tuple[Rule, ...] = (
    # import and start-up: anything under the import machinery, and interpreter start-up
    Rule("import", "stack", "file", r"^<frozen importlib\._bootstrap(_external)?>$|^<frozen zipimport>$|^<frozen site>$"),
    Rule("import", "stack", "file", r"(^|/)importlib/(__init__|_bootstrap(_external)?|metadata/.*)\.py$|(^|/)site\.py$|(^|/)pkg_resources/"),
    Rule("import", "stack", "function", r"(^|\.)(_find_and_load|_find_and_load_unlocked|_load_unlocked|_call_with_frames_removed|exec_module|import_module|__import__)$"),
    # garbage collection (py-spy --native shows the collector's C functions)
    Rule("gc", "stack", "function", r"^(gc_collect\w*|collect_with_callback|_PyObject_GC_\w*|gc\.collect|garbage collection)$"),
    Rule("gc", "leaf", "source", r"\bgc\.collect\("),
    # data loading and decoding
    Rule("data", "stack", "file", r"(^|/)torch/utils/data/|(^|/)(PIL|cv2|imageio|decord|av|tokenizers|webdataset|torchdata)/|(^|/)torchvision/(io|datasets|transforms)/|(^|/)transformers/.*tokeniz|(^|/)datasets/(arrow_dataset|formatting|iterable_dataset)"),
    Rule("data", "stack", "function", r"(^|\.)(_MultiProcessingDataLoaderIter|_SingleProcessDataLoaderIter|DataLoader)\.|^(imdecode|ImagingDecode\w*|jpeg_\w+|png_\w+)$"),
    Rule("data", "leaf", "source", r"\bImage\.open\(|\bcv2\.(imread|imdecode|resize|cvtColor)|\btokeni[sz]er(\.\w+)?\(|\bdecode_(jpeg|image)\("),
    # serialization
    Rule("serialization", "stack", "file", r"(^|/)json/|(^|/)(pickle|copyreg|marshal|pickletools|_compat_pickle)\.py$|(^|/)(msgspec|orjson|ujson|yaml|ruamel|msgpack|cloudpickle|dill|simplejson|safetensors|protobuf|google/protobuf)/|(^|/)torch/serialization\.py$"),
    Rule("serialization", "leaf", "source", r"\b(json|pickle|cloudpickle|dill|msgspec\.json|msgspec\.msgpack|orjson|ujson|yaml|msgpack|marshal)\.(dumps?|loads?|encode|decode|safe_load|safe_dump|packb|unpackb)\(|\btorch\.(save|load)\("),
    # lock and condition waits (threading, queue, futures, multiprocessing, subprocess waits)
    Rule("lock", "leaf", "function", r"(^|\.)(_wait_for_tstate_lock|wait_for|_acquire_restore)$|^(Condition|Event|Semaphore|BoundedSemaphore|Barrier|Lock|RLock|_RLock)\.(wait|acquire|_acquire\w*)$|^(Thread\.join|Queue\.(get|put|join)|SimpleQueue\.get|Future\.result|_base\.Future\.result|Popen\.(wait|_wait|_try_wait|communicate)|Connection\.(recv|poll|_recv\w*|_poll))$"),
    Rule("lock", "leaf", "file", r"(^|/)multiprocessing/(synchronize|connection|queues|pool)\.py$|(^|/)concurrent/futures/"),
    Rule("lock", "leaf", "function", r"^(pthread_cond_(timed)?wait\w*|__pthread_cond_wait\w*|__lll_lock_wait\w*|pthread_mutex_lock|futex_wait\w*|__futex_abstimed_wait\w*|do_futex_wait\w*|sem_(timed)?wait|PyThread_acquire_lock\w*|acquire_timed|take_gil|drop_gil|PyCOND_\w*|lock_PyThread_acquire_lock)$"),
    Rule("lock", "leaf", "source", r"\.acquire\(|^\s*(async\s+)?with\s+[\w.\[\]]*(lock|Lock|LOCK|mutex|Mutex|cond|Cond|sem|Sem)\w*\s*(\)|:)|\.wait\(|\.join\(\s*(timeout\s*=\s*[\w.]+|[\d.]*)\s*\)|\.get\(\s*(\)|block\s*=|timeout\s*=)|\.result\(|\.communicate\("),
    # sleep
    Rule("sleep", "leaf", "function", r"^(time\.)?sleep$|^(nanosleep|clock_nanosleep|__nanosleep\w*|__clock_nanosleep\w*|time_sleep|pysleep|usleep)$"),
    Rule("sleep", "leaf", "source", r"\b(time\.)?sleep\(|\basyncio\.sleep\("),
    # file and socket I/O
    Rule("io", "leaf", "file", r"(^|/)(socket|ssl|selectors|_pyio|shutil|tempfile|ftplib|smtplib)\.py$|(^|/)http/(client|server)\.py$|(^|/)(urllib3|requests|httpx|httpcore|aiohttp|botocore|boto3|s3transfer|fsspec|gcsfs|s3fs|h5py|zmq)/|(^|/)asyncio/(selector_events|base_events|unix_events|streams)\.py$"),
    Rule("io", "leaf", "function", r"^(__)?(libc_)?(read|write|readv|writev|pread64|pwrite64|recv|recvfrom|recvmsg|send|sendto|sendmsg|epoll_wait|poll|ppoll|select|__select|pselect6?|accept4?|connect|fsync|fdatasync|sync_file_range|openat|open64|close|__libc_(read|write|recv|send|open64|close))$|^(sock_recv\w*|sock_send\w*|_io__\w+_(read|write)\w*)$"),
    Rule("io", "leaf", "source", r"\bopen\(|\.(read|write|readinto|readline|readlines|flush|recv|recv_into|recvfrom|send|sendall|sendto|accept|connect|makefile|select|poll|urlopen|request|getresponse|download_file|upload_file)\(|\bos\.(read|write|fsync|fdatasync|open|sendfile|replace|rename|remove|unlink|listdir|scandir|stat|walk)\(|\bsocket\.(socket|socketpair|create_connection|getaddrinfo)\(|\bselect\.|\bsubprocess\.(run|call|check_call|check_output)\(|\brequests\.(get|post|put|delete|request)\(|\bshutil\.|\bnp\.(load|save|fromfile|loadtxt)\(|\bpd\.read_\w+\("),
    # allocation and copying
    Rule("alloc", "leaf", "function", r"^(malloc|calloc|realloc|free|cfree|posix_memalign|aligned_alloc|memcpy|memmove|memset|__memcpy\w*|__memmove\w*|__memset\w*|_int_malloc|_int_free|mmap64|mmap|munmap|madvise|brk|sbrk|PyMem_\w+|PyObject_Malloc|PyObject_Free|_PyObject_Malloc|clear_page\w*|copy_user\w*|__(GI|libc)_(malloc|free|memcpy)\w*)$|^(copy|deepcopy|_deepcopy_\w+|_reconstruct)$"),
    Rule("alloc", "leaf", "file", r"(^|/)copy\.py$"),
    Rule("alloc", "leaf", "source", r"\.(clone|contiguous|copy|tolist|numpy|cpu|pin_memory)\(|\b(np|numpy)\.(concatenate|stack|vstack|hstack|copy|array|zeros|empty|ones)\(|\btorch\.(cat|stack|zeros|empty|ones|tensor|from_numpy)\(|\bdeepcopy\(|\bbytearray\("),
    # native and extension compute: compiled code, or a Python line inside a compiled library
    Rule("native", "leaf", "file", _SO),
    Rule("native", "leaf", "file", _EXT_PKG),
    Rule("native", "leaf", "function", r"^0x[0-9a-fA-F]+$|_\[k\]$|_\[j\]$|^\[unknown\]$|^\[kernel\.kallsyms\]|^(at::|c10::|torch::|mkl_|dnnl_|cblas_|openblas|gemm|sgemm|dgemm|GOMP_|__kmp|omp_)"),
    Rule("native", "leaf", "source", r"\btorch\.\w+|\bF\.\w+\(|\b(np|numpy|scipy|jnp)\.\w+\(|\.backward\("),
)


class Classifier:
    """Compiled :data:`RULES`; per frame, the best leaf kind and the best stack kind."""

    def __init__(self, rules: Iterable[Rule] = RULES) -> None:
        self.rules = [(r, re.compile(r.pattern)) for r in rules]
        self._by_field: dict[str, list[tuple[Rule, re.Pattern[str]]]] = {}
        for r, rx in self.rules:
            self._by_field.setdefault(r.field, []).append((r, rx))
        # per field, distinct texts repeat (one file holds many frames): each is matched once
        self._memo: dict[str, dict[str, tuple[int, int]]] = {f: {} for f in self._by_field}

    def memo_size(self) -> int:
        return sum(len(m) for m in self._memo.values())

    def _field(self, field: str, text: str) -> tuple[int, int]:
        memo = self._memo.get(field)
        if memo is None:
            return -1, -1
        got = memo.get(text)
        if got is None:
            leaf = stack = -1
            for rule, rx in self._by_field[field]:
                p = PRIORITY[rule.kind]
                if rule.scope == "leaf":
                    if p > leaf and rx.search(text):
                        leaf = p
                elif p > stack and rx.search(text):
                    stack = p
            got = memo[text] = (leaf, stack)
        return got

    def frame(self, function: str, file: str, source: str) -> tuple[int, int]:
        """(leaf priority, stack priority) of one frame; -1 where no rule matches (see
        :func:`default_kind` for the kind of a leaf that matches nothing)."""
        leaf = stack = -1
        for field, text in (("function", function), ("file", file), ("source", source)):
            if text:
                lp, sp = self._field(field, text)
                leaf, stack = max(leaf, lp), max(stack, sp)
        # a stack rule also applies when the frame itself is the leaf
        return max(leaf, stack), stack


def default_kind(file: str, source: str) -> FrameKind:
    """Kind of a leaf frame that no rule matches: ``python`` when its source line is known
    (``source``: text that tells what the line does, def lines of ``py-spy --function`` left
    out by the caller), ``unverified`` for a Python line without it, ``other`` for a frame that
    is not Python."""
    if not file or not python_file(file):
        return FrameKind.OTHER
    return FrameKind.PYTHON if source else FrameKind.UNVERIFIED


def label(kind: str) -> str:
    return KINDS.get(kind, kind)
