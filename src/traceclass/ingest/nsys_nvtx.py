"""NVTX_EVENTS of an nsys export -> ``Annotations`` (and ``Ops`` for torch ``emit_nvtx``).

Ranges are push/pop (59), start/end (60) and .nvtxt push/pop (70). A range in a named domain
is called ``domain:message``; the domain name is the text of the DomainCreate (75) row with
the same ``domainId`` in the same process. Ranges written by
``torch.autograd.profiler.emit_nvtx`` carry the op name plus ``, seq = N``, ``, op_id = N``,
``, sizes = [[...], ...]`` and ``, input_op_ids = [...]`` (torch/csrc/profiler/util.cpp,
``getNvtxStr``); they become ``Ops`` rows so the shared cost model and linking apply.
"""

from __future__ import annotations

import dataclasses
import json
import re

import numpy as np

from traceclass.ingest.nsys_cuda import process_key, split_global_tid
from traceclass.ingest.nsys_schema import NsysDb, text
from traceclass.model import Annotations, InputsTable, OpInputs, Ops, StringTable
from traceclass.model.names import annotation_kind
from traceclass.model.nesting import lookup, lookup2

NVTX = "NVTX_EVENTS"
MARK, PUSH_POP, START_END, NVTXT_PUSH_POP = 34, 59, 60, 70
DOMAIN_CREATE, DOMAIN_DESTROY, CATEGORY = 75, 76, 33
RANGE_TYPES = (PUSH_POP, START_END, NVTXT_PUSH_POP)

_SUFFIX_KEYS = (", seq = ", ", op_id = ", ", sizes = ", ", input_op_ids = ")
_EMIT_TAIL = re.compile(
    r"(?:, seq = (?P<seq>-?\d+))?"
    r"(?:, op_id = (?P<op_id>\d+))?"
    r"(?:, sizes = (?P<sizes>\[(?:\[[-\d, ]*\](?:, )?)*\]))?"
    r"(?:, input_op_ids = \[(?:\(-?\d+,-?\d+\)(?:, )?)*\])?",
)
#: A bare operator name (``aten::empty``): emit_nvtx writes no suffix when an op has no
#: sequence number and shapes are off (torch before op_id was added)
_BARE_OP = re.compile(r"[A-Za-z_]\w*::[\w:.<>]+(?:: \w+)?")


@dataclasses.dataclass(frozen=True)
class EmitNvtx:
    """One parsed ``emit_nvtx`` range text."""

    name: str
    seq: int  # -1 when absent
    op_id: int  # -1 when absent
    sizes: str | None  # the raw ``[[...], ...]`` text
    is_op: bool  # False: a record_function / user scope that only gained an op_id suffix


def parse_emit_nvtx(message: str) -> EmitNvtx | None:
    """Parse ``aten::addmm, seq = 12, op_id = 40, sizes = [[64, 128], [128, 32]]``.

    Returns None for text not in that form. Torch appends ``op_id`` to every range, including
    ``record_function`` scopes (sequence number -1, so no ``seq``); those are not ops unless
    their name is namespaced like an operator (``aten::empty``).
    """
    cut = -1
    for key in _SUFFIX_KEYS:
        i = message.find(key)
        if i > 0 and (cut < 0 or i < cut):
            cut = i
    if cut <= 0:
        return None
    m = _EMIT_TAIL.fullmatch(message, cut)
    if m is None:
        return None
    seq, op_id, sizes = m.group("seq"), m.group("op_id"), m.group("sizes")
    if seq is None and op_id is None and sizes is None:
        return None
    name = message[:cut]
    return EmitNvtx(
        name=name,
        seq=int(seq) if seq is not None else -1,
        op_id=int(op_id) if op_id is not None else -1,
        sizes=sizes,
        is_op=seq is not None or "::" in name,
    )


def parse_sizes(sizes: str) -> OpInputs | None:
    """``[[64, 128], [], [3]]`` -> dims ``((64, 128), None, (3,))``, dtypes unknown.

    NVTX records no dtypes, so ``[]`` (scalar, None, 0-d tensor, empty list) cannot be told
    apart and is kept as a non-tensor input.
    """
    try:
        value = json.loads(sizes)
    except ValueError:
        return None
    if not isinstance(value, list) or not all(isinstance(v, list) for v in value):
        return None
    dims = tuple(tuple(int(x) for x in v) if v else None for v in value)
    return OpInputs(dims=dims, dtypes=("",) * len(dims))


