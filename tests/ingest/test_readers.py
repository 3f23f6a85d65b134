"""The reader registry: one module per format, sniffed in order, or picked by name."""

from __future__ import annotations

import gzip
import sqlite3

import pytest
from conftest import ROOT, corpus
from ingest.nsys_fixtures import small_kernel_storm_export

from traceclass.errors import ConfigError, TraceFormatError
from traceclass.ingest import FORMATS, READERS, all_readers, load, reader
from traceclass.ingest.probe import Probe

SAMPLE = ROOT / "sample_traces" / "torch_minitoy-train_mi250.json.gz"


def test_every_reader_module_has_its_name_sniff_and_read():
    mods = all_readers()
    assert [m.NAME for m in mods] == list(FORMATS)
    assert [m.__name__.rsplit(".", 1)[-1] for m in mods] == list(READERS)
    for m in mods:
        assert callable(m.sniff) and callable(m.read) and m.DESCRIPTION


def _accepting(path) -> list[str]:
    """Readers that accept the file, in sniffing order, up to the first (the one load uses)."""
    probe = Probe(path)
    out = []
    for m in all_readers():
        if m.sniff(probe):
            out.append(m.NAME)
            break
        out.append("-")
    return [n for n in out if n != "-"]


def test_each_format_is_accepted_by_its_reader(tmp_path):
    assert _accepting(SAMPLE) == ["kineto"]
    assert reader("chrome-trace").sniff(Probe(SAMPLE))  # the catch-all would take it too: order matters
    assert _accepting(corpus("pyspy", "cpu_lock.default.speedscope.json")) == ["speedscope"]
    assert _accepting(corpus("pyspy", "cpu_lock.default.chrometrace.json")) == ["chrome-trace"]
    assert _accepting(corpus("pyspy", "cpu_lock.default.raw.txt")) == ["collapsed"]
    db = tmp_path / "storm.sqlite"
    small_kernel_storm_export(db)
    assert _accepting(db) == ["nsys-sqlite"]


def test_a_foreign_sqlite_file_is_not_sent_to_the_nsys_reader(tmp_path):
    p = tmp_path / "app.sqlite"
    con = sqlite3.connect(p)
    con.executescript("CREATE TABLE users (id INTEGER, name TEXT); INSERT INTO users VALUES (1, 'a');")
    con.close()
    assert _accepting(p) == []
    with pytest.raises(TraceFormatError) as err:
        load(p)
    msg = str(err.value)
    assert msg.startswith(str(p)) and "\n" not in msg
    assert "SQLite database, but not an Nsight Systems export" in msg


def test_input_format_overrides_detection(tmp_path):
    # a Kineto trace read as a plain Chrome trace: no Kineto interpretation (no GPU device rows)
    as_kineto = load(SAMPLE)
    as_chrome = load(SAMPLE, fmt="chrome-trace")
    assert as_kineto.source.format == "kineto" and as_chrome.source.format == "chrome-trace"
    assert len(as_kineto.gpu) == 16 and len(as_chrome.gpu) == 0
    with pytest.raises(ConfigError, match="unknown input format 'pdf'"):
        reader("pdf")


def test_binary_and_blank_files_get_one_line_errors(tmp_path):
    blank = tmp_path / "blank.txt"
    blank.write_bytes(b" \n\t\n")
    binary = tmp_path / "x.bin"
    binary.write_bytes(b"\x00\x01\x02garbage")
    gz_blank = tmp_path / "blank.txt.gz"
    gz_blank.write_bytes(gzip.compress(b"   \n"))
    for p, msg in ((blank, "only whitespace"), (binary, "binary file of unknown format"),
                   (gz_blank, "only whitespace")):
        with pytest.raises(TraceFormatError, match=msg):
            load(p)
