"""fio results (human summary of fio 2.x/3.x, or ``--output-format=json``) -> bandwidth, IOPS.

Returns ``{"read_mib_s", "read_iops", "write_mib_s", "write_iops", "read_jobs"}`` with
only the keys found; ``read_jobs`` is how many jobs (concurrent clients) produced the read
figure, from the job headers (``(groupid=0, jobs=8)``, one header per job without
group_reporting) or the JSON jobs. Jobs of one group (``groupid``) add up; across groups
(stonewalled phases such as seq-read then rand-read) the best group is kept, since the
phases ran one after another. fio 3 prints IEC units first (``BW=48.1MiB/s (50.4MB/s)``,
``MB`` then means 10^6); fio 2 printed ``bw=104857KB/s`` meaning KiB.
"""

from __future__ import annotations

import json
import re
from typing import Any

from gpu_triage.model.facts import HostFacts

_JOB_HEAD = re.compile(r"\(groupid=(\d{1,9})(?:,\s*jobs=(\d{1,6}))?")
_JOB_LINE = re.compile(r"^\s*(read|write)\s*:\s*(.*)$")
_GROUP_HEAD = re.compile(r"Run status group (\d{1,9})")
_GROUP_LINE = re.compile(r"^\s*(READ|WRITE)\s*:\s*(.*)$")
_IOPS = re.compile(r"\biops=\s*([\d.]+)\s*([kKmM]?)", re.IGNORECASE)
_BW = re.compile(r"\b(?:bw|aggrb)=\s*([\d.]+)\s*([KMGTkmgt]?)(i?)B/s", re.IGNORECASE)
_POWER = {"": 0, "k": 1, "m": 2, "g": 3, "t": 4}


def _count(num: str, suffix: str) -> float:
    return float(num) * 1000.0 ** _POWER[suffix.lower()]


def _mib_s(num: str, prefix: str, iec: str, legacy: bool) -> float:
    """A bandwidth as MiB/s; fio 2 ('legacy') used KB/MB for powers of 1024."""
    power = _POWER[prefix.lower()]
    base = 1024.0 if (iec or legacy) else 1000.0
    return float(num) * base**power / 1024.0**2


def _best(per_group: dict[int, dict[str, float]]) -> dict[str, float]:
    out: dict[str, float] = {}
    for values in per_group.values():
        for key, val in values.items():
            out[key] = max(out.get(key, 0.0), val)
    return {k: round(v, 3) for k, v in out.items()}


def _with_jobs(
    best: dict[str, float], per_group: dict[int, dict[str, float]], clients: dict[int, int]
) -> dict[str, float]:
    """Add ``read_jobs``: the job count of the group that gave the best read figure."""
    reads = [(v["read_mib_s"], g) for g, v in per_group.items() if v.get("read_mib_s")]
    if reads:
        group = max(reads)[1]
        if clients.get(group):
            best["read_jobs"] = float(clients[group])
    return best


def _parse_text(text: str) -> dict[str, float]:
    jobs: dict[int, dict[str, float]] = {}  # summed over the group's job lines
    groups: dict[int, dict[str, float]] = {}  # from "Run status group" lines
    clients: dict[int, int] = {}  # group -> jobs its headers announce
    group = 0
    in_status = False
    for raw in text.splitlines():
        if m := _JOB_HEAD.search(raw):
            group, in_status = int(m.group(1)), False
            if m.group(2) is not None:
                clients[group] = clients.get(group, 0) + int(m.group(2))
            continue
        if m := _GROUP_HEAD.search(raw):
            group, in_status = int(m.group(1)), True
            continue
        line = _GROUP_LINE.match(raw) if in_status else _JOB_LINE.match(raw)
        if not line:
            continue
        rw, rest = line.group(1).lower(), line.group(2)
        legacy = "iops=" in rest or "aggrb=" in rest  # fio 2 spelling (case matters)
        target = (groups if in_status else jobs).setdefault(group, {})
        if b := _BW.search(rest):
            key = f"{rw}_mib_s"
            target[key] = target.get(key, 0.0) + _mib_s(b[1], b[2], b[3], legacy)
        if not in_status and (i := _IOPS.search(rest)):
            key = f"{rw}_iops"
            target[key] = target.get(key, 0.0) + _count(i[1], i[2])
    # Group totals win over per-job sums for bandwidth; IOPS only exist per job.
    for gid, values in groups.items():
        jobs.setdefault(gid, {}).update(values)
    return _with_jobs(_best(jobs), jobs, clients)


def _parse_json(doc: Any) -> dict[str, float]:
    per_group: dict[int, dict[str, float]] = {}
    clients: dict[int, int] = {}
    glob = doc.get("global options")
    grouped = isinstance(glob, dict) and "group_reporting" in glob
    jobs = doc.get("jobs")
    for job in jobs if isinstance(jobs, list) else []:
        if not isinstance(job, dict):
            continue
        gid = job.get("groupid", 0)
        gid = gid if isinstance(gid, int) else 0
        target = per_group.setdefault(gid, {})
        clients[gid] = clients.get(gid, 0) + _json_clients(job, glob, grouped)
        for rw in ("read", "write"):
            part = job.get(rw)
            if not isinstance(part, dict):
                continue
            if isinstance(part.get("bw_bytes"), int | float):
                mib = part["bw_bytes"] / 1024.0**2
            elif isinstance(part.get("bw"), int | float):
                mib = part["bw"] / 1024.0  # KiB/s in fio's JSON
            else:
                continue
            target[f"{rw}_mib_s"] = target.get(f"{rw}_mib_s", 0.0) + mib
            if isinstance(part.get("iops"), int | float):
                target[f"{rw}_iops"] = target.get(f"{rw}_iops", 0.0) + float(part["iops"])
    # Idle directions (a read-only job has write bw 0) are not measurements.
    best = {k: v for k, v in _best(per_group).items() if v > 0}
    return _with_jobs(best, per_group, clients)


def _json_clients(job: dict[str, Any], glob: Any, grouped: bool) -> int:
    """Jobs one JSON entry stands for: numjobs when group_reporting folded them, else 1."""
    opts = job.get("job options")
    opts = opts if isinstance(opts, dict) else {}
    if not (grouped or "group_reporting" in opts):
        return 1
    numjobs = opts.get("numjobs", glob.get("numjobs") if isinstance(glob, dict) else None)
    try:
        return max(1, int(str(numjobs))) if numjobs is not None else 1
    except ValueError:
        return 1


def parse_fio(text: str) -> dict[str, float]:
    """Read/write MiB/s and IOPS from fio output; ``{}`` when there is none."""
    start = re.search(r"^[ \t]*\{", text, re.MULTILINE)  # json may follow fio's warnings
    if start is not None and '"jobs"' in text:
        try:
            doc, _ = json.JSONDecoder().raw_decode(text[start.start() :].lstrip())
        except ValueError:
            doc = None
        if isinstance(doc, dict):
            return _parse_json(doc)
    return _parse_text(text)


def fill_host_from_fio(result: dict[str, float], host: HostFacts | None = None) -> HostFacts:
    """Copy the read bandwidth and IOPS into HostFacts."""
    host = host if host is not None else HostFacts(source="fio")
    if "read_mib_s" in result:
        host.storage_read_mib_s = result["read_mib_s"]
    if "read_iops" in result:
        host.storage_read_iops = result["read_iops"]
    if "read_jobs" in result:
        host.storage_read_jobs = int(result["read_jobs"])
    return host
