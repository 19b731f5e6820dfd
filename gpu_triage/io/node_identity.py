"""Which node this is, and which boot of it: what ties a snapshot to the machine it came from.

Hostnames can be redacted, reused or spoofed, so a snapshot records the machine id (hashed:
``/etc/machine-id`` is meant to stay private, see machine-id(5)) and the kernel's boot id.
A runbook step runs only where both match the incident's snapshot: on another node, or after
a reboot, what the step would see is not the incident's state.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import NamedTuple

_MAX_BYTES = 256  # both files hold one short line


class NodeIdentity(NamedTuple):
    node_id: str  # sha256 of the machine id, hex, "" when unknown
    boot_id: str  # the kernel's boot id, "" when unknown

    @property
    def known(self) -> bool:
        return bool(self.node_id and self.boot_id)


def _read_line(path: Path) -> str:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return ""
    try:
        return os.read(fd, _MAX_BYTES).decode("ascii", "replace").strip()
    except OSError:
        return ""
    finally:
        os.close(fd)


def hash_machine_id(machine_id: str) -> str:
    return hashlib.sha256(f"gpu-triage:{machine_id}".encode()).hexdigest() if machine_id else ""


def local_identity(root: Path = Path("/")) -> NodeIdentity:
    """This node's identity, read under ``root`` (tests point it at a fixture tree)."""
    machine_id = _read_line(root / "etc" / "machine-id")
    boot_id = _read_line(root / "proc" / "sys" / "kernel" / "random" / "boot_id")
    return NodeIdentity(hash_machine_id(machine_id), boot_id)