@dataclasses.dataclass
class NvtxResult:
    annotations: Annotations
    ops: Ops
    counts: dict[str, int]
    notes: list[str]
    has_shapes: bool


def read_nvtx(
    db: NsysDb, strings: StringTable, inputs: InputsTable, trace_end: int | None
) -> NvtxResult | None:
    """NVTX ranges of the export, or None when the table is absent."""
    if NVTX not in db.columns:
        return None
    notes: list[str] = []
    lacking = db.missing(NVTX, ("start", "eventType"))
    if lacking:
        notes.append(f"{NVTX} lacks column(s) {', '.join(lacking)}: NVTX not read")
        return NvtxResult(Annotations.empty(), Ops.empty(), {}, notes, False)

    def col(name: str) -> str:
        return name if db.has(NVTX, name) else "NULL"

    kinds = ",".join(str(k) for k in (*RANGE_TYPES, DOMAIN_CREATE))
    where = f"eventType IN ({kinds})"
    c = db.ints(
        NVTX,
        {
            "rowid": "rowid",
            "start": "start",
            "end": col("end"),
            "type": "eventType",
            "gtid": col("globalTid"),
            "text_id": col("textId"),
            "domain": col("domainId"),
        },
        where=where,
        fill={"domain": 0},
    )
    counts = _type_counts(db)
    # messages stay local until a column keeps them: emit_nvtx writes one distinct text per
    # op call (seq and op_id differ), and none of those texts is a name once parsed
    message, texts = _messages(db, c, where)

    is_domain = c["type"] == DOMAIN_CREATE
    proc = process_key(c["gtid"])
    domain_name = _domain_names(strings, texts, proc, c["domain"], message, is_domain)

    rng = ~is_domain
    r = {k: v[rng] for k, v in c.items()}
    msg, dom = message[rng], domain_name[rng]
    n = len(msg)
    open_ = r["end"] < 0
    if open_.any():
        # without a recorded window or other activity, the last NVTX timestamp ends them
        end_at = trace_end if trace_end is not None else int(max(r["start"].max(), r["end"].max()))
        r["end"] = np.where(open_, np.maximum(end_at, r["start"]), r["end"])
        notes.append(
            f"{int(open_.sum())} NVTX ranges were still open when the capture ended; "
            "they were closed at the trace end"
        )
    r["end"] = np.maximum(r["end"], r["start"])
    pid, tid = split_global_tid(r["gtid"])

    # emit_nvtx ops live in the default domain as push/pop ranges
    candidate = (r["type"] == PUSH_POP) & (r["domain"] == 0) & (msg >= 0)
    op_row = np.zeros(n, dtype=bool)
    op_name = np.full(n, -1, dtype=np.int32)
    op_seq = np.full(n, -1, dtype=np.int64)
    op_id = np.full(n, -1, dtype=np.int64)
    op_inputs = np.full(n, -1, dtype=np.int32)
    renamed = np.zeros(n, dtype=bool)  # user scopes lose the emit_nvtx suffix (name in op_name)
    has_shapes = False
    if candidate.any():
        codes, inv = np.unique(msg[candidate], return_inverse=True)
        rows = np.flatnonzero(candidate)
        inv = inv.ravel()
        per = [parse_emit_nvtx(texts[k]) for k in codes.tolist()]
        is_op = np.array([p is not None and p.is_op for p in per], dtype=bool)
        parsed = np.array([p is not None for p in per], dtype=bool)
        name_c = np.array(
            [strings.intern(p.name) if p is not None else -1 for p in per], dtype=np.int32
        )
        seq_c = np.array([p.seq if p is not None else -1 for p in per], dtype=np.int64)
        opid_c = np.array([p.op_id if p is not None else -1 for p in per], dtype=np.int64)
        sized: dict[str, int] = {}
        inp_c = np.array([_inputs_code(inputs, p, sized) for p in per], dtype=np.int32)
        has_shapes = bool((inp_c >= 0).any())
        op_row[rows] = is_op[inv]
        op_name[rows] = name_c[inv]
        op_seq[rows] = seq_c[inv]
        op_id[rows] = opid_c[inv]
        op_inputs[rows] = inp_c[inv]
        if is_op.any():
            # this export has emit_nvtx ops: bare operator names beside them are ops too
            bare = np.array(
                [strings.intern(texts[k]) if p is None and _BARE_OP.fullmatch(texts[k]) else -1
                 for p, k in zip(per, codes.tolist(), strict=True)],
                dtype=np.int32,
            )
            bare_rows = rows[(bare >= 0)[inv]]
            op_row[bare_rows] = True
            op_name[bare_rows] = bare[inv][(bare >= 0)[inv]]
        user = rows[parsed[inv] & ~is_op[inv]]
        renamed[user] = True

    ann_rows = ~op_row
    # annotation names: the parsed name of a suffixed user scope, else the message itself
    plain_name = np.where(
        renamed, op_name, _to_strings(strings, texts, np.where(ann_rows & ~renamed, msg, -1))
    ).astype(np.int32)
    ops = Ops.build(
        int(op_row.sum()),
        start_ns=r["start"][op_row],
        end_ns=r["end"][op_row],
        pid=pid[op_row],
        tid=tid[op_row],
        name=op_name[op_row],
        external_id=op_id[op_row],
        seq=op_seq[op_row],
        inputs=op_inputs[op_row],
    )
    names = _qualified(strings, dom[ann_rows], plain_name[ann_rows])
    kind = _kinds(strings, plain_name[ann_rows], names)
    annotations = Annotations.build(
        int(ann_rows.sum()),
        start_ns=r["start"][ann_rows],
        end_ns=r["end"][ann_rows],
        pid=pid[ann_rows],
        tid=tid[ann_rows],
        name=names,
        kind=kind,
    )
    order = np.lexsort((annotations.start_ns,))
    annotations = annotations.take(order)
    ops = ops.take(np.argsort(ops.start_ns, kind="stable"))

    if counts.get("ranges", 0) == 0 and counts.get("domain_rows", 0) > 0:
        notes.append(
            "NVTX was captured but recorded no ranges (known with nvtx 0.2.17 + nsys 2022.4: "
            f"only {counts['domain_rows']} domain create/destroy rows were written); "
            "pin nvtx 0.2.8 or use a newer nsys to see the ranges"
        )
    counts["ops"] = len(ops)
    return NvtxResult(annotations, ops, counts, notes, has_shapes)


