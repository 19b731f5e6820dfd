"""Parser for ``lspci -vv`` link status: ``LnkCap`` (capability) and ``LnkSta`` (current).

Reads full device blocks (``3b:00.0 3D controller: NVIDIA ...``) and header-less
fragments such as ``lspci -s BUS -vv | egrep 'LnkCap|LnkSta'``. Bridges keep their
Access Control Services state (``ACSCap`` / ``ACSCtl`` flags: ``ReqRedir+ CmpltRedir+``
send peer-to-peer traffic up through the root complex and IOMMU), their bus range
(``Bus: secondary=, subordinate=``: which devices sit below) and IOMMU group. Values are reported
as printed: a GPU idling at 2.5GT/s is saving power, not faulty; rules decide.
"""

from __future__ import annotations

import re

from gpu_triage.collectors.parsers import ParseError
from gpu_triage.collectors.parsers.nvidia_smi.values import (
    MAX_LINE_CHARS,
    as_text,
    normalize_pci_bus_id,
)
from gpu_triage.model.facts import PcieLinkFacts, UnavailableReason

__all__ = ["count_nvswitches", "device_class", "parse_lspci_vv"]

_HEADER_RE = re.compile(
    r"^\s{0,3}((?:[0-9A-Fa-f]{4,8}:)?[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])\s+"
    r"([^:\[]+?)(?:\s*\[[0-9A-Fa-f]{4}\])?:\s*(.*)$"
)
_LNK_RE = re.compile(r"^\s*(LnkCap|LnkSta):\s*(.*)$")
_SPEED_RE = re.compile(r"Speed\s+(?:(\d{1,3}(?:\.\d{1,3})?)\s*(?:GT|Gb)/s|(unknown))", re.I)
_WIDTH_RE = re.compile(r"Width\s+x(\d{1,3})(?!\d)", re.I)
_NUMA_RE = re.compile(r"\bNUMA node:?\s*(-?\d+)")
_IOMMU_RE = re.compile(r"^\s*IOMMU group:?\s*(\d{1,6})\s*$")
_BUS_RE = re.compile(
    r"^\s*Bus:\s*primary=[0-9a-fA-F]{2},\s*secondary=([0-9a-fA-F]{2}),\s*subordinate=([0-9a-fA-F]{2})"
)
_ACS_RE = re.compile(r"^\s*(ACSCap|ACSCtl):\s*(.*)$")
_FLAG_RE = re.compile(r"\b([A-Za-z]+)([+-])")
# ACSCtl flags as lspci prints them -> the fact that says the feature is enabled
ACS_FIELDS = {
    "SrcValid": "acs_src_valid",
    "TransBlk": "acs_trans_blk",
    "ReqRedir": "acs_req_redir",
    "CmpltRedir": "acs_cmplt_redir",
    "UpstreamFwd": "acs_upstream_fwd",
    "EgressCtrl": "acs_egress_ctrl",
    "DirectTrans": "acs_direct_trans",
}


# NVSwitch functions enumerate as "Bridge [0680]: NVIDIA Corporation ..." (not "PCI bridge")
_NVSWITCH_RE = re.compile(
    r"^\s{0,3}(?:[0-9A-Fa-f]{4,8}:)?[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]\s+"
    r"Bridge(?:\s*\[0680\])?:\s*NVIDIA\b",
    re.M,
)


def count_nvswitches(text: str | bytes) -> int:
    """NVSwitch functions in an lspci listing."""
    return sum(
        1
        for ln in as_text(text).splitlines()
        if len(ln) <= MAX_LINE_CHARS and _NVSWITCH_RE.match(ln)
    )


def _acs(fact: PcieLinkFacts, kind: str, value: str) -> None:
    """ACSCap says the port has ACS; ACSCtl which of its features are on (Flag+ / Flag-)."""
    fact.acs_capable = True
    if kind != "ACSCtl":
        return
    for flag, sign in _FLAG_RE.findall(value):
        field_name = ACS_FIELDS.get(flag)
        if field_name is not None:
            setattr(fact, field_name, sign == "+")


