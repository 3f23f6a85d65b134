"""Damaged and foreign inputs: a clean TraceFormatError or a loaded trace, never a traceback.
Also the ``.nsys-rep`` path through a stand-in ``nsys`` executable."""

from __future__ import annotations

import hashlib
import os
import sqlite3
import stat
import textwrap

import pytest

import nsys_fixtures as fx
from traceclass.errors import TraceFormatError
from traceclass.ingest import load, nsys, nsys_schema
from traceclass.ingest.nsys import read_nsys_report, read_nsys_sqlite
from traceclass.model import Trace


def _sha(path) -> str:
    with open(path, "rb") as fh:
        return hashlib.sha256(fh.read()).hexdigest()


def _load_or_error(path) -> Trace | TraceFormatError:
    try:
        return load(path)
    except TraceFormatError as exc:
        assert "\n" not in str(exc) and str(path) in str(exc)
        return exc


def test_foreign_sqlite_database(tmp_path):
    p = tmp_path / "app.sqlite"
    con = sqlite3.connect(p)
    con.executescript("CREATE TABLE users (id INTEGER, name TEXT); INSERT INTO users VALUES (1, 'a');")
    con.close()
    with pytest.raises(TraceFormatError, match="not an Nsight Systems export"):
        load(p)


def test_sqlite_database_without_tables(tmp_path):
    p = tmp_path / "empty_db.sqlite"
    sqlite3.connect(p).execute("PRAGMA user_version = 1").connection.close()
    with pytest.raises(TraceFormatError, match="no tables|not an Nsight Systems export"):
        load(p)


def test_empty_file_named_sqlite(tmp_path):
    p = tmp_path / "report.sqlite"
    p.write_bytes(b"")
    with pytest.raises(TraceFormatError, match="empty"):
        load(p)
    # called directly, SQLite sees an empty database
    with pytest.raises(TraceFormatError):
        read_nsys_sqlite(p)


@pytest.mark.parametrize("keep", [100, 1024, 4096, 0.3, 0.5, 0.9])
def test_truncated_export(tmp_path, keep):
    full = tmp_path / "full.sqlite"
    fx.small_kernel_storm_export(full, n=3000)
    data = full.read_bytes()
    cut = tmp_path / "cut.sqlite"
    n = keep if isinstance(keep, int) else int(len(data) * keep)
    cut.write_bytes(data[:n])
    got = _load_or_error(cut)
    if isinstance(got, Trace):
        assert len(got.gpu) <= 3000


def test_truncated_corpus_file(tmp_path):
    from conftest import CORPUS

    src = CORPUS / "nsys" / "SamuelAmsih_CUDA__report14.sqlite"
    if not src.exists():
        pytest.skip("corpus not available")
    data = src.read_bytes()
    for frac in (0.25, 0.5, 0.75):
        cut = tmp_path / f"cut{frac}.sqlite"
        cut.write_bytes(data[: int(len(data) * frac)])
        _load_or_error(cut)


def test_garbage_after_sqlite_header(tmp_path):
    p = tmp_path / "garbage.sqlite"
    p.write_bytes(b"SQLite format 3\x00" + os.urandom(8192))
    with pytest.raises(TraceFormatError):
        load(p)


def test_encrypted_like_file_read_directly(tmp_path):
    p = tmp_path / "encrypted.sqlite"
    p.write_bytes(os.urandom(16384))  # SQLCipher files have no plain header
    with pytest.raises(TraceFormatError, match="not a readable SQLite database"):
        read_nsys_sqlite(p)


def test_locked_database(tmp_path, monkeypatch):
    p = tmp_path / "locked.sqlite"
    fx.small_kernel_storm_export(p, n=10)
    monkeypatch.setattr(nsys_schema, "BUSY_TIMEOUT_S", 0.05)
    holder = sqlite3.connect(p)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(TraceFormatError, match="locked"):
            load(p)
    finally:
        holder.rollback()
        holder.close()


def test_corrupt_values_do_not_raise(tmp_path):
    p = tmp_path / "values.sqlite"
    with fx.NsysExportBuilder(p) as b:
        c = b.runtime(1_000, 2_000, "cudaLaunchKernel_v7000")
        b.kernel(3_000, 4_000, "good", c)
        b.kernel(5_000, 6_000, "weird", c + 1)
        b.con.execute("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET start = 'abc', end = 'x' WHERE correlationId = ?", (c + 1,))
        b.con.execute("INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME (start, end, eventClass, nameId, returnValue) VALUES (9e30, 1.5, 0, 424242, 0)")
        b.nvtx(10, 5, "ends before it starts")
    t = load(p)
    assert [t.strings[c] for c in t.gpu.name] == ["good"]
    assert any("no timestamps" in n for n in t.notes)
    assert len(t.api) == 2 and t.api.name[1] == -1  # unknown StringIds id -> no name
    assert t.api.end_ns[1] >= t.api.start_ns[1]
    assert t.annotations.start_ns.tolist() == [10] and t.annotations.end_ns.tolist() == [10]


