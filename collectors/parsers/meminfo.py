"""/proc/meminfo -> HostFacts memory, swap and hugepage fields.

``MemAvailable`` appeared in Linux 3.14; older kernels (and some embedded ones) lack
it. It is then reported unavailable rather than estimated, because MemFree + Buffers
+ Cached overstates what can be reclaimed and would hide real memory pressure.
"""

from __future__ import annotations

import re

from gpu_triage.collectors.parsers import ParseError
from gpu_triage.model.facts import HostFacts, UnavailableReason

_LINE = re.compile(r"^\s*([A-Za-z0-9_()]+):\s*(\d{1,20})(?:\s*([kKmMgG]i?B))?\s*$")
_TO_KIB = {"k": 1, "m": 1024, "g": 1024 * 1024}


def parse_meminfo_kib(text: str, source: str = "/proc/meminfo") -> dict[str, int]:
    """Every ``Key: value [kB]`` line; sizes in KiB, counts (HugePages_*) as printed."""
    values: dict[str, int] = {}
    for raw in text.splitlines():
        m = _LINE.match(raw)
        if not m:
            continue  # wrapped or decorated paste lines
        key, num, unit = m.group(1), int(m.group(2)), m.group(3)
        values[key] = num * _TO_KIB[unit[0].lower()] if unit else num
    if not values:
        raise ParseError("no 'Key: value' lines of /proc/meminfo", source=source)
    return values


def parse_meminfo(text: str, source: str = "/proc/meminfo") -> HostFacts:
    """Memory facts from /proc/meminfo text; a key it lacks leaves its field unavailable."""
    kib = parse_meminfo_kib(text, source)
    host = HostFacts(source=source)
    fill_host_from_meminfo(host, kib)
    return host


def fill_host_from_meminfo(host: HostFacts, kib: dict[str, int]) -> None:
    """Set the memory fields of ``host`` from parsed meminfo values."""

    def mib(key: str) -> float | None:
        return round(kib[key] / 1024.0, 2) if key in kib else None

    def missing(field: str, key: str) -> None:
        host.mark_unavailable(field, UnavailableReason.NOT_SUPPORTED, f"{key} absent from meminfo")

    if "MemTotal" in kib:
        host.mem_total_mib = mib("MemTotal")
    else:
        missing("mem_total_mib", "MemTotal")
    if "MemAvailable" in kib:
        host.mem_available_mib = mib("MemAvailable")
    else:
        host.mark_unavailable(
            "mem_available_mib",
            UnavailableReason.NOT_SUPPORTED,
            "MemAvailable absent from meminfo (kernel older than 3.14)",
        )
    if "SwapTotal" in kib:
        host.swap_total_mib = mib("SwapTotal")
        if "SwapFree" in kib:
            host.swap_used_mib = round(max(0, kib["SwapTotal"] - kib["SwapFree"]) / 1024.0, 2)
        else:
            missing("swap_used_mib", "SwapFree")
    else:
        missing("swap_total_mib", "SwapTotal")
        missing("swap_used_mib", "SwapTotal")
    # Hugepage lines are missing on kernels built without CONFIG_HUGETLBFS.
    for field, key in (
        ("hugepages_total", "HugePages_Total"),
        ("hugepages_free", "HugePages_Free"),
        ("hugepage_size_kib", "Hugepagesize"),
    ):
        if key in kib:
            setattr(host, field, kib[key])
        else:
            missing(field, key)