def device_class(class_text: str, description: str) -> str:
    """gpu, nic, nvme, bridge or other, from the lspci class and vendor text."""
    c = class_text.lower()
    if ("vga" in c or "3d controller" in c or "display controller" in c) and (
        "nvidia" in description.lower()
    ):
        return "gpu"
    if "ethernet" in c or "infiniband" in c or "network controller" in c:
        return "nic"
    if "non-volatile memory" in c:
        return "nvme"
    if "bridge" in c:
        return "bridge"
    return "other"


def _link(fact: PcieLinkFacts, kind: str, value: str) -> None:
    speed_field = "speed_gts_max" if kind == "LnkCap" else "speed_gts"
    width_field = "width_max" if kind == "LnkCap" else "width"
    sm = _SPEED_RE.search(value)
    if sm and sm.group(1):
        setattr(fact, speed_field, float(sm.group(1)))
    elif sm:
        # old lspci does not know newer speeds (32GT/s): 'Speed unknown'
        fact.mark_unavailable(speed_field, UnavailableReason.NOT_SUPPORTED, "Speed unknown")
    wm = _WIDTH_RE.search(value)
    if wm:
        setattr(fact, width_field, int(wm.group(1)))


def parse_lspci_vv(text: str | bytes, source: str = "<text>") -> list[PcieLinkFacts]:
    """Parse ``lspci -vv`` (or LnkCap/LnkSta fragments) into one entry per PCIe link.

    Devices without a link (no Express capability) are left out, except GPUs, NICs
    and NVMe drives whose capabilities lspci could not read (``<access denied>``).
    Raises :class:`ParseError` when the text has neither device headers nor link lines.
    """
    text = as_text(text)
    out: list[PcieLinkFacts] = []
    cur: PcieLinkFacts | None = None
    cur_has_link = False
    acs_seen: set[str] = set()  # ACSCap / ACSCtl lines read for the current device
    denied = False
    seen_header = False

    def flush() -> None:
        if cur is None:
            return
        if cur_has_link or acs_seen:
            out.append(cur)
        elif denied and cur.device_class in ("gpu", "nic", "nvme"):
            for name in ("speed_gts", "speed_gts_max", "width", "width_max"):
                cur.mark_unavailable(name, UnavailableReason.NO_PERMISSION, "<access denied>")
            out.append(cur)

    for raw_line in text.splitlines():
        if len(raw_line) > MAX_LINE_CHARS:
            continue
        line = raw_line.expandtabs(8).rstrip()
        hm = _HEADER_RE.match(line)
        if hm:
            flush()
            seen_header, denied, cur_has_link = True, False, False
            acs_seen = set()
            cur = PcieLinkFacts(
                pci_bus_id=normalize_pci_bus_id(hm.group(1)),
                device_class=device_class(hm.group(2), hm.group(3)),
                source=source,
            )
            continue
        lm = _LNK_RE.match(line)
        if lm:
            kind = lm.group(1)
            field_name = "speed_gts_max" if kind == "LnkCap" else "speed_gts"
            already = cur is not None and (
                getattr(cur, field_name) is not None or field_name in cur.unavailable
            )
            if cur is None or (already and not seen_header):
                # header-less fragment: each LnkCap/LnkSta pair is one link
                flush()
                cur, cur_has_link, denied = PcieLinkFacts(source=source), False, False
                acs_seen = set()
            _link(cur, kind, lm.group(2))
            cur_has_link = True
            continue
        am = _ACS_RE.match(line)
        if am:
            if cur is None or (am.group(1) in acs_seen and not seen_header):
                # header-less `grep ACS` output: each ACSCap/ACSCtl pair is one port
                flush()
                cur, cur_has_link, denied = PcieLinkFacts(source=source), False, False
                acs_seen = set()
            _acs(cur, am.group(1), am.group(2))
            acs_seen.add(am.group(1))
            continue
        if cur is None:
            continue
        nm = _NUMA_RE.search(line)
        im = _IOMMU_RE.match(line)
        bm = _BUS_RE.match(line)
        if im:
            cur.iommu_group = int(im.group(1))
        elif bm:
            cur.secondary_bus, cur.subordinate_bus = int(bm.group(1), 16), int(bm.group(2), 16)
        elif nm:
            cur.numa_node = int(nm.group(1))
        elif "<access denied>" in line:
            denied = True
    flush()
    if not out and not seen_header and text.strip():
        raise ParseError("no lspci device headers, LnkCap/LnkSta or ACS lines", source=source)
    return out
