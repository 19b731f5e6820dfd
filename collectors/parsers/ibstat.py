"""``ibstat`` (all CAs or one) -> IbPortFacts, plus the CA-level details.

Indentation is not trusted (pastes turn tabs into spaces or drop them): a ``CA '...'``
line opens a CA, ``Port N:`` opens a port, and ``Key: value`` lines belong to the
port once one is open. ``ibwarn:`` / ``ibpanic:`` debug lines and anything else
unrecognised are skipped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from gpu_triage.collectors.parsers import ParseError
from gpu_triage.model.facts import IbPortFacts

_CA = re.compile(r"^\s*CA:?\s+'([^']+)'\s*$")  # `ibstat CA PORT` prints "CA: 'mlx5_0'"
_PORT = re.compile(r"^\s*Port\s+(\d+)\s*:\s*$")
_KV = re.compile(r"^\s*([A-Za-z][A-Za-z ]*?)\s*:\s*(.*?)\s*$")
_RATE = re.compile(r"(\d+(?:\.\d+)?)")
_NOISE = ("ibwarn:", "ibpanic:", "ibdebug:")
# Logical port states as ibstat and sysfs print them -> the names rules use.
_STATES = {"initializing": "init", "initialize": "init", "active_defer": "active"}


@dataclass
class IbCa:
    """One HCA: its ``Key: value`` lines (keys as printed) and its ports."""

    name: str
    fields: dict[str, str] = field(default_factory=dict)
    ports: dict[int, dict[str, str]] = field(default_factory=dict)


def normalize_state(text: str | None) -> str | None:
    """'4: ACTIVE' / 'Active' -> 'active'; 'Initializing' -> 'init'."""
    if not text:
        return None
    word = text.split(":", 1)[-1].strip().lower().replace(" ", "_")
    return _STATES.get(word, word) or None


def normalize_phys_state(text: str | None) -> str | None:
    """'5: LinkUp' / 'LinkUp' -> 'linkup'; 'Phy Test' -> 'phytest'."""
    if not text:
        return None
    return text.split(":", 1)[-1].strip().lower().replace(" ", "") or None


def parse_rate_gbps(text: str | None) -> float | None:
    """'200' (ibstat) or '200 Gb/sec (4X HDR)' (sysfs) -> 200.0."""
    if not text:
        return None
    m = _RATE.search(text)
    return float(m.group(1)) if m else None


def parse_ibstat_cas(text: str) -> list[IbCa]:
    """The CAs of ibstat output with their fields and ports, as printed."""
    cas: list[IbCa] = []
    port: dict[str, str] | None = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith(_NOISE):
            continue
        m = _CA.match(line)
        if m:
            cas.append(IbCa(name=m.group(1)))
            port = None
            continue
        m = _PORT.match(line)
        if m and not cas:
            cas.append(IbCa(name=""))  # a pasted port block without its CA line
        if not cas:
            continue
        if m:
            port = cas[-1].ports.setdefault(int(m.group(1)), {})
            continue
        m = _KV.match(line)
        if m:
            (port if port is not None else cas[-1].fields)[m.group(1)] = m.group(2)
    return cas


_DEVINFO = re.compile(r"^\s*(?:hca_id|phys_port_cnt|port_lid)\s*:", re.M)


def parse_ibstat(text: str, source: str = "ibstat") -> list[IbPortFacts]:
    """One IbPortFacts per port. Raises ParseError when the text holds no CA or port
    block (``ibv_devinfo`` output, whose parser is ``ibv-devinfo``, is named as such)."""
    cas = parse_ibstat_cas(text)
    if not any(ca.ports for ca in cas) and text.strip():
        if _DEVINFO.search(text):
            raise ParseError(
                "this is ibv_devinfo output, not ibstat: read it as ibv-devinfo "
                "(--from-text ibv-devinfo:FILE, or name no kind)",
                source=source,
            )
        raise ParseError("no CA or 'Port N:' block of ibstat output", source=source)
    ports: list[IbPortFacts] = []
    for ca in cas:
        for num, kv in sorted(ca.ports.items()):
            layer = kv.get("Link layer")
            ports.append(
                IbPortFacts(
                    source=source,
                    ca_name=ca.name or None,
                    port=num,
                    state=normalize_state(kv.get("State")),
                    phys_state=normalize_phys_state(kv.get("Physical state")),
                    rate_gbps=parse_rate_gbps(kv.get("Rate")),
                    link_layer=layer.lower() if layer else None,
                    firmware_version=ca.fields.get("Firmware version") or None,
                )
            )
    return ports
