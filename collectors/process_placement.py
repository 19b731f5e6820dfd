"""Where the processes feeding the GPUs may run: CPU and memory NUMA placement and the CPU
quota of their cgroup (guide/T5, guide/FD4: "pin CPU threads and data loaders to the NUMA
node local to the GPUs they feed"; "confirm cgroup limits").

For each process NVML lists, ``/proc/PID/status`` gives ``Cpus_allowed_list`` and
``Mems_allowed_list``; ``/sys/devices/system/node/node*/cpulist`` says which CPUs belong
to which NUMA node; ``/proc/PID/cgroup`` names the process's cgroup (v2), whose
``cpu.max`` and ``cpu.stat`` give its CPU quota and how often it was throttled.

Runs as root over paths a workload controls in part (cgroup names come from pod and job
names): every read is bounded, a cgroup path is taken apart and rebuilt under
/sys/fs/cgroup from plain names only (no "..", no absolute jumps), and a process that
exits while being read (its /proc directory vanishes) leaves its fields unavailable with
the reason, never an error. Costs are linear in processes times NUMA nodes.
"""

from __future__ import annotations

import errno
from pathlib import Path

from gpu_triage.model.facts import Facts, GpuProcess, UnavailableReason

MAX_STATUS_BYTES = 64 << 10
MAX_SMALL_BYTES = 4 << 10
MAX_CPUS = 1 << 16
MAX_NODES = 1024
MAX_PROCESSES = 4096
MAX_CGROUP_DEPTH = 64

PLACEMENT_FIELDS = (
    "cpus_allowed",
    "mems_allowed",
    "cpus_pinned",
    "gpu_numa_cpus_pct",
    "mems_on_gpu_numa_node",
)
CGROUP_FIELDS = ("cgroup", "cpu_quota_cores", "cpu_periods", "cpu_throttled_pct")


class _Unreadable(Exception):
    def __init__(self, reason: UnavailableReason, detail: str) -> None:
        super().__init__(detail)
        self.reason, self.detail = reason, detail


def _read(path: Path, limit: int) -> str:
    """A small kernel file, bounded; a missing one (the process exited) is unreadable."""
    try:
        with path.open("rb") as fh:
            return fh.read(limit).decode("utf-8", "replace")
    except FileNotFoundError:
        raise _Unreadable(UnavailableReason.NOT_COLLECTED, f"{path}: gone (exited)") from None
    except PermissionError:
        raise _Unreadable(UnavailableReason.NO_PERMISSION, str(path)) from None
    except OSError as exc:
        if exc.errno == errno.ESRCH:
            raise _Unreadable(UnavailableReason.NOT_COLLECTED, f"{path}: exited") from None
        raise _Unreadable(UnavailableReason.ERROR, f"{path}: {exc.strerror or exc}") from None


def parse_cpu_list(text: str) -> frozenset[int] | None:
    """A kernel CPU list ("0-3,8,10-11"); None when it is not one (or absurdly large)."""
    out: set[int] = set()
    text = text.strip()
    if not text:
        return frozenset()
    for part in text.split(","):
        lo, sep, hi = part.strip().partition("-")
        if not lo.isdigit() or (sep and not hi.isdigit()):
            return None
        a, b = int(lo), int(hi) if sep else int(lo)
        if b < a or b >= MAX_CPUS or len(out) + (b - a + 1) > MAX_CPUS:
            return None
        out.update(range(a, b + 1))
    return frozenset(out)


def status_lists(text: str) -> dict[str, str]:
    """``Cpus_allowed_list`` and ``Mems_allowed_list`` of a /proc/PID/status text."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key in ("Cpus_allowed_list", "Mems_allowed_list"):
            out[key] = value.strip()
    return out


def numa_cpus(root: Path) -> dict[int, frozenset[int]]:
    """NUMA node -> its CPUs, from sysfs (empty when the node has no NUMA information)."""
    base = root / "sys" / "devices" / "system" / "node"
    out: dict[int, frozenset[int]] = {}
    try:
        entries = sorted(base.iterdir())[: MAX_NODES * 4]
    except OSError:
        return out
    for entry in entries:
        name = entry.name
        if not name.startswith("node") or not name[4:].isdigit() or len(out) >= MAX_NODES:
            continue
        try:
            cpus = parse_cpu_list(_read(entry / "cpulist", MAX_SMALL_BYTES))
        except _Unreadable:
            continue
        if cpus is not None:
            out[int(name[4:])] = cpus
    return out


def cgroup_dir(root: Path, cgroup_text: str) -> Path | None:
    """The cgroup v2 directory of a process (the ``0::/path`` line), rebuilt from plain
    names under /sys/fs/cgroup; None when there is no v2 entry or the path is not plain."""
    for line in cgroup_text.splitlines():
        hid, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        if hid != "0" or controllers:
            continue
        parts = [p for p in path.split("/") if p]
        if len(parts) > MAX_CGROUP_DEPTH or any(
            p in (".", "..") or "\x00" in p or len(p) > 255 for p in parts
        ):
            return None
        return root.joinpath("sys", "fs", "cgroup", *parts)
    return None


def _cpu_max(text: str) -> float | None:
    """Cores a ``cpu.max`` ("quota period" or "max period") allows; None: no limit."""
    quota, _, period = text.strip().partition(" ")
    if quota == "max" or not quota.isdigit() or not period.strip().isdigit():
        return None
    p = int(period)
    return round(int(quota) / p, 3) if p else None


def _cpu_stat(text: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if value.strip().isdigit():
            out[key] = int(value)
    return out


def place(
    proc: GpuProcess, root: Path, gpu_node: int | None, nodes: dict[int, frozenset[int]]
) -> None:
    """Fill one process's placement and cgroup facts (or say why they are missing)."""
    if proc.pid is None:
        return
    pdir = root / "proc" / str(proc.pid)
    try:
        lists = status_lists(_read(pdir / "status", MAX_STATUS_BYTES))
    except _Unreadable as why:
        for f in (*PLACEMENT_FIELDS, *CGROUP_FIELDS):
            proc.mark_unavailable(f, why.reason, why.detail)
        return
    _placement(proc, lists, gpu_node, nodes)
    _cgroup(proc, root, pdir)


