"""Nsight Systems SQLite export: safe read-only access, schema probing, fast column reads.

Facts about the format are in ``shared/reference/nsys-sqlite.md``. Everything here treats
the file as untrusted: it is opened read-only through a URI, the schema is probed before any
column is named, TEXT is read as bytes and decoded with ``errors="replace"``, and every
``sqlite3`` failure becomes a :class:`~traceclass.errors.TraceFormatError`.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import sqlite3
import threading
import urllib.parse
from concurrent.futures import ThreadPoolExecutor
from typing import Iterable, Mapping

import numpy as np

from traceclass.errors import TraceFormatError
from traceclass.model.nesting import lookup
from traceclass.model.strings import StringTable

#: Seconds to wait for a lock held by another process before giving up.
BUSY_TIMEOUT_S = 5.0
#: Rows per ``group_concat`` query: bounds the concatenated texts held at once (about 20
#: bytes per value and column) while keeping the number of queries small.
CHUNK_ROWS = 1 << 20
#: Ids per ``IN (...)`` list; old SQLite builds allow 999 bound parameters.
_IN_BATCH = 900
#: Column queries run on this many threads, each with its own connection: sqlite3 releases
#: the GIL while SQLite works, so one ``group_concat`` per core proceeds in parallel.
MAX_READERS = 4

#: Tables that only an Nsight Systems export has; one of them must be present.
NSYS_MARKER_TABLES = frozenset(
    {
        "CUPTI_ACTIVITY_KIND_KERNEL",
        "CUPTI_ACTIVITY_KIND_RUNTIME",
        "CUPTI_ACTIVITY_KIND_MEMCPY",
        "CUPTI_ACTIVITY_KIND_MEMSET",
        "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION",
        "NVTX_EVENTS",
        "OSRT_API",
        "COMPOSITE_EVENTS",
        "TARGET_INFO_GPU",
        "TARGET_INFO_CUDA_GPU",
        "TARGET_INFO_SESSION_START_TIME",
        "META_DATA_EXPORT",
        "EXPORT_META_DATA",
        "ThreadNames",
        "PROFILER_OVERHEAD",
    }
)


def text(value: object) -> str:
    """A TEXT cell (read as bytes) as str; invalid UTF-8 becomes U+FFFD, NUL is dropped."""
    if value is None:
        return ""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).decode("utf-8", errors="replace").replace("\x00", "")
    return str(value)


def qi(name: str) -> str:
    """Quote an SQL identifier."""
    return '"' + name.replace('"', '""') + '"'


def _wal_mode(path: str) -> bool:
    # header bytes 18/19 are the read/write format versions: 2 means WAL
    try:
        with open(path, "rb") as fh:
            head = fh.read(20)
    except OSError:
        return False
    return len(head) == 20 and (head[18] == 2 or head[19] == 2)


def _connect(uri: str) -> sqlite3.Connection:
    con = sqlite3.connect(uri, uri=True, timeout=BUSY_TIMEOUT_S, check_same_thread=False)
    try:
        con.text_factory = bytes
        # belt and braces on top of mode=ro: no writes, and no schema-defined code (views,
        # triggers, generated columns) may call functions with side effects
        con.execute("PRAGMA query_only = 1")
        con.execute("PRAGMA trusted_schema = 0")
        con.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except BaseException:
        con.close()
        raise
    return con


def sqlite_problem(exc: BaseException) -> str:
    """One-line reason for a sqlite3 failure, in terms a user can act on."""
    msg = str(exc).strip() or type(exc).__name__
    low = msg.lower()
    if "not a database" in low:
        return "not a readable SQLite database (corrupt or encrypted)"
    if "malformed" in low:
        return "SQLite database is corrupt or truncated (database disk image is malformed)"
    if "locked" in low or "busy" in low:
        return "SQLite database is locked by another process; retry when it is finished"
    if "unable to open" in low:
        return "cannot open SQLite database (unreadable, or a WAL database whose -shm file cannot be created)"
    return f"SQLite error: {msg}"


def _open_private_copy(path: str, wal: str) -> tuple[sqlite3.Connection, str, str]:
    """A WAL database whose -wal still holds committed pages: SQLite must build a -shm index
    to read them, even read-only, and would create it beside the input. The database and its
    -wal are copied to a private temporary folder and read there (a copy costs the file's
    size in temporary space; immutable=1 would skip the -wal's pages and read stale data)."""
    private = tempfile.mkdtemp(prefix="traceclass-wal-")
    copy = os.path.join(private, "export.sqlite")
    try:
        shutil.copyfile(path, copy)
        shutil.copyfile(wal, copy + "-wal")
        uri = f"file:{urllib.parse.quote(copy)}?mode=ro"
        return _connect(uri), uri, private
    except (OSError, sqlite3.Error) as exc:
        _remove_private_copy(private)
        why = exc.strerror if isinstance(exc, OSError) else sqlite_problem(exc)
        raise TraceFormatError(
            path, f"SQLite database in WAL mode with a pending -wal file: cannot read a private copy ({why})"
        ) from None


def _remove_private_copy(private: str | None) -> None:
    if private is not None:
        shutil.rmtree(private, ignore_errors=True)


def table_names(path: str) -> frozenset[str] | None:
    """Names of the tables of a SQLite file opened read-only; None when it cannot be opened
    or read (the reader then says exactly why)."""
    try:
        con, _uri, private = NsysDb._open(path)
    except TraceFormatError:
        return None
    try:
        rows = con.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
    except sqlite3.Error:
        return None
    finally:
        con.close()
        _remove_private_copy(private)
    return frozenset(text(r[0]) for r in rows)


def is_nsys_export(tables: frozenset[str]) -> bool:
    """The tables only an Nsight Systems export has (one place for the sniff and the reader)."""
    return "StringIds" in tables and bool(NSYS_MARKER_TABLES & tables)


class NsysDb:
    """A read-only connection to one export plus its probed schema."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.con, self._uri, self._private_dir = self._open(path)
        self.columns: dict[str, frozenset[str]] = {}
        self._pool: ThreadPoolExecutor | None = None
        self._local = threading.local()
        self._worker_cons: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        try:
            self._probe()
        except sqlite3.Error as exc:
            self.close()
            raise TraceFormatError(path, sqlite_problem(exc)) from None
        except BaseException:
            self.close()
            raise

    # ------------------------------------------------------------------ opening

    @staticmethod
    def _open(path: str) -> tuple[sqlite3.Connection, str, str | None]:
        """(connection, its URI, the private copy's folder when one was made)."""
        if not os.path.exists(path):
            raise TraceFormatError(path, "no such file")
        if os.path.isdir(path):
            raise TraceFormatError(path, "is a directory, not a trace file")
        quoted = urllib.parse.quote(os.path.abspath(path))
        wal = path + "-wal"
        pending_wal = os.path.exists(wal) and os.path.getsize(wal) > 0
        if pending_wal and _wal_mode(path):
            return _open_private_copy(path, wal)
        uris = [f"file:{quoted}?mode=ro"]
        if _wal_mode(path) and not pending_wal:
            # A WAL database opened with mode=ro still creates (and may leave) a -shm file
            # beside it, or fails where the folder is read-only. With no -wal file holding
            # committed pages, immutable=1 reads the same data and touches nothing.
            uris.insert(0, f"file:{quoted}?mode=ro&immutable=1")
        first: sqlite3.Error | None = None
        for uri in uris:
            try:
                return _connect(uri), uri, None
            except sqlite3.Error as exc:
                first = first or exc
        if pending_wal:
            raise TraceFormatError(
                path,
                "SQLite database in WAL mode with a pending -wal file could not be opened "
                "read-only; copy it with its -wal file to a writable folder and retry",
            )
        raise TraceFormatError(path, sqlite_problem(first) if first else "cannot open SQLite database")

    def _probe(self) -> None:
        rows = self.con.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
        names = [text(r[0]) for r in rows]
        if not names:
            raise TraceFormatError(self.path, "SQLite database has no tables: not an Nsight Systems export")
        if not is_nsys_export(frozenset(names)):
            raise TraceFormatError(
                self.path,
                "SQLite database is not an Nsight Systems export (no StringIds and CUPTI_/NVTX_/"
                "TARGET_INFO_ tables); export .nsys-rep files with `nsys export --type sqlite`",
            )
        for name in names:
            try:
                info = self.con.execute(f"PRAGMA table_info({qi(name)})").fetchall()
            except sqlite3.Error:
                continue  # e.g. a virtual table whose module this build lacks
            self.columns[name] = frozenset(text(r[1]) for r in info)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
        for con in [self.con, *self._worker_cons]:
            try:
                con.close()
            except sqlite3.Error:
                pass
        self._worker_cons = []
        _remove_private_copy(self._private_dir)
        self._private_dir = None

    def _worker_con(self) -> sqlite3.Connection:
        con = getattr(self._local, "con", None)
        if con is None:
            con = _connect(self._uri)
            self._local.con = con
            with self._lock:
                self._worker_cons.append(con)
        return con

    @staticmethod
    def _workers() -> int:
        return max(1, min(MAX_READERS, os.cpu_count() or 1))

    def _executor(self) -> ThreadPoolExecutor | None:
        workers = self._workers()
        if workers < 2:
            return None
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="nsys-read")
        return self._pool

    # ------------------------------------------------------------------ schema

    def has(self, table: str, *cols: str) -> bool:
        have = self.columns.get(table)
        return have is not None and all(c in have for c in cols)

    def missing(self, table: str, cols: Iterable[str]) -> list[str]:
        have = self.columns.get(table, frozenset())
        return [c for c in cols if c not in have]

    def count(self, table: str) -> int:
        return int(self.con.execute(f"SELECT count(*) FROM {qi(table)}").fetchone()[0])

    # ------------------------------------------------------------------ reading

    def ints(
        self,
        table: str,
        exprs: Mapping[str, str],
        where: str = "",
        fill: Mapping[str, int] | None = None,
    ) -> dict[str, np.ndarray]:
        """Integer columns of ``table`` as int64 arrays, in rowid order.

        ``exprs`` maps an output name to an SQL expression over the table's columns (the
        caller has checked they exist). NULL becomes ``fill[name]`` (default -1). Each column
        is read with one ``group_concat`` per chunk of rows and parsed by numpy: SQLite does
        the per-row work in C, and no Python object is made per row.
        """
        fill = fill or {}
        cond = f"({where})" if where else "1"
        spans = self._rowid_spans(table, cond, counted=not where)
        names = list(exprs)
        pool = self._executor() if len(names) > 1 else None
        # one scan per group of columns: SQLite decodes each row once for all aggregates of a
        # query, and the groups run on separate connections in parallel
        n_groups = min(len(names), self._workers()) if pool else 1
        groups = [names[i::n_groups] for i in range(n_groups)] if names else []
        work: list[tuple[str, list[tuple[str, str, int]], str, tuple[int, ...], int]] = []
        for span_sql, params, n in spans:
            if n is None:
                n = int(
                    self.con.execute(
                        f"SELECT count(*) FROM {qi(table)} WHERE {cond}{span_sql}", params
                    ).fetchone()[0]
                )
            for group in groups:
                cols = [(name, exprs[name], int(fill.get(name, -1))) for name in group]
                work.append((table, cols, cond + span_sql, params, n))
        if pool is not None:
            futures = [pool.submit(self._concat_columns, *w) for w in work]
            results = [f.result() for f in futures]
        else:
            results = [self._concat_columns(*w, con=self.con) for w in work]
        parts: dict[str, list[np.ndarray]] = {k: [] for k in names}
        for got in results:
            for name, arr in got.items():
                parts[name].append(arr)
        return {
            k: (np.concatenate(v) if len(v) > 1 else (v[0] if v else np.zeros(0, np.int64)))
            for k, v in parts.items()
        }

    def _rowid_spans(
        self, table: str, cond: str, counted: bool
    ) -> list[tuple[str, tuple[int, ...], int | None]]:
        """(extra WHERE, params, row count if known) per chunk of rowids."""
        try:
            lo, hi, n = self.con.execute(
                f"SELECT min(rowid), max(rowid), count(*) FROM {qi(table)}"
            ).fetchone()
        except sqlite3.OperationalError:
            return [("", (), None)]  # WITHOUT ROWID table: one pass
        whole = int(n) if counted else None
        if lo is None or n <= CHUNK_ROWS:
            return [("", (), whole)]
        lo, hi, n = int(lo), int(hi), int(n)
        if hi - lo > 4 * n + CHUNK_ROWS:
            return [("", (), whole)]  # sparse rowids: chunking would mostly query gaps
        return [
            (" AND rowid >= ? AND rowid < ?", (a, a + CHUNK_ROWS), None)
            for a in range(lo, hi + 1, CHUNK_ROWS)
        ]

    def _concat_columns(
        self,
        table: str,
        cols: list[tuple[str, str, int]],
        cond: str,
        params: tuple[int, ...],
        n: int,
        con: sqlite3.Connection | None = None,
    ) -> dict[str, np.ndarray]:
        if n == 0:
            return {name: np.zeros(0, dtype=np.int64) for name, _, _ in cols}
        con = con or self._worker_con()
        # group_concat skips NULLs, so every value is made non-NULL to keep rows aligned
        aggs = ", ".join(f"group_concat(IFNULL({expr}, {fill}), ',')" for _, expr, fill in cols)
        row = con.execute(f"SELECT {aggs} FROM {qi(table)} WHERE {cond}", params).fetchone()
        out = {}
        for (name, expr, fill), blob in zip(cols, row, strict=True):
            arr = None
            if blob is not None:
                try:
                    # a C parser over the text; a REAL or TEXT cell makes it stop early (a
                    # warning, an error under -W error or in later numpy) and the count differ
                    arr = np.fromstring(blob, dtype=np.int64, sep=",")
                except (ValueError, DeprecationWarning):
                    arr = None
            if arr is None or len(arr) != n:
                # not plain integers: CAST row by row (slow, only for damaged files)
                cast = f"CAST(IFNULL({expr}, {fill}) AS INTEGER)"
                cur = con.execute(f"SELECT {cast} FROM {qi(table)} WHERE {cond}", params)
                arr = np.fromiter((r[0] for r in cur), dtype=np.int64, count=n)
            out[name] = arr
        return out

    def string_values(self, ids: np.ndarray) -> tuple[np.ndarray, list[str]]:
        """``StringIds`` values for the distinct non-negative ``ids`` (sorted ids, values)."""
        uniq = np.unique(ids[ids >= 0]) if len(ids) else np.zeros(0, dtype=np.int64)
        found: dict[int, str] = {}
        values = uniq.tolist()
        for i in range(0, len(values), _IN_BATCH):
            batch = values[i : i + _IN_BATCH]
            marks = ",".join("?" * len(batch))
            for sid, val in self.con.execute(
                f"SELECT id, CAST(value AS BLOB) FROM StringIds WHERE id IN ({marks})", batch
            ):
                if isinstance(sid, int):
                    found[sid] = text(val)
        keys = np.array(sorted(found), dtype=np.int64)
        return keys, [found[k] for k in keys.tolist()]

    def intern_ids(
        self, strings: StringTable, *columns: np.ndarray
    ) -> list[np.ndarray]:
        """Replace StringIds ids in each column with codes of ``strings`` (-1 when unknown)."""
        if not columns:
            return []
        allids = np.concatenate(columns) if len(columns) > 1 else columns[0]
        keys, values = self.string_values(allids)
        codes = strings.intern_many(values)
        out = []
        for col in columns:
            pos = lookup(keys, col)
            out.append(np.where(pos >= 0, codes[np.maximum(pos, 0)] if len(codes) else -1, -1).astype(np.int32))
        return out

    def key_values(self, table: str) -> list[tuple[str, str]]:
        """(name, value) rows of a metadata table, decoded."""
        if not self.has(table, "name", "value"):
            return []
        rows = self.con.execute(
            f"SELECT CAST(name AS BLOB), CAST(value AS BLOB) FROM {qi(table)}"
        ).fetchall()
        return [(text(k), text(v)) for k, v in rows]


class ExportVersion:
    """Product and schema version of an export, and how they were found."""

    __slots__ = ("product", "schema", "source", "metadata")

    def __init__(self, product: str, schema: str, source: str, metadata: dict[str, str]) -> None:
        self.product = product  # "2024.5.4.34", or an era such as "2020.3" when guessed
        self.schema = schema  # "3.13.2", "" when the export does not say
        self.source = source  # "META_DATA_EXPORT", "EXPORT_META_DATA" or "schema features"
        self.metadata = metadata  # export key -> value (first value of repeated keys)


def detect_version(db: NsysDb) -> ExportVersion:
    """Version from the export metadata (2022.1+), else guessed from the schema (2020-2021)."""
    for table in ("META_DATA_EXPORT", "EXPORT_META_DATA"):
        if table in db.columns:
            meta: dict[str, str] = {}
            for k, v in db.key_values(table):
                meta.setdefault(k, v)
            product = meta.get("EXPORT_PRODUCT_VERSION", "")
            schema = meta.get("EXPORT_SCHEMA_VERSION", "")
            if product or schema:
                return ExportVersion(product, schema, table, meta)
    return ExportVersion(_era_from_features(db), "", "schema features", {})


def _era_from_features(db: NsysDb) -> str:
    # schema history, nsys-sqlite.md section 7: each release added columns or tables
    if "CUPTI_ACTIVITY_KIND_RUNTIME" in db.columns and not db.has(
        "CUPTI_ACTIVITY_KIND_RUNTIME", "callchainId"
    ):
        return "2020.3"
    if "CUPTI_ACTIVITY_KIND_KERNEL" in db.columns and not db.has(
        "CUPTI_ACTIVITY_KIND_KERNEL", "sharedMemoryLimitConfig"
    ):
        return "2020.3"
    if "TARGET_INFO_CUDA_GPU" in db.columns and not db.has("TARGET_INFO_GPU", "totalMemory"):
        return "2020.5"
    if "TARGET_INFO_SESSION_START_TIME" not in db.columns:
        return "2021.1-2021.2"
    if "PROCESSES" not in db.columns:
        return "2021.3-2021.5"
    return "2021-2022"
