"""Chrome-trace JSON read in blocks: the events array is cut into runs of whole events as the
bytes arrive (plain or gzip), so memory holds one block and the columns built so far, never
the file. Every Kineto file is read this way, small ones too (it is also the faster path).

A cut goes after a ``}`` followed by ``,`` or ``]``; msgspec validates the run before it is
used (a ``}`` inside a string or a nested object makes the run invalid, and an earlier cut is
tried), so a cut never splits an event. The top-level keys before the array are decoded from
the head, those after it from the tail. Anything the stream cannot handle (no events key in
the first :data:`HEAD_LIMIT` bytes, damaged JSON) raises :class:`StreamUnsupported` and the
caller reads the file whole instead, with its forgiving paths.
"""

from __future__ import annotations

import os
import re
import zlib
from typing import Any, Callable, Iterator

import msgspec

from traceclass.errors import TraceFormatError
from traceclass.ingest.jsonload import Container, DecodedRun, buffer_address
from traceclass.ingest.source import GZIP_MAGIC, GZIP_RATIO_GRACE, MAX_GZIP_RATIO

#: Bytes read (decompressed) per block: about one run, so memory holds a run's text and its
#: decoded events, never the file (measured on the corpus V100 trace, 12 MB: peak RSS 59 MB
#: with 1 MB blocks, 67 MB with 4 MB, 73 MB reading the file whole; and a third faster)
BLOCK = 1 << 20
#: Bytes per run of events (about): a reader builds its columns faster from a few MB of
#: events at a time (they stay in cache) than from a whole block, and holds less.
RUN = 1 << 20
#: Compressed bytes read from a gzip file at a time
GZ_IN = 1 << 20
#: Bytes searched for an event's start after a split point's nominal offset
SPLIT_WINDOW = 1 << 20
#: The ``traceEvents`` key must start within this many bytes.
HEAD_LIMIT = 64 << 20
#: Plain files above this size are streamed (gzip files above a 16th of it): streaming holds
#: less and, with the reader's typed runs, parses each event once, so every file is streamed;
#: the whole-file path remains for what the stream cannot handle (:class:`StreamUnsupported`)
STREAM_ABOVE = 0

_RawList = msgspec.json.Decoder(list[msgspec.Raw])
_RawDict = msgspec.json.Decoder(dict[str, msgspec.Raw])
_WS = b" \t\r\n"


class StreamUnsupported(Exception):
    """The file cannot be streamed; read it whole."""


class RawRun(list):  # type: ignore[type-arg]
    """A run of raw event slices; ``origin`` is the address of the run's first byte in the
    text the slices point into, so an event that fails to decode can be located in the file."""

    __slots__ = ("origin",)

    def __init__(self, events: list[msgspec.Raw], origin: int) -> None:
        super().__init__(events)
        self.origin = origin


class GzipResume:
    """Where a pass over a gzip file left its stream (see :func:`gzip_split_points`): the
    decompressor's state, the compressed bytes not yet fed to it, the file offset after them,
    the ratio guard's counts and the decompressed bytes from the resume point on. A forked
    helper goes on from here instead of inflating the file up to its part again."""

    __slots__ = ("d", "data", "pos", "consumed", "produced", "pending")

    def __init__(self, d: Any, data: bytes, pos: int, consumed: int, produced: int, pending: bytes) -> None:
        self.d, self.data, self.pos = d, data, pos
        self.consumed, self.produced, self.pending = consumed, produced, pending


