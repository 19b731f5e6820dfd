"""Parsers for ``nvidia-smi`` outputs: the default table, ``-q``, and the CSV queries.

All of them produce :class:`~gpu_triage.model.facts.GpuFacts` / :class:`GpuProcess`. They
report values as printed and never judge them: an idle GPU shows ``Idle: Active``,
``SW Power Cap: Active`` or a low PCIe generation while it saves power, and that is
for rules to weigh, not for the parser.

Values nvidia-smi could not read (``N/A``, ``[Not Supported]``, ``Unknown Error``,
``ERR!``, ``GPU is lost``) become ``None`` with the reason in ``unavailable``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from gpu_triage.collectors.parsers import ParseError
from gpu_triage.collectors.pci import normalize_pci
from gpu_triage.model.facts import (
    THROTTLE_REASONS,
    GpuFacts,
    GpuProcess,
    RecoveryAction,
    UnavailableReason,
)

__all__ = [
    "NvidiaSmiQ",
    "NvidiaSmiTable",
    "normalize_pci_bus_id",
    "parse_compute_apps_csv",
    "parse_nvidia_smi_q",
    "parse_nvidia_smi_table",
    "parse_query_gpu_csv",
]

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


_CONVERTERS: dict[str, Callable[[str], object]] = {
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


# --------------------------------------------------------------------------- table


@dataclass
class NvidiaSmiTable:
    """What the default ``nvidia-smi`` table shows."""

    driver_version: str | None = None
    cuda_version: str | None = None
    gpus: list[GpuFacts] = field(default_factory=list)
    processes: list[GpuProcess] = field(default_factory=list)
    timestamp: str | None = None


_VERSION_RE = re.compile(r"Driver Version:\s*([0-9][\w.\-]*)", re.I)
_CUDA_RE = re.compile(r"CUDA Version:\s*([\w.\-/]+)", re.I)
_TIMESTAMP_RE = re.compile(r"^\s*(?:[A-Z][a-z]{2}\s+){2}\d{1,2}\s+\d{1,2}:\d{2}:\d{2}\s+\d{4}\s*$")
_GPU_ROW1_RE = re.compile(r"^\s*(\d{1,3})\.?\s+(\S.*?)\s*$")
_TEMP_RE = re.compile(r"^(-?\d+)\s*C$", re.I)
_MEM_RE = re.compile(r"(\S+?)\s*(MiB|MB|GiB|GB)?\s*/\s*(\S+?)\s*(MiB|MB|GiB|GB)?\s*$", re.I)
_PROC_TYPE_RE = re.compile(r"^[CGM](?:\+[CGM])*$")


def _cells(line: str) -> list[str] | None:
    s = line.strip()
    if not s.startswith("|"):
        return None
    s = s.strip("|")
    return [c.strip() for c in s.split("|")]


def _mib(num: str, unit: str | None) -> float | None:
    n = _number(num)
    if n is None:
        return None
    if unit and unit.lower() in ("gib", "gb"):
        return n * 1024.0
    return n


def _table_row1(gpu: GpuFacts, s: _Setter, cells: list[str]) -> None:
    m = _GPU_ROW1_RE.match(cells[0])
    if m is None:  # pragma: no cover - caller checked
        return
    gpu.index = int(m.group(1))
    rest = m.group(2).split()
    last = rest[-1] if rest else ""
    if len(rest) > 1 and last in ("On", "Off"):
        gpu.persistence_mode = last == "On"
        rest = rest[:-1]
    elif len(rest) > 1 and last in ("WDDM", "TCC", "N/A", "ERR!"):
        rest = rest[:-1]  # Windows driver model column, or unreadable
        s.count_error(last)
    # keep runs of spaces inside the name as single spaces; truncation ('...') stays
    gpu.name = " ".join(rest) or None
    if len(cells) > 1:
        s.count_error(cells[1])
        bus = normalize_pci_bus_id(cells[1])
        if bus:
            gpu.pci_bus_id = bus
    if len(cells) > 2:
        tokens = cells[2].split()
        if tokens:
            raw = tokens[-1]  # the old 'SB / DB' layout prints two counts; DB is uncorrected
            s.count_error(raw)
            if raw.isdigit():
                s.set("ecc_volatile_uncorrected", raw, "int")
                s.value("ecc_enabled", True)
            elif raw.lower() == "off":
                s.value("ecc_enabled", False)
                s.missing("ecc_volatile_uncorrected", UnavailableReason.NOT_SUPPORTED, "ECC off")
            elif raw.lower() == "on":
                # MIG mode prints 'On' here: the counts live with the MIG devices
                s.value("ecc_enabled", True)
                s.missing("ecc_volatile_uncorrected", UnavailableReason.NOT_SUPPORTED, "On")
            else:
                s.set("ecc_volatile_uncorrected", raw, "int")


def _table_row2(gpu: GpuFacts, s: _Setter, cells: list[str]) -> None:
    head = cells[0]
    pm = re.search(r"(\S+)\s*/\s*(\S+)\s*$", head)
    if pm:
        for raw, name in ((pm.group(1), "power_draw_w"), (pm.group(2), "power_limit_w")):
            s.count_error(raw)
            s.set(name, raw, "float")
        head = head[: pm.start()]
    # '62 C' (old layout) -> '62C'
    tokens = re.sub(r"(\d)\s+C\b", r"\1C", head).split()
    fan = temp = perf = None
    loose: list[str] = []
    for tok in tokens:
        if tok.endswith("%") and fan is None:
            fan = tok
        elif _TEMP_RE.match(tok) and temp is None:
            temp = tok
        elif re.fullmatch(r"P\d{1,2}", tok) and perf is None:
            perf = tok
        else:
            loose.append(tok)
    # N/A and ERR! cells have no shape; they fill the free slots in column order
    for slot in ("fan", "temp", "perf"):
        if not loose:
            break
        if slot == "fan" and fan is None:
            fan = loose.pop(0)
        elif slot == "temp" and temp is None:
            temp = loose.pop(0)
        elif slot == "perf" and perf is None:
            perf = loose.pop(0)
    for raw, name, kind in (
        (fan, "fan_speed_pct", "float"),
        (temp, "temperature_gpu_c", "float"),
        (perf, "performance_state", "pstate"),
    ):
        if raw is not None:
            s.count_error(raw)
            s.set(name, raw, kind)
    if len(cells) > 1:
        cell = re.sub(r"^\s*\d+%\s+", "", cells[1])  # old layouts print a memory-util % first
        mm = _MEM_RE.search(cell)
        if mm:
            for num, unit, name in (
                (mm.group(1), mm.group(2), "memory_used_mib"),
                (mm.group(3), mm.group(4), "memory_total_mib"),
            ):
                s.count_error(num)
                if _unavailable_reason(num):
                    s.set(name, num)
                else:
                    value = _mib(num, unit)
                    if value is not None:
                        s.value(name, value)
    if len(cells) > 2:
        tokens = cells[2].split()
        if tokens:
            s.count_error(tokens[0])
            s.set("utilization_gpu_pct", tokens[0], "float")
            mode = " ".join(tokens[1:])
            if mode:
                s.count_error(mode)
                s.set("compute_mode", mode, "compute")


def _table_row3(gpu: GpuFacts, s: _Setter, cells: list[str], mig_col: int | None) -> None:
    if mig_col == -1:
        return
    col = mig_col if mig_col is not None else len(cells) - 1
    if col >= len(cells) or not cells[col]:
        return
    raw = cells[col]
    s.count_error(raw)
    if _bool(raw) is not None or _unavailable_reason(raw) is not None:
        s.set("mig_mode", raw, "bool")


def _parse_process_row(cell: str, has_gi: bool | None) -> GpuProcess | None:
    t = cell.split()
    if len(t) < 4 or not t[0].isdigit():
        return None
    layouts = [True, False] if has_gi is None else [has_gi]
    for gi in layouts:
        at = 3 if gi else 1
        if len(t) < at + 3 or not t[at].isdigit() or not _PROC_TYPE_RE.match(t[at + 1]):
            continue
        proc = GpuProcess(gpu_index=int(t[0]), pid=int(t[at]))
        kind = t[at + 1]
        proc.type = {"C": "compute", "G": "graphics", "C+G": "compute+graphics"}.get(
            kind, kind.lower()
        )
        mem = t[-1]
        name = " ".join(t[at + 2 : -1])
        if not name:  # name column empty: the last token was the name, memory missing
            name, mem = mem, ""
        proc.name = name or None
        reason = _unavailable_reason(mem) if mem else UnavailableReason.NOT_COLLECTED
        if reason is not None:
            proc.mark_unavailable("used_memory_mib", reason, mem)
        else:
            m = re.match(r"(\d+(?:\.\d+)?)\s*(MiB|MB|GiB|GB)?$", mem, re.I)
            if m:
                proc.used_memory_mib = _mib(m.group(1), m.group(2))
        return proc
    return None


def parse_nvidia_smi_table(text: str | bytes, source: str = "<text>") -> NvidiaSmiTable:
    """Parse the default ``nvidia-smi`` table (any layout from the 295 to the 5xx drivers).

    Reads the banner (driver/CUDA versions), one block per GPU (2 rows in old layouts,
    3 with the ``MIG M.`` row), skips the ``MIG devices`` table and reads the
    ``Processes`` table. Raises :class:`ParseError` when the text is not this output.
    """
    text = as_text(text)
    lines = _lines(text)
    result = NvidiaSmiTable()
    section = "gpus"  # fragments often start in the middle of the GPU table
    mig_col: int | None = None
    has_gi: bool | None = None
    procs_seen = False
    header_rows: list[list[str]] = []
    in_header = False
    current: GpuFacts | None = None
    setter: _Setter | None = None
    row = 0
    recognised = False

    for line in lines:
        if not line.strip():
            continue
        if result.timestamp is None and not result.gpus and _TIMESTAMP_RE.match(line):
            result.timestamp = line.strip()
            continue
        if "NVIDIA-SMI" in line and ("Driver Version" in line or "|" in line):
            recognised = True
            vm = _VERSION_RE.search(line)
            cm = _CUDA_RE.search(line)
            result.driver_version = vm.group(1) if vm else result.driver_version
            if cm and _unavailable_reason(cm.group(1)) is None:
                result.cuda_version = cm.group(1)
            in_header, header_rows, section = True, [], "gpus"
            continue
        stripped = line.strip()
        if stripped.startswith("+") or (
            re.fullmatch(r"\|[-+=| ]*\|?", stripped) and re.search(r"[-=]", stripped)
        ):
            if stripped.startswith("|=") and in_header and section == "gpus":
                in_header = False
                # which cell of the 3rd header row holds 'MIG M.'
                if len(header_rows) >= 3:
                    mig_col = next((i for i, c in enumerate(header_rows[2]) if "MIG" in c), mig_col)
                elif header_rows:
                    mig_col = -1  # a header without the 'MIG M.' row: no MIG column
            elif not stripped.startswith("|="):
                current, row = None, 0  # a rule line ends a GPU block
            continue
        cells = _cells(line)
        if cells is None:
            continue
        joined = " ".join(cells)
        if re.match(r"^MIG devices:?", joined, re.I):
            section, current, recognised = "mig", None, True
            continue
        if re.match(r"^Processes:?", joined, re.I):
            section, current, procs_seen, recognised = "procs", None, True, True
            continue
        if section == "procs":
            words = joined.split()
            if "PID" in words:
                has_gi = "GI" in words
                continue
            if "no running processes found" in joined.lower():
                continue
            proc = _parse_process_row(joined, has_gi)
            if proc is not None:
                proc.source = source
                result.processes.append(proc)
            continue
        if section == "mig":
            continue
        if in_header:
            header_rows.append(cells)
            continue
        m = _GPU_ROW1_RE.match(cells[0])
        if (
            m
            and len(cells) >= 2
            and re.search(r"[A-Za-z]", m.group(2))
            and not re.match(r"^\s*\d+%", cells[0])
        ):
            current = GpuFacts(source=source, query_errors=0)
            setter = _Setter(current)
            result.gpus.append(current)
            _table_row1(current, setter, cells)
            row, recognised = 1, True
            continue
        if current is None or setter is None:
            continue
        row += 1
        if row == 2:
            _table_row2(current, setter, cells)
        elif row == 3:
            _table_row3(current, setter, cells, mig_col)

    for gpu in result.gpus:
        gpu.driver_version = result.driver_version
        gpu.cuda_version = result.cuda_version
    known = {g.pci_bus_id for g in result.gpus if g.pci_bus_id}
    lost = _lost_gpus(lines, source, known)
    result.gpus.extend(lost)

    by_index = {g.index: g for g in result.gpus if g.index is not None}
    for proc in result.processes:
        gpu = by_index.get(proc.gpu_index)
        if gpu is not None:
            proc.gpu_pci_bus_id = gpu.pci_bus_id
    if procs_seen:
        for gpu in by_index.values():
            gpu.process_count = sum(
                1
                for p in result.processes
                if p.gpu_index == gpu.index and "C" in _type_letters(p.type)
            )

    if not recognised and not lost and text.strip():
        if _NO_GPU_RE.search(text):
            return result
        raise ParseError("not an nvidia-smi table", source=source)
    return result


def _type_letters(kind: str | None) -> str:
    if not kind:
        return "C"  # unknown type: count it, a context is held
    return {"compute": "C", "graphics": "G", "compute+graphics": "CG"}.get(kind, kind.upper())


# --------------------------------------------------------------------------- -q


@dataclass
class NvidiaSmiQ:
    """What ``nvidia-smi -q`` (full or ``-d`` subsets) shows."""

    driver_version: str | None = None
    cuda_version: str | None = None
    gpus: list[GpuFacts] = field(default_factory=list)
    processes: list[GpuProcess] = field(default_factory=list)
    timestamp: str | None = None
    attached_gpus: int | None = None


def _names(text: str) -> frozenset[str]:
    """'a|b\n |c' -> {'a', 'b', 'c'}: long name lists stay compact and readable."""
    return frozenset(" ".join(n.split()) for n in text.split("|"))


# Printed reason label (lower case) -> GpuFacts throttle field suffix.
THROTTLE_LABELS: dict[str, str] = {
    "idle": "gpu_idle",
    "gpu idle": "gpu_idle",
    "applications clocks setting": "applications_clocks_setting",
    "application clocks setting": "applications_clocks_setting",
    "user defined clocks": "applications_clocks_setting",  # pre-2013 name
    "sw power cap": "sw_power_cap",
    "hw slowdown": "hw_slowdown",
    "sync boost": "sync_boost",
    "sw thermal slowdown": "sw_thermal_slowdown",
    "hw thermal slowdown": "hw_thermal_slowdown",
    "hw power brake slowdown": "hw_power_brake_slowdown",
    "display clock setting": "display_clock_setting",
    "display clocks setting": "display_clock_setting",
}

_THROTTLE_SECTIONS = {"clocks throttle reasons", "clocks event reasons", "clock throttle reasons"}

# Sections that sit directly under a GPU, used when a paste lost its indentation.
_TOP_SECTIONS = _names(
    """mig mode|mig devices|driver model|platform info|inforom version|inforom bbx object flush
    |gpu operation mode|gpu c2c mode|gpu virtualization mode|gpu reset status|ibmnpu|pci
    |clocks throttle reasons|clocks event reasons|clock throttle reasons
    |clocks event reasons counters|clocks throttle reasons counters|fb memory usage|memory usage
    |bar1 memory usage|conf compute protected memory usage|compute mode|utilization
    |encoder stats|fbc stats|ecc mode|ecc errors|retired pages|remapped rows|temperature
    |power readings|gpu power readings|gpu memory power readings|module power readings
    |power samples|clocks|applications clocks|default applications clocks|deferred clocks
    |max clocks|max customer boost clocks|clock policy|supported clocks|voltage|fabric
    |processes|accounted processes|capabilities|sram error status|utilization samples
    |memory utilization samples|gpu utilization samples|hic info|accounting mode
    |power smoothing|workload power profiles"""
)
_REPLAY_KEYS = ("replays since reset", "replays", "replay number", "replay counter")
_BANNER_KEYS = ("driver version", "cuda version", "timestamp", "attached gpus")
# GPU-level keys read but not modelled: recognising them keeps a fragment 'recognised'.
_GPU_LEVEL_UNMAPPED = _names(
    """product brand|product architecture|display mode|display active|addressing mode
    |accounting mode|accounting mode buffer size|minor number|multigpu board|board id
    |board part number|gpu part number|fru part number|module id|gsp firmware version
    |gpu c2c mode|sparse operation mode|driver model"""
)
_PCI_UNMAPPED = _names(
    """bus|device|domain|device id|sub system id|base classcode|sub classcode
    |replay number rollovers|tx throughput|rx throughput|atomic caps outbound
    |atomic caps inbound"""
)
# Known nested headers: section -> header -> depth below the section.
_CHILD_LEVELS: dict[str, dict[str, int]] = {
    "pci": {"gpu link info": 1, "bridge chip": 1, "pcie generation": 2, "link width": 2},
    "ecc errors": {
        "volatile": 1,
        "aggregate": 1,
        "aggregate uncorrectable sram sources": 1,
        "single bit": 2,
        "double bit": 2,
    },
    "remapped rows": {"bank remap availability histogram": 1},
    "fabric": {"health": 1},
}
_GPU_HEADER_RE = re.compile(
    r"^\s*GPU\s+([0-9A-Fa-f]{1,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])\s*$"
)


def _norm(key: str) -> str:
    return " ".join(key.strip().lower().split())


def _anchor(path: tuple[str, ...]) -> tuple[str, ...]:
    """Re-root a section path on a known section (fragments start mid-way, pastes add titles)."""
    if not path or path[0] in _TOP_SECTIONS:
        return path
    for i, name in enumerate(path):
        if name in _TOP_SECTIONS:
            return path[i:]
    for top, levels in _CHILD_LEVELS.items():
        if path[0] in levels:
            return (top, *path)
    return path


@dataclass
class _EccCount:
    """One ECC counter: the printed Total (old layout) or the sum of its parts."""

    total: int | None = None
    parts_sum: int = 0
    parts: int = 0
    missing: str = ""  # the N/A-like text when a part could not be read


class _QGpu:
    """One GPU block of ``-q`` being read."""

    def __init__(self, source: str) -> None:
        self.gpu = GpuFacts(source=source, query_errors=0)
        self.s = _Setter(self.gpu)
        # ECC counters per (volatile|aggregate, corrected|uncorrected)
        self.ecc: dict[tuple[str, str], _EccCount] = {}
        self.processes: list[GpuProcess] = []

    # Each handler returns True when it used the key.
    def apply(self, path: tuple[str, ...], key: str, raw: str) -> bool:
        s = self.s
        path = _anchor(path)
        if not path:
            return self._gpu_level(key, raw)
        top, sub = path[0], path[1:]
        if top == "mig mode" and not sub and key == "current":
            s.set("mig_mode", raw, "bool")
        elif top == "pci":
            return self._pci(sub, key, raw)
        elif top in _THROTTLE_SECTIONS:
            name = THROTTLE_LABELS.get(key)
            if name is None:
                return key == "unknown"
            s.set(f"throttle_{name}", raw, "bool")
        elif top in ("fb memory usage", "memory usage") and not sub:
            if key not in ("total", "used"):
                return key in ("free", "reserved")
            s.set(f"memory_{key}_mib", raw, "float")
        elif top == "utilization" and not sub:
            if key not in ("gpu", "memory"):
                return key in ("encoder", "decoder", "jpeg", "ofa")
            s.set(f"utilization_{key}_pct", raw, "float")
        elif top == "ecc mode" and not sub:
            if key != "current":
                return key == "pending"
            s.set("ecc_enabled", raw, "bool")
        elif top == "ecc errors":
            return self._ecc(sub, key, raw)
        elif top == "retired pages" and not sub:
            if key.startswith("single bit"):
                s.set("retired_pages_sbe", raw, "int")
            elif key.startswith("double bit"):
                s.set("retired_pages_dbe", raw, "int")
            elif key.startswith("pending"):
                s.set("retired_pages_pending", raw, "bool")
            else:
                return False
        elif top == "remapped rows" and not sub:
            names = {
                "correctable error": ("remapped_rows_correctable", "int"),
                "uncorrectable error": ("remapped_rows_uncorrectable", "int"),
                "pending": ("remapped_rows_pending", "bool"),
                "remapping failure occurred": ("remapped_rows_failure", "bool"),
            }
            if key not in names:
                return False
            s.set(names[key][0], raw, names[key][1])
        elif top == "temperature" and not sub:
            return self._temperature(key, raw)
        elif top in ("power readings", "gpu power readings") and not sub:
            return self._power(key, raw)
        elif top == "clocks" and not sub and key == "sm":
            s.set("clocks_sm_mhz", raw, "float")
        elif top == "max clocks" and not sub and key == "sm":
            s.set("clocks_sm_max_mhz", raw, "float")
        elif top == "processes":
            return self._process(key, raw)
        else:
            return False
        return True

    def _gpu_level(self, key: str, raw: str) -> bool:
        s = self.s
        simple = {
            "product name": ("name", "str"),
            "serial number": ("serial", "str"),
            "gpu uuid": ("uuid", "str"),
            "vbios version": ("vbios_version", "str"),
            "persistence mode": ("persistence_mode", "bool"),
            "performance state": ("performance_state", "pstate"),
            "fan speed": ("fan_speed_pct", "float"),
            "compute mode": ("compute_mode", "compute"),
            "gpu recovery action": ("recovery_action", "recovery"),
            "mig mode": ("mig_mode", "bool"),
        }
        if key in simple:
            s.set(simple[key][0], raw, simple[key][1])
            return True
        if key in _REPLAY_KEYS or key == "bus id":
            # a fragment that starts inside PCI: these names exist nowhere else
            return self._pci((), key, raw)
        reason = _unavailable_reason(raw)
        if key in _THROTTLE_SECTIONS and reason is not None:
            for name in THROTTLE_REASONS:
                s.set(f"throttle_{name}", raw, "bool")
            return True
        groups = {
            "remapped rows": (
                "remapped_rows_correctable",
                "remapped_rows_uncorrectable",
                "remapped_rows_pending",
                "remapped_rows_failure",
            ),
            "retired pages": ("retired_pages_sbe", "retired_pages_dbe", "retired_pages_pending"),
            "ecc mode": ("ecc_enabled",),
        }
        if key in groups and reason is not None:
            for name in groups[key]:
                s.set(name, raw)
            return True
        if key == "processes" and raw.strip().lower() == "none":
            s.value("process_count", 0)
            return True
        return key in _GPU_LEVEL_UNMAPPED

    def _pci(self, sub: tuple[str, ...], key: str, raw: str) -> bool:
        s = self.s
        # these names are unique inside PCI, whatever subsection a flat paste leaves us in
        if key == "bus id":
            s.set("pci_bus_id", raw, "pci")
            return True
        if key in _REPLAY_KEYS:
            s.set("pcie_replay_count", raw, "int")
            return True
        leaf = sub[-1] if sub else None
        if leaf == "pcie generation":
            if key == "max":
                s.set("pcie_link_gen_max", raw, "int")
            elif key == "current":
                s.set("pcie_link_gen", raw, "int")
            else:
                return key in ("device current", "device max", "host max")
            return True
        if leaf == "link width":
            if key == "max":
                s.set("pcie_link_width_max", raw, "width")
            elif key == "current":
                s.set("pcie_link_width", raw, "width")
            else:
                return False
            return True
        return leaf is None and key in _PCI_UNMAPPED

    def _ecc(self, sub: tuple[str, ...], key: str, raw: str) -> bool:
        if not sub or sub[0] not in ("volatile", "aggregate"):
            return False
        scope = sub[0]
        if len(sub) >= 2 and sub[1] in ("single bit", "double bit"):
            # old layout: per-memory counts, then Total
            kind = "corrected" if sub[1] == "single bit" else "uncorrected"
        elif "uncorrectable" in key:
            kind = "uncorrected"
        elif "correctable" in key:
            kind = "corrected"
        else:
            return key.endswith("threshold exceeded")
        acc = self.ecc.setdefault((scope, kind), _EccCount())
        reason = _unavailable_reason(raw)
        if reason is not None:
            acc.missing = raw.strip()
            return True
        n = _int(raw)
        if n is None:
            return False
        if key == "total":
            acc.total = n
        else:
            acc.parts_sum += n
            acc.parts += 1
        return True

    def _temperature(self, key: str, raw: str) -> bool:
        # 'T.Limit' rows are margins to a limit, not temperatures: deliberately unmapped.
        names = {
            "gpu current temp": "temperature_gpu_c",
            "gpu": "temperature_gpu_c",
            "gpu temp": "temperature_gpu_c",
            "memory current temp": "temperature_memory_c",
            "gpu slowdown temp": "temperature_slowdown_c",
            "gpu shutdown temp": "temperature_shutdown_c",
        }
        if key not in names:
            return "temp" in key or "t.limit" in key
        self.s.set(names[key], raw, "float")
        return True

    def _power(self, key: str, raw: str) -> bool:
        draws = {"average power draw": 2, "power draw": 1, "instantaneous power draw": 0}
        limits = {"enforced power limit": 2, "current power limit": 2, "power limit": 1}
        if key in draws:
            self.s.set("power_draw_w", raw, "float", prio=draws[key])
        elif key in limits:
            self.s.set("power_limit_w", raw, "float", prio=limits[key])
        elif key == "power state" and self.gpu.performance_state is None:
            self.s.set("performance_state", raw, "pstate")
        else:
            return "power" in key
        return True

    def _process(self, key: str, raw: str) -> bool:
        if key == "process id":
            proc = GpuProcess(source=self.gpu.source, pid=_int(raw))
            self.processes.append(proc)
            return True
        if not self.processes:
            return key in ("gpu instance id", "compute instance id")
        proc = self.processes[-1]
        if key == "type":
            kind = raw.strip()
            proc.type = {"C": "compute", "G": "graphics", "C+G": "compute+graphics"}.get(
                kind, kind.lower() or None
            )
        elif key in ("name", "process name"):
            proc.name = raw.strip() or None
        elif key == "used gpu memory":
            reason = _unavailable_reason(raw)
            if reason is not None:
                proc.mark_unavailable("used_memory_mib", reason, raw.strip())
            else:
                proc.used_memory_mib = _number(raw)
        else:
            return False
        return True

    def finish(self) -> None:
        for scope in ("volatile", "aggregate"):
            for kind in ("corrected", "uncorrected"):
                acc = self.ecc.get((scope, kind))
                if acc is None:
                    continue
                name = f"ecc_{scope}_{kind}"
                total = acc.total
                if total is None and acc.parts:
                    total = acc.parts_sum
                if total is not None:
                    self.s.value(name, total)
                elif acc.missing:
                    self.s.set(name, acc.missing)
        for proc in self.processes:
            proc.gpu_pci_bus_id = self.gpu.pci_bus_id
        if self.processes:
            self.s.value(
                "process_count",
                sum(1 for p in self.processes if "C" in _type_letters(p.type)),
            )


def parse_nvidia_smi_q(text: str | bytes, source: str = "<text>") -> NvidiaSmiQ:
    """Parse ``nvidia-smi -q`` (full, ``-d`` subsets, old drivers, pastes that lost indentation).

    Structure comes from indentation when the text has any, from known section names
    when it has none. Raises :class:`ParseError` when the text is not this output.
    """
    text = as_text(text)
    lines = _lines(text)
    result = NvidiaSmiQ()
    indented = any(line[:1] == " " and line.strip() for line in lines)
    stack: list[tuple[str, int]] = []  # (section name, indent), GPU level excluded
    cur: _QGpu | None = None
    blocks: list[_QGpu] = []
    recognised = False
    gpu_indent = -1

    def new_gpu() -> _QGpu:
        block = _QGpu(source)
        blocks.append(block)
        return block

    for line in lines:
        if not line.strip():
            continue
        if "NVSMI LOG" in line:
            recognised = True
            continue
        indent = len(line) - len(line.lstrip())
        hm = _GPU_HEADER_RE.match(line)
        if hm:
            cur = new_gpu()
            cur.s.set("pci_bus_id", hm.group(1), "pci")
            stack, gpu_indent, recognised = [], indent, True
            continue
        if ":" not in line:
            # a section header
            name = _norm(line)
            if not re.search(r"[a-z]", name) or len(name) > 80:
                continue
            if name in _TOP_SECTIONS or name in _THROTTLE_SECTIONS:
                recognised = True
            if indented:
                while stack and stack[-1][1] >= indent:
                    stack.pop()
                if indent <= gpu_indent and name not in _TOP_SECTIONS:
                    stack = []  # text back at the GPU line's column: not a GPU section
                    continue
                stack.append((name, indent))
            else:
                levels = _CHILD_LEVELS.get(stack[0][0], {}) if stack else {}
                if name in levels:
                    stack = [*stack[: levels[name]], (name, indent)]
                else:
                    stack = [(name, indent)]
            continue

        key_text, _, raw = line.partition(":")
        key, raw = _norm(key_text), raw.strip()
        if not re.search(r"[a-z]", key) or len(key) > 80:
            continue
        if (indent <= gpu_indent or cur is None) and key in _BANNER_KEYS:
            # banner keys before the first GPU block
            recognised = True
            value = raw if raw and _unavailable_reason(raw) is None else None
            if key == "driver version":
                result.driver_version = value
            elif key == "cuda version":
                result.cuda_version = value
            elif key == "timestamp":
                result.timestamp = value
            else:
                result.attached_gpus = _int(raw)
            continue
        popped = [(n, i) for n, i in stack if i < indent] if indented else stack
        block = cur if cur is not None else _QGpu(source)
        handled = False
        for cand in (popped, stack, []):
            if block.apply(tuple(n for n, _ in cand), key, raw):
                handled = True
                # keep the deeper context only when indentation proved unreliable
                if cand is popped or (not indented and not cand):
                    stack = list(cand)
                break
        else:
            stack = popped
        if cur is None and handled:
            # a fragment without its 'GPU <bus id>' line: keep the implicit GPU
            cur = block
            blocks.append(block)
        if cur is not None:
            cur.s.count_error(raw)
        recognised = recognised or handled

    for block in blocks:
        block.finish()
        block.gpu.driver_version = result.driver_version
        block.gpu.cuda_version = result.cuda_version
        result.gpus.append(block.gpu)
        result.processes.extend(block.processes)
    known = {g.pci_bus_id for g in result.gpus if g.pci_bus_id}
    lost = _lost_gpus(lines, source, known)
    result.gpus.extend(lost)
    if not recognised and not lost and text.strip():
        if _NO_GPU_RE.search(text):
            return result
        raise ParseError("not nvidia-smi -q output", source=source)
    return result


# --------------------------------------------------------------------------- CSV queries


def _split_csv(line: str) -> list[str]:
    # nvidia-smi never quotes; it joins fields with ', '
    return [c.strip() for c in line.split(",")]


def _header_name(cell: str) -> str:
    return re.sub(r"\s*\[[^\]]*\]\s*$", "", cell.strip()).strip().lower()


def _csv_rows(
    text: str, columns: Sequence[str] | None, looks_like_header: set[str], source: str
) -> tuple[list[str], list[tuple[int, list[str]]]]:
    lines = [(i, line) for i, line in enumerate(_lines(text), start=1) if line.strip()]
    header: list[str] | None = None
    rows: list[tuple[int, list[str]]] = []
    for i, line in lines:
        cells = _split_csv(line)
        names = [_header_name(c) for c in cells]
        if header is None and any(n in looks_like_header for n in names):
            header = names
            continue
        rows.append((i, cells))
    if header is None:
        header = [c.strip().lower() for c in columns] if columns else []
    return header, rows


_APP_COLUMNS = {
    "pid": "pid",
    "process_name": "name",
    "name": "name",
    "used_gpu_memory": "mem",
    "used_memory": "mem",
    "gpu_bus_id": "bus",
    "pci.bus_id": "bus",
    "gpu_uuid": "uuid",
    "gpu_name": "gpu_name",
    "gpu_serial": "serial",
}


def parse_compute_apps_csv(
    text: str | bytes, source: str = "<text>", columns: Sequence[str] | None = None
) -> list[GpuProcess]:
    """Parse ``nvidia-smi --query-compute-apps=... --format=csv[,noheader][,nounits]``.

    Columns come from the header; for ``noheader`` output pass the query's field
    names as ``columns``, or the common ``pid,process_name,used_gpu_memory[,gpu_bus_id,
    gpu_uuid]`` order is assumed (bus ids and UUIDs are recognised by their shape).
    """
    text = as_text(text)
    header, rows = _csv_rows(text, columns, set(_APP_COLUMNS), source)
    roles = [_APP_COLUMNS.get(h, "") for h in header]
    out: list[GpuProcess] = []
    for _, cells in rows:
        if len(cells) == 1 and "no running" in cells[0].lower():
            continue
        cur_roles = roles
        if not roles:
            cur_roles = _guess_app_roles(cells)
        elif len(cells) > len(roles) and "name" in roles:
            # a process name with commas: glue the extra cells back into it
            at = roles.index("name")
            extra = len(cells) - len(roles)
            cells = [*cells[:at], ", ".join(cells[at : at + extra + 1]), *cells[at + extra + 1 :]]
        proc = GpuProcess(source=source, type="compute")
        ok = False
        for role, raw in zip(cur_roles, cells, strict=False):
            reason = _unavailable_reason(raw)
            if role == "pid":
                proc.pid = _int(raw) if raw.strip().isdigit() else None
                ok = ok or proc.pid is not None
            elif role == "name":
                proc.name = raw or None
            elif role == "mem":
                if reason is not None:
                    proc.mark_unavailable("used_memory_mib", reason, raw)
                else:
                    m = re.match(r"(\d+(?:\.\d+)?)\s*(MiB|MB|GiB|GB)?$", raw.strip(), re.I)
                    proc.used_memory_mib = _mib(m.group(1), m.group(2)) if m else None
            elif role == "bus":
                proc.gpu_pci_bus_id = normalize_pci_bus_id(raw)
        if ok:
            out.append(proc)
    if not out and rows and not header:
        raise ParseError("not nvidia-smi --query-compute-apps CSV", source=source)
    return out


def _guess_app_roles(cells: list[str]) -> list[str]:
    roles: list[str] = []
    ints = 0
    for raw in cells:
        v = raw.strip()
        if _PCI_RE.fullmatch(v):
            roles.append("bus")
        elif v.startswith(("GPU-", "MIG-")):
            roles.append("uuid")
        elif re.fullmatch(r"\d+", v) and ints == 0:
            roles.append("pid")
            ints += 1
        elif re.fullmatch(r"\d+(?:\.\d+)?\s*(?:MiB|MB|GiB|GB)?", v, re.I) or (
            _unavailable_reason(v) is not None and "name" in roles
        ):
            roles.append("mem")
            ints += 1
        elif "name" not in roles:
            roles.append("name")
        else:
            roles.append("")
    return roles


_Q_GPU: dict[str, tuple[str, str, int]] = {
    # header name -> (GpuFacts field, converter, priority)
    "index": ("index", "int", 0),
    "name": ("name", "str", 0),
    "gpu_name": ("name", "str", 0),
    "uuid": ("uuid", "str", 0),
    "gpu_uuid": ("uuid", "str", 0),
    "serial": ("serial", "str", 0),
    "gpu_serial": ("serial", "str", 0),
    "pci.bus_id": ("pci_bus_id", "pci", 0),
    "gpu_bus_id": ("pci_bus_id", "pci", 0),
    "driver_version": ("driver_version", "str", 0),
    "vbios_version": ("vbios_version", "str", 0),
    "persistence_mode": ("persistence_mode", "bool", 0),
    "compute_mode": ("compute_mode", "compute", 0),
    "pstate": ("performance_state", "pstate", 0),
    "fan.speed": ("fan_speed_pct", "float", 0),
    "utilization.gpu": ("utilization_gpu_pct", "float", 0),
    "utilization.memory": ("utilization_memory_pct", "float", 0),
    "memory.total": ("memory_total_mib", "float", 0),
    "memory.used": ("memory_used_mib", "float", 0),
    "power.draw": ("power_draw_w", "float", 1),
    "power.draw.average": ("power_draw_w", "float", 2),
    "power.draw.instant": ("power_draw_w", "float", 0),
    "power.limit": ("power_limit_w", "float", 1),
    "enforced.power.limit": ("power_limit_w", "float", 2),
    "temperature.gpu": ("temperature_gpu_c", "float", 0),
    "temperature.memory": ("temperature_memory_c", "float", 0),
    "clocks.sm": ("clocks_sm_mhz", "float", 0),
    "clocks.current.sm": ("clocks_sm_mhz", "float", 0),
    "clocks.max.sm": ("clocks_sm_max_mhz", "float", 0),
    "clocks.max.sm_clock": ("clocks_sm_max_mhz", "float", 0),
    "pcie.link.gen.current": ("pcie_link_gen", "int", 1),
    "pcie.link.gen.gpucurrent": ("pcie_link_gen", "int", 0),
    "pcie.link.gen.max": ("pcie_link_gen_max", "int", 0),
    "pcie.link.width.current": ("pcie_link_width", "int", 0),
    "pcie.link.width.max": ("pcie_link_width_max", "int", 0),
    "ecc.mode.current": ("ecc_enabled", "bool", 0),
    "ecc.errors.corrected.volatile.total": ("ecc_volatile_corrected", "int", 0),
    "ecc.errors.uncorrected.volatile.total": ("ecc_volatile_uncorrected", "int", 0),
    "ecc.errors.corrected.aggregate.total": ("ecc_aggregate_corrected", "int", 0),
    "ecc.errors.uncorrected.aggregate.total": ("ecc_aggregate_uncorrected", "int", 0),
    "retired_pages.single_bit_ecc.count": ("retired_pages_sbe", "int", 0),
    "retired_pages.sbe": ("retired_pages_sbe", "int", 0),
    "retired_pages.double_bit.count": ("retired_pages_dbe", "int", 0),
    "retired_pages.dbe": ("retired_pages_dbe", "int", 0),
    "retired_pages.pending": ("retired_pages_pending", "bool", 0),
    "remapped_rows.correctable": ("remapped_rows_correctable", "int", 0),
    "remapped_rows.uncorrectable": ("remapped_rows_uncorrectable", "int", 0),
    "remapped_rows.pending": ("remapped_rows_pending", "bool", 0),
    "remapped_rows.failure": ("remapped_rows_failure", "bool", 0),
    "mig.mode.current": ("mig_mode", "bool", 0),
}
_REASON_PREFIXES = ("clocks_event_reasons.", "clocks_throttle_reasons.")
_REASON_ALIASES = {"idle": "gpu_idle", "applications_clocks": "applications_clocks_setting"}


def parse_query_gpu_csv(
    text: str | bytes, source: str = "<text>", columns: Sequence[str] | None = None
) -> list[GpuFacts]:
    """Parse ``nvidia-smi --query-gpu=... --format=csv[,noheader][,nounits]`` by header names.

    Unknown columns are skipped. ``noheader`` output needs ``columns`` (the query's
    field names in order); without either, raises :class:`ParseError`.
    """
    text = as_text(text)
    known = set(_Q_GPU) | {"timestamp", "count", "power.management"}
    header, rows = _csv_rows(text, columns, known, source)
    if not header:
        if any(line.strip() for line in _lines(text)) and rows:
            raise ParseError(
                "no header in --query-gpu CSV; pass the query's columns", source=source
            )
        return []
    header = [_header_name(h) for h in header]
    out: list[GpuFacts] = []
    for _, cells in rows:
        if len(cells) < 2 and len(header) >= 2:
            continue
        gpu = GpuFacts(source=source, query_errors=0)
        s = _Setter(gpu)
        for name, raw in zip(header, cells, strict=False):
            s.count_error(raw)
            if name in _Q_GPU:
                fld, kind, prio = _Q_GPU[name]
                s.set(fld, raw, kind, prio)
                continue
            prefix = next((p for p in _REASON_PREFIXES if name.startswith(p)), None)
            if prefix is None:
                continue
            reason = name[len(prefix) :]
            reason = _REASON_ALIASES.get(reason, reason)
            if reason == "active":
                if _unavailable_reason(raw) is None:
                    try:
                        gpu.set_throttle_mask(int(raw.strip(), 16 if "x" in raw else 10))
                    except ValueError:
                        continue
                continue
            if reason in THROTTLE_REASONS:
                s.set(f"throttle_{reason}", raw, "bool", prio=1)
        out.append(gpu)
    return out
