"""``ethtool -i IFACE`` (driver information) -> NicFacts: driver, firmware, PCI address.

The format is one ``key: value`` a line, in this order since ethtool 2.6.x::

    driver: mlx5_core
    version: 5.8-1.0.1
    firmware-version: 28.36.1010 (MT_0000000838)
    expansion-rom-version:
    bus-info: 0000:17:00.0
    supports-statistics: yes

``firmware-version`` is free text per driver: NVIDIA/Mellanox print the version and the
board id (PSID) in parentheses; Intel ``0x8000d95e, 1.3106.0``; Broadcom
``222.0.150.0/pkg 22.21.06.80``; virtual NICs ``N/A`` or nothing. Several outputs pasted
one after another (``for i in ...; do ethtool -i $i; done``) give one NIC each; a prompt
line naming the interface (``$ ethtool -i ens1f0np0``, in the text or in the source a paste
names) gives its name.
"""

from __future__ import annotations

import re

from gpu_triage.collectors.parsers import ParseError
from gpu_triage.model.facts import NicFacts

_KV = re.compile(r"^\s*(?P<key>[a-z][a-z-]{1,40}):[ \t]*(?P<value>.*?)\s*$")
_PROMPT = re.compile(r"\bethtool\s+(?:-i|--driver)\s+(?P<name>[A-Za-z0-9_.:@-]{1,32})\s*(?:$|\))")
_PSID = re.compile(r"^(?P<fw>.*?)\s*\((?P<psid>[A-Z]{2,4}_\d{6,12})\)\s*$")
_BDF = re.compile(r"^(?:[0-9a-fA-F]{4}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]$")
_NONE = {"", "n/a", "na", "none", "unknown"}
MAX_VALUE = 128


def parse_ethtool_i(text: str, source: str = "ethtool -i") -> list[NicFacts]:
    """One NicFacts per ``driver:`` block; ParseError when there is none."""
    nics: list[NicFacts] = []
    # a paste's prompt line reaches the parser in its source ("p.txt:2-11 (ethtool -i x)")
    named = _PROMPT.search(source)
    name: str | None = named.group("name") if named else None
    nic: NicFacts | None = None
    for raw in text.splitlines():
        if m := _PROMPT.search(raw):
            name, nic = m.group("name"), None
            continue
        m = _KV.match(raw)
        if m is None:
            continue
        key, value = m.group("key"), m.group("value")[:MAX_VALUE]
        if key == "driver":
            nic = NicFacts(name=name, driver=value or None, source=source)
            nics.append(nic)
            name = None
            continue
        if nic is None:
            continue
        if key == "firmware-version":
            _firmware(nic, value)
        elif key == "bus-info" and _BDF.match(value):
            bdf = value.lower()
            nic.pci_bus_id = bdf if bdf.count(":") == 2 else f"0000:{bdf}"
    if not nics:
        raise ParseError("no 'driver:' line: not ethtool -i output", source=source)
    return nics


def _firmware(nic: NicFacts, value: str) -> None:
    if value.strip().lower() in _NONE:
        return
    if m := _PSID.match(value):
        nic.firmware_version = m.group("fw").strip() or None
        nic.firmware_psid = m.group("psid")
    else:
        nic.firmware_version = value.strip()
