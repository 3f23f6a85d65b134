"""Hardware specs for the roofline: peak FLOP/s per precision and unit, memory bandwidth.

Data lives in ``specs.toml`` (one table per device, every figure with its source). Public API:

* :func:`load_specs` - every spec by canonical name;
* :func:`lookup` - the spec a profiler-reported name denotes, None when unknown or ambiguous;
* :func:`get` - the spec for a ``--device NAME`` override, raising ``ConfigError`` otherwise;
* :func:`peak_flops`, :func:`ridge_point` - roofs for a precision on the matrix or vector path;
* :func:`with_measured_bandwidth` - a spec using the bandwidth a profiler reported;
* :func:`cpu_spec`, :func:`default_cpu` - the per-core CPU entries scaled to a core count.
"""

from __future__ import annotations

from traceclass.hardware.lookup import get, lookup
from traceclass.hardware.lookup import named as lookup_named
from traceclass.hardware.specs import (
    PEAK_KEYS,
    PRECISIONS,
    UNITS,
    DeviceSpec,
    cpu_spec,
    default_cpu,
    load_specs,
    peak_flops,
    ridge_point,
    with_measured_bandwidth,
)

__all__ = [
    "DeviceSpec",
    "PEAK_KEYS",
    "PRECISIONS",
    "UNITS",
    "cpu_spec",
    "default_cpu",
    "get",
    "load_specs",
    "lookup",
    "lookup_named",
    "peak_flops",
    "ridge_point",
    "with_measured_bandwidth",
]