class _Inflater:
    """A gzip file's decompressed bytes in pieces of at most ``block``, members one after
    another, with the decompression-bomb ratio guard of :mod:`traceclass.ingest.source`."""

    def __init__(self, fh: Any, path: str, resume: GzipResume | None = None) -> None:
        self.fh, self.path = fh, path
        if resume is None:
            self.d: Any = zlib.decompressobj(16 + zlib.MAX_WBITS)
            self.data, self.consumed, self.produced = b"", 0, 0
        else:  # a copy: the same resume point may be used twice (a helper, then a fallback)
            self.d, self.data = resume.d.copy(), resume.data
            self.consumed, self.produced = resume.consumed, resume.produced
            fh.seek(resume.pos)

    def piece(self, block: int) -> bytes | None:
        """The next piece (b"" when a step yields nothing yet), None at the end of the file."""
        if not self.data:
            self.data = self.fh.read(GZ_IN)
            if not self.data:
                # a truncated member simply ends the bytes: the events parser then finds the
                # JSON cut short and the whole-file path reports it
                return None
            self.consumed += len(self.data)
        try:
            piece = self.d.decompress(self.data, block)
        except zlib.error as exc:
            raise TraceFormatError(self.path, f"corrupt gzip data ({exc})") from None
        self.data = self.d.unconsumed_tail
        self.produced += len(piece)
        if self.produced > GZIP_RATIO_GRACE and self.produced > MAX_GZIP_RATIO * max(self.consumed, 1):
            raise TraceFormatError(self.path, f"gzip expands more than {MAX_GZIP_RATIO}:1 "
                                              f"({self.produced >> 20} MiB from {self.consumed >> 20} MiB): "
                                              "decompression bomb?")
        if self.d.eof:
            # the bytes after the member are in unused_data (and, when the output bound was hit
            # on the way, in unconsumed_tail too: the same bytes, not more of them)
            rest = self.d.unused_data
            self.d = zlib.decompressobj(16 + zlib.MAX_WBITS)  # a following member, if any
            self.data = rest if rest.strip(b"\x00") else b""
        return piece

    def resume(self, pending: bytes) -> GzipResume:
        """This point of the stream, ``pending`` (decompressed, not yet used) first."""
        return GzipResume(self.d.copy(), self.data, self.fh.tell(), self.consumed, self.produced, pending)


def _blocks(path: str, block: int, start: int = 0, stop: int | None = None,
            resume: GzipResume | None = None) -> Iterator[bytes]:
    """The file's content in pieces of about ``block`` bytes, gunzipped when gzip, with the
    decompression-bomb ratio guard of :mod:`traceclass.ingest.source`. ``start`` and ``stop``
    (offsets in the content: decompressed for gzip) read a part of it; a gzip part is reached by
    inflating the stream up to it, or taken up where a :class:`GzipResume` for ``start`` left it."""
    with open(path, "rb") as fh:
        magic = fh.read(2)
        if magic != GZIP_MAGIC:
            fh.seek(start)
            if stop is None:
                # a callable iterator: no frame of ours keeps the piece while the caller uses it
                yield from iter(lambda: fh.read(block), b"")
                return
            left = stop - start
            while left > 0:
                piece = fh.read(min(block, left))
                if not piece:
                    return
                left -= len(piece)
                box = [piece]
                del piece
                yield box.pop()
            return
        fh.seek(0)  # the stream from its start, or where the resume point left it
        z = _Inflater(fh, path, resume)
        # at: the content offset of pending's first byte
        pending, at = (resume.pending, start) if resume is not None else (b"", 0)
        while True:
            piece = z.piece(block)
            if piece is None:
                break
            if at < start:  # before the part: inflated and dropped
                if at + len(piece) <= start:
                    at += len(piece)
                    continue
                piece, at = piece[start - at:], start
            pending += piece
            del piece
            if stop is not None and at + len(pending) >= stop:
                pending = pending[:stop - at]
                break
            if len(pending) >= block:
                at += len(pending)
                box, pending = [pending], b""
                yield box.pop()  # handed over: this frame keeps no reference while suspended
        if stop is not None:  # also when the stream ended first, or a resume point held it all
            pending = pending[:max(stop - at, 0)]
        if pending:
            box, pending = [pending], b""
            yield box.pop()


def _strip_ws(b: bytes, i: int = 0) -> int:
    n = len(b)
    while i < n and b[i] in _WS:
        i += 1
    return i


def _find_events_start(head: bytes, key: bytes) -> tuple[int, int] | None:
    """(offset of the events key, offset just after the ``[`` opening the events array), when
    the key is at top level; for a bare array the key offset is -1."""
    lead = _strip_ws(head, 3 if head.startswith(b"\xef\xbb\xbf") else 0)
    if head[lead:lead + 1] == b"[":
        return -1, lead + 1
    if head[lead:lead + 1] != b"{":
        return None
    needle = b'"' + key + b'"'
    pos = head.find(needle)
    while pos >= 0:
        i = _strip_ws(head, pos + len(needle))
        if head[i:i + 1] == b":":
            j = _strip_ws(head, i + 1)
            if head[j:j + 1] == b"[":
                try:  # at top level iff the text before it plus an empty array closes the object
                    _RawDict.decode(head[lead:pos] + needle + b":[]}")
                    return pos, j + 1
                except msgspec.DecodeError:
                    pass
        pos = head.find(needle, pos + 1)
    return None


