"""What the nvidia-smi parsers share: lines, value conversions (``N/A``, ``[Not Supported]``,
``ERR!`` become None with the reason in ``unavailable``), the field setter, lost GPUs."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from gpu_triage.collectors.pci import normalize_pci
from gpu_triage.model.facts import GpuFacts, GpuProcess, RecoveryAction, UnavailableReason

# Lines longer than this are not nvidia-smi output (binary junk, a log blob); skipping
# them keeps every regex linear and cheap.
MAX_LINE_CHARS = 4096

_PCI_RE = re.compile(
    r"(?<![0-9A-Fa-f:])(?:([0-9A-Fa-f]{1,8}):)?([0-9A-Fa-f]{2}):([0-9A-Fa-f]{2})\.([0-7])(?![0-9A-Fa-f])"
)
_LOST_RE = re.compile(
    r"Unable to determine the device handle for (?:GPU\s*)?([0-9A-Fa-f:.]+):\s*(.*)", re.I
)
# nvidia-smi's own messages when it sees no GPU: valid output, nothing to report
_NO_GPU_RE = re.compile(r"No devices were found|NVIDIA-SMI has failed|No supported GPUs", re.I)
_NUM_RE = re.compile(r"[-+]?\d{1,20}(?:\.\d{1,20})?")


def normalize_pci_bus_id(text: str | None) -> str | None:
    """``00000000:18:00.0`` or ``3B:00.0`` -> ``0000:18:00.0`` / ``0000:3b:00.0``; None if none."""
    return normalize_pci(text, require_function=True)


def as_text(text: str | bytes) -> str:
    if isinstance(text, bytes):
        return text.decode("utf-8", errors="replace")
    return text


def _lines(text: str) -> list[str]:
    """Lines with tabs expanded and overlong lines dropped (they are not this format)."""
    out = []
    for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        out.append("" if len(line) > MAX_LINE_CHARS else line.expandtabs(8).rstrip())
    return out


# --------------------------------------------------------------------------- values


def _unavailable_reason(raw: str) -> UnavailableReason | None:
    """Why a printed value is not a value, or None when it is one."""
    v = raw.strip().strip("[]").strip().lower()
    if v in ("n/a", "na", "not supported", "not available", "unsupported", "none available"):
        return UnavailableReason.NOT_SUPPORTED
    if v in ("unknown error", "err!", "err", "error") or v.startswith("unknown error"):
        return UnavailableReason.ERROR
    if v.startswith("gpu is lost") or v == "gpu lost":
        return UnavailableReason.GPU_LOST
    if v.startswith("insufficient permission") or v == "no permission":
        return UnavailableReason.NO_PERMISSION
    if v.startswith("requested functionality has been deprecated"):
        return UnavailableReason.NOT_SUPPORTED
    if v in ("timeout", "timed out"):
        return UnavailableReason.TIMED_OUT
    return None


def process_value_failed(proc: GpuProcess, name: str, raw: str) -> bool:
    """A process field the driver answered with an error ([Unknown Error], GPU lost):
    marked unavailable with that reason and the process flagged (``query_error``), never
    kept as a name or a number. Returns whether it was one."""
    reason = _unavailable_reason(raw)
    if reason not in (UnavailableReason.ERROR, UnavailableReason.GPU_LOST):
        return False
    proc.mark_unavailable(name, reason, raw.strip()[:80])
    proc.query_error = True
    return True


def _number(raw: str) -> float | None:
    m = _NUM_RE.search(raw)
    return float(m.group(0)) if m else None


def _int(raw: str) -> int | None:
    n = _number(raw)
    return int(n) if n is not None else None


_TRUE = {"enabled", "active", "yes", "on", "true", "supported"}
_FALSE = {"disabled", "not active", "no", "off", "false", "inactive"}


def _bool(raw: str) -> bool | None:
    v = " ".join(raw.strip().strip("[]").lower().split())
    if v in _TRUE:
        return True
    if v in _FALSE:
        return False
    return None


def _pstate(raw: str) -> int | None:
    m = re.search(r"\bP(\d{1,2})\b", raw, re.I)
    return int(m.group(1)) if m else None


def _compute_mode(raw: str) -> str | None:
    v = raw.strip().lower().replace(".", "").replace("_", " ")
    v = " ".join(v.split())
    if not v:
        return None
    if v in ("default",):
        return "default"
    if v in ("e process", "exclusive process", "exclusive"):
        return "exclusive_process"
    if v in ("e thread", "exclusive thread"):
        return "exclusive_thread"
    if v.startswith("prohibit"):
        return "prohibited"
    return v.replace(" ", "_")


# (words that must all appear, RecoveryAction value); most specific first
_RECOVERY_WORDS: tuple[tuple[tuple[str, ...], str], ...] = (
    (("drain", "reset"), "drain_and_reset"),
    (("drain", "p2p"), "drain_p2p"),
    (("imex",), "recover_imex_domain"),
    (("bus", "reset"), "bus_reset"),
    (("system", "reboot"), "system_reboot"),
    (("reboot",), "node_reboot"),
    (("reset",), "gpu_reset"),
)


def _recovery_action(raw: str) -> RecoveryAction | None:
    v = " ".join(raw.strip().lower().replace("_", " ").split())
    if v == "none":
        return RecoveryAction.NONE
    for words, value in _RECOVERY_WORDS:
        if all(w in v for w in words):
            try:
                return RecoveryAction(value)
            except ValueError:  # an older fact model without this action
                continue
    return None


def _width(raw: str) -> int | None:
    m = re.search(r"x?(\d+)x?", raw)
    return int(m.group(1)) if m else None


def _pci(raw: str) -> str | None:
    return normalize_pci_bus_id(raw)


def _fabric(raw: str) -> str | None:
    """Fabric State / Status as printed ("In Progress", "Success") in snake case."""
    v = "_".join(raw.strip().lower().replace("-", " ").split())
    return v or None


_CONVERTERS: dict[str, Callable[[str], object]] = {
    "fabric": _fabric,
    "str": lambda raw: raw.strip() or None,
    "float": _number,
    "int": _int,
    "bool": _bool,
    "pstate": _pstate,
    "compute": _compute_mode,
    "recovery": _recovery_action,
    "width": _width,
    "pci": _pci,
}


class _Setter:
    """Sets GpuFacts fields from printed values, recording why a value is missing.

    A field may be printed under several names (``Power Draw`` and ``Average Power
    Draw``); ``prio`` decides which wins regardless of order.
    """

    def __init__(self, gpu: GpuFacts) -> None:
        self.gpu = gpu
        self.prio: dict[str, int] = {}

    def set(self, name: str, raw: str, kind: str = "str", prio: int = 0) -> None:
        if self.prio.get(name, -1) > prio:
            return
        reason = _unavailable_reason(raw)
        if reason is not None:
            if self.prio.get(name, -1) == prio and getattr(self.gpu, name) is not None:
                return  # a value already read at this rank beats a missing one
            self.prio[name] = prio
            setattr(self.gpu, name, None)
            self.gpu.mark_unavailable(name, reason, raw.strip())
            if reason is UnavailableReason.GPU_LOST:
                self.gpu.lost = True
            return
        value = _CONVERTERS[kind](raw)
        if value is None:
            return  # unreadable text: leave what we have
        self.prio[name] = prio
        setattr(self.gpu, name, value)
        self.gpu.unavailable.pop(name, None)

    def value(self, name: str, value: object, prio: int = 0) -> None:
        if self.prio.get(name, -1) > prio:
            return
        self.prio[name] = prio
        setattr(self.gpu, name, value)
        self.gpu.unavailable.pop(name, None)

    def missing(self, name: str, reason: UnavailableReason, detail: str) -> None:
        if getattr(self.gpu, name) is None:
            self.gpu.mark_unavailable(name, reason, detail)

    def count_error(self, raw: str) -> None:
        if _unavailable_reason(raw) in (UnavailableReason.ERROR, UnavailableReason.GPU_LOST):
            self.gpu.query_errors = (self.gpu.query_errors or 0) + 1


def _lost_gpus(lines: Sequence[str], source: str, known: set[str]) -> list[GpuFacts]:
    """GPUs nvidia-smi names in 'Unable to determine the device handle' lines."""
    out: list[GpuFacts] = []
    for line in lines:
        m = _LOST_RE.search(line)
        if not m:
            continue
        bus = normalize_pci_bus_id(m.group(1))
        if bus is None or bus in known:
            continue
        known.add(bus)
        gpu = GpuFacts(pci_bus_id=bus, source=source, query_errors=1)
        reason = m.group(2).strip().rstrip(".")
        if "lost" in reason.lower():
            gpu.lost = True
        gpu.mark_unavailable(
            "name",
            UnavailableReason.GPU_LOST if gpu.lost else UnavailableReason.ERROR,
            reason,
        )
        out.append(gpu)
    return out
