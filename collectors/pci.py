"""PCI addresses in one canonical form, ``dddd:bb:dd.f`` lower case, whatever printed them.

NVML prints ``00000000:3B:00.0``, Xid lines ``0000:3b:00`` (no function), lspci
``3b:00.0`` (no domain), sysfs ``0000:3b:00.0``: facts from every source must join on
the same string.
"""

from __future__ import annotations

import re

_PCI = re.compile(
    r"(?<![0-9A-Fa-f:])(?:PCI:)?(?:(?P<domain>[0-9A-Fa-f]{1,8}):)?"
    r"(?P<bus>[0-9A-Fa-f]{2}):(?P<dev>[0-9A-Fa-f]{2})(?:\.(?P<fn>[0-7]))?(?![0-9A-Fa-f])"
)


def normalize_pci(
    text: str | bytes | None, *, anywhere: bool = True, require_function: bool = False
) -> str | None:
    """The canonical form of the first PCI address in ``text`` (``anywhere``) or of
    ``text`` as a whole; None when there is none (a redacted ``PCI:...`` included).
    ``require_function`` refuses ``bb:dd`` without ``.f``, which in tables could be a time."""
    if not text:
        return None
    if isinstance(text, bytes):
        text = text.decode("ascii", errors="replace")
    text = text.strip()
    m = _PCI.search(text) if anywhere else _PCI.fullmatch(text)
    if m is None or (require_function and m["fn"] is None):
        return None
    domain = int(m["domain"] or "0", 16)
    return f"{domain:04x}:{m['bus'].lower()}:{m['dev'].lower()}.{m['fn'] or '0'}"
