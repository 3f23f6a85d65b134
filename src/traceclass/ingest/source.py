"""Reading input bytes safely: size limits, gzip (with a bomb guard).

Every failure becomes a :class:`~traceclass.errors.TraceFormatError` naming the file, so the
CLI can print one line and exit 2.
"""

from __future__ import annotations

import os
import zlib
from pathlib import Path
from typing import Callable, Optional

from traceclass.errors import TraceFormatError

Progress = Optional[Callable[[str, int, int], None]]  # (phase, done, total)

GZIP_MAGIC = b"\x1f\x8b"
SQLITE_MAGIC = b"SQLite format 3\x00"

#: A deflate stream expands at most ~1032:1. Real traces compress 10-30:1 (Kineto ~19:1);
#: past this ratio on a large output we stop and call it a decompression bomb.
MAX_GZIP_RATIO = 250
#: The ratio check only applies once this much has come out, so small odd files pass.
GZIP_RATIO_GRACE = 256 << 20
_CHUNK = 8 << 20


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


def read_bytes(
    path: str | os.PathLike[str], progress: Progress = None, limit: int | None = None
) -> bytes:
    """Whole file content, gunzipped when it is gzip (multi-member streams included)."""
    p = Path(path)
    limit = default_size_limit() if limit is None else limit
    try:
        size = p.stat().st_size
        with open(p, "rb") as fh:
            magic = fh.read(2)
            fh.seek(0)
            if magic != GZIP_MAGIC:
                if size > limit:
                    raise TraceFormatError(
                        p, f"file is {size / 2**30:.1f} GiB, above the {limit / 2**30:.1f} GiB limit"
                    )
                return _read_plain(fh, size, progress)
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


def _read_plain(fh, size: int, progress: Progress) -> bytes:  # type: ignore[no-untyped-def]
    if size < (64 << 20):
        return fh.read()
    # read into one preallocated buffer in pieces (for the progress bar) and hand it over
    # without a copy: the decoders take any bytes-like object, while read() of an unknown
    # length grows its buffer by reallocation and can briefly hold twice the file
    buf = bytearray(size)
    view = memoryview(buf)
    done = 0
    while done < size:
        n = fh.readinto(view[done : done + _CHUNK])
        if not n:
            break
        done += n
        if progress is not None:
            progress("reading", done, size)
    view.release()
    if done != size:
        del buf[done:]
    return buf  # type: ignore[return-value]


def _gunzip(p: Path, fh, size: int, progress: Progress, limit: int) -> bytes:  # type: ignore[no-untyped-def]
    # one growing buffer: large reallocations are remapped in place, whereas collecting the
    # pieces and joining them would briefly hold the output twice
    out = bytearray()
    out_len = 0
    consumed = 0
    d = zlib.decompressobj(16 + zlib.MAX_WBITS)
    member_open = False
    first_checked = False
    while True:
        chunk = fh.read(_CHUNK)
        if not chunk:
            break
        consumed += len(chunk)
        data = chunk
        while data:
            member_open = True
            try:
                piece = d.decompress(data, _CHUNK)
            except zlib.error as exc:
                raise TraceFormatError(p, f"corrupt gzip data ({exc})") from None
            data = d.unconsumed_tail
            if piece:
                if not first_checked:
                    first_checked = True
                    _check_decompressed_head(p, piece)
                out += piece
                out_len += len(piece)
                if out_len > limit:
                    raise TraceFormatError(
                        p,
                        f"gzip content exceeds {limit / 2**30:.1f} GiB after decompression; "
                        "refusing to continue",
                    )
                if out_len > GZIP_RATIO_GRACE and out_len > MAX_GZIP_RATIO * max(consumed, 1):
                    raise TraceFormatError(
                        p,
                        f"gzip expands more than {MAX_GZIP_RATIO}:1 "
                        f"({out_len >> 20} MiB from {consumed >> 20} MiB): decompression bomb?",
                    )
            if d.eof:
                member_open = False
                rest = d.unused_data + data
                d = zlib.decompressobj(16 + zlib.MAX_WBITS)  # a following gzip member, if any
                data = rest if rest.strip(b"\x00") else b""
        if progress is not None:
            progress("decompressing", consumed, size)
    if member_open:
        raise TraceFormatError(p, "truncated gzip stream (file ends inside compressed data)")
    if out_len == 0:
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
