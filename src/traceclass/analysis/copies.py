"""Memory copies (``trace.gpu`` memcpy rows): direction, exposure, peaks and launch sites.

* *direction class*: HtoD (incl. UVM HtoD, HtoA), DtoH (incl. UVM DtoH, AtoH), DtoD (DtoD, PtoP,
  UVM DtoD and array copies on the device) and other (HtoH, unknown).
* *exposed* time of a copy: its time overlapped by no kernel on the same device (any stream,
  communication kernels included). Per-copy values may add up past the exposed wall time when
  copies overlap each other; :func:`exposed_union_ns` gives the wall time.
* *peak* a copy is judged against: the host link per direction for HtoD/DtoH
  (``DeviceSpec.host_link_bps``), half the memory bandwidth for DtoD (every byte is read and
  written once, so a copy of B bytes moves 2B through device memory).
* *site*: the op that issued the copy (innermost op and the outermost op above it), or the API
  call when no op is recorded (nsys exports), and the user source line.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from traceclass import timeline as tl
from traceclass.analysis.sites import op_names, op_source_codes, source_codes, source_label, top_level_ops
from traceclass.model import ApiKind, CopyKind, GpuKind, MemKind, Trace
from traceclass.model.nesting import group_ids

HTOD, DTOH, DTOD, OTHER = 0, 1, 2, 3
CLASS_LABEL = ("HtoD", "DtoH", "DtoD", "other")
_CLASS_OF_KIND = np.full(256, OTHER, dtype=np.int8)
for _k in (CopyKind.HTOD, CopyKind.UVM_HTOD, CopyKind.HTOA):
    _CLASS_OF_KIND[int(_k)] = HTOD
for _k in (CopyKind.DTOH, CopyKind.UVM_DTOH, CopyKind.ATOH):
    _CLASS_OF_KIND[int(_k)] = DTOH
for _k in (CopyKind.DTOD, CopyKind.PTOP, CopyKind.UVM_DTOD, CopyKind.ATOA, CopyKind.ATOD, CopyKind.DTOA):
    _CLASS_OF_KIND[int(_k)] = DTOD

HOST_SIDE = {HTOD: "src_mem", DTOH: "dst_mem"}


def memcpy_rows(trace: Trace) -> np.ndarray:
    """Rows of ``trace.gpu`` that are copies."""
    return np.flatnonzero(trace.gpu.kind == GpuKind.MEMCPY)


def direction_class(trace: Trace, rows: np.ndarray) -> np.ndarray:
    """HTOD / DTOH / DTOD / OTHER per copy row."""
    return _CLASS_OF_KIND[trace.gpu.copy_kind[rows].astype(np.int64) & 0xFF]


def host_mem(trace: Trace, rows: np.ndarray) -> np.ndarray:
    """MemKind of the host side of each copy (source of HtoD, destination of DtoH), else UNKNOWN."""
    gpu = trace.gpu
    cls = direction_class(trace, rows)
    return np.where(cls == HTOD, gpu.src_mem[rows],
                    np.where(cls == DTOH, gpu.dst_mem[rows], int(MemKind.UNKNOWN))).astype(np.int8)


def kernel_cover(trace: Trace, device: int) -> tl.Intervals:
    gpu = trace.gpu
    k = (gpu.device == device) & (gpu.kind == GpuKind.KERNEL)
    return tl.merge(gpu.start_ns[k], gpu.end_ns[k])


def exposed_each(trace: Trace, rows: np.ndarray) -> np.ndarray:
    """Per copy row: ns overlapped by no kernel on its device."""
    gpu = trace.gpu
    out = np.zeros(len(rows), dtype=np.int64)
    dev = gpu.device[rows]
    for d in np.unique(dev).tolist():
        sel = dev == d
        r = rows[sel]
        s, e = gpu.start_ns[r], gpu.end_ns[r]
        out[sel] = np.maximum(e - s, 0) - tl.overlap_each(s, e, kernel_cover(trace, d))
    return out


def exposed_union_ns(trace: Trace, rows: np.ndarray) -> int:
    """Wall time during which some of ``rows`` (one device's copies) ran and no kernel did."""
    if len(rows) == 0:
        return 0
    gpu = trace.gpu
    total = 0
    dev = gpu.device[rows]
    for d in np.unique(dev).tolist():
        r = rows[dev == d]
        total += tl.total(tl.subtract(tl.merge(gpu.start_ns[r], gpu.end_ns[r]), kernel_cover(trace, d)))
    return total


def peak_bps(spec: object, cls: int) -> tuple[float | None, str]:
    """(bytes/s, what it is) a copy of class ``cls`` can reach on ``spec``; (None, why) when unknown."""
    if spec is None:
        return None, "device not identified"
    if cls in (HTOD, DTOH):
        link = getattr(spec, "host_link_bps", None)
        if link:
            return float(link), "host link, per direction"
        return None, "host-link bandwidth of this device not on record"
    if cls == DTOD:
        return float(spec.memory_bandwidth_bps) / 2.0, "half the memory bandwidth: a copy reads and writes"
    return None, "no peak for this copy kind"


def sites(trace: Trace, rows: np.ndarray) -> dict[str, np.ndarray]:
    """Launch site columns per GPU row: ``op`` (innermost op row), ``top`` (outermost op above
    it), ``api_name`` (string code of the API call), ``source`` (frame-name code), all -1 unknown."""
    gpu = trace.gpu
    return api_sites(trace, gpu.api[rows].astype(np.int64), gpu.op[rows].astype(np.int64))


def api_sites(trace: Trace, api_rows: np.ndarray, op: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """Like :func:`sites` for API call rows (``op`` defaults to the op that made each call)."""
    api = trace.api
    a = np.asarray(api_rows, dtype=np.int64)
    has = a >= 0
    if op is None:
        op = np.where(has, api.op[np.maximum(a, 0)], -1).astype(np.int64) if len(api) else np.full(len(a), -1)
    top = np.where(op >= 0, top_level_ops(trace, op), -1)
    api_name = np.where(has, api.name[np.maximum(a, 0)], -1).astype(np.int64) if len(api) else np.full(len(a), -1)
    src = op_source_codes(trace, op)
    need = (src < 0) & has
    if need.any() and len(trace.python):
        ar = a[need]
        src[need] = source_codes(trace, api.pid[ar], api.tid[ar], api.start_ns[ar])
    return {"op": op, "top": top, "api_name": api_name, "source": src}


def site_label(trace: Trace, op: int, top: int, api_name: int) -> tuple[str, tuple[str, ...]]:
    """Readable launch site and the op names for evidence (outermost first)."""
    names: list[str] = []
    if top >= 0 and top != op:
        names.append(trace.strings[int(trace.ops.name[top])])
    if op >= 0:
        names.append(trace.strings[int(trace.ops.name[op])])
    if names:
        return " > ".join(names), tuple(names)
    if api_name >= 0:
        return trace.strings[int(api_name)], ()
    return "no launching call recorded", ()


@dataclasses.dataclass(frozen=True)
class SiteGroup:
    """Copies (positions into the rows given to :func:`site_groups`) issued from one site."""

    index: np.ndarray
    where: str  # "aten::to > aten::copy_", "cudaMemcpy"
    ops: tuple[str, ...]
    source: str | None
    name: str  # memcpy name of the first copy ("Memcpy HtoD (Pageable -> Device)")


def site_groups(trace: Trace, rows: np.ndarray, cols: dict[str, np.ndarray] | None = None,
                extra: tuple[np.ndarray, ...] | None = None) -> list[SiteGroup]:
    """Copy rows grouped by launch site (op chain, API, source line) and memory kinds.

    ``cols`` are site columns from :func:`sites` / :func:`api_sites` (default: ``sites(rows)``);
    ``extra`` adds grouping keys. ``rows`` index ``trace.gpu`` (-1 allowed when ``cols`` is given).
    """
    if len(rows) == 0:
        return []
    gpu = trace.gpu
    s = cols if cols is not None else sites(trace, rows)
    has = rows >= 0
    r0 = np.maximum(rows, 0)
    mem = [np.where(has, gpu.src_mem[r0], -1).astype(np.int64), np.where(has, gpu.dst_mem[r0], -1).astype(np.int64)] \
        if len(gpu) else [np.full(len(rows), -1, dtype=np.int64)] * 2
    gid, n = group_ids(op_names(trace, s["op"]), op_names(trace, s["top"]), s["api_name"], s["source"],
                       *mem, *(extra or ()))
    order = np.argsort(gid, kind="stable")
    cuts = np.flatnonzero(np.diff(gid[order])) + 1
    out = []
    for idx in np.split(order, cuts):
        k = int(idx[0])
        where, names = site_label(trace, int(s["op"][k]), int(s["top"][k]), int(s["api_name"][k]))
        name = trace.strings[int(gpu.name[rows[k]])] if rows[k] >= 0 else "copy (no GPU record)"
        out.append(SiteGroup(idx, where, names, source_label(trace, int(s["source"][k])), name))
    return out


_WAITS = (ApiKind.SYNC_STREAM, ApiKind.SYNC_DEVICE, ApiKind.SYNC_EVENT)


def blocking_copy_calls(trace: Trace, max_gap_ns: float) -> tuple[np.ndarray, ...]:
    """Copy API calls the host waits for: ``(rows, waited, blocked_ns, gap_ns)``.

    A call is a synchronous copy API (``ApiKind.MEMCPY_SYNC``) or an async copy whose next call on
    the same thread (event records skipped) is a stream/device/event synchronize starting within
    ``max_gap_ns`` of its end (``waited``). Blocked time: the call's duration, plus the
    synchronize call's for waited copies; ``gap_ns``: copy end -> synchronize start (0 otherwise).
    """
    api = trace.api
    keep = np.flatnonzero(~trace.strings.mask(api.name, lambda s: "EventRecord" in s))
    order = keep[np.lexsort((api.start_ns[keep], api.tid[keep], api.pid[keep]))]
    del keep
    k = api.kind[order]
    # only copies and the call after each are looked at (not every call: api-sized temporaries)
    cand = np.flatnonzero((k == ApiKind.MEMCPY_SYNC) | (k == ApiKind.MEMCPY_ASYNC))
    r = order[cand]
    has_next = cand + 1 < len(order)
    nxt = order[np.minimum(cand + 1, len(order) - 1)]
    same = has_next & (api.pid[nxt] == api.pid[r]) & (api.tid[nxt] == api.tid[r])
    gap = api.start_ns[nxt] - api.end_ns[r]
    waited = (k[cand] == ApiKind.MEMCPY_ASYNC) & same & np.isin(api.kind[nxt], _WAITS) & (gap <= max_gap_ns)
    dur = api.end_ns[r] - api.start_ns[r]
    blocked = np.where(waited, dur + (api.end_ns[nxt] - api.start_ns[nxt]), dur).astype(np.int64)
    gaps = np.where(waited, gap, 0).astype(np.int64)
    sel = (k[cand] == ApiKind.MEMCPY_SYNC) | waited
    return r[sel], waited[sel], blocked[sel], gaps[sel]


def idle_after(trace: Trace, rows: np.ndarray) -> np.ndarray:
    """Per GPU row (-1 allowed): the idle gap after the busy stretch (union of all GPU activity on
    its device) that contains the row's end; 0 when nothing follows or the row is -1."""
    gpu = trace.gpu
    out = np.zeros(len(rows), dtype=np.int64)
    has = rows >= 0
    for d in np.unique(gpu.device[rows[has]]).tolist():
        on = (gpu.device == d) & (gpu.kind != GpuKind.SYNC)
        bs, be = tl.merge(gpu.start_ns[on], gpu.end_ns[on])
        sel = np.flatnonzero(has & (gpu.device[np.maximum(rows, 0)] == d))
        i = np.searchsorted(bs, gpu.end_ns[rows[sel]], side="left") - 1  # stretch holding the end
        ok = (i >= 0) & (i + 1 < len(bs))
        out[sel[ok]] = bs[i[ok] + 1] - be[i[ok]]
    return out


def title_site(site: str) -> str:
    """A copy site in a few words for a finding's title: the outermost op of its chain
    ("aten::to > aten::copy_ at x.py:12" -> "aten::to"); the lead line adds the file:line."""
    return site.split(" > ")[0].split(" at ")[0]
