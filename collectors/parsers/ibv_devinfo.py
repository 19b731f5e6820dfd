"""``ibv_devinfo`` (with or without ``-v``) -> IbPortFacts, one per port.

Each device opens with ``hca_id: mlx5_0``; ``port: N`` opens a port; then
``key: value`` lines (tabs or spaces, any indentation). States print as
``PORT_ACTIVE (4)`` and ``LINK_UP (5)``; the rate is ``active_width`` times
``active_speed`` (``4X (2)`` and ``25.0 Gbps (32)`` give 100 Gb/s), printed only
with ``-v``.
"""

from __future__ import annotations

import re

from gpu_triage.collectors.parsers import ParseError
from gpu_triage.model.facts import IbPortFacts

_HCA = re.compile(r"^\s*hca_id:\s*(\S+)\s*$")
_PORT = re.compile(r"^\s*port:\s*(\d{1,3})\s*$")
_KV = re.compile(r"^\s*([a-z_]{2,40}):\s*(.*?)\s*$")
_WIDTH = re.compile(r"^(\d{1,2})X\b")
_SPEED = re.compile(r"^(\d{1,4}(?:\.\d{1,4})?)\s*Gbps\b", re.I)
# ibv_devinfo state names -> the names ibstat's parser gives (rules use these)
_STATE = {
    "PORT_ACTIVE": "active",
    "PORT_DOWN": "down",
    "PORT_INIT": "init",
    "PORT_ARMED": "armed",
    "PORT_ACTIVE_DEFER": "active",
    "PORT_NOP": "nop",
}
_PHYS = {
    "LINK_UP": "linkup",
    "POLLING": "polling",
    "DISABLED": "disabled",
    "SLEEP": "sleep",
    "PORT_CONFIGURATION_TRAINING": "portconfigurationtraining",
    "LINK_ERROR_RECOVERY": "linkerrorrecovery",
    "PHY_TEST": "phytest",
}


def _word(value: str) -> str:
    return value.split("(", 1)[0].strip()


def parse_ibv_devinfo(text: str, source: str = "ibv_devinfo") -> list[IbPortFacts]:
    """Raises ParseError when the text has no ``hca_id:`` or ``port:`` line at all."""
    ports: list[IbPortFacts] = []
    ca: str | None = None
    port: IbPortFacts | None = None
    width: dict[int, int] = {}
    speed: dict[int, float] = {}
    seen = False
    firmware: str | None = None  # the device's fw_ver, printed before its ports
    for raw in text.splitlines():
        m = _HCA.match(raw)
        if m:
            ca, port, seen, firmware = m.group(1), None, True, None
            continue
        m = _PORT.match(raw)
        if m:
            port = IbPortFacts(
                source=source, ca_name=ca, port=int(m.group(1)), firmware_version=firmware
            )
            ports.append(port)
            seen = True
            continue
        m = _KV.match(raw)
        if m is None:
            continue
        key, value = m.group(1), m.group(2)
        if key == "fw_ver" and port is None:
            firmware = value or None
            continue
        if port is None:
            continue
        if key == "state":
            port.state = _STATE.get(_word(value), _word(value).lower() or None)
        elif key == "phys_state":
            port.phys_state = _PHYS.get(_word(value), _word(value).lower() or None)
        elif key == "link_layer":
            port.link_layer = value.lower() or None
        elif key == "active_width" and (w := _WIDTH.match(value)):
            width[id(port)] = int(w.group(1))
        elif key == "active_speed" and (s := _SPEED.match(value)):
            speed[id(port)] = float(s.group(1))
    if not seen:
        raise ParseError("no 'hca_id:' or 'port:' line: not ibv_devinfo output", source=source)
    for p in ports:
        if id(p) in width and id(p) in speed:
            p.rate_gbps = round(width[id(p)] * speed[id(p)], 3)
    return ports
