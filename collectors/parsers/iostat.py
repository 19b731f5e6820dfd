"""sysstat ``iostat -x`` / ``-xz`` / ``-xk`` / ``-xm`` (any interval, -t, -h, -o JSON) -> disks.

Columns come from each ``Device`` header, so the old layout (``rrqm/s wrqm/s r/s w/s
rkB/s wkB/s avgrq-sz avgqu-sz await r_await w_await svctm %util``), the sysstat 11/12
one and the newest (``r/s rkB/s rrqm/s %rrqm r_await rareq-sz ... f_await aqu-sz
%util``) all parse. With an interval, iostat repeats the report and the first one
holds averages since boot, so the facts come from the last report. Its ``avg-cpu``
block gives iowait and steal.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from gpu_triage.collectors.parsers import ParseError
from gpu_triage.model.facts import DiskFacts, HostFacts, UnavailableReason

_NUMBER = re.compile(r"^-?\d+(?:[.,]\d+)?([BkKMGTP%])?$")
# -h prints sizes with a unit suffix; values are stored in the column's own unit (kB).
_HUMAN_KB = {
    "B": 1 / 1024,
    "k": 1.0,
    "K": 1.0,
    "M": 1024.0,
    "G": 1024.0**2,
    "T": 1024.0**3,
    "P": 1024.0**4,
}
# Throughput columns -> factor to MiB/s.
_READ_BW = {
    "rkB/s": 1 / 1024,
    "rMB/s": 1.0,
    "rsec/s": 512 / 1024**2,
    "kB_read/s": 1 / 1024,
    "MB_read/s": 1.0,
    "Blk_read/s": 512 / 1024**2,
}
_WRITE_BW = {
    "wkB/s": 1 / 1024,
    "wMB/s": 1.0,
    "wsec/s": 512 / 1024**2,
    "kB_wrtn/s": 1 / 1024,
    "MB_wrtn/s": 1.0,
    "Blk_wrtn/s": 512 / 1024**2,
}


@dataclass
class IostatRow:
    """One device row; ``values`` keyed by column name exactly as the header prints it."""

    line: int
    device: str
    values: dict[str, float]
    report: int  # 0-based index of the report (block) it belongs to


@dataclass
class IostatResult:
    rows: list[IostatRow] = field(default_factory=list)
    avg_cpu: list[dict[str, float]] = field(default_factory=list)  # one per report
    reports: int = 0

    @property
    def last_rows(self) -> list[IostatRow]:
        """Rows of the last report (the first report averages since boot)."""
        if not self.rows:
            return []
        last = self.rows[-1].report
        return [r for r in self.rows if r.report == last]


def _value(token: str, column: str) -> float | None:
    m = _NUMBER.match(token)
    if not m:
        return None
    unit = m.group(1)
    num = float(token.rstrip("BkKMGTP%").replace(",", "."))
    if unit and unit != "%":
        if "kB" not in column and "MB" not in column and "-sz" not in column:
            return None  # a size suffix on a count column: not iostat as we know it
        num *= _HUMAN_KB[unit] / (1024.0 if "MB" in column else 1.0)
    return num


def _is_device_header(tokens: list[str]) -> bool:
    return any(t in ("Device", "Device:") for t in tokens) and len(tokens) > 2


def parse_iostat(text: str, source: str = "iostat") -> IostatResult:
    """Every report of iostat output; raises ParseError when there is no Device header."""
    stripped = text.lstrip()
    if stripped.startswith("{"):
        return _parse_json(stripped, source)
    result = IostatResult()
    columns: list[str] | None = None
    dev_idx = 0
    pending_name: str | None = None  # -h / long names print the device on a line of its own
    cpu_columns: list[str] | None = None
    for lineno, raw in enumerate(text.splitlines(), start=1):
        tokens = raw.split()
        if not tokens:
            continue
        if tokens[0] == "avg-cpu:":
            cpu_columns = tokens[1:]
            continue
        if cpu_columns is not None:
            nums = [_value(t, "") for t in tokens]
            if len(nums) == len(cpu_columns) and all(n is not None for n in nums):
                result.avg_cpu.append(
                    {c: n for c, n in zip(cpu_columns, nums, strict=True) if n is not None}
                )
            cpu_columns = None
            continue
        if _is_device_header(tokens):
            dev_idx = next(i for i, t in enumerate(tokens) if t in ("Device", "Device:"))
            columns = tokens
            result.reports += 1
            pending_name = None
            continue
        if columns is None:
            continue
        if len(tokens) == 1 and _value(tokens[0], "") is None:
            pending_name = tokens[0]
            continue
        if pending_name is not None and len(tokens) == len(columns) - 1:
            tokens = [*tokens[:dev_idx], pending_name, *tokens[dev_idx:]]
        pending_name = None
        if len(tokens) != len(columns):
            continue  # wrapped or collapsed row
        device = tokens[dev_idx]
        values: dict[str, float] = {}
        for col, tok in zip(columns, tokens, strict=True):
            if col in ("Device", "Device:"):
                continue
            num = _value(tok, col)
            if num is None:
                values = {}
                break
            values[col] = num
        if values:
            result.rows.append(IostatRow(lineno, device, values, result.reports - 1))
    if result.reports == 0 and not result.avg_cpu:
        raise ParseError("no iostat 'Device' header", source=source)
    return result


def _parse_json(text: str, source: str) -> IostatResult:
    try:
        stats = json.loads(text)["sysstat"]["hosts"][0]["statistics"]
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        raise ParseError(f"not iostat -o JSON output: {exc}", source=source) from exc
    result = IostatResult()
    for report, stat in enumerate(stats):
        result.reports += 1
        cpu = stat.get("avg-cpu")
        if isinstance(cpu, dict):
            result.avg_cpu.append(
                {f"%{k}": float(v) for k, v in cpu.items() if isinstance(v, int | float)}
            )
        for disk in stat.get("disk") or []:
            values = {k: float(v) for k, v in disk.items() if isinstance(v, int | float)}
            # JSON names util "util" where the text header prints "%util".
            for key in ("util", "rrqm", "wrqm", "drqm"):
                if key in values:
                    values[f"%{key}"] = values.pop(key)
            result.rows.append(IostatRow(0, str(disk.get("disk_device", "")), values, report))
    return result


def disk_facts(row: IostatRow, source: str = "iostat") -> DiskFacts:
    """A DiskFacts from one iostat row (old iostat has one ``await`` for reads and writes)."""
    v = row.values
    disk = DiskFacts(name=row.device, source=source)

    def first(*names: str) -> float | None:
        return next((v[n] for n in names if n in v), None)

    for attr, table in (("read_mib_s", _READ_BW), ("write_mib_s", _WRITE_BW)):
        col = next((c for c in table if c in v), None)
        if col is not None:
            setattr(disk, attr, round(v[col] * table[col], 3))
    disk.read_iops = first("r/s")
    disk.read_request_kib = _read_request_kib(v, disk.read_mib_s, disk.read_iops)
    disk.write_iops = first("w/s")
    disk.read_await_ms = first("r_await", "await")
    disk.write_await_ms = first("w_await", "await")
    disk.util_pct = first("%util")
    for attr in (
        "read_iops",
        "write_iops",
        "read_await_ms",
        "write_await_ms",
        "util_pct",
        "read_request_kib",
    ):
        if getattr(disk, attr) is None:
            disk.mark_unavailable(attr, UnavailableReason.NOT_SUPPORTED, "column not printed")
    disk.mark_unavailable("rotational", UnavailableReason.NOT_SUPPORTED, "iostat does not say")
    return disk


def _read_request_kib(
    v: dict[str, float], read_mib_s: float | None, read_iops: float | None
) -> float | None:
    """Average read request size: the rareq-sz column (sysstat 12, kB) when printed, else
    read throughput over reads per second (older layouts; avgrq-sz mixes in the writes)."""
    if read_iops == 0:
        return None  # no reads in the interval: iostat prints 0.00, which is no size at all
    if "rareq-sz" in v:
        return round(v["rareq-sz"], 2)
    if read_mib_s is not None and read_iops:
        return round(read_mib_s * 1024 / read_iops, 2)
    return None


def parse_iostat_x(text: str, source: str = "iostat") -> list[DiskFacts]:
    """Disk facts from the last report of ``iostat -x`` output."""
    return [disk_facts(r, source) for r in parse_iostat(text, source).last_rows]


def fill_host_from_iostat(result: IostatResult, host: HostFacts | None = None) -> HostFacts:
    """CPU iowait/steal (and user/system/idle) from the last avg-cpu block."""
    host = host if host is not None else HostFacts(source="iostat")
    if not result.avg_cpu:
        return host
    cpu = result.avg_cpu[-1]
    if "%user" in cpu:
        host.cpu_user_pct = round(cpu["%user"] + cpu.get("%nice", 0.0), 2)
    host.cpu_system_pct = cpu.get("%system", host.cpu_system_pct)
    host.cpu_iowait_pct = cpu.get("%iowait", host.cpu_iowait_pct)
    host.cpu_steal_pct = cpu.get("%steal", host.cpu_steal_pct)
    host.cpu_idle_pct = cpu.get("%idle", host.cpu_idle_pct)
    return host


def parse_iostat_cpu(text: str, source: str = "iostat") -> HostFacts:
    """HostFacts CPU fields from the last ``avg-cpu`` block of iostat output."""
    return fill_host_from_iostat(parse_iostat(text, source), HostFacts(source=source))
