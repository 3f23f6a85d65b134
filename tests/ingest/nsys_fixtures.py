"""Hand-built Nsight Systems SQLite exports, for reader tests and for rule tests.

The tables use the real DDL of ``nsys export --type sqlite`` (copied from
``shared/reference/nsys-schema/``: 2024.5.4 / schema 3.13.2 and 2025.5.2 / schema 3.24.0;
``NVTX_EVENTS`` from 2022.4.2 / 3.0.0, the newest dump that has it). Like nsys, a table is
created only when the first row goes into it, so "table absent" cases come for free.

Typical use::

    with NsysExportBuilder(tmp_path / "x.sqlite") as b:
        b.gpu()
        corr = b.launch(1_000, 3_000, 10_000, 13_000, "my_kernel")
    trace = traceclass.ingest.load(tmp_path / "x.sqlite")

The ``*_export`` functions at the end write whole scenarios (kernel storm, launch gap
with a stream sync, pageable copies, NVTX, torch ``emit_nvtx`` ops) and return the facts a
test can assert on.
"""

from __future__ import annotations

import os
import re
import sqlite3
from typing import Any, Iterable, Sequence

# --------------------------------------------------------------------------- DDL

_DDL_2024_5 = {
    "StringIds": (
        "id INT NN PRIMARY KEY, value TEXT NN"
    ),
    "ThreadNames": (
        "nameId INT NN, priority INT, globalTid INT"
    ),
    "PROCESSES": (
        "globalPid INT, pid INT, name TEXT"
    ),
    "ANALYSIS_DETAILS": (
        "globalVid INT NN, duration INT NN, startTime INT NN, stopTime INT NN"
    ),
    "TARGET_INFO_SESSION_START_TIME": (
        "utcEpochNs INT, utcTime TEXT, localTime TEXT"
    ),
    "TARGET_INFO_SYSTEM_ENV": (
        "globalVid INT, devStateName TEXT NN, name TEXT NN, nameEnum INT NN, value TEXT NN"
    ),
    "TARGET_INFO_GPU": (
        "vmId INT NN, id INT NN, name TEXT, busLocation TEXT, isDiscrete INT, l2CacheSize "
        "INT, totalMemory INT, memoryBandwidth INT, clockRate INT, smCount INT, pwGpuId INT, "
        "uuid TEXT, luid INT, chipName TEXT, cuDevice INT, ctxswDevPath TEXT, ctrlDevPath "
        "TEXT, revision INT, nodeMask INT, constantMemory INT, maxIPC INT, "
        "maxRegistersPerBlock INT, maxShmemPerBlock INT, maxShmemPerBlockOptin INT, "
        "maxShmemPerSm INT, maxRegistersPerSm INT, threadsPerWarp INT, asyncEngines INT, "
        "maxWarpsPerSm INT, maxBlocksPerSm INT, maxThreadsPerBlock INT, maxBlockDimX INT, "
        "maxBlockDimY INT, maxBlockDimZ INT, maxGridDimX INT, maxGridDimY INT, maxGridDimZ "
        "INT, computeMajor INT, computeMinor INT, smMajor INT, smMinor INT"
    ),
    "META_DATA_EXPORT": (
        "name TEXT NN, value TEXT"
    ),
    "META_DATA_CAPTURE": (
        "name TEXT NN, value TEXT"
    ),
    "CUPTI_ACTIVITY_KIND_RUNTIME": (
        "start INT NN, end INT NN, eventClass INT NN, globalTid INT, correlationId INT, "
        "nameId INT NN, returnValue INT NN, callchainId INT"
    ),
    "CUPTI_ACTIVITY_KIND_KERNEL": (
        "start INT NN, end INT NN, deviceId INT NN, contextId INT NN, greenContextId INT, "
        "streamId INT NN, correlationId INT, globalPid INT, demangledName INT NN, shortName "
        "INT NN, mangledName INT, launchType INT, cacheConfig INT, registersPerThread INT NN, "
        "gridX INT NN, gridY INT NN, gridZ INT NN, blockX INT NN, blockY INT NN, blockZ INT "
        "NN, staticSharedMemory INT NN, dynamicSharedMemory INT NN, localMemoryPerThread INT "
        "NN, localMemoryTotal INT NN, gridId INT NN, sharedMemoryExecuted INT, graphNodeId "
        "INT, sharedMemoryLimitConfig INT"
    ),
    "CUPTI_ACTIVITY_KIND_MEMCPY": (
        "start INT NN, end INT NN, deviceId INT NN, contextId INT NN, greenContextId INT, "
        "streamId INT NN, correlationId INT, globalPid INT, bytes INT NN, copyKind INT NN, "
        "deprecatedSrcId INT, srcKind INT, dstKind INT, srcDeviceId INT, srcContextId INT, "
        "dstDeviceId INT, dstContextId INT, migrationCause INT, graphNodeId INT, "
        "virtualAddress INT"
    ),
    "CUPTI_ACTIVITY_KIND_MEMSET": (
        "start INT NN, end INT NN, deviceId INT NN, contextId INT NN, greenContextId INT, "
        "streamId INT NN, correlationId INT, globalPid INT, value INT NN, bytes INT NN, "
        "graphNodeId INT, memKind INT"
    ),
    "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION": (
        "start INT NN, end INT NN, deviceId INT NN, contextId INT NN, greenContextId INT, "
        "streamId INT NN, correlationId INT, globalPid INT, syncType INT NN, eventId INT NN"
    ),
}