def test_input_file_is_not_modified(tmp_path):
    p = tmp_path / "x.sqlite"
    fx.emit_nvtx_export(p)
    before = _sha(p)
    mtime = os.stat(p).st_mtime_ns
    load(p)
    assert _sha(p) == before and os.stat(p).st_mtime_ns == mtime
    assert sorted(os.listdir(tmp_path)) == ["x.sqlite"]  # no -journal/-wal/-shm left


def test_wal_mode_export_is_read_without_side_files(tmp_path):
    p = tmp_path / "wal.sqlite"
    fx.small_kernel_storm_export(p, n=20)
    con = sqlite3.connect(p)
    con.execute("PRAGMA journal_mode = WAL")
    con.close()  # last connection: checkpoints and removes -wal/-shm
    assert sorted(os.listdir(tmp_path)) == ["wal.sqlite"]
    before = _sha(p)
    t = load(p)
    assert len(t.gpu) == 20
    assert _sha(p) == before
    assert sorted(os.listdir(tmp_path)) == ["wal.sqlite"]


def test_read_only_file(tmp_path):
    p = tmp_path / "ro.sqlite"
    fx.small_kernel_storm_export(p, n=5)
    os.chmod(p, stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH)
    assert len(load(p).gpu) == 5


def test_path_needing_uri_quoting(tmp_path):
    d = tmp_path / "dir with spaces & ?#%"
    d.mkdir()
    p = d / "report #1?.sqlite"
    fx.small_kernel_storm_export(p, n=4)
    assert len(load(p).gpu) == 4


def test_missing_file_and_directory(tmp_path):
    with pytest.raises(TraceFormatError, match="no such file"):
        read_nsys_sqlite(tmp_path / "nope.sqlite")
    with pytest.raises(TraceFormatError, match="directory"):
        read_nsys_sqlite(tmp_path)


# --------------------------------------------------------------------------- .nsys-rep


def _fake_nsys(bin_dir, body: str) -> None:
    bin_dir.mkdir(exist_ok=True)
    exe = bin_dir / "nsys"
    exe.write_text("#!/bin/sh\n" + textwrap.dedent(body))
    exe.chmod(0o755)


def test_report_without_nsys_names_the_command(tmp_path, monkeypatch):
    rep = tmp_path / "profile.nsys-rep"
    rep.write_bytes(b"\x00binary report")
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    with pytest.raises(TraceFormatError) as err:
        load(rep)
    assert f"nsys export --type sqlite --output report.sqlite {rep}" in str(err.value)


def test_report_exported_by_nsys(tmp_path, monkeypatch):
    src = tmp_path / "made.sqlite"
    fx.small_kernel_storm_export(src, n=12)
    rep = tmp_path / "profile.qdrep"
    rep.write_bytes(b"\x00binary report")
    _fake_nsys(tmp_path / "bin", f"""
        # stand-in for `nsys export --type sqlite --output OUT INPUT`
        [ "$1" = export ] && [ "$2" = --type ] && [ "$3" = sqlite ] && [ "$4" = --output ] || exit 3
        [ "$6" = "{rep}" ] || exit 4
        cp "{src}" "$5"
    """)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:{os.environ['PATH']}")
    t = load(rep)
    assert len(t.gpu) == 12
    assert t.source.path == str(rep) and t.source.size_bytes == rep.stat().st_size
    assert t.meta["nsys.exported_from"] == "nsys-rep"


def test_report_export_failure(tmp_path, monkeypatch):
    rep = tmp_path / "broken.nsys-rep"
    rep.write_bytes(b"\x00")
    _fake_nsys(tmp_path / "bin", """
        echo "Processing events..."
        echo "ERROR: the report is corrupt" >&2
        exit 1
    """)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:{os.environ['PATH']}")
    with pytest.raises(TraceFormatError, match="nsys export.* failed: ERROR: the report is corrupt"):
        read_nsys_report(rep)


def test_report_export_timeout(tmp_path, monkeypatch):
    rep = tmp_path / "slow.nsys-rep"
    rep.write_bytes(b"\x00")
    _fake_nsys(tmp_path / "bin", "exec sleep 30\n")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:{os.environ['PATH']}")
    monkeypatch.setattr(nsys, "NSYS_EXPORT_TIMEOUT_S", 0.5)
    with pytest.raises(TraceFormatError, match="did not finish"):
        read_nsys_report(rep)
