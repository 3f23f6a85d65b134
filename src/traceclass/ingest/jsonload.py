"""Tolerant, memory-lean decoding of Chrome-trace JSON containers.

The container (``{"traceEvents": [...], ...}`` or a bare ``[...]``) is split into raw event
slices with msgspec, which validates and skips at GB/s without building Python objects; the
events are then decoded in bounded chunks by the format reader. Damaged input (invalid UTF-8,
raw control characters, NaN, integers beyond 64 bits) goes through a slower, forgiving path.
"""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any, Callable, Iterator, Optional

import msgspec
import numpy as np

from traceclass.errors import TraceFormatError

_RawList = msgspec.json.Decoder(list[msgspec.Raw])
_RawDict = msgspec.json.Decoder(dict[str, msgspec.Raw])


@dataclasses.dataclass
class Container:
    """Top-level keys (decoded, minus the events) and the raw event slices."""

    top: dict[str, Any]
    events: list[msgspec.Raw]
    bare: bool  # the file was a bare array of events
    repaired: str = ""  # what the forgiving path had to do, for the report's notes
    has_events: bool = True  # the object had an events key
    #: streamed files: the events after ``events``, in runs, read as they are iterated
    rest: Optional[Iterator[list[msgspec.Raw]]] = None
    #: streamed files: a reader's typed decoder for the runs in ``rest``; when set, a run is
    #: decoded straight from its text (one parse, instead of splitting it into raw events and
    #: decoding those again) and comes as a :class:`DecodedRun`
    decode_run: Optional[Callable[[bytes], list[Any]]] = None
    size: int = 0  # streamed files: content bytes read so far
    #: address and offset of the buffer the events were sliced from (0: unknown), so an event
    #: that fails to decode can be located by byte offset in the file
    origin: int = 0
    shift: int = 0


class DecodedRun(list):  # type: ignore[type-arg]
    """A run of events already decoded by :attr:`Container.decode_run`; ``text`` is the JSON
    array they were decoded from."""

    __slots__ = ("text",)

    def __init__(self, events: list[Any], text: bytes) -> None:
        super().__init__(events)
        self.text = text


_NON_SPACE = re.compile(rb"[^ \t\r\n]")


def first_char(data: bytes) -> bytes:
    """First non-whitespace byte after an optional BOM ("" when none), without copying ``data``."""
    start = 3 if data[:3] == b"\xef\xbb\xbf" else 0
    m = _NON_SPACE.search(data, start)
    return data[m.start(): m.start() + 1] if m else b""


def decode_container(path: str, data: bytes, events_key: str = "traceEvents") -> Container:
    """Split ``data`` into top-level metadata and raw events; raise TraceFormatError if hopeless."""
    shift = 0
    if data.startswith(b"\xef\xbb\xbf"):
        data, shift = data[3:], 3
    try:
        c = _decode_fast(path, data, events_key)
        c.origin, c.shift = buffer_address(data), shift
        return c
    except msgspec.DecodeError as exc:
        msg = str(exc)
        if "truncated" in msg.lower():
            repaired = _repair_truncated_array(data)
            if repaired is not None:
                c = _decode_fast(path, repaired, events_key)
                c.origin, c.shift = buffer_address(repaired), shift
                c.repaired = "file was truncated; the events before the cut were read"
                return c
            raise TraceFormatError(path, f"truncated JSON ({msg})") from None
    return _decode_forgiving(path, data, events_key)


def _decode_fast(path: str, data: bytes, events_key: str) -> Container:
    c = first_char(data)
    if c == b"[":
        return Container(top={}, events=_RawList.decode(data), bare=True)
    if c != b"{":
        raise TraceFormatError(path, "not JSON (expected an object or an array)")
    raw_top = _RawDict.decode(data)
    events_raw = raw_top.pop(events_key, None)
    top: dict[str, Any] = {}
    for k, v in raw_top.items():
        try:
            top[k] = msgspec.json.decode(v)
        except msgspec.DecodeError:
            top[k] = None
    if events_raw is None:
        return Container(top=top, events=[], bare=False, has_events=False)
    try:
        events = _RawList.decode(events_raw)
    except msgspec.ValidationError:
        raise TraceFormatError(path, f'"{events_key}" is not a list') from None
    return Container(top=top, events=events, bare=False)


