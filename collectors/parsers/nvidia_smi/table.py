"""The default ``nvidia-smi`` table: the GPU rows and the process table."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from gpu_triage.collectors.parsers import ParseError
from gpu_triage.collectors.parsers.nvidia_smi.values import (
    _NO_GPU_RE,
    _bool,
    _lines,
    _lost_gpus,
    _number,
    _Setter,
    _unavailable_reason,
    as_text,
    normalize_pci_bus_id,
    process_value_failed,
)
from gpu_triage.model.facts import GpuFacts, GpuProcess, UnavailableReason

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


_BUS_CELL_RE = re.compile(r"^[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]\b")


def _gpu_row_with_bus(cells: list[str]) -> bool:
    m = _GPU_ROW1_RE.match(cells[0]) if cells else None
    return bool(
        m
        and len(cells) >= 2
        and re.search(r"[A-Za-z]", m.group(2))
        and _BUS_CELL_RE.match(cells[1].strip())
    )


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
    # A bracketed value ends the row in the memory column ("[Unknown Error]", "[N/A]"):
    # one token, however many words it has.
    end = re.search(r"\s(\[[^\[\]]{1,40}\])\s*$", cell)
    t = [*cell[: end.start()].split(), end.group(1)] if end else cell.split()
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
        if not process_value_failed(proc, "name", name):
            proc.name = name or None
        if mem and process_value_failed(proc, "used_memory_mib", mem):
            return proc
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
            if not _gpu_row_with_bus(cells):
                header_rows.append(cells)
                continue
            # A shortened table (a paste, a guide) without the ==== line under its header:
            # a GPU's first row (index, name ... bus id) ends the header all the same.
            in_header = False
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
        owner = by_index.get(proc.gpu_index) if proc.gpu_index is not None else None
        if owner is not None:
            proc.gpu_pci_bus_id = owner.pci_bus_id
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
