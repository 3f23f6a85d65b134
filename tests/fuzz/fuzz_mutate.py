"""Mutations of seed inputs: byte-level damage, structural JSON damage, SQLite damage.

Every mutation is a pure function of a :class:`random.Random`, so the hypothesis tests (which
hand in a ``st.randoms()`` instance they control and can shrink) and the long campaign
(``benchmarks/fuzz_campaign.py``, seeded) share them.
"""

from __future__ import annotations

import gzip
import json
import random
import sqlite3
from pathlib import Path
from typing import Any

#: values that have broken readers: wrong types, extreme numbers, hostile strings
HOSTILE_VALUES: list[Any] = [
    None, True, -1, 0, -(2**63), 2**63, 2**64 + 7, 10**30, 1.5e308, -1e-320, "NaN", "Infinity",
    "1,2", "", "  ", "\u202e\u0000evil", "x" * 5000, "a|b`c*d", [1, 2], {"a": 1, "b": 2}, [], {},
    [[[[[]]]]], "\ud800", "1700000000000000.123", 1.7e15, -1.7e15,
]
_DEEP = "\u2063deep\u2063"
_BYTES = b'[]{},:"0123456789-.eE;() \n\t\x00\xff\xfeabcNI'
_TOKENS = [b"NaN", b"Infinity", b"-", b"1e999", b"9" * 400, b"\x00" * 8, b"\xc3\x28", b'"', b"[" * 64,
           b"{" * 64, b"\\u0000", b",", b";;;", b" 99999999999999999999\n"]


def mutate_bytes(rng: random.Random, data: bytes) -> bytes:
    """One to three byte-level edits: truncate, flip, delete, duplicate, insert a token."""
    b = bytearray(data)
    for _ in range(rng.randint(1, 3)):
        if not b:
            b = bytearray(rng.choice(_TOKENS))
            continue
        op = rng.randrange(6)
        if op == 0:
            del b[rng.randint(0, len(b)):]
        elif op == 1:
            for _ in range(rng.randint(1, 8)):
                b[rng.randrange(len(b))] = rng.choice(_BYTES)
        elif op == 2:
            i, j = sorted(rng.randrange(len(b) + 1) for _ in range(2))
            del b[i:j]
        elif op == 3:
            i, j = sorted(rng.randrange(len(b) + 1) for _ in range(2))
            b[j:j] = b[i:j][:4096]
        elif op == 4:
            i = rng.randrange(len(b) + 1)
            b[i:i] = rng.choice(_TOKENS)
        else:
            i = rng.randrange(len(b))
            b[i] ^= 1 << rng.randrange(8)
    return bytes(b)


def _walk(obj: Any) -> list[tuple[Any, Any]]:
    """(container, key) slots of a JSON document, up to a bound."""
    out: list[tuple[Any, Any]] = []
    stack = [obj]
    while stack and len(out) < 5000:
        o = stack.pop()
        if isinstance(o, dict):
            for k, v in o.items():
                out.append((o, k))
                stack.append(v)
        elif isinstance(o, list):
            for i, v in enumerate(o):
                out.append((o, i))
                stack.append(v)
    return out


def mutate_json(rng: random.Random, data: bytes) -> bytes:
    """Structural damage to a JSON document: a field gets a hostile value, is removed, nests
    deeply or grows a long name; the result is written back as JSON text."""
    try:
        doc = json.loads(data)
    except ValueError:
        return mutate_bytes(rng, data)
    slots = _walk(doc)
    depth = 0
    for _ in range(rng.randint(1, 4)):
        if not slots:
            break
        parent, key = rng.choice(slots)
        op = rng.randrange(5)
        if op == 0:
            parent[key] = rng.choice(HOSTILE_VALUES)
        elif op == 1 and isinstance(parent, dict):
            parent.pop(key, None)
            slots = _walk(doc)
        elif op == 2:
            parent[key] = _DEEP  # spliced in as text below: json cannot write it that deep
            depth = rng.choice([10, 200, 3000, 100_000])
        elif op == 3:
            parent[key] = "k" * rng.choice([300, 70_000, 1_000_000])
        else:
            v = parent[key]
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                parent[key] = rng.choice([-v, v * 1e9, v + 1.7e15, float(2**62), -(2**62)])
    text = json.dumps(doc, allow_nan=True)
    if depth:
        text = text.replace(json.dumps(_DEEP), "[" * depth + "0" + "]" * depth)
    return text.encode("utf-8", "surrogatepass")


def mutate_sqlite(rng: random.Random, src: Path, dst: Path) -> None:
    """A damaged nsys export: SQL-level edits (hostile values, dropped tables, WAL mode) or
    byte damage to the database file."""
    dst.write_bytes(src.read_bytes())
    if rng.random() < 0.3:
        dst.write_bytes(mutate_bytes(rng, dst.read_bytes()))
        return
    con = sqlite3.connect(dst)
    try:
        tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        for _ in range(rng.randint(1, 3)):
            t = rng.choice(tables)
            op = rng.randrange(4)
            if op == 0:
                con.execute(f'DROP TABLE IF EXISTS "{t}"')
                tables.remove(t)
                if not tables:
                    break
            else:
                cols = [r[1] for r in con.execute(f'PRAGMA table_info("{t}")')]
                if not cols:
                    continue
                c = rng.choice(cols)
                v = rng.choice([None, -1, 2**63 - 1, -(2**63), "x" * 300, 1.5e308, "", 0])
                con.execute(f'UPDATE "{t}" SET "{c}" = ? WHERE rowid % ? = 0', (v, rng.randint(1, 3)))
        con.commit()
    except sqlite3.Error:
        pass
    finally:
        con.close()


def make_input(rng: random.Random, seed: Path, folder: Path) -> Path:
    """A mutated copy of ``seed`` in ``folder`` (gzip seeds stay gzip, sometimes damaged)."""
    name = seed.name
    out = folder / name
    if name.endswith(".sqlite"):
        mutate_sqlite(rng, seed, out)
        return out
    raw = seed.read_bytes()
    gz = name.endswith(".gz")
    if gz:
        raw = gzip.decompress(raw)
    is_json = raw.lstrip()[:1] in (b"{", b"[")
    data = mutate_json(rng, raw) if is_json and rng.random() < 0.6 else mutate_bytes(rng, raw)
    if gz:
        data = gzip.compress(data, mtime=0)
        if rng.random() < 0.3:
            data = mutate_bytes(rng, data)
    out.write_bytes(data)
    return out