def _repair_truncated_array(data: bytes) -> bytes | None:
    """A bare array cut short (Chrome accepts these): close it after the last whole event."""
    if first_char(data) != b"[":
        return None
    body = data.rstrip()
    if body.endswith(b","):
        body = body[:-1]
    candidate = body + b"]"
    try:
        _RawList.decode(candidate)
        return candidate
    except msgspec.DecodeError:
        pass
    # cut after the last complete top-level "}," boundary
    cut = body.rfind(b"},")
    while cut > 0:
        candidate = body[: cut + 1] + b"]"
        try:
            _RawList.decode(candidate)
            return candidate
        except msgspec.DecodeError:
            cut = body.rfind(b"},", 0, cut)
    return None


def _decode_forgiving(path: str, data: bytes, events_key: str) -> Container:
    """Python's json with strict=False and NaN support, over text with bad bytes replaced."""
    notes = []
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = data.decode("utf-8", errors="replace")
        notes.append("invalid UTF-8 replaced")
    try:
        obj = json.loads(text, strict=False, parse_constant=lambda _c: None, parse_int=parse_int)
    except json.JSONDecodeError as exc:
        where = f"line {exc.lineno} column {exc.colno}"
        if exc.pos >= len(text.rstrip()) - 1:
            raise TraceFormatError(path, f"truncated JSON (ends at {where})") from None
        at_byte = len(text[: exc.pos].encode("utf-8", errors="surrogatepass"))
        raise TraceFormatError(path, f"invalid JSON at byte {at_byte:,} ({where}): {exc.msg}") from None
    except RecursionError:
        raise TraceFormatError(path, "JSON nested too deeply") from None
    notes.append("non-standard JSON tolerated")
    obj = _sanitize(obj)
    clean = msgspec.json.encode(obj)
    c = _decode_fast(path, clean, events_key)
    c.repaired = "; ".join(notes)
    return c


def buffer_address(buf: Any) -> int:
    """Memory address of the first byte of ``buf`` (0 when empty): raw slices point into their
    text, so an address difference is a byte offset."""
    if not len(buf):
        return 0
    return int(np.frombuffer(buf, dtype=np.uint8).ctypes.data)


_ESCAPED = re.compile("[\udc80-\udcff]")


def repair_utf8(buf: bytes) -> tuple[bytes, int]:
    """``buf`` with each byte that is not valid UTF-8 replaced by U+FFFD, and how many were."""
    text = bytes(buf).decode("utf-8", errors="surrogateescape")
    fixed, n = _ESCAPED.subn("\ufffd", text)
    return (fixed.encode("utf-8") if n else buf), n


def locate_bad_event(container: Container, events: list[msgspec.Raw]) -> str:
    """Where the first event of ``events`` that does not decode is: its byte offset in the file
    (when known) and what is wrong there."""
    for raw in events:
        try:
            msgspec.json.decode(raw)
            continue
        except msgspec.DecodeError as exc:
            err = str(exc)
        within = 0
        try:
            bytes(raw).decode("utf-8")
        except UnicodeDecodeError as u:
            within, err = u.start, f"invalid UTF-8 byte 0x{bytes(raw)[u.start]:02x}"
        else:
            m = re.search(r"\(byte (\d+)\)", err)
            within = int(m.group(1)) if m else 0
        if not container.origin:
            return f"invalid event: {err}"
        offset = buffer_address(raw) - container.origin + container.shift + within
        where = f"at byte {offset:,}" if within else f"starting at byte {offset:,}"
        return f"invalid event {where} of the JSON text: {err}"
    return "invalid events"


_INT64_MAX = (1 << 63) - 1


def parse_int(text: str) -> int:
    """JSON integer text -> int, never meeting Python's int-string limit (4,300 digits): longer
    texts become 2**64 with their sign (:func:`_sanitize` folds every big value into int64)."""
    if len(text) > 4000:
        return -(1 << 64) if text.startswith("-") else 1 << 64
    return int(text)
_SURROGATE = re.compile("[\ud800-\udfff]")


def _sanitize(obj: Any) -> Any:
    """Integers beyond int64 become their value modulo 2**63 (ids stay distinct, in range);
    strings with lone surrogates (``"\\ud800"`` escapes) get U+FFFD instead."""
    if isinstance(obj, str):
        try:
            obj.encode("utf-8")
            return obj
        except UnicodeEncodeError:
            return _SURROGATE.sub("\ufffd", obj)
    if isinstance(obj, int) and not isinstance(obj, bool):
        if obj > _INT64_MAX or obj < -_INT64_MAX:
            return obj % (1 << 63)
        return obj
    if isinstance(obj, list):
        return [_sanitize(x) for x in obj]
    if isinstance(obj, dict):
        return {_sanitize(k): _sanitize(v) for k, v in obj.items()}
    return obj
