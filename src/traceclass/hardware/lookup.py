"""Finding a spec: from the name a profiler reported, or from a ``--device NAME`` override.

The two differ on purpose. :func:`lookup` sees names written by drivers
(``NVIDIA A100-SXM4-80GB``, ``Tesla V100-PCIE-32GB``, ``Orin``) and must never guess: a name
that matches no entry, several entries, or an entry whose SM count or memory size contradicts
what the trace reported gives None. :func:`get` serves a user who typed a name and raises a
one-line :class:`ConfigError` naming close matches when it cannot resolve it.
"""

from __future__ import annotations

import difflib
import re

from traceclass.errors import ConfigError
from traceclass.hardware.specs import DeviceSpec, _table, cpu_spec, normalize_name

# A reported memory size this close to an entry's nominal GB fits it. Drivers report a little
# less than the marketed size (80 GB -> 79.2 GiB; Jetson shares memory with the CPU: 8 -> 7.4).
_MEM_RATIO = (0.85, 1.05)


def lookup(device_name: str, *, sm_count: int | None = None, memory_bytes: int | None = None) -> DeviceSpec | None:
    """The spec a reported device name denotes, or None when unknown or ambiguous.

    ``sm_count`` (SMs / CUs) and ``memory_bytes``, when the trace reports them, rule out entries
    that share a name with the actual board (GTX 1050 2 GB vs 3 GB, Jetson AGX Orin vs Orin Nano).
    Pass them whenever known: without them a shared name resolves to the only entry that has it.
    """
    if not device_name or not device_name.strip():
        return None
    table = _table()
    norm = normalize_name(device_name)
    if norm in table.ambiguous:
        return None
    found = [s for s in table.specs.values() if s.kind == "gpu" and any(re.search(p, norm) for p in s.match)]
    found = [s for s in found if _fits(s, sm_count, memory_bytes)]
    return found[0] if len(found) == 1 else None


def named(device_name: str) -> list[DeviceSpec]:
    """Entries whose name patterns match ``device_name``, whatever its SM count and memory."""
    if not device_name or not device_name.strip():
        return []
    norm = normalize_name(device_name)
    return [s for s in _table().specs.values() if s.kind == "gpu" and any(re.search(p, norm) for p in s.match)]


def _fits(spec: DeviceSpec, sm_count: int | None, memory_bytes: int | None) -> bool:
    if sm_count and spec.sm_count and sm_count != spec.sm_count:
        return False
    if memory_bytes and spec.memory_gb:
        ratio = memory_bytes / 2**30 / spec.memory_gb
        if not (_MEM_RATIO[0] <= ratio <= _MEM_RATIO[1]):
            return False
    return True


def get(name_or_alias: str) -> DeviceSpec:
    """Spec by canonical name, alias or reported name; ``cpu-generic-avx2:16`` scales a CPU entry.

    Raises :class:`ConfigError` with close names when nothing (or more than one entry) fits.
    """
    table = _table()
    text = name_or_alias.strip()
    key = _key(text)
    if ":" in text:
        base, _, count = text.rpartition(":")
        spec = _by_key(_key(base))
        if spec is not None and spec.kind == "cpu":
            if not count.strip().isdigit() or int(count) < 1:
                raise ConfigError(f"--device {text!r}: core count after ':' must be a positive integer")
            return cpu_spec(spec.name, int(count))
    spec = _by_key(key) or lookup(text)
    if spec is not None:
        return spec
    names = sorted(table.specs)
    vocab = {_key(n): n for n in names}
    for s in table.specs.values():
        for a in s.aliases:
            vocab.setdefault(_key(a), s.name)
    close = difflib.get_close_matches(key, list(vocab), n=5, cutoff=0.5)
    suggestions = list(dict.fromkeys(vocab[c] for c in close)) or names
    hint = "close names" if close else "known devices"
    raise ConfigError(f"unknown device {name_or_alias!r} for --device; {hint}: {', '.join(suggestions)}")


def _by_key(key: str) -> DeviceSpec | None:
    table = _table()
    for s in table.specs.values():
        if key == _key(s.name) or any(key == _key(a) for a in s.aliases):
            return s
    return None


def _key(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "", text.lower())
