"""What a reader's ``sniff`` looks at: one input file, read at most once.

A :class:`Probe` wraps a path and caches, on first use, the file's first bytes (gunzipped),
its whole content and its decoded Chrome-trace container, so several readers can sniff the
same file and the one that accepts it reads what the sniffing already loaded.
"""

from __future__ import annotations

import os
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from traceclass.errors import TraceFormatError
from traceclass.ingest.source import SQLITE_MAGIC, Progress, read_bytes, read_head

if TYPE_CHECKING:
    from traceclass.ingest.jsonload import Container

UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")


class Probe:
    """One input file as the readers see it (content only; the name decides nothing but
    binary ``.nsys-rep`` reports, which must be exported by ``nsys`` first)."""

    def __init__(self, path: str | os.PathLike[str], progress: Progress = None) -> None:
        self.path = str(path)
        self.progress = progress
        self.name = Path(path).name.lower()
        self._data: bytes | None = None
        self.size = 0  # bytes of the decompressed content, once read

    @cached_property
    def head(self) -> bytes:
        """First 64 KiB, decompressed when gzip; raises for an empty or unreadable file."""
        head = read_head(self.path)
        if not head:
            raise TraceFormatError(Path(self.path), "file is empty")
        return head

    @cached_property
    def first_mib(self) -> bytes:
        """First MiB, decompressed when gzip (for sniffers that look past the head)."""
        return read_head(self.path, 1 << 20)

    @property
    def is_sqlite(self) -> bool:
        return self.head.startswith(SQLITE_MAGIC)

    @property
    def is_utf16(self) -> bool:
        return self.head.startswith(UTF16_BOMS)

    @cached_property
    def text_head(self) -> bytes:
        """The head without leading whitespace and UTF-8 BOM ("" for a blank file)."""
        return self.head.lstrip(b" \t\r\n\xef\xbb\xbf")

    @property
    def is_json(self) -> bool:
        return not self.is_sqlite and not self.is_utf16 and self.text_head[:1] in (b"{", b"[")

    @property
    def data(self) -> bytes:
        """The whole content (gunzipped), read once."""
        if self._data is None:
            self._data = read_bytes(self.path, progress=self.progress)
            self.size = len(self._data)
        return self._data

    @cached_property
    def container(self) -> Container:
        """The Chrome-trace JSON container (``traceEvents`` and top-level keys), validated.

        The file is streamed (:mod:`traceclass.ingest.jsonstream`): ``events`` holds the
        first block and ``rest`` the others; readers that need every event at once use
        :meth:`whole_container`."""
        from traceclass.ingest.jsonstream import StreamUnsupported, should_stream, stream_container

        if should_stream(self.path):
            try:
                container = stream_container(self.path)
                if container.events:
                    return container
            except StreamUnsupported:
                pass
        return self.whole_container()

    def whole_container(self) -> Container:
        """The container with every raw event in memory (the file is read whole)."""
        streamed = self.__dict__.get("container")
        if streamed is not None and streamed.rest is None:
            return streamed
        container = self._whole_container()
        self.__dict__["container"] = container
        return container

    def _whole_container(self) -> Container:
        from traceclass.ingest.jsonload import decode_container, first_char

        data = self.data
        if not first_char(data):
            raise TraceFormatError(self.path, "file is empty" if not data else "file contains only whitespace")
        if first_char(data) not in (b"{", b"["):
            raise TraceFormatError(self.path, "not a JSON trace (expected '{' or '[' at the start)")
        container = decode_container(self.path, data)
        self._data = None  # the raw event slices keep what they need
        if not container.bare and not container.has_events:
            raise TraceFormatError(self.path, "JSON object has no \"traceEvents\" list: not a Chrome/Kineto trace")
        if not container.events:
            raise TraceFormatError(self.path, "the trace holds no events (empty \"traceEvents\")")
        return container

    @cached_property
    def sqlite_tables(self) -> frozenset[str] | None:
        """Table names of a SQLite file; None when the database cannot be opened read-only."""
        from traceclass.ingest.nsys_schema import table_names

        return table_names(self.path)

    def unknown(self) -> TraceFormatError:
        """The one-line error for a file no reader accepts."""
        if self.is_sqlite:
            return TraceFormatError(
                self.path,
                "SQLite database, but not an Nsight Systems export (no StringIds and CUPTI_/NVTX_/"
                "TARGET_INFO_ tables); export .nsys-rep files with `nsys export --type sqlite`",
            )
        if not self.text_head:
            return TraceFormatError(Path(self.path), "file contains only whitespace")
        if b"\x00" in self.head:
            return TraceFormatError(Path(self.path), "binary file of unknown format (not JSON, SQLite or text)")
        return TraceFormatError(self.path, "no reader recognises this file")
