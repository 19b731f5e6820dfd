"""Parser for ``nvidia-smi nvlink -s`` (link status), ``-e`` (error counters) and ``-R``
(remote PCI address and link of each link's far end: the NVSwitch port on HGX).

Both print a ``GPU <n>: <name> (UUID: ...)`` line, then one ``Link <k>: ...`` line per
link (per counter for ``-e``). Lines of both may be concatenated; entries for the
same GPU and link merge into one :class:`~gpu_triage.model.facts.NvlinkFacts`.
"""

from __future__ import annotations

import re

from gpu_triage.collectors.parsers import ParseError
from gpu_triage.collectors.parsers.nvidia_smi.values import (
    MAX_LINE_CHARS,
    as_text,
    normalize_pci_bus_id,
)
from gpu_triage.model.facts import NvlinkFacts, UnavailableReason

__all__ = ["parse_nvlink_status"]

_GPU_RE = re.compile(r"^GPU\s+(\d+)\s*:\s*(.*?)\s*(?:\(UUID:\s*([^)]*)\))?\s*$")
_LINK_RE = re.compile(r"^Link\s+(\d+)\s*:\s*(.*?)\s*$", re.I)
_SPEED_RE = re.compile(r"^([\d.]+)\s*GB/s$", re.I)
_COUNTER_RE = re.compile(r"^([A-Za-z][A-Za-z ]*?)\s*:\s*(\S+)$")
# nvlink -R: "Link 0: Remote Device 00000000:C7:00.0: Link 30" (recalled, not verified)
_REMOTE_RE = re.compile(
    r"^Remote\s+Device\s*(?:PCI\s*Bus\s*ID\s*)?:?\s*"
    r"([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])\s*[:,]?\s*(?:Link\s+(\d{1,3}))?$",
    re.I,
)
_NVML_ERROR_RE = re.compile(r"^(?:NVML:|Unable to|Failed to)|all links are inactive", re.I)


def _counter_field(name: str) -> str | None:
    n = " ".join(name.lower().split())
    if n.startswith("replay"):
        return "replay_errors"
    if n.startswith("recovery"):
        return "recovery_errors"
    if n in ("crc errors", "crc flit errors", "crc flit error"):
        return "crc_errors"
    return None


def parse_nvlink_status(text: str | bytes, source: str = "<text>") -> list[NvlinkFacts]:
    """Parse ``nvidia-smi nvlink -s`` and/or ``-e`` into one entry per GPU link.

    ``Link 0: 26.562 GB/s`` -> active with its speed; ``Link 0: <inactive>`` -> not
    active. When NVML reports that every link is inactive (no per-link lines), the
    GPU gets a single entry with ``link=None, active=False`` carrying the message in
    ``unavailable['link']``. Raises :class:`ParseError` when the text is not this output.
    """
    text = as_text(text)
    links: dict[tuple[int | None, int | None], NvlinkFacts] = {}
    gpu_index: int | None = None
    gpu_bus: str | None = None
    gpu_has_links = False
    recognised = False

    def entry(link: int | None) -> NvlinkFacts:
        key = (gpu_index, link)
        if key not in links:
            links[key] = NvlinkFacts(
                gpu_index=gpu_index, gpu_pci_bus_id=gpu_bus, link=link, source=source
            )
        return links[key]

    for raw_line in text.splitlines():
        if len(raw_line) > MAX_LINE_CHARS:
            continue
        line = raw_line.strip()
        if not line:
            continue
        gm = _GPU_RE.match(line)
        if gm:
            gpu_index, gpu_has_links, recognised = int(gm.group(1)), False, True
            gpu_bus = normalize_pci_bus_id(gm.group(2))
            continue
        lm = _LINK_RE.match(line)
        if lm:
            link, value = int(lm.group(1)), lm.group(2)
            recognised = gpu_has_links = True
            fact = entry(link)
            sm = _SPEED_RE.match(value)
            cm = _COUNTER_RE.match(value)
            rm = _REMOTE_RE.match(value)
            if rm:
                fact.remote_pci_bus_id = normalize_pci_bus_id(rm.group(1))
                fact.remote_link = int(rm.group(2)) if rm.group(2) else None
                fact.active = True  # only a trained link has a far end to name
            elif sm:
                fact.active, fact.speed_gbps = True, float(sm.group(1))
            elif value.lower().strip("<>") in ("inactive", "down", "disabled"):
                fact.active = False
            elif cm and _counter_field(cm.group(1)):
                name = _counter_field(cm.group(1))
                assert name is not None
                if cm.group(2).isdigit():
                    setattr(fact, name, int(cm.group(2)))
                else:
                    fact.mark_unavailable(name, UnavailableReason.NOT_SUPPORTED, cm.group(2))
            elif value.upper() in ("N/A", "[N/A]"):
                fact.mark_unavailable("active", UnavailableReason.NOT_SUPPORTED, value)
            continue
        if gpu_index is not None and not gpu_has_links and _NVML_ERROR_RE.search(line):
            # e.g. 'NVML: Unable to retrieve NVLink information as all links are inActive'
            recognised = True
            fact = entry(None)
            fact.active = False
            fact.mark_unavailable("link", UnavailableReason.ERROR, line)

    if not recognised and text.strip():
        raise ParseError("not nvidia-smi nvlink output", source=source)
    return list(links.values())