def _placement(
    proc: GpuProcess, lists: dict[str, str], gpu_node: int | None, nodes: dict[int, frozenset[int]]
) -> None:
    cpus_text, mems_text = lists.get("Cpus_allowed_list"), lists.get("Mems_allowed_list")
    cpus = parse_cpu_list(cpus_text) if cpus_text is not None else None
    mems = parse_cpu_list(mems_text) if mems_text is not None else None
    if cpus is None:
        for f in ("cpus_allowed", "cpus_pinned", "gpu_numa_cpus_pct"):
            proc.mark_unavailable(f, UnavailableReason.ERROR, "no Cpus_allowed_list in status")
    else:
        proc.cpus_allowed = (cpus_text or "")[:200]
    if mems is None:
        for f in ("mems_allowed", "mems_on_gpu_numa_node"):
            proc.mark_unavailable(f, UnavailableReason.ERROR, "no Mems_allowed_list in status")
    else:
        proc.mems_allowed = (mems_text or "")[:200]
    everything = frozenset().union(*nodes.values()) if nodes else frozenset()
    if cpus is not None:
        if everything:
            proc.cpus_pinned = not everything <= cpus
        else:
            proc.mark_unavailable(
                "cpus_pinned", UnavailableReason.NOT_SUPPORTED, "no NUMA nodes in sysfs"
            )
    local = nodes.get(gpu_node) if gpu_node is not None and gpu_node >= 0 else None
    if local is None:
        detail = (
            "the GPU has no NUMA node"
            if gpu_node is None or gpu_node < 0
            else (f"NUMA node {gpu_node} is not in sysfs")
        )
        for f in ("gpu_numa_cpus_pct", "mems_on_gpu_numa_node"):
            proc.mark_unavailable(f, UnavailableReason.NOT_SUPPORTED, detail)
        return
    if cpus:
        proc.gpu_numa_cpus_pct = round(100.0 * len(cpus & local) / len(cpus), 1)
    if mems is not None and gpu_node is not None:
        proc.mems_on_gpu_numa_node = gpu_node in mems


def _cgroup(proc: GpuProcess, root: Path, pdir: Path) -> None:
    try:
        where = cgroup_dir(root, _read(pdir / "cgroup", MAX_STATUS_BYTES))
    except _Unreadable as why:
        for f in CGROUP_FIELDS:
            proc.mark_unavailable(f, why.reason, why.detail)
        return
    if where is None:
        for f in CGROUP_FIELDS:
            proc.mark_unavailable(f, UnavailableReason.NOT_SUPPORTED, "no cgroup v2 entry")
        return
    base = root / "sys" / "fs" / "cgroup"
    proc.cgroup = ("/" + str(where.relative_to(base)).replace("\\", "/"))[:300]
    try:
        limit = _read(where / "cpu.max", MAX_SMALL_BYTES)
        proc.cpu_quota_cores = _cpu_max(limit)
        if proc.cpu_quota_cores is None:
            proc.mark_unavailable(
                "cpu_quota_cores", UnavailableReason.NOT_SUPPORTED, "no CPU quota (max)"
            )
        stat = _cpu_stat(_read(where / "cpu.stat", MAX_SMALL_BYTES))
    except _Unreadable as why:
        for f in ("cpu_quota_cores", "cpu_periods", "cpu_throttled_pct"):
            if f not in proc.unavailable:
                proc.mark_unavailable(f, why.reason, why.detail)
        return
    periods, throttled = stat.get("nr_periods"), stat.get("nr_throttled")
    if periods is None or throttled is None:
        for f in ("cpu_periods", "cpu_throttled_pct"):
            proc.mark_unavailable(f, UnavailableReason.NOT_SUPPORTED, "cpu.stat has no nr_periods")
        return
    proc.cpu_periods = periods
    proc.cpu_throttled_pct = round(100.0 * throttled / periods, 1) if periods else 0.0


def place_processes(facts: Facts, root: Path = Path("/")) -> None:
    """Placement and cgroup facts for every GPU process, against its GPU's NUMA node."""
    if not facts.processes:
        return
    nodes = numa_cpus(root)
    gpu_node = {g.pci_bus_id: g.numa_node for g in facts.gpus if g.pci_bus_id}
    for proc in facts.processes[:MAX_PROCESSES]:
        place(proc, root, gpu_node.get(proc.gpu_pci_bus_id or ""), nodes)
