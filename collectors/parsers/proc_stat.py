"""``/proc/stat`` -> HostFacts: CPU time shares, boot time, CPU count.

The ``cpu`` line counts jiffies since boot in the columns user nice system idle
iowait irq softirq steal [guest guest_nice] (guest time is already inside user and
nice). One reading gives shares since boot; two readings pasted one after the other
(``cat /proc/stat; sleep 5; cat /proc/stat``) give the shares over the interval,
as the live collector measures them. ``btime`` is the boot time (epoch seconds).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

from gpu_triage.collectors.parsers import ParseError
from gpu_triage.model.facts import HostFacts

_CPU = re.compile(r"^\s*cpu(\d{0,5})\s+(\d{1,20}(?:\s+\d{1,20}){3,9})\s*$")
_BTIME = re.compile(r"^\s*btime\s+(\d{1,12})\s*$")
SATURATED_BUSY_PCT = 90.0


def _readings(text: str) -> tuple[list[dict[str, list[int]]], int | None]:
    """Each reading's 'cpu' and 'cpuN' counters (a new 'cpu' line opens a reading), btime."""
    readings: list[dict[str, list[int]]] = []
    btime: int | None = None
    for raw in text.splitlines():
        m = _CPU.match(raw)
        if m:
            values = [int(v) for v in m.group(2).split()]
            values = (values + [0] * 8)[:8]  # guest/guest_nice are inside user/nice
            if m.group(1) == "" or not readings:
                readings.append({})
            readings[-1][f"cpu{m.group(1)}"] = values
            continue
        b = _BTIME.match(raw)
        if b:
            btime = int(b.group(1))
    return readings, btime


def _pct(part: int, total: int) -> float:
    return round(100.0 * part / total, 2) if total else 0.0


def parse_proc_stat(text: str, source: str = "/proc/stat") -> HostFacts:
    """Raises ParseError when there is neither a ``cpu`` line nor ``btime``."""
    readings, btime = _readings(text)
    if not readings and btime is None:
        raise ParseError("no 'cpu' or 'btime' line of /proc/stat", source=source)
    what = "since boot" if len(readings) < 2 else "between the first and last readings"
    host = HostFacts(source=f"{source} ({what})")
    if btime is not None:
        host.boot_time = datetime.fromtimestamp(btime, UTC)
    if not readings:
        return host
    now = readings[-1]
    before = readings[0] if len(readings) >= 2 else {}
    deltas = {
        k: [max(0, a - b) for a, b in zip(v, before.get(k, [0] * 8), strict=True)]
        for k, v in now.items()
    }
    cores = [k for k in now if k != "cpu"]
    host.cpu_count = len(cores) or None
    total = deltas.get("cpu")
    if total and sum(total) > 0:
        user, nice, system, idle, iowait, irq, softirq, steal = total
        all_ = sum(total)
        host.cpu_user_pct = _pct(user + nice, all_)
        host.cpu_system_pct = _pct(system + irq + softirq, all_)
        host.cpu_idle_pct = _pct(idle, all_)
        host.cpu_iowait_pct = _pct(iowait, all_)
        host.cpu_steal_pct = _pct(steal, all_)
    busy = {
        int(k[3:]): round(100.0 - _pct(d[3] + d[4], sum(d)), 2)
        for k in cores
        if sum(d := deltas[k]) > 0
    }
    if busy:
        top = max(busy, key=lambda c: busy[c])
        host.busiest_core, host.busiest_core_busy_pct = top, busy[top]
        host.cores_saturated = sum(1 for v in busy.values() if v > SATURATED_BUSY_PCT)
    return host
