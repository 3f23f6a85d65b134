"""GPU descriptions of an nsys export -> ``DeviceInfo``.

``TARGET_INFO_GPU`` (2021+; five columns in 2020.5) reports bytes, B/s and Hz;
``TARGET_INFO_CUDA_GPU`` (2020.x) copies CUPTI's device record, whose units are kB/s and kHz.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from traceclass.ingest.nsys_schema import NsysDb, qi, text
from traceclass.model import DeviceInfo, GpuActivity, Vendor


def read_devices(db: NsysDb, gpu: GpuActivity) -> tuple[DeviceInfo, ...]:
    """One DeviceInfo per described GPU, plus a nameless one per other device in use."""
    found: dict[int, dict[str, Any]] = {}
    used = sorted(set(np.unique(gpu.device).tolist())) if len(gpu) else []
    if "TARGET_INFO_GPU" in db.columns and db.has("TARGET_INFO_GPU", "name"):
        key = "id" if db.has("TARGET_INFO_GPU", "id") else "deviceId"
        if db.has("TARGET_INFO_GPU", "cuDevice") and db.has("TARGET_INFO_GPU", key):
            # the activity tables number devices like CUDA does; prefer that column when the
            # nsys GPU ids do not cover the devices in use
            ids = {r[0] for r in db.con.execute(f"SELECT {key} FROM TARGET_INFO_GPU")}
            cuda_ids = {r[0] for r in db.con.execute("SELECT cuDevice FROM TARGET_INFO_GPU")}
            if used and not set(used) <= ids and set(used) <= cuda_ids:
                key = "cuDevice"
        rows = _select(db, "TARGET_INFO_GPU", [key, "name", "totalMemory", "memoryBandwidth",
                                               "clockRate", "smCount", "computeMajor", "computeMinor"])
        for idx, name, mem, bw, clock, sms, major, minor in rows:
            if not isinstance(idx, int) or idx in found:
                continue  # one row per VM for the same device: keep the first
            found[idx] = dict(
                name=text(name),
                memory_bytes=_pos(mem),
                memory_bandwidth_bps=_pos_float(bw),
                clock_hz=_pos_float(clock),
                sm_count=_pos(sms),
                compute_capability=_cc(major, minor),
            )
    if db.has("TARGET_INFO_CUDA_GPU", "name"):
        rows = _select(db, "TARGET_INFO_CUDA_GPU", [
            "deviceId", "name", "globalMemorySize", "globalMemoryBandwidth", "coreClockRate",
            "numMultiprocessors", "computeCapabilityMajor", "computeCapabilityMinor"])
        for idx, name, mem, bw, clock, sms, major, minor in rows:
            if not isinstance(idx, int):
                continue
            mem_b = _pos(mem)
            # CUPTI reports bytes, but 2020.3 exports hold MiB (32510 for a 32 GB V100): no
            # GPU has less than 1 MiB, so a value that small is MiB
            if mem_b is not None and mem_b < (1 << 20):
                mem_b <<= 20
            bw_b = _pos_float(bw)
            clk = _pos_float(clock)
            old = dict(
                name=text(name),
                memory_bytes=mem_b,
                memory_bandwidth_bps=bw_b * 1000.0 if bw_b else None,  # CUPTI: kB/s
                clock_hz=clk * 1000.0 if clk else None,  # CUPTI: kHz
                sm_count=_pos(sms),
                compute_capability=_cc(major, minor),
            )
            have = found.setdefault(idx, {})
            for k, v in old.items():
                if not have.get(k) and v:
                    have[k] = v
    for u in used:
        found.setdefault(int(u), {"name": ""})
    return tuple(
        DeviceInfo(index=idx, vendor=Vendor.NVIDIA, **{"name": "", **info})
        for idx, info in sorted(found.items())
    )


def _select(db: NsysDb, table: str, cols: list[str]) -> list[tuple[Any, ...]]:
    exprs = ", ".join(
        (f"CAST({qi(c)} AS BLOB)" if c == "name" else qi(c)) if db.has(table, c) else "NULL"
        for c in cols
    )
    return db.con.execute(f"SELECT {exprs} FROM {qi(table)}").fetchall()


def _pos(v: object) -> int | None:
    return int(v) if isinstance(v, (int, float)) and v > 0 else None


def _pos_float(v: object) -> float | None:
    return float(v) if isinstance(v, (int, float)) and v > 0 else None


def _cc(major: object, minor: object) -> str | None:
    if isinstance(major, int) and isinstance(minor, int) and major > 0:
        return f"{major}.{minor}"
    return None
