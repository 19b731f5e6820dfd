"""Which PCIe bridges sit above which GPUs and network adapters, and their ACS control.

GPUDirect RDMA (GPU <-> NIC) and GPU peer-to-peer traffic cross the bridges above both
ends; with Access Control Services redirecting peer requests (ACSCtl ``ReqRedir+`` /
``CmpltRedir+``) it goes up through the root complex and the IOMMU instead, which slows
it or hangs NCCL (NCCL troubleshooting guide, "PCI Access Control Services").

Two sources, one result (``gpus_below``, ``nics_below``, ``devices_below`` on each
bridge's :class:`PcieLinkFacts`):

- live: each device's sysfs path (``/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0``)
  names every bridge above it; ACS control is read from the bridge's config space
  (extended capability 0x000D; root reads all 4096 bytes, others only the first 256, and
  then the ACS state stays unknown);
- ``lspci -vv``: a bridge's ``Bus: secondary=, subordinate=`` range holds the buses of the
  devices below it.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable

from gpu_triage.model.facts import PcieLinkFacts

ACS_EXT_CAP_ID = 0x000D
EXT_CAP_START = 0x100
CONFIG_SPACE = 4096
MAX_CAPS = 64  # a config space holds at most (4096 - 256) / 4 capabilities; a loop is a lie
# ACS Control register bits (PCIe base spec 7.7.8.3) -> the facts lspci's names map to
ACS_BITS = (
    (0x01, "acs_src_valid"),
    (0x02, "acs_trans_blk"),
    (0x04, "acs_req_redir"),
    (0x08, "acs_cmplt_redir"),
    (0x10, "acs_upstream_fwd"),
    (0x20, "acs_egress_ctrl"),
    (0x40, "acs_direct_trans"),
)
MAX_LISTED = 8  # devices named in devices_below


def acs_from_config(config: bytes) -> dict[str, bool] | None:
    """ACS control flags from a PCIe config space image; ``{}`` when the device has no ACS
    capability; None when the extended space is not there to read (fewer than 4096 bytes:
    not root, or a conventional PCI device)."""
    if len(config) < CONFIG_SPACE:
        return None
    offset, seen = EXT_CAP_START, 0
    while offset and seen < MAX_CAPS:
        if offset < EXT_CAP_START or offset + 8 > CONFIG_SPACE or offset % 4:
            return {}
        header = int.from_bytes(config[offset : offset + 4], "little")
        if header in (0, 0xFFFFFFFF):
            return {}
        if header & 0xFFFF == ACS_EXT_CAP_ID:
            control = int.from_bytes(config[offset + 6 : offset + 8], "little")
            return {name: bool(control & bit) for bit, name in ACS_BITS}
        offset, seen = header >> 20, seen + 1
    return {}


def apply_acs(link: PcieLinkFacts, flags: dict[str, bool]) -> None:
    link.acs_capable = bool(flags)
    for name, value in flags.items():
        setattr(link, name, value)


def _describe(gpus: list[str], nics: list[str]) -> str:
    parts = [f"GPU {b}" for b in gpus[:MAX_LISTED]] + [f"NIC {b}" for b in nics[:MAX_LISTED]]
    more = len(gpus) + len(nics) - len(parts)
    return ", ".join(parts) + (f" and {more} more" if more > 0 else "")


def set_below(bridge: PcieLinkFacts, gpus: list[str], nics: list[str]) -> None:
    bridge.gpus_below, bridge.nics_below = len(gpus), len(nics)
    bridge.devices_below = _describe(gpus, nics) or None


def mark_by_ancestry(
    bridges: dict[str, PcieLinkFacts], ancestry: Iterable[tuple[str, str, list[str]]]
) -> None:
    """``ancestry``: (device address, 'gpu' or 'nic', the bridge addresses above it).
    Every bridge in ``bridges`` gets its counts, zero included (it was looked at)."""
    below: dict[str, tuple[list[str], list[str]]] = {b: ([], []) for b in bridges}
    for bdf, kind, above in ancestry:
        for b in above:
            if b in below:
                below[b][0 if kind == "gpu" else 1].append(bdf)
    for b, (gpus, nics) in below.items():
        set_below(bridges[b], gpus, nics)


def _split(bdf: str) -> tuple[str, int] | None:
    domain, _, rest = bdf.partition(":")
    bus = rest.partition(":")[0]
    try:
        return domain, int(bus, 16)
    except ValueError:
        return None


def mark_by_bus_ranges(links: list[PcieLinkFacts]) -> None:
    """lspci: a bridge's secondary..subordinate bus range holds the devices below it. Only
    a listing that has GPUs or NICs in it says anything (``lspci -vv -s BRIDGE`` alone
    leaves the counts unknown). Sorted buses per domain and bisection keep it
    O((bridges + devices) log devices)."""
    devices: dict[str, list[tuple[int, str, str]]] = {}
    for link in links:
        if link.device_class in ("gpu", "nic") and link.pci_bus_id:
            key = _split(link.pci_bus_id)
            if key is not None:
                devices.setdefault(key[0], []).append((key[1], link.device_class, link.pci_bus_id))
    if not devices:
        return
    for rows in devices.values():
        rows.sort()
    for link in links:
        if link.device_class != "bridge" or link.secondary_bus is None or not link.pci_bus_id:
            continue
        if link.subordinate_bus is None:
            continue
        key = _split(link.pci_bus_id)
        rows = devices.get(key[0], []) if key else []
        lo = bisect.bisect_left(rows, (link.secondary_bus, "", ""))
        hi = bisect.bisect_right(rows, (link.subordinate_bus, "\uffff", "\uffff"))
        inside = rows[lo:hi]
        set_below(
            link, [b for _, k, b in inside if k == "gpu"], [b for _, k, b in inside if k == "nic"]
        )