def _inputs_code(inputs: InputsTable, p: EmitNvtx | None, seen: dict[str, int]) -> int:
    """Input signature code of an op's ``sizes`` text (-1 without one); dtypes are all ``""``:
    emit_nvtx records none, and :mod:`traceclass.analysis.ops` reads them off the kernels."""
    if p is None or not p.is_op or p.sizes is None:
        return -1
    sizes = p.sizes
    code = seen.get(sizes)
    if code is None:
        code = seen[sizes] = inputs.intern(("nvtx", sizes), lambda: parse_sizes(sizes))
    return code


def _type_counts(db: NsysDb) -> dict[str, int]:
    rows = db.con.execute(f"SELECT eventType, count(*) FROM {NVTX} GROUP BY eventType").fetchall()
    by = {int(t): int(n) for t, n in rows if isinstance(t, int)}
    return {
        "ranges": sum(by.get(t, 0) for t in RANGE_TYPES),
        "marks": by.get(MARK, 0),
        "domain_rows": by.get(DOMAIN_CREATE, 0) + by.get(DOMAIN_DESTROY, 0),
        "other": sum(v for k, v in by.items() if k not in (*RANGE_TYPES, MARK, DOMAIN_CREATE,
                                                         DOMAIN_DESTROY, CATEGORY)),
    }


