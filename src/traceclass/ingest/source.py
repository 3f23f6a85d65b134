"""Reading input bytes safely: size limits, gzip (with a bomb guard).

Every failure becomes a :class:`~traceclass.errors.TraceFormatError` naming the file, so the
CLI can print one line and exit 2.
"""

from __future__ import annotations

import os
import re
import stat
import zlib
from pathlib import Path
from typing import Callable, Optional

from traceclass import units
from traceclass.errors import TraceFormatError

Progress = Optional[Callable[[str, int, int], None]]  # (phase, done, total)

GZIP_MAGIC = b"\x1f\x8b"
SQLITE_MAGIC = b"SQLite format 3\x00"

#: A deflate stream expands at most ~1032:1. Real traces compress 10-30:1 (Kineto ~19:1);
#: past this ratio on a large output we stop and call it a decompression bomb.
MAX_GZIP_RATIO = 250
#: The ratio check only applies once this much has come out, so small odd files pass. With
#: the output per step bounded, a bomb holds at most this plus one step when it is stopped.
GZIP_RATIO_GRACE = 128 << 20
_CHUNK = 8 << 20
#: Compressed bytes fed to the decompressor per step. Each step yields at most ``_CHUNK`` and
#: the ratio is judged on the input actually consumed, so a bomb is stopped within one step of
#: the grace, whatever its ratio (a whole read chunk counted as consumed let 2 GB out first).
_GZ_IN = 1 << 20
#: A run of this many NUL bytes is never text: sparse files, zero padding, disk images.
#: Found chunk by chunk, it stops the read early instead of after loading gigabytes.
_NUL_RUN = b"\x00" * 4096