def _cut(buf: bytes, start: int = 0, decode: Callable[[bytes], list[Any]] | None = None) -> tuple[list[Any], int]:
    """The longest run of whole events in ``buf`` from ``start``: (events, bytes used). The
    events are raw slices, or a :class:`DecodedRun` when ``decode`` (a reader's typed decoder)
    accepts the run's text; when it refuses, the raw slices still tell whether the cut is sound
    (the reader then decodes them with its own recovery, e.g. for invalid UTF-8). Runs are
    kept to about :data:`RUN` bytes when an event boundary allows."""
    if len(buf) - start > RUN:
        evs, used = _cut_before(buf, start, start + RUN, decode)
        if used:
            return evs, used
    return _cut_before(buf, start, len(buf), decode)


def _cut_before(buf: bytes, start: int, end: int,
                decode: Callable[[bytes], list[Any]] | None) -> tuple[list[Any], int]:
    tries = 0
    while tries < 64:
        k = buf.rfind(b"}", start, end)
        if k < 0:
            return [], 0
        nxt = _strip_ws(buf, k + 1)
        if nxt < len(buf) and buf[nxt] in b",]":
            tries += 1
            text = b"[" + buf[start: k + 1] + b"]"
            if decode is not None:
                try:
                    return DecodedRun(decode(text), text), k + 1 - start
                except msgspec.MsgspecError:
                    pass
            try:
                return RawRun(_RawList.decode(text), buffer_address(text) + 1), k + 1 - start
            except msgspec.DecodeError:
                pass
        end = k
    return [], 0


def stream_container(path: str, events_key: str = "traceEvents", block: int | None = None,
                     stop: int | None = None) -> Container:
    """A :class:`Container` whose ``events`` are the first block's and whose ``rest`` yields
    the others as they are read; ``top`` gets the keys after the array once ``rest`` ends.
    With ``stop`` (a content offset where an event starts, see :func:`split_point`)
    the events end there: the rest is :func:`stream_from`'s, and :class:`NotABoundary` is
    raised if ``stop`` turns out not to start an event."""
    container = Container(top={}, events=[], bare=False)
    blocks = _counted_blocks(container, path, block, 0, stop)
    head = b""
    found = None
    for piece in blocks:
        head += piece
        found = _find_events_start(head, events_key.encode())
        if found is not None or len(head) >= HEAD_LIMIT:
            break
    if found is None:
        raise StreamUnsupported("no events array near the start")
    key_at, start = found
    bare = key_at < 0
    top: dict[str, Any] = {}
    if not bare:
        lead = _strip_ws(head, 3 if head.startswith(b"\xef\xbb\xbf") else 0)
        prefix = head[lead:key_at].rstrip()
        if prefix.endswith(b","):
            prefix = prefix[:-1]
        for k, v in _RawDict.decode(prefix + b"}").items():
            try:
                top[k] = msgspec.json.decode(v)
            except msgspec.DecodeError:
                top[k] = None
    container.top, container.bare = top, bare
    if stop is not None and bare:
        raise StreamUnsupported("a bare array is not split")
    gen = _events(path, head, start, blocks, container, split_end=stop is not None)
    del head
    first = next(gen, [])
    container.events = first
    container.rest = gen
    return container


def _counted_blocks(container: Container, path: str, block: int | None, start: int, stop: int | None,
                    resume: GzipResume | None = None) -> Iterator[bytes]:
    """:func:`_blocks`, each piece's size added to ``container.size`` as it is read."""

    def counted(piece: bytes) -> bytes:
        container.size += len(piece)
        return piece

    # a map keeps no piece
    return map(counted, _blocks(path, BLOCK if block is None else block, start, stop, resume))


class NotABoundary(Exception):
    """A split point turned out not to start an event: the part before it ends mid-event."""


def split_point(path: str, at: int, hi: int) -> int | None:
    """A byte offset from ``at`` (before ``hi``) of a plain file that looks like the start of an
    event (the ``{`` after ``}`` and a comma); None when the next MB has none. Only a guess:
    the part before it is read up to it and must end with a whole event (:class:`NotABoundary`
    otherwise), and the part after it must decode as events."""
    with open(path, "rb") as fh:
        fh.seek(at)
        window = fh.read(min(SPLIT_WINDOW, max(hi - at, 0)))
    for m in _SPLIT.finditer(window):
        found = at + m.start(1)
        if found < hi:
            return found
    return None