def _messages(db: NsysDb, c: dict[str, np.ndarray], where: str) -> tuple[np.ndarray, list[str]]:
    """Message per row: ``text`` when set, else ``StringIds[textId]``, as a code into the
    returned list of distinct texts (-1 for none). Nothing is interned in the trace's strings."""
    n = len(c["rowid"])
    out = np.full(n, -1, dtype=np.int32)
    texts: list[str] = []
    index: dict[str, int] = {}

    def local(value: str) -> int:
        code = index.get(value)
        if code is None:
            code = index[value] = len(texts)
            texts.append(value)
        return code

    if db.has(NVTX, "textId"):
        keys, values = db.string_values(c["text_id"])
        if len(keys):
            codes = np.array([local(v) for v in values], dtype=np.int32)
            pos = lookup(keys, c["text_id"])
            ok = pos >= 0
            out[ok] = codes[pos[ok]]
    if db.has(NVTX, "text") and n:
        # only rows that carry inline text come back to Python; each distinct text is decoded once
        cur = db.con.execute(
            f"SELECT rowid, CAST(text AS BLOB) FROM {NVTX} WHERE ({where}) AND text IS NOT NULL"
        )
        rowids: list[int] = []
        got: list[int] = []
        seen: dict[bytes, int] = {}
        for rid, raw in cur:
            code = seen.get(raw)
            if code is None:
                code = seen[raw] = local(text(raw))
            rowids.append(rid)
            got.append(code)
        if rowids:
            pos = lookup(c["rowid"], np.asarray(rowids, dtype=np.int64))
            ok = pos >= 0
            out[pos[ok]] = np.asarray(got, dtype=np.int32)[ok]
    return out, texts


def _to_strings(strings: StringTable, texts: list[str], local: np.ndarray) -> np.ndarray:
    """Codes of ``strings`` for local message codes (-1 stays -1), interning each text once."""
    out = np.full(len(local), -1, dtype=np.int32)
    used = local >= 0
    if used.any():
        uniq, inv = np.unique(local[used], return_inverse=True)
        codes = np.array([strings.intern(texts[k]) for k in uniq.tolist()], dtype=np.int32)
        out[used] = codes[inv.ravel()]
    return out


def _domain_names(
    strings: StringTable, texts: list[str], proc: np.ndarray, domain: np.ndarray,
    message: np.ndarray, is_domain: np.ndarray,
) -> np.ndarray:
    """Domain name code of ``strings`` per row (-1 for the default domain or an unnamed one)."""
    out = np.full(len(proc), -1, dtype=np.int32)
    if not is_domain.any():
        return out
    d_proc, d_id = proc[is_domain], domain[is_domain]
    d_name = _to_strings(strings, texts, message[is_domain])
    named = (domain > 0) & ~is_domain
    if named.any():
        hit = lookup2(d_proc, d_id, proc[named], domain[named])
        ok = hit >= 0
        idx = np.flatnonzero(named)
        out[idx[ok]] = d_name[hit[ok]]
    return out


def _qualified(strings: StringTable, dom: np.ndarray, msg: np.ndarray) -> np.ndarray:
    """``domain:message`` codes, built once per distinct pair."""
    out = msg.astype(np.int32).copy()
    named = (dom >= 0) & (msg >= 0)
    if not named.any():
        return out
    pair = (dom[named].astype(np.int64) << 32) | msg[named].astype(np.int64)
    uniq, inv = np.unique(pair, return_inverse=True)
    codes = np.array(
        [strings.intern(f"{strings[int(p >> 32)]}:{strings[int(p & 0xFFFFFFFF)]}") for p in uniq.tolist()],
        dtype=np.int32,
    )
    out[named] = codes[inv.ravel()]
    return out


def _kinds(strings: StringTable, message: np.ndarray, names: np.ndarray) -> np.ndarray:
    # the message decides (a "ProfilerStep#3" range in any domain is a step); the qualified
    # name only when the message alone says nothing
    by_msg = _kind_per_code(strings, message)
    by_name = _kind_per_code(strings, names)
    return np.where(by_msg != 0, by_msg, by_name).astype(np.int8)


def _kind_per_code(strings: StringTable, codes: np.ndarray) -> np.ndarray:
    out = np.zeros(len(codes), dtype=np.int8)
    if len(codes) == 0:
        return out
    uniq, inv = np.unique(codes, return_inverse=True)
    per = np.array([int(annotation_kind(strings[int(k)])) if k >= 0 else 0 for k in uniq.tolist()],
                   dtype=np.int8)
    return per[inv.ravel()]