def _available_memory() -> int | None:
    try:
        with open("/proc/meminfo", "rb") as fh:
            for line in fh:
                if line.startswith(b"MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def default_size_limit() -> int:
    """Largest decompressed input we accept: 80% of available memory, or 64 GiB."""
    avail = _available_memory()
    cap = 64 << 30
    return cap if avail is None else min(cap, int(avail * 0.8))


def read_head(path: str | os.PathLike[str], n: int = 1 << 16) -> bytes:
    """First ``n`` bytes of the file, decompressed when gzip."""
    p = Path(path)
    try:
        with open(p, "rb") as fh:
            head = fh.read(n)
            if head[:2] != GZIP_MAGIC:
                return head
            fh.seek(0)
            d = zlib.decompressobj(16 + zlib.MAX_WBITS)
            out = b""
            while len(out) < n:
                chunk = fh.read(1 << 16)
                if not chunk:
                    break
                try:
                    out += d.decompress(chunk, n - len(out))
                except zlib.error as exc:
                    raise TraceFormatError(p, f"corrupt gzip data ({exc})") from None
                if d.unconsumed_tail:
                    break
            return out
    except IsADirectoryError:
        raise TraceFormatError(p, "is a directory, not a trace file") from None
    except FileNotFoundError:
        raise TraceFormatError(p, "no such file") from None
    except PermissionError:
        raise TraceFormatError(p, "permission denied") from None
    except OSError as exc:
        raise TraceFormatError(p, f"cannot read ({exc.strerror or exc})") from None


#: what traceclass reads, for errors that must tell a user what to give it instead
ACCEPTED = ("torch.profiler/Kineto JSON (.json, .json.gz), Nsight Systems exports (.sqlite; .nsys-rep with "
            "nsys on PATH) and py-spy profiles (speedscope JSON, collapsed stacks 'frame;...;frame COUNT', "
            "chrometrace)")

_PYTHON = re.compile(rb"^(#!.*python|import \w|from [\w.]+ import |def \w+\(|class \w+)", re.M)
_MARKDOWN = re.compile(rb"^(#{1,6} \S|[-*] \S|```)", re.M)


def describe_content(path: str | os.PathLike[str]) -> str:
    """What the file looks like, in a few words, for an "unrecognized input" error:
    ``gzip-compressed Python source``, ``text starting 'Hello world.'``, ``binary data``."""
    try:
        with open(path, "rb") as fh:
            gz = fh.read(2) == GZIP_MAGIC
        head = read_head(path, 4096)
    except (OSError, TraceFormatError):
        return "unreadable content"
    pre = "gzip-compressed " if gz else ""
    if not head.strip():
        return pre + ("an empty file" if not head else "only whitespace")
    if b"\x00" in head:
        return pre + "binary data"
    if _PYTHON.search(head):
        return pre + "Python source"
    if _MARKDOWN.search(head):
        return pre + "Markdown text"
    first = next((ln for ln in head.splitlines() if ln.strip()), b"").decode("utf-8", "replace").strip()
    from traceclass.model.names import cut  # here, not at import: `--help` loads this module

    first = cut(first, 40)
    return pre + f"text starting {first!r}"


def unrecognized(path: str | os.PathLike[str], detail: str = "") -> TraceFormatError:
    """The error for a file of no supported format: what it looks like and what we accept."""
    seen = describe_content(path) + (f"; {detail}" if detail else "")
    return TraceFormatError(path, f"not a recognized trace ({seen}); traceclass reads {ACCEPTED}")


def read_bytes(
    path: str | os.PathLike[str], progress: Progress = None, limit: int | None = None
) -> bytes:
    """Whole content of a text input (trace, report, baseline, config), gunzipped when it is
    gzip (multi-member streams included).

    The one guard every file read goes through: at most ``limit`` bytes (default: 80% of
    available memory) ever come out, a gzip stream past :data:`MAX_GZIP_RATIO` is stopped
    within one step of :data:`GZIP_RATIO_GRACE`, and a run of NUL bytes (binary data, a
    sparse file) stops the read at the chunk where it appears.
    """
    p = Path(path)
    limit = default_size_limit() if limit is None else limit
    try:
        with open(p, "rb") as fh:
            st = os.fstat(fh.fileno())
            # a FIFO or a device has no size to trust (/dev/zero never ends): read it as a
            # stream, bounded by the limit
            size = st.st_size if stat.S_ISREG(st.st_mode) else -1
            magic = fh.read(2)
            if magic != GZIP_MAGIC:
                if size > limit:
                    raise TraceFormatError(
                        p, f"file is {_size(size)}, above the {_size(limit)} limit"
                    )
                return _read_plain(p, fh, magic, size, progress, limit)
            fh.seek(0)
            return _gunzip(p, fh, size, progress, limit)
    except TraceFormatError:
        raise
    except IsADirectoryError:
        raise TraceFormatError(p, "is a directory, not a trace file") from None
    except FileNotFoundError:
        raise TraceFormatError(p, "no such file") from None
    except PermissionError:
        raise TraceFormatError(p, "permission denied") from None
    except MemoryError:
        raise TraceFormatError(p, "not enough memory to read the file") from None
    except OSError as exc:
        raise TraceFormatError(p, f"cannot read ({exc.strerror or exc})") from None


def _size(n: int) -> str:
    return units.binary_size(n)


def _read_plain(p: Path, fh, head: bytes, size: int, progress: Progress, limit: int) -> bytes:  # type: ignore[no-untyped-def]
    if 0 <= size < (64 << 20):
        data = head + fh.read(size)
        _check_text(p, data, 0)
        return data
    # read into one buffer grown a chunk at a time (large reallocations are remapped in place,
    # and pages are touched only as data arrives, so a file rejected early never costs its
    # size) and hand it over without a copy: the decoders take any bytes-like object
    buf = bytearray(head)
    done = len(head)
    while size < 0 or done < size:
        if done > limit:
            raise TraceFormatError(p, f"input exceeds the {_size(limit)} limit; refusing to continue")
        want = _CHUNK if size < 0 else min(_CHUNK, size - done)
        buf.extend(bytes(want))
        view = memoryview(buf)
        n = fh.readinto(view[done : done + want])
        view.release()
        if not n:
            break
        _check_text(p, buf, max(done - len(_NUL_RUN), 0), done + n)
        done += n
        if progress is not None and size > 0:
            progress("reading", done, size)
    if done != len(buf):
        del buf[done:]
    return buf  # type: ignore[return-value]


def _check_text(p: Path, data: bytes | bytearray, start: int, end: int | None = None) -> None:
    at = data.find(_NUL_RUN, start, end)
    if at >= 0:
        raise TraceFormatError(
            p, f"{len(_NUL_RUN)} NUL bytes in a row at byte {at}: binary data (zero padding or a sparse "
               "file), not a trace, report or config"
        )


def _gunzip(p: Path, fh, size: int, progress: Progress, limit: int) -> bytes:  # type: ignore[no-untyped-def]
    # one growing buffer: large reallocations are remapped in place, whereas collecting the
    # pieces and joining them would briefly hold the output twice
    out = bytearray()
    consumed = 0
    d = zlib.decompressobj(16 + zlib.MAX_WBITS)
    member_open = False
    first_checked = False
    while True:
        chunk = fh.read(_GZ_IN)
        if not chunk:
            break
        data = chunk
        while data:
            member_open = True
            try:
                piece = d.decompress(data, _CHUNK)
            except zlib.error as exc:
                raise TraceFormatError(p, f"corrupt gzip data ({exc})") from None
            # at a member's end the bytes after it are in unused_data (and, when the output
            # bound was hit on the way, in unconsumed_tail too: the same bytes); they are fed
            # to the next member below and counted then
            consumed += len(data) - len(d.unused_data if d.eof else d.unconsumed_tail)
            data = d.unconsumed_tail
            if piece:
                if not first_checked:
                    first_checked = True
                    _check_decompressed_head(p, piece)
                at = len(out)
                out += piece
                _check_text(p, out, max(at - len(_NUL_RUN), 0))
                if len(out) > limit:
                    raise TraceFormatError(
                        p,
                        f"gzip content exceeds {_size(limit)} after decompression; refusing to continue",
                    )
                if len(out) > GZIP_RATIO_GRACE and len(out) > MAX_GZIP_RATIO * max(consumed, 1):
                    raise TraceFormatError(
                        p,
                        f"gzip expands more than {MAX_GZIP_RATIO}:1 "
                        f"({len(out) >> 20} MiB from {consumed >> 10} KiB): decompression bomb?",
                    )
            if d.eof:
                member_open = False
                rest = d.unused_data
                d = zlib.decompressobj(16 + zlib.MAX_WBITS)  # a following gzip member, if any
                data = rest if rest.strip(b"\x00") else b""
        if progress is not None and size > 0:
            progress("decompressing", min(consumed, size), size)
    if member_open:
        raise TraceFormatError(p, "truncated gzip stream (file ends inside compressed data)")
    if not out:
        raise TraceFormatError(p, "gzip file decompresses to nothing")
    return out  # type: ignore[return-value]


def _check_decompressed_head(p: Path, piece: bytes) -> None:
    head = piece[:4096]
    if head.startswith(SQLITE_MAGIC):
        raise TraceFormatError(
            p, "gzip-compressed SQLite export: decompress it first (gunzip -k) and pass the .sqlite"
        )
    if b"\x00" in head and not (head.startswith(b"\xff\xfe") or head.startswith(b"\xfe\xff")):
        raise TraceFormatError(p, "gzip content is binary, not a trace (no JSON or text inside)")
