"""The CSV queries: ``--query-gpu=... --format=csv`` and ``--query-compute-apps=...``."""

from __future__ import annotations

import re
from collections.abc import Sequence

from gpu_triage.collectors.parsers import ParseError
from gpu_triage.collectors.parsers.nvidia_smi.table import _mib
from gpu_triage.collectors.parsers.nvidia_smi.values import (
    _PCI_RE,
    _int,
    _lines,
    _Setter,
    _unavailable_reason,
    as_text,
    normalize_pci_bus_id,
    process_value_failed,
)
from gpu_triage.model.facts import THROTTLE_REASONS, GpuFacts, GpuProcess

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
                if not process_value_failed(proc, "name", raw):
                    proc.name = raw or None
            elif role == "mem":
                if process_value_failed(proc, "used_memory_mib", raw):
                    pass
                elif reason is not None:
                    proc.mark_unavailable("used_memory_mib", reason, raw)
                else:
                    m = re.match(r"(\d+(?:\.\d+)?)\s*(MiB|MB|GiB|GB)?$", raw.strip(), re.I)
                    proc.used_memory_mib = _mib(m.group(1), m.group(2)) if m else None
            elif role == "bus":
                proc.gpu_pci_bus_id = normalize_pci_bus_id(raw)
        # a query without pid (process_name,used_memory) still lists processes
        ok = ok or ("pid" not in cur_roles and bool(proc.name or proc.used_memory_mib is not None))
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
    "power.default_limit": ("power_limit_default_w", "float", 0),
    "clocks.applications.graphics": ("clocks_applications_graphics_mhz", "float", 0),
    "clocks.applications.gr": ("clocks_applications_graphics_mhz", "float", 0),
    "clocks.default_applications.graphics": (
        "clocks_default_applications_graphics_mhz",
        "float",
        0,
    ),
    "clocks.default_applications.gr": ("clocks_default_applications_graphics_mhz", "float", 0),
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
