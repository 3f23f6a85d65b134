"""Peak bandwidth of a GPU's scale-up link (NVLink / Infinity Fabric), per GPU and direction, in
GB/s (1e9 bytes/s): the figure nccl-tests' busbw is compared against inside one node. Traffic
that crosses nodes goes through the NICs (typically 25-50 GB/s per GPU) and cannot reach it;
``--link-gbps`` sets the peak for such jobs. Datasheet totals are bidirectional: halved here.
"""

from __future__ import annotations

import re

#: (pattern on the device name, GB/s per direction, source)
LINKS = (
    (r"B200", 900.0, "NVIDIA DGX B200 datasheet: NVLink 5, 1.8 TB/s per GPU (bidirectional)"),
    (r"H200", 450.0, "NVIDIA H200 datasheet: NVLink 900 GB/s (bidirectional)"),
    (r"H100 (80GB HBM3|SXM)", 450.0, "NVIDIA H100 datasheet: SXM NVLink 900 GB/s (bidirectional)"),
    (r"A100-(SXM|PG509)", 300.0, "NVIDIA A100 datasheet: SXM NVLink 600 GB/s (bidirectional)"),
    (r"V100-SXM", 150.0, "NVIDIA V100 datasheet: SXM2 NVLink 300 GB/s (bidirectional)"),
    (r"MI300X", 448.0, "AMD Instinct MI300X datasheet: 7 Infinity Fabric links, 896 GB/s aggregate (bidirectional)"),
)


def link_peak(device_name: str) -> tuple[float | None, str]:
    """(GB/s per direction, source) of the device's scale-up link, or (None, "")."""
    for pat, gbps, src in LINKS:
        if re.search(pat, device_name or ""):
            return gbps, src
    return None, ""
