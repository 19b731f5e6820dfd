"""What each NVLink of a GPU model should carry (guide/T3: "links active at the expected
bandwidth").

``nvidia-smi nvlink -s`` prints every link's bandwidth per direction ("Link 0: 25 GB/s"
on an A100, "26.562 GB/s" on an H100, "53.125 GB/s" on a B200). A link that trained up at
a lower rate passes a count of active links; compared with its GPU model's nominal rate
it does not. The nominal figure is the per-link, per-direction rate of the NVLink
generation as NVIDIA states it (total bidirectional bandwidth / links / 2); nvidia-smi
prints the raw signalling rate, a little above it, so a link counts as slow only when it
reports clearly less (see the rule's threshold).

Sources (NVIDIA data sheets and architecture whitepapers):
- P100 SXM2, NVLink 1: 4 links, 160 GB/s total: 20 GB/s per link per direction
  (Tesla P100 whitepaper).
- V100 SXM2/SXM3, NVLink 2: 6 links, 300 GB/s: 25 GB/s (Tesla V100 data sheet).
- A100 SXM4 and A100 PCIe with bridges, NVLink 3: 12 links, 600 GB/s: 25 GB/s
  (A100 data sheet); A800: 8 links, 400 GB/s: 25 GB/s (A800 data sheet).
- A40, RTX A6000, NVLink 3 bridge: 4 links, 112.5 GB/s: 14.0625 GB/s (A40 data sheet).
- H100 SXM5 / H200 SXM / GH200, NVLink 4: 18 links, 900 GB/s: 25 GB/s (H100 and H200
  data sheets); H800: 8 links, 400 GB/s: 25 GB/s; H100 NVL: 600 GB/s bridge: 25 GB/s.
- B200 / GB200 / B300, NVLink 5: 18 links, 1.8 TB/s: 50 GB/s (DGX B200, GB200 NVL72 data
  sheets).
"""

from __future__ import annotations

import re

# (pattern on the product name, nominal GB/s per link per direction). First match wins.
_TABLE: tuple[tuple[re.Pattern[str], float], ...] = tuple(
    (re.compile(p, re.IGNORECASE), gbps)
    for p, gbps in (
        (r"\bP100\b", 20.0),
        (r"\bV100\b", 25.0),
        (r"\b(?:A100|A800)\b", 25.0),
        (r"\b(?:A40|RTX A6000)\b", 14.0625),
        (r"\b(?:H100|H200|H800|GH200)\b", 25.0),
        (r"\b(?:B200|GB200|B300|GB300)\b", 50.0),
    )
)


def nominal_link_gbps(name: str | None) -> float | None:
    """Nominal per-link, per-direction NVLink rate of a GPU model (None: not in the table).
    A board without NVLink has no link facts, so a rate for it is never compared."""
    if not name or len(name) > 200:
        return None
    for pattern, gbps in _TABLE:
        if pattern.search(name):
            return gbps
    return None
