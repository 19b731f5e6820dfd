"""/proc/net/tcp and /proc/net/tcp6 -> the TCP ports something listens on.

Each socket is a line ``sl local_address rem_address st ...``: the addresses are hex
``IP:PORT`` (IPv4 as 8 hex digits, IPv6 as 32), the state ``0A`` is LISTEN. Lines are read
wherever they sit (a paste may indent them or keep the header); a line that is not a
socket is skipped.
"""

from __future__ import annotations

import re

_SOCKET = re.compile(
    r"^\s*\d+:\s+(?:[0-9A-Fa-f]{8}|[0-9A-Fa-f]{32}):([0-9A-Fa-f]{4})\s+"
    r"(?:[0-9A-Fa-f]{8}|[0-9A-Fa-f]{32}):[0-9A-Fa-f]{4}\s+([0-9A-Fa-f]{2})\b"
)
LISTEN = "0A"


def listening_ports(text: str) -> set[int]:
    """Local ports of the sockets in state LISTEN."""
    ports: set[int] = set()
    for line in text.splitlines():
        m = _SOCKET.match(line)
        if m and m.group(2).upper() == LISTEN:
            ports.add(int(m.group(1), 16))
    return ports