_DDL_2025_5_CHANGES = {
    "CUPTI_ACTIVITY_KIND_KERNEL": (
        "start INT NN, end INT NN, deviceId INT NN, contextId INT NN, greenContextId INT, "
        "streamId INT NN, correlationId INT, globalPid INT, demangledName INT NN, shortName "
        "INT NN, mangledName INT, launchType INT, cacheConfig INT, registersPerThread INT NN, "
        "gridX INT NN, gridY INT NN, gridZ INT NN, blockX INT NN, blockY INT NN, blockZ INT "
        "NN, staticSharedMemory INT NN, dynamicSharedMemory INT NN, localMemoryPerThread INT "
        "NN, localMemoryTotal INT NN, gridId INT NN, sharedMemoryExecuted INT, graphNodeId "
        "INT, sharedMemoryLimitConfig INT, qmdBulkReleaseDone INT, qmdPreexitDone INT, "
        "qmdLastCtaDone INT, graphId INT, clusterX INT, clusterY INT, clusterZ INT, "
        "clusterSchedulingPolicy INT, maxPotentialClusterSize INT, maxActiveClusters INT"
    ),
    "CUPTI_ACTIVITY_KIND_MEMCPY": (
        "start INT NN, end INT NN, deviceId INT NN, contextId INT NN, greenContextId INT, "
        "streamId INT NN, correlationId INT, globalPid INT, bytes INT NN, copyKind INT NN, "
        "deprecatedSrcId INT, srcKind INT, dstKind INT, srcDeviceId INT, srcContextId INT, "
        "dstDeviceId INT, dstContextId INT, migrationCause INT, graphNodeId INT, "
        "virtualAddress INT, copyCount INT"
    ),
    "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION": (
        "start INT NN, end INT NN, deviceId INT NN, contextId INT NN, greenContextId INT, "
        "streamId INT NN, correlationId INT, globalPid INT, deprecatedSyncType INT, syncType "
        "INT NN, eventId INT NN, eventSyncId INT"
    ),
    "COMPOSITE_EVENTS": (
        "id INT NN PRIMARY KEY, start INT NN, cpu INT, threadState INT, globalTid INT, "
        "cpuCycles INT NN"
    ),
    "SAMPLING_CALLCHAINS": (
        "id INT NN, symbol INT NN, module INT NN, kernelMode INT, thumbCode INT, unresolved "
        "INT, specialEntry INT, originalIP INT, unwindMethod INT, stackDepth INT NN, PRIMARY "
        "KEY (id, stackDepth)"
    ),
}