def gzip_split_points(path: str, parts: int, progress: Callable[[int, int], None] | None = None
                      ) -> list[tuple[int, GzipResume]]:
    """Split points of a gzip file into about ``parts`` parts: for each, the offset in the
    decompressed content that looks like an event's start (as :func:`split_point`; the first
    one in the MB after each ``k / parts`` of the compressed bytes) and where the stream was
    there, so a helper goes on from it without inflating the part before. Costs inflating the
    file up to the last point, once. Fewer points where the stream ends first or a window has
    no event start; raises :class:`~traceclass.errors.TraceFormatError` on corrupt data.
    ``progress(compressed bytes read, compressed bytes to read)`` is called as it goes."""
    points: list[tuple[int, GzipResume]] = []
    size = os.stat(path).st_size
    with open(path, "rb") as fh:
        z = _Inflater(fh, path)
        at = 0  # content offset of the next piece's first byte
        for k in range(1, parts):
            while z.consumed < k * size // parts:
                piece = z.piece(BLOCK)
                if piece is None:
                    return points
                at += len(piece)
                if progress is not None:
                    last = (parts - 1) * size // parts
                    progress(min(z.consumed, last), last)
            window = b""
            while len(window) < SPLIT_WINDOW:
                piece = z.piece(BLOCK)
                if piece is None:
                    break
                window += piece
            m = _SPLIT.search(window)
            if m is not None:
                points.append((at + m.start(1), z.resume(window[m.start(1):])))
            at += len(window)
    return points


_SPLIT = re.compile(rb"\}[ \t\r\n]*,[ \t\r\n]*(\{)[ \t\r\n]*\"")


def stream_from(path: str, start: int, container: Container, block: int | None = None,
                stop: int | None = None, resume: GzipResume | None = None) -> Iterator[list[msgspec.Raw]]:
    """Runs of the events from content offset ``start`` (where an event starts; decompressed
    for gzip, taken up from ``resume`` when given) to the end of the events array, the keys
    after it going into ``container.top``; or to ``stop``, where another event must start
    (:class:`NotABoundary` otherwise)."""
    blocks = _counted_blocks(container, path, block, start, stop, resume)
    first = next(blocks, b"")
    return _events(path, first, 0, blocks, container, split_end=stop is not None, base=start)


def _events(path: str, buf: bytes, pos: int, blocks: Iterator[bytes], container: Container,
            split_end: bool = False, base: int = 0) -> Iterator[list[msgspec.Raw]]:
    """``base``: the offset of ``buf[0]`` in the JSON text; ``split_end``: the blocks stop
    where another reader starts (a whole event must end there)."""
    eof = False
    # pos: where the unread events start; runs are cut from buf without copying its rest
    while True:
        i = _strip_ws(buf, pos)
        if buf[i:i + 1] == b",":
            i = _strip_ws(buf, i + 1)
        if buf[i:i + 1] == b"]":
            _tail(path, buf[i + 1:], blocks, container)
            return
        pos = i
        evs, used = _cut(buf, pos, container.decode_run) if pos < len(buf) else ([], 0)
        if evs:
            if isinstance(evs, RawRun):  # the reader locates a bad event by byte offset
                container.origin, container.shift = evs.origin, base + pos
            pos += used
            yield evs
            continue
        if len(buf) - pos > 4 * max(BLOCK, 1 << 20):  # no whole event in MBs: damaged, not a huge event
            raise StreamUnsupported("no valid event boundary in the block")
        if eof:
            if split_end:
                if buf[pos:].strip(_WS + b","):
                    raise NotABoundary("the split point is inside an event")
                return
            if container.bare and not buf[pos:].strip():
                container.repaired = "file was truncated; the events before the cut were read"
                return
            raise StreamUnsupported("truncated or invalid JSON in the events")
        piece = next(blocks, None)
        if piece is None:
            eof = True
        else:
            base += pos
            buf, pos = buf[pos:] + piece, 0
            del piece  # else this frame keeps the block while suspended


def _tail(path: str, rest: bytes, blocks: Iterator[bytes], container: Container) -> None:
    for piece in blocks:
        rest += piece
    if container.bare:
        return
    rest = rest.strip()
    if rest.startswith(b","):
        rest = rest[1:]
    try:
        after = _RawDict.decode(b"{" + rest) if rest.strip() != b"}" else {}
    except msgspec.DecodeError:
        raise StreamUnsupported("invalid JSON after the events") from None
    for k, v in after.items():
        try:
            container.top[k] = msgspec.json.decode(v)
        except msgspec.DecodeError:
            container.top[k] = None


def should_stream(path: str, limit: int | None = None) -> bool:
    """Whether the file is large enough that holding its bytes would dominate memory: plain
    files above ``limit`` bytes (default :data:`STREAM_ABOVE`), gzip files above ``limit / 16``
    (Kineto compresses ~19:1)."""
    limit = STREAM_ABOVE if limit is None else limit
    try:
        size = os.stat(path).st_size
        with open(path, "rb") as fh:
            gz = fh.read(2) == GZIP_MAGIC
    except OSError:
        return False
    return size > (limit // 16 if gz else limit)
