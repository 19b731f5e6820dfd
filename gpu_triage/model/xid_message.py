"""What the text of an Xid line says beyond its code: NVLink registers and units, and the
recovery action Xid 154 announces.

Pure functions over the message text (the part after ``Xid (PCI:...): N, pid=..., name=...``);
the engine uses them to annotate Xid events before the rules run (engine/enrich.py), so
events from any source (kernel log, pasted text, a stored snapshot) are decoded alike.

Formats (NVIDIA Xid catalogue, sheet "Customer User Guide"; ../shared/xid-reference.md):

- Xid 74 (NVLink before Blackwell): ``NVLink: fatal error detected on link 8(0x0, 0x0,
  0x10000, 0x0, 0x0, 0x0, 0x0)``: seven registers, Reg0 first.
- Xid 144-150 (NVLink5): ``<sub component> <fatal|nonfatal> <Crosscontain> <injected> Link
  <n> (<intrInfo> <errorStatus> <debug0..4>)``. IntrInfo[25:20] is the NETIR link event's
  reason; the subcode is IntrInfo[9:5] before driver R575 and IntrInfo[6:0] from R575.
- Xid 154: ``GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)``.
"""

from __future__ import annotations

import re
from typing import NamedTuple

_HEX = r"0x[0-9a-fA-F]{1,16}"
_XID74 = re.compile(
    rf"(?i)\blink\s*#?\s*(?P<link>\d{{1,3}})\s*\(\s*(?P<regs>{_HEX}(?:\s*,?\s*{_HEX}){{3,7}})\s*\)"
)
_XID74_FATAL = re.compile(r"(?i)\b(?P<word>non-?\s?fatal|fatal)\b")
_NVLINK5 = re.compile(
    rf"^\s*(?:NVLINK:?\s*)?(?P<unit>[A-Za-z][A-Za-z0-9_]*(?:/[A-Za-z0-9_]+)?)\s*,?\s+"
    rf"(?P<sev>non-?\s?fatal|fatal)\b(?P<mid>[^()]{{0,80}}?)\bLink\s*(?P<link>-?\d{{1,3}})\s*"
    rf"\(\s*(?P<intr>{_HEX})[\s,]+(?P<status>{_HEX})",
    re.I,
)
_RECOVERY = re.compile(
    rf"(?i)recovery\s+action\s+changed\s+from\s+(?P<from>{_HEX})\s*(?:\((?P<from_text>[^)]*)\))?"
    rf"\s+to\s+(?P<to>{_HEX})\s*(?:\((?P<to_text>[^)]*)\))?"
)

# nvmlDeviceGpuRecoveryAction_t and the words Xid 154 prints for it.
RECOVERY_BY_NUMBER = {
    0: "none",
    1: "gpu_reset",
    2: "node_reboot",
    3: "drain_p2p",
    4: "drain_and_reset",
}
RECOVERY_BY_TEXT = {
    "none": "none",
    "gpu reset required": "gpu_reset",
    "gpu reset": "gpu_reset",
    "node reboot required": "node_reboot",
    "node reboot": "node_reboot",
    "drain p2p": "drain_p2p",
    "drain and reset": "drain_and_reset",
}


class Xid74Message(NamedTuple):
    link: int
    registers: tuple[int, ...]
    fatal: bool | None


class Nvlink5Message(NamedTuple):
    unit: str
    fatal: bool
    link: int | None  # None: the unit is not a link's ("Link -1")
    intr_info: int
    error_status: int

    @property
    def reason(self) -> int:
        """IntrInfo[25:20]: the reason code of a NETIR link event."""
        return (self.intr_info >> 20) & 0x3F

    def subcode(self, driver_major: int | None) -> int | None:
        """IntrInfo[9:5] before R575, IntrInfo[6:0] from R575; unknown without the driver."""
        if driver_major is None:
            return None
        if driver_major < 575:
            return (self.intr_info >> 5) & 0x1F
        return self.intr_info & 0x7F


def _fatal_word(word: str) -> bool:
    return not word.lower().startswith("non")


def parse_xid74(message: str | None) -> Xid74Message | None:
    if not message:
        return None
    m = _XID74.search(message)
    if not m:
        return None
    regs = tuple(int(v, 16) for v in re.findall(_HEX, m.group("regs")))
    w = _XID74_FATAL.search(message[: m.start()] or message)
    return Xid74Message(int(m.group("link")), regs, _fatal_word(w.group("word")) if w else None)


def parse_nvlink5(message: str | None) -> Nvlink5Message | None:
    if not message:
        return None
    m = _NVLINK5.search(message)
    if not m:
        return None
    return Nvlink5Message(
        unit=m.group("unit").upper(),
        fatal=_fatal_word(m.group("sev")),
        link=int(m.group("link")) if int(m.group("link")) >= 0 else None,
        intr_info=int(m.group("intr"), 16),
        error_status=int(m.group("status"), 16),
    )


def parse_recovery_action(message: str | None) -> str | None:
    """The recovery action Xid 154 changed *to*, as a ``RecoveryAction`` value."""
    if not message:
        return None
    m = _RECOVERY.search(message)
    if not m:
        return None
    text = re.sub(r"\s+", " ", (m.group("to_text") or "").strip().lower())
    if text in RECOVERY_BY_TEXT:
        return RECOVERY_BY_TEXT[text]
    return RECOVERY_BY_NUMBER.get(int(m.group("to"), 16))


def driver_major(version: str | None) -> int | None:
    if not version:
        return None
    m = re.match(r"\s*(\d{2,4})\b", version)
    return int(m.group(1)) if m else None