_DDL_NVTX = {
    "NVTX_EVENTS": (
        "start INT NN, end INT, eventType INT NN, rangeId INT, category INT, color INT, text "
        "TEXT, globalTid INT, endGlobalTid INT, textId INT, domainId INT, uint64Value INT, "
        "int64Value INT, doubleValue REAL, uint32Value INT, int32Value INT, floatValue REAL, "
        "jsonTextId INT, jsonText TEXT"
    ),
}

#: (EXPORT_PRODUCT_VERSION, EXPORT_SCHEMA_VERSION, table -> column definitions)
VERSIONS: dict[str, tuple[str, str, dict[str, str]]] = {
    "2024.5": ("2024.5.4.34", "3.13.2", {**_DDL_2024_5, **_DDL_NVTX}),
    "2025.5": ("2025.5.2.266", "3.24.0", {**_DDL_2024_5, **_DDL_2025_5_CHANGES, **_DDL_NVTX}),
}

#: VM id bits of a local capture (nsys-sqlite.md section 6)
HOST_VM = 1 << 48
PID = 4242
TID = 4242

# enum values (nsys-sqlite.md section 4)
HTOD, DTOH, DTOD = 1, 2, 8
PAGEABLE, PINNED, DEVICE, MANAGED = 0, 1, 2, 4
PUSH_POP, START_END, MARK, DOMAIN_CREATE, DOMAIN_DESTROY = 59, 60, 34, 75, 76


def global_pid(pid: int, vm: int = HOST_VM) -> int:
    return vm | (pid << 24)


def global_tid(pid: int, tid: int, vm: int = HOST_VM) -> int:
    return vm | (pid << 24) | tid


def _create_sql(table: str, defs: str) -> str:
    defs = re.sub(r"\bINT\b", "INTEGER", defs).replace(" NN", " NOT NULL")
    return f"CREATE TABLE {table} ({defs})"


def _not_null_columns(defs: str) -> list[tuple[str, bool]]:
    cols = []
    for part in re.split(r",\s*(?![^()]*\))", defs):
        words = part.split()
        if not words or words[0] == "PRIMARY":
            continue
        cols.append((words[0], " NN" in f" {part} " or part.endswith(" NN")))
    return cols


def emit_nvtx_text(
    name: str,
    seq: int = -1,
    op_id: int = 0,
    sizes: Sequence[Sequence[int]] | None = None,
    input_op_ids: Sequence[tuple[int, int]] | None = None,
) -> str:
    """The range text torch's ``emit_nvtx`` writes (torch/csrc/profiler/util.cpp getNvtxStr).

    ``op_id=0`` and ``sizes=None`` reproduce older torch (no op_id, record_shapes off).
    """
    s = f"{name}, seq = {seq}" if seq >= 0 else name
    if op_id > 0:
        s += f", op_id = {op_id}"
    if sizes is not None:
        s += ", sizes = [" + ", ".join("[" + ", ".join(str(d) for d in t) + "]" for t in sizes) + "]"
    if input_op_ids:
        s += ", input_op_ids = [" + ", ".join(f"({a},{b})" for a, b in input_op_ids) + "]"
    return s


class NsysExportBuilder:
    """Writes an nsys-style export row by row. Use as a context manager or call close()."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        version: str = "2024.5",
        *,
        metadata: bool = True,
        window: tuple[int, int] | None = None,
        capture_types: Iterable[str] = ("Cuda", "NvtxEvents"),
    ) -> None:
        self.path = str(path)
        if os.path.exists(self.path):
            os.remove(self.path)
        self.product, self.schema, self.ddl = VERSIONS[version]
        self.con = sqlite3.connect(self.path)
        self.con.execute("PRAGMA journal_mode = OFF")
        self.con.execute("PRAGMA synchronous = OFF")
        self._created: set[str] = set()
        self._strings: dict[str, int] = {}
        self._next_corr = 1
        self.table("StringIds")
        if metadata:
            rows = [
                ("EXPORT_PRODUCT_VERSION", self.product),
                ("EXPORT_SCHEMA_VERSION", self.schema),
                ("EXPORT_PARAM_TIME_NORMALIZE", "false"),
            ]
            rows += [(k, v) for k, v in zip(("MAJOR", "MINOR", "MICRO"), self.schema.split("."))]
            self.insert_many("META_DATA_EXPORT", ("name", "value"),
                             [(k if k.startswith("EXPORT") else f"EXPORT_SCHEMA_VERSION_{k}", v)
                              for k, v in rows])
            self.insert_many("META_DATA_CAPTURE", ("name", "value"),
                             [("CAPTURE_EVENT_TYPE", t) for t in capture_types])
        if window is not None:
            self.insert("ANALYSIS_DETAILS", globalVid=HOST_VM, duration=window[1] - window[0],
                        startTime=window[0], stopTime=window[1])

    # ------------------------------------------------------------------ plumbing

    def table(self, name: str) -> None:
        if name not in self._created:
            self.con.execute(_create_sql(name, self.ddl[name]))
            self._created.add(name)

    def _defaults(self, table: str) -> dict[str, Any]:
        return {c: 0 for c, nn in _not_null_columns(self.ddl[table]) if nn}

    def insert(self, table: str, **values: Any) -> None:
        self.table(table)
        row = {**self._defaults(table), **values}
        cols = ", ".join(row)
        # bytes go in as TEXT cells holding those bytes (how non-UTF-8 text appears in real
        # exports); bound as-is they would become BLOBs
        marks = ", ".join("CAST(? AS TEXT)" if isinstance(v, bytes) else "?" for v in row.values())
        self.con.execute(f"INSERT INTO {table} ({cols}) VALUES ({marks})", tuple(row.values()))

    def insert_many(self, table: str, columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
        """Bulk insert; NOT NULL columns not in ``columns`` get 0."""
        self.table(table)
        extra = {c: v for c, v in self._defaults(table).items() if c not in columns}
        cols = list(columns) + list(extra)
        tail = tuple(extra.values())
        marks = ", ".join("?" * len(cols))
        self.con.executemany(
            f"INSERT INTO {table} ({', '.join(cols)}) VALUES ({marks})",
            (tuple(r) + tail for r in rows),
        )

    def string(self, value: str | bytes) -> int:
        key = value if isinstance(value, str) else value.decode("latin-1")
        sid = self._strings.get(key)
        if sid is None:
            sid = len(self._strings) + 1
            self._strings[key] = sid
            self.insert("StringIds", id=sid, value=value)
        return sid

    def corr(self) -> int:
        c = self._next_corr
        self._next_corr += 1
        return c

    def close(self) -> str:
        self.con.commit()
        self.con.close()
        return self.path

    def __enter__(self) -> "NsysExportBuilder":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ rows

    def thread(self, name: str, pid: int = PID, tid: int = TID) -> int:
        gtid = global_tid(pid, tid)
        self.insert("ThreadNames", nameId=self.string(name), priority=20, globalTid=gtid)
        return gtid

    def process(self, name: str, pid: int = PID) -> None:
        self.insert("PROCESSES", globalPid=global_pid(pid), pid=pid, name=name)

    def gpu(
        self,
        id: int = 0,
        name: str = "NVIDIA H100 80GB HBM3",
        total_memory: int = 85_028_224_000,
        bandwidth: int = 3_352_320_000_000,
        clock_hz: int = 1_980_000_000,
        sm_count: int = 132,
        cc: tuple[int, int] = (9, 0),
    ) -> None:
        self.insert("TARGET_INFO_GPU", vmId=HOST_VM, id=id, name=name, totalMemory=total_memory,
                    memoryBandwidth=bandwidth, clockRate=clock_hz, smCount=sm_count,
                    computeMajor=cc[0], computeMinor=cc[1], cuDevice=id, chipName="GH100")

    def runtime(self, start: int, end: int, name: str, corr: int | None = None, *,
                pid: int = PID, tid: int = TID, event_class: int | None = None) -> int:
        """A CUDA API call. ``name`` as nsys stores it (``cudaLaunchKernel_v7000``)."""
        corr = self.corr() if corr is None else corr
        if event_class is None:
            event_class = 0 if name.startswith("cuda") else 1
        self.insert("CUPTI_ACTIVITY_KIND_RUNTIME", start=start, end=end, eventClass=event_class,
                    globalTid=global_tid(pid, tid), correlationId=corr,
                    nameId=self.string(name), returnValue=0)
        return corr

    def kernel(self, start: int, end: int, name: str, corr: int, *, pid: int = PID,
               device: int = 0, stream: int = 7, demangled: str | None = None,
               grid: tuple[int, int, int] = (1, 1, 1), block: tuple[int, int, int] = (128, 1, 1),
               registers: int = 32, static_smem: int = 0, dynamic_smem: int = 0,
               graph_node: int | None = None) -> None:
        self.insert(
            "CUPTI_ACTIVITY_KIND_KERNEL", start=start, end=end, deviceId=device, contextId=1,
            streamId=stream, correlationId=corr, globalPid=global_pid(pid),
            demangledName=self.string(demangled or name), shortName=self.string(name),
            launchType=1, registersPerThread=registers,
            gridX=grid[0], gridY=grid[1], gridZ=grid[2], blockX=block[0], blockY=block[1],
            blockZ=block[2], staticSharedMemory=static_smem, dynamicSharedMemory=dynamic_smem,
            graphNodeId=graph_node,
        )

    def launch(self, api_start: int, api_end: int, k_start: int, k_end: int, name: str, *,
               api: str = "cudaLaunchKernel_v7000", pid: int = PID, tid: int = TID,
               **kernel_kw: Any) -> int:
        """One launch call and the kernel it started; returns the correlation id."""
        corr = self.runtime(api_start, api_end, api, pid=pid, tid=tid)
        self.kernel(k_start, k_end, name, corr, pid=pid, **kernel_kw)
        return corr

    def memcpy(self, start: int, end: int, nbytes: int, copy_kind: int, src_kind: int,
               dst_kind: int, corr: int, *, pid: int = PID, device: int = 0,
               stream: int = 7) -> None:
        self.insert("CUPTI_ACTIVITY_KIND_MEMCPY", start=start, end=end, deviceId=device,
                    contextId=1, streamId=stream, correlationId=corr,
                    globalPid=global_pid(pid), bytes=nbytes, copyKind=copy_kind,
                    srcKind=src_kind, dstKind=dst_kind, srcDeviceId=device, dstDeviceId=device)

    def memset(self, start: int, end: int, nbytes: int, mem_kind: int, corr: int, *,
               pid: int = PID, device: int = 0, stream: int = 7) -> None:
        self.insert("CUPTI_ACTIVITY_KIND_MEMSET", start=start, end=end, deviceId=device,
                    contextId=1, streamId=stream, correlationId=corr,
                    globalPid=global_pid(pid), value=0, bytes=nbytes, memKind=mem_kind)

    def sync(self, start: int, end: int, corr: int, sync_type: int, *, pid: int = PID,
             device: int = 0, stream: int = 7) -> None:
        self.insert("CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", start=start, end=end, deviceId=device,
                    contextId=1, streamId=stream, correlationId=corr,
                    globalPid=global_pid(pid), syncType=sync_type, eventId=0)

    def nvtx(self, start: int, end: int | None, text: str | bytes | None = None, *,
             registered: str | None = None, event_type: int = PUSH_POP, pid: int = PID,
             tid: int = TID, domain: int = 0, range_id: int | None = None,
             color: int | None = None, category: int | None = None,
             end_tid: int | None = None) -> None:
        """An NVTX event. ``text`` is written inline; ``registered`` goes through StringIds
        (textId), as the Python ``nvtx`` package does."""
        self.insert(
            "NVTX_EVENTS", start=start, end=end, eventType=event_type, rangeId=range_id,
            category=category, color=color, text=text,
            globalTid=global_tid(pid, tid),
            endGlobalTid=global_tid(pid, end_tid) if end_tid is not None else None,
            textId=self.string(registered) if registered is not None else None,
            domainId=domain,
        )

    def nvtx_domain(self, name: str, domain_id: int, at: int, *, pid: int = PID,
                    tid: int = TID) -> None:
        self.nvtx(at, None, name, event_type=DOMAIN_CREATE, pid=pid, tid=tid, domain=domain_id)


# --------------------------------------------------------------------------- scenarios

SGEMM_DEMANGLED = (
    "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_64x64_16x6_tn_align4>"
    "(cutlass_80_tensorop_s1688gemm_64x64_16x6_tn_align4::Params)"
)
ELEMENTWISE_DEMANGLED = (
    "void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>, "
    "at::detail::Array<char *, 3>>(int, at::native::AddFunctor<float>, "
    "at::detail::Array<char *, 3>)"
)


def small_kernel_storm_export(
    path: str | os.PathLike[str], n: int = 200, kernel_ns: int = 3_000, gap_ns: int = 7_000,
    t0: int = 1_000_000_000, version: str = "2024.5",
) -> dict[str, Any]:
    """``n`` tiny kernels, each launched 4 us before it starts, ``gap_ns`` idle between them."""
    period = kernel_ns + gap_ns
    with NsysExportBuilder(path, version, window=(t0 - 100_000, t0 + n * period + 100_000)) as b:
        b.gpu()
        b.thread("python")
        for i in range(n):
            ks = t0 + i * period
            b.launch(ks - 4_000, ks - 2_000, ks, ks + kernel_ns, "vectorized_elementwise_kernel",
                     demangled=ELEMENTWISE_DEMANGLED, grid=(4, 1, 1), block=(128, 1, 1))
    return {
        "kernels": n,
        "kernel_ns": kernel_ns,
        "gap_ns": gap_ns,
        "first_start": t0,
        "last_end": t0 + (n - 1) * period + kernel_ns,
        "total_kernel_ns": n * kernel_ns,
    }


def launch_gap_with_sync_export(path: str | os.PathLike[str], t0: int = 2_000_000_000) -> dict[str, Any]:
    """Kernel A (1 ms); the host waits in cudaStreamSynchronize, then computes 2 ms on the CPU
    before launching kernel B: the GPU idles for 2.01 ms."""
    with NsysExportBuilder(path, window=(t0, t0 + 4_000_000)) as b:
        b.gpu()
        b.thread("python")
        a = b.launch(t0, t0 + 5_000, t0 + 10_000, t0 + 1_010_000, "gemm_a",
                     demangled=SGEMM_DEMANGLED, grid=(64, 2, 1), block=(256, 1, 1),
                     registers=128, static_smem=16_384, dynamic_smem=32_768)
        s = b.runtime(t0 + 6_000, t0 + 1_012_000, "cudaStreamSynchronize_v3020")
        # GPU-side view of the same wait; syncType 3 is "stream sync" in 2022-2024 exports
        b.sync(t0 + 6_000, t0 + 1_012_000, s, sync_type=3)
        bb = b.launch(t0 + 3_012_000, t0 + 3_017_000, t0 + 3_020_000, t0 + 3_520_000, "gemm_b")
    return {
        "corr_a": a,
        "corr_sync": s,
        "corr_b": bb,
        "a_end": t0 + 1_010_000,
        "b_start": t0 + 3_020_000,
        "gap_ns": 2_010_000,
        "sync_api": (t0 + 6_000, t0 + 1_012_000),
    }


def pageable_copies_export(path: str | os.PathLike[str], t0: int = 3_000_000_000) -> dict[str, Any]:
    """Blocking cudaMemcpy from/to pageable memory, plus one pinned async copy and a memset."""
    mib8 = 8 << 20
    with NsysExportBuilder(path) as b:
        b.gpu()
        b.thread("python")
        t = t0
        for _ in range(4):
            c = b.runtime(t, t + 2_000_000, "cudaMemcpy_v3020")
            b.memcpy(t + 100_000, t + 1_900_000, mib8, HTOD, PAGEABLE, DEVICE, c)
            t += 2_500_000
        c = b.runtime(t, t + 2_000_000, "cudaMemcpy_v3020")
        b.memcpy(t + 100_000, t + 1_900_000, mib8, DTOH, DEVICE, PAGEABLE, c)
        t += 2_500_000
        c = b.runtime(t, t + 10_000, "cudaMemcpyAsync_v3020")
        b.memcpy(t + 20_000, t + 700_000, mib8, HTOD, PINNED, DEVICE, c)
        t += 1_000_000
        c = b.runtime(t, t + 8_000, "cudaMemsetAsync_v3020")
        b.memset(t + 10_000, t + 30_000, 1 << 20, DEVICE, c)
    return {
        "memcpy": 6,
        "pageable": 5,
        "bytes_by_kind": {HTOD: 5 * mib8, DTOH: mib8},
        "memset": 1,
        "copy_ns": 1_800_000,
    }


def nvtx_export(path: str | os.PathLike[str], t0: int = 4_000_000_000) -> dict[str, Any]:
    """Push/pop (inline and registered text), a named domain, start/end across threads, a
    mark, a step range on a worker thread and a range that never ended."""
    worker = TID + 1
    end = t0 + 30_000
    with NsysExportBuilder(path, window=(t0, end)) as b:
        b.gpu()
        b.thread("python")
        b.thread("worker", tid=worker)
        b.nvtx_domain("traceclass", 1, t0)
        b.nvtx(t0 + 100, t0 + 10_000, "outer", color=0xFF0000)
        b.nvtx(t0 + 200, t0 + 5_000, registered="inner")
        b.nvtx(t0 + 300, t0 + 4_000, "inner_dom", domain=1, category=5)
        b.launch(t0 + 1_000, t0 + 1_500, t0 + 2_000, t0 + 3_000, "k_in_range")
        b.nvtx(t0 + 10_500, t0 + 20_000, "cross_thread", event_type=START_END, range_id=1,
               end_tid=worker)
        b.nvtx(t0 + 7_000, None, "a_mark", event_type=MARK)
        b.nvtx(t0 + 1_000, t0 + 8_000, "ProfilerStep#3", tid=worker)
        b.nvtx(t0 + 21_000, None, "never_closed")
        b.nvtx(t0 + 25_000, None, None, event_type=DOMAIN_DESTROY, domain=0)
        b.nvtx(t0 + 25_001, None, None, event_type=DOMAIN_DESTROY, domain=1)
    return {
        "ranges": {
            "outer": (t0 + 100, t0 + 10_000, TID),
            "inner": (t0 + 200, t0 + 5_000, TID),
            "traceclass:inner_dom": (t0 + 300, t0 + 4_000, TID),
            "cross_thread": (t0 + 10_500, t0 + 20_000, TID),
            "ProfilerStep#3": (t0 + 1_000, t0 + 8_000, worker),
            "never_closed": (t0 + 21_000, end, TID),
        },
        "launch_annotation": "traceclass:inner_dom",
        "window": (t0, end),
    }


def emit_nvtx_export(path: str | os.PathLike[str], t0: int = 5_000_000_000) -> dict[str, Any]:
    """Ranges as ``torch.autograd.profiler.emit_nvtx(record_shapes=True)`` writes them, with
    two kernel launches inside ``aten::addmm`` and ``aten::relu``, one older-torch range
    without op_id, a bare op name and two non-op ranges."""
    ops = {}
    with NsysExportBuilder(path, window=(t0, t0 + 200_000)) as b:
        b.gpu()
        b.thread("python")

        def op(start: int, end: int, text: str) -> None:
            b.nvtx(t0 + start, t0 + end, text)

        op(0, 100_000, emit_nvtx_text("my_stage", op_id=1))  # record_function scope
        op(500, 99_000, "forward")  # torch.cuda.nvtx.range_push("forward")
        op(1_000, 50_000, emit_nvtx_text("aten::linear", 11, 2, [[64, 128], [32, 128], [32]],
                                         [(0, -1), (0, -1), (0, -1)]))
        op(2_000, 4_000, emit_nvtx_text("aten::t", 11, 3, [[32, 128]], [(0, -1)]))
        op(5_000, 45_000, emit_nvtx_text("aten::addmm", 12, 4,
                                         [[32], [64, 128], [128, 32], [], []],
                                         [(0, -1), (0, -1), (3, 0), (0, -1), (0, -1)]))
        k1 = b.launch(t0 + 10_000, t0 + 14_000, t0 + 20_000, t0 + 80_000,
                      "cutlass_80_tensorop_s1688gemm_64x64_16x6_tn_align4",
                      demangled=SGEMM_DEMANGLED)
        op(51_000, 60_000, emit_nvtx_text("aten::relu", 13, 5, [[64, 32]], [(4, 0)]))
        k2 = b.launch(t0 + 52_000, t0 + 55_000, t0 + 81_000, t0 + 83_000,
                      "vectorized_elementwise_kernel", demangled=ELEMENTWISE_DEMANGLED)
        op(61_000, 62_000, emit_nvtx_text("aten::empty", -1, 6, [[], [], [], [], [], []]))
        op(63_000, 70_000, emit_nvtx_text("aten::mm", 7, 0, [[4, 8], [8, 2]]))  # older torch
        op(64_000, 65_000, "aten::resize_")  # no seq, shapes off, older torch: bare name
    ops = {
        "aten::linear": dict(seq=11, op_id=2, dims=((64, 128), (32, 128), (32,)), parent=None),
        "aten::t": dict(seq=11, op_id=3, dims=((32, 128),), parent="aten::linear"),
        "aten::addmm": dict(seq=12, op_id=4, dims=((32,), (64, 128), (128, 32), None, None),
                            parent="aten::linear"),
        "aten::relu": dict(seq=13, op_id=5, dims=((64, 32),), parent=None),
        "aten::empty": dict(seq=-1, op_id=6, dims=(None,) * 6, parent=None),
        "aten::mm": dict(seq=7, op_id=-1, dims=((4, 8), (8, 2)), parent=None),
        "aten::resize_": dict(seq=-1, op_id=-1, dims=None, parent="aten::mm"),
    }
    return {
        "ops": ops,
        "annotations": ["my_stage", "forward"],
        "kernel_op": {k1: "aten::addmm", k2: "aten::relu"},
    }


def two_thread_launch_export(path: str | os.PathLike[str], t0: int = 1_000_000_000) -> dict[str, Any]:
    """An NVTX range ``mystage`` on thread A, three times; inside each, A launches
    ``kernel_main`` (490 us) and thread B, which has no ranges, launches ``kernel_other``
    (300 us). nsys projects a range onto the launches of its own thread only."""
    other = TID + 5
    with NsysExportBuilder(path, window=(t0, t0 + 10_000_000)) as b:
        b.gpu()
        b.thread("python")
        b.thread("other", tid=other)
        for i in range(3):
            t = t0 + i * 3_000_000
            b.nvtx(t, t + 1_000_000, "mystage")
            b.launch(t + 1_000, t + 3_000, t + 10_000, t + 500_000, "kernel_main")
            b.launch(t + 2_000, t + 4_000, t + 600_000, t + 900_000, "kernel_other", tid=other)
    return {
        "stage": "mystage",
        "occurrences": 3,
        "own_busy_ns": 490_000,  # per occurrence: kernel_main only
        "other_busy_ns": 300_000,
        "other_tid": other,
    }
