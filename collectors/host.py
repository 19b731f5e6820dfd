"""The node itself, from /proc and /sys: CPU, memory, pressure, disks, NICs, IB ports, PCIe.

Everything is read through ``ctx.path`` so tests can point ``ctx.root`` at a recorded
tree. Counters (/proc/stat, /proc/vmstat, /proc/diskstats) are read twice,
``ctx.window_s`` apart; the sleep between them is the only slow part. A file that is
missing or unreadable leaves just its fields unavailable, with the reason.
"""

from __future__ import annotations

import errno
import os
import re
import stat
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from gpu_triage.collectors import roce
from gpu_triage.collectors.base import CollectContext, CollectorUnavailable
from gpu_triage.collectors.observability import fill_observability
from gpu_triage.collectors.parsers import ParseError
from gpu_triage.collectors.parsers.ibstat import (
    normalize_phys_state,
    normalize_state,
    parse_rate_gbps,
)
from gpu_triage.collectors.parsers.meminfo import fill_host_from_meminfo, parse_meminfo_kib
from gpu_triage.collectors.parsers.mountstats import mount_facts, parse_mountstats
from gpu_triage.collectors.parsers.pressure import parse_pressure
from gpu_triage.collectors.pcie_paths import (
    CONFIG_SPACE,
    acs_from_config,
    apply_acs,
    mark_by_ancestry,
)
from gpu_triage.model.facts import (
    DiskFacts,
    DriverFacts,
    FactModel,
    Facts,
    HostFacts,
    IbPortFacts,
    MountFacts,
    NicFacts,
    PcieLinkFacts,
    Unavailable,
    UnavailableReason,
)

NAME = "host"
SATURATED_BUSY_PCT = 90.0
NVIDIA_VENDOR = "0x10de"
GPU_CLASSES = ("0x0300", "0x0302")  # VGA-compatible and 3D controllers
SECTOR_BYTES = 512  # /proc/diskstats counts 512-byte sectors whatever the device
_BDF = re.compile(r"^[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]$")
_NVML_LIB = re.compile(r"^libnvidia-ml\.so\.(\d{3,}\.\d{1,3}(?:\.\d{1,3})?)$")
NVML_LIBRARY_DIRS = (
    ("usr", "lib", "x86_64-linux-gnu"),
    ("usr", "lib64"),
    ("usr", "lib", "aarch64-linux-gnu"),
    ("usr", "lib"),
)
_NUMBER = re.compile(r"(\d+(?:\.\d+)?)")
# Partitions and pseudo devices, for when /sys/block cannot tell us what is a disk.
_NOT_A_DISK = re.compile(
    r"^(loop\d+|ram\d+|sr\d+|fd\d+|(?:[shv]d|xvd)[a-z]+\d+|nvme\d+n\d+p\d+|mmcblk\d+p\d+)$"
)
_CPU_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")
PEERMEM_MODULES = ("nvidia_peermem", "nv_peer_mem")
ACS_FACTS = ("acs_capable", "acs_req_redir", "acs_cmplt_redir", "acs_src_valid")
_IOMMU_WORD = re.compile(r"^(?:iommu|intel_iommu|amd_iommu|iommu\.passthrough|iommu\.strict)=")


def iommu_words(cmdline: str) -> list[str]:
    """The IOMMU words of a kernel command line, as given (bounded: a command line is
    4 KiB at most)."""
    return [w for w in cmdline[:4096].split() if _IOMMU_WORD.match(w)][:16]


def iommu_mode(words: list[str], units: bool, group_types: set[str]) -> str:
    """off, passthrough, translated or absent. The GPUs' IOMMU group type is the kernel's
    own answer (identity = passthrough, DMA / DMA-FQ = translated); without it the command
    line and the IOMMU units decide."""
    if group_types:
        if group_types <= {"identity"}:
            return "passthrough"
        return "translated"
    opts = {w.split("=", 1)[0]: w.split("=", 1)[1].lower() for w in words}
    if not units:
        return (
            "off"
            if "off" in (opts.get("iommu"), opts.get("intel_iommu"), opts.get("amd_iommu"))
            else "absent"
        )
    if opts.get("iommu") == "pt" or opts.get("iommu.passthrough") in ("1", "y", "on"):
        return "passthrough"
    return "translated"


def read_attributes(
    fact: FactModel,
    base: Path,
    default_reason: UnavailableReason,
    specs: Iterable[tuple[str, str, Callable[[str], Any]]],
) -> None:
    """Set each ``(field, file under base, parser)`` of a sysfs device on ``fact``; a file
    that is missing, unreadable or does not parse leaves the field unavailable with why
    (``default_reason`` when the file was read but its content is no value)."""
    for fld, rel, parse in specs:
        text, why = read_file(base / rel)
        value = parse(text.strip()) if text is not None else None
        if value is None:
            fact.mark_unavailable(
                fld,
                why.reason if why else default_reason,
                why.detail if why else f"{rel}: {(text or '').strip()!r}",
            )
        else:
            setattr(fact, fld, value)


MOUNTSTATS_MAX = 8 << 20  # a node with thousands of mounts; an NFS block is ~3 KiB


def read_capped(path: Path, max_bytes: int) -> tuple[str | None, Unavailable | None]:
    """A procfs file read without following it into anything but a regular file and
    without reading more than ``max_bytes`` (a planted FIFO, device or huge file under a
    host root neither blocks nor floods the collector). A cut text loses its last,
    partial line."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
    except OSError:
        return read_file(path)  # the same reasons, worded the same way
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None, Unavailable(
                reason=UnavailableReason.ERROR, detail=f"{path}: not a regular file"
            )
        chunks, size = [], 0
        while size <= max_bytes and (chunk := os.read(fd, min(1 << 20, max_bytes + 1 - size))):
            chunks.append(chunk)
            size += len(chunk)
    except OSError as exc:
        return None, Unavailable(reason=UnavailableReason.ERROR, detail=f"{path}: {exc}")
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) > max_bytes:
        data = data[:max_bytes].rpartition(b"\n")[0]
    return data.decode("utf-8", errors="replace"), None


SHORT_ATTRIBUTE_MAX = 256  # a version string, a date


def read_short(path: Path) -> tuple[str | None, Unavailable | None]:
    """A one-line sysfs attribute (a version, a date), read without following it into
    anything but a regular file and capped: its first line, stripped of blanks and
    control characters, or None with why."""
    text, why = read_capped(path, SHORT_ATTRIBUTE_MAX)
    if text is None:
        return None, why
    line = text.split("\n", 1)[0]
    line = "".join(ch for ch in line if ch.isprintable()).strip()
    return line or None, None


def nvidia_pci_devices(ctx: CollectContext) -> list[tuple[Path, str]]:
    """Every NVIDIA function on the PCI bus (sysfs) with its class (``0x030200``, lower
    case), sorted by address; OSError naming the directory when the bus cannot be listed."""
    base = ctx.path("sys", "bus", "pci", "devices")
    try:
        devices = sorted(base.iterdir())
    except OSError as exc:
        raise OSError(f"{base}: {exc.strerror}") from exc
    out = []
    for dev in devices:
        vendor, _ = read_file(dev / "vendor")
        if not vendor or vendor.strip().lower() != NVIDIA_VENDOR:
            continue
        klass, _ = read_file(dev / "class")
        if klass:
            out.append((dev, klass.strip().lower()))
    return out


def read_file(path: Path) -> tuple[str | None, Unavailable | None]:
    """A sysfs/procfs file's text, or why it could not be read."""
    try:
        return path.read_text(errors="replace"), None
    except FileNotFoundError:
        return None, Unavailable(reason=UnavailableReason.NOT_SUPPORTED, detail=f"no {path}")
    except PermissionError:
        return None, Unavailable(reason=UnavailableReason.NO_PERMISSION, detail=f"{path}")
    except OSError as exc:
        # EINVAL/EOPNOTSUPP: e.g. a down link's speed, PSI disabled at boot.
        if exc.errno in (errno.EINVAL, errno.EOPNOTSUPP, errno.ENODEV, errno.ENOTSUP):
            return None, Unavailable(
                reason=UnavailableReason.NOT_SUPPORTED, detail=f"{path}: {exc.strerror}"
            )
        return None, Unavailable(reason=UnavailableReason.ERROR, detail=f"{path}: {exc}")


def _mark(model: FactModel, fields: tuple[str, ...] | list[str], why: Unavailable) -> None:
    for name in fields:
        model.mark_unavailable(name, why.reason, why.detail)


def _first_number(text: str) -> float | None:
    m = _NUMBER.search(text)
    return float(m.group(1)) if m else None


def _int_or_none(text: str | None) -> int | None:
    if text is None:
        return None
    try:
        return int(text.strip(), 0) if text.strip().startswith("0x") else int(text.strip())
    except ValueError:
        return None


# --------------------------------------------------------------------------- counter samples


@dataclass
class Sample:
    """One reading of the counter files (None where unreadable)."""

    stat: str | None = None
    vmstat: str | None = None
    diskstats: str | None = None
    mountstats: str | None = None
    errors: dict[str, Unavailable] = field(default_factory=dict)
    at: float = 0.0


def _cpu_times(stat: str) -> dict[str, list[int]]:
    """'cpu' and 'cpuN' lines of /proc/stat -> the eight busy/idle counters (jiffies)."""
    out: dict[str, list[int]] = {}
    for line in stat.splitlines():
        parts = line.split()
        if not parts or not parts[0].startswith("cpu"):
            continue
        nums = [int(x) for x in parts[1:] if x.isdigit()]
        # guest/guest_nice are already inside user/nice: leave them out of the total.
        nums = (nums + [0] * len(_CPU_FIELDS))[: len(_CPU_FIELDS)]
        out[parts[0]] = nums
    return out


def _vmstat(text: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].isdigit():
            out[parts[0]] = int(parts[1])
    return out


def _diskstats(text: str) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 14 and all(p.isdigit() for p in parts[3:14]):
            out[parts[2]] = [int(p) for p in parts[3:14]]
    return out


def _pct(part: int, total: int) -> float:
    return round(100.0 * max(0, part) / total, 2) if total > 0 else 0.0


# --------------------------------------------------------------------------- the collector


class HostCollector:
    """CPU, memory, PSI, load, disks, NICs, InfiniBand ports and PCIe links of the node."""

    name = NAME
    kinds = ("host", "disk", "mount", "nic", "ib", "pcie", "driver")

    def __init__(self, sleep: Callable[[float], None] | None = None) -> None:
        # Tests inject a sleep that rewrites the counter files to their second sample.
        self._sleep = sleep or time.sleep

    def collect(self, ctx: CollectContext, facts: Facts) -> None:
        if not ctx.path("proc").is_dir():
            raise CollectorUnavailable(f"no {ctx.path('proc')}: not a Linux host")
        host = HostFacts(source="/proc, /sys")
        roce_ports = roce.roce_ports(ctx)
        first = self._sample(ctx)
        roce_first = roce.read_roce(ctx, roce_ports)
        self._sleep(ctx.window_s)
        second = self._sample(ctx)
        roce_second = roce.read_roce(ctx, roce_ports)
        elapsed = max(second.at - first.at, ctx.window_s)

        self._cpu(host, first, second)
        self._vm(host, first, second, elapsed)
        facts.disks = self._disks(ctx, first, second, elapsed)
        facts.mounts = self._mounts(first, second, elapsed)
        self._identity(ctx, host)
        self._load(ctx, host)
        self._memory(ctx, host)
        self._pressure(ctx, host)
        self._numa(ctx, host)
        facts.driver = self._driver(ctx, host)
        links: dict[str, PcieLinkFacts] = {}
        self._gpus(ctx, host, links)
        facts.nics = self._nics(ctx, links)
        facts.ib_ports = self._ib(ctx, links)
        roce.fill_roce(ctx, facts.ib_ports, roce_ports, roce_first, roce_second)
        bridges = self._bridges(ctx, links)
        facts.pcie_links = list(links.values()) + list(bridges.values())
        self._gpudirect(ctx, host, links)
        fill_observability(ctx, host)  # node exporter, dcgm-exporter (guide/CB)
        facts.host = host

    # ------------------------------------------------------------------ sampling

    def _sample(self, ctx: CollectContext) -> Sample:
        s = Sample(at=time.monotonic())
        for attr, rel in (("stat", "stat"), ("vmstat", "vmstat"), ("diskstats", "diskstats")):
            text, why = read_file(ctx.path("proc", rel))
            setattr(s, attr, text)
            if why:
                s.errors[attr] = why
        s.mountstats, why = read_capped(ctx.path("proc", "self", "mountstats"), MOUNTSTATS_MAX)
        if why:
            s.errors["mountstats"] = why
        return s

    def _cpu(self, host: HostFacts, a: Sample, b: Sample) -> None:
        fields = [
            "cpu_count",
            "cpu_user_pct",
            "cpu_system_pct",
            "cpu_iowait_pct",
            "cpu_steal_pct",
            "cpu_idle_pct",
            "busiest_core",
            "busiest_core_busy_pct",
            "cores_saturated",
        ]
        if a.stat is None or b.stat is None:
            _mark(host, fields, a.errors.get("stat") or b.errors["stat"])
            return
        btime = re.search(r"^btime\s+(\d{1,12})\s*$", b.stat, re.MULTILINE)
        if btime:
            host.boot_time = datetime.fromtimestamp(int(btime.group(1)), UTC)
        t0, t1 = _cpu_times(a.stat), _cpu_times(b.stat)
        cores = [k for k in t1 if k != "cpu"]
        host.cpu_count = len(cores) or None
        deltas = {k: [y - x for x, y in zip(t0[k], t1[k], strict=True)] for k in t1 if k in t0}
        total = deltas.get("cpu")
        if not total or sum(max(0, d) for d in total) == 0:
            _mark(
                host,
                fields[1:],
                Unavailable(
                    reason=UnavailableReason.ERROR, detail="no CPU time elapsed between samples"
                ),
            )
            return
        user, nice, system, idle, iowait, irq, softirq, steal = (max(0, d) for d in total)
        all_ = sum((user, nice, system, idle, iowait, irq, softirq, steal))
        # user + system + iowait + steal + idle = 100 (nice is user mode, irq/softirq kernel).
        host.cpu_user_pct = _pct(user + nice, all_)
        host.cpu_system_pct = _pct(system + irq + softirq, all_)
        host.cpu_iowait_pct = _pct(iowait, all_)
        host.cpu_steal_pct = _pct(steal, all_)
        host.cpu_idle_pct = _pct(idle, all_)
        busy: dict[int, float] = {}
        for name in cores:
            d = [max(0, x) for x in deltas.get(name, [])]
            if d and sum(d) > 0:
                busy[int(name[3:])] = round(100.0 - _pct(d[3] + d[4], sum(d)), 2)
        if busy:
            top = max(busy, key=lambda c: busy[c])
            host.busiest_core, host.busiest_core_busy_pct = top, busy[top]
            host.cores_saturated = sum(1 for v in busy.values() if v > SATURATED_BUSY_PCT)

    def _vm(self, host: HostFacts, a: Sample, b: Sample, elapsed: float) -> None:
        fields = (
            "swap_in_pages_s",
            "swap_out_pages_s",
            "reclaim_scan_pages_s",
            "direct_reclaim_pages_s",
        )
        if a.vmstat is None or b.vmstat is None:
            _mark(host, fields, a.errors.get("vmstat") or b.errors["vmstat"])
            return
        v0, v1 = _vmstat(a.vmstat), _vmstat(b.vmstat)

        def rate(keys: list[str]) -> float | None:
            keys = [k for k in keys if k in v0 and k in v1]
            if not keys:
                return None
            return round(sum(max(0, v1[k] - v0[k]) for k in keys) / elapsed, 2)

        def matching(prefix: str) -> list[str]:
            # pgscan_direct_throttle counts throttling events, not scanned pages.
            return [k for k in v1 if k.startswith(prefix) and k != "pgscan_direct_throttle"]

        kswapd, direct = rate(matching("pgscan_kswapd")), rate(matching("pgscan_direct"))
        values = {
            "swap_in_pages_s": rate(["pswpin"]),
            "swap_out_pages_s": rate(["pswpout"]),
            "direct_reclaim_pages_s": direct,
            "reclaim_scan_pages_s": None
            if kswapd is None and direct is None
            else round((kswapd or 0.0) + (direct or 0.0), 2),
        }
        for name, val in values.items():
            if val is None:
                host.mark_unavailable(
                    name, UnavailableReason.NOT_SUPPORTED, "counter absent from /proc/vmstat"
                )
            else:
                setattr(host, name, val)

    def _mounts(self, a: Sample, b: Sample, elapsed: float) -> list[MountFacts]:
        """NFS mounts over the window: each mount's counters in the second reading less
        those of the first (a mount that appeared in between: since its mount)."""
        if b.mountstats is None:
            return []
        try:
            now = parse_mountstats(b.mountstats, "/proc/self/mountstats")
            was = parse_mountstats(a.mountstats or "", "/proc/self/mountstats")
        except ParseError:
            return []  # no mount lines at all: nothing mounted we could read
        before = {(m.device, m.mountpoint): m for m in was}
        out = []
        for m in now:
            prev = before.get((m.device, m.mountpoint))
            out.append(mount_facts(m, prev, elapsed, "/proc/self/mountstats"))
        return out

    def _disks(self, ctx: CollectContext, a: Sample, b: Sample, elapsed: float) -> list[DiskFacts]:
        if a.diskstats is None or b.diskstats is None:
            return []
        d0, d1 = _diskstats(a.diskstats), _diskstats(b.diskstats)
        sys_block = ctx.path("sys", "block")
        known = {p.name for p in sys_block.iterdir()} if sys_block.is_dir() else None
        disks: list[DiskFacts] = []
        for name, now in d1.items():
            sysname = name.replace("/", "!")  # cciss/c0d0 is cciss!c0d0 in sysfs
            if name.startswith(("loop", "ram", "zram")) or name not in d0:
                continue
            if (known is not None and sysname not in known) or (
                known is None and _NOT_A_DISK.match(name)
            ):
                continue  # a partition
            was = d0[name]
            rd, rd_sec, rd_ms, wr, wr_sec, wr_ms, io_ms = (
                max(0, now[i] - was[i]) for i in (0, 2, 3, 4, 6, 7, 9)
            )
            disk = DiskFacts(
                name=name,
                source="/proc/diskstats",
                read_mib_s=round(rd_sec * SECTOR_BYTES / 1024**2 / elapsed, 3),
                write_mib_s=round(wr_sec * SECTOR_BYTES / 1024**2 / elapsed, 3),
                read_iops=round(rd / elapsed, 2),
                write_iops=round(wr / elapsed, 2),
                read_await_ms=round(rd_ms / rd, 2) if rd else 0.0,
                read_request_kib=round(rd_sec * SECTOR_BYTES / 1024 / rd, 2) if rd else None,
                write_await_ms=round(wr_ms / wr, 2) if wr else 0.0,
                util_pct=round(min(100.0, 100.0 * io_ms / (elapsed * 1000.0)), 2),
            )
            if not rd:
                disk.mark_unavailable(
                    "read_request_kib", UnavailableReason.NOT_SUPPORTED, "no reads in the window"
                )
            text, why = read_file(ctx.path("sys", "block", sysname, "queue", "rotational"))
            if text is not None and text.strip() in ("0", "1"):
                disk.rotational = text.strip() == "1"
            else:
                disk.mark_unavailable(
                    "rotational",
                    why.reason if why else UnavailableReason.ERROR,
                    why.detail if why else text or "",
                )
            disks.append(disk)
        return disks

    # ------------------------------------------------------------------ one-shot files

    def _identity(self, ctx: CollectContext, host: HostFacts) -> None:
        for fld, rel in (("hostname", "hostname"), ("kernel", "osrelease")):
            text, why = read_file(ctx.path("proc", "sys", "kernel", rel))
            if text is not None and text.strip():
                setattr(host, fld, text.strip())
            elif why:
                host.mark_unavailable(fld, why.reason, why.detail)
        for fld, rel in (("bios_version", "bios_version"), ("bios_date", "bios_date")):
            text, why = read_short(ctx.path("sys", "class", "dmi", "id", rel))
            if text:
                setattr(host, fld, text)
            else:
                host.mark_unavailable(
                    fld,
                    why.reason if why else UnavailableReason.NOT_SUPPORTED,
                    why.detail if why else f"/sys/class/dmi/id/{rel} is empty",
                )

    def _load(self, ctx: CollectContext, host: HostFacts) -> None:
        text, why = read_file(ctx.path("proc", "loadavg"))
        parts = text.split() if text else []
        try:
            host.load_1m, host.load_5m, host.load_15m = (float(x) for x in parts[:3])
        except ValueError:
            why = why or Unavailable(reason=UnavailableReason.ERROR, detail=f"bad loadavg {text!r}")
            _mark(host, ("load_1m", "load_5m", "load_15m"), why)

    def _memory(self, ctx: CollectContext, host: HostFacts) -> None:
        text, why = read_file(ctx.path("proc", "meminfo"))
        fields = (
            "mem_total_mib",
            "mem_available_mib",
            "swap_total_mib",
            "swap_used_mib",
            "hugepages_total",
            "hugepages_free",
            "hugepage_size_kib",
        )
        if text is None:
            _mark(host, fields, why or Unavailable(reason=UnavailableReason.ERROR))
            return
        ctx.keep_raw(NAME, "/proc/meminfo", text)
        try:
            fill_host_from_meminfo(host, parse_meminfo_kib(text, "/proc/meminfo"))
        except ParseError as exc:
            _mark(host, fields, Unavailable(reason=UnavailableReason.ERROR, detail=str(exc)))

    def _pressure(self, ctx: CollectContext, host: HostFacts) -> None:
        wanted = {
            "cpu": (("some", "psi_cpu_some_avg10"),),
            "io": (("some", "psi_io_some_avg10"), ("full", "psi_io_full_avg10")),
            "memory": (("some", "psi_memory_some_avg10"), ("full", "psi_memory_full_avg10")),
        }
        for resource, pairs in wanted.items():
            text, why = read_file(ctx.path("proc", "pressure", resource))
            if text is None:
                reason = why or Unavailable(reason=UnavailableReason.ERROR)
                if reason.reason is UnavailableReason.NOT_SUPPORTED:
                    reason = Unavailable(
                        reason=reason.reason, detail="kernel without PSI (CONFIG_PSI, psi=1)"
                    )
                _mark(host, [f for _, f in pairs], reason)
                continue
            ctx.keep_raw(NAME, f"/proc/pressure/{resource}", text)
            psi = parse_pressure(text)
            for kind, fld in pairs:
                if kind in psi and "avg10" in psi[kind]:
                    setattr(host, fld, float(psi[kind]["avg10"]))
                else:
                    host.mark_unavailable(
                        fld,
                        UnavailableReason.NOT_SUPPORTED,
                        f"no '{kind}' line in /proc/pressure/{resource}",
                    )

    def _numa(self, ctx: CollectContext, host: HostFacts) -> None:
        base = ctx.path("sys", "devices", "system", "node")
        try:
            nodes = [p for p in base.iterdir() if re.fullmatch(r"node\d+", p.name)]
        except OSError:
            host.mark_unavailable(
                "numa_nodes", UnavailableReason.NOT_SUPPORTED, f"no {base} (kernel without NUMA)"
            )
            return
        host.numa_nodes = len(nodes)

    def _driver(self, ctx: CollectContext, host: HostFacts) -> DriverFacts:
        """The kernel module (/proc/driver/nvidia/version), the user-space NVML library
        (libnvidia-ml.so.<version>) and nouveau: when they disagree NVML cannot start,
        and these are the facts that say why."""
        driver = DriverFacts(source="/proc/driver/nvidia, /sys/module, libnvidia-ml")
        text, why = read_file(ctx.path("proc", "driver", "nvidia", "version"))
        version = None
        if text:
            ctx.keep_raw(NAME, "/proc/driver/nvidia/version", text)
            line = next((ln for ln in text.splitlines() if "NVRM" in ln), "")
            m = re.search(r"\s(\d{3,}\.\d+(?:\.\d+)?)\s", line + " ")
            version = m.group(1) if m else None
        module_dir = ctx.path("sys", "module", "nvidia")
        driver.kernel_module_loaded = bool(text) or module_dir.is_dir()
        driver.nouveau_loaded = ctx.path("sys", "module", "nouveau").is_dir()
        if version:
            host.driver_version = version
            driver.kernel_module_version = version
        else:
            detail = "nvidia kernel module not loaded" if why else "no version in the file"
            reason = why.reason if why else UnavailableReason.ERROR
            host.mark_unavailable("driver_version", reason, detail)
            driver.mark_unavailable("kernel_module_version", reason, detail)
        library = self._nvml_library_version(ctx)
        if library:
            driver.library_version = library
        else:
            driver.mark_unavailable(
                "library_version", UnavailableReason.NOT_SUPPORTED, "no libnvidia-ml.so.<version>"
            )
        return driver

    def _nvml_library_version(self, ctx: CollectContext) -> str | None:
        """The version the loader gets for libnvidia-ml.so.1: the name its link points to
        (read, not followed: a planted link only changes a name), else the only versioned
        file beside it."""
        for parts in NVML_LIBRARY_DIRS:
            base = ctx.path(*parts)
            try:
                target = os.readlink(base / "libnvidia-ml.so.1")
            except OSError:
                target = ""
            m = _NVML_LIB.search(os.path.basename(target))
            if m:
                return m.group(1)
            try:
                found = {
                    m.group(1)
                    for name in os.listdir(base)
                    if name.startswith("libnvidia-ml.so.") and (m := _NVML_LIB.search(name))
                }
            except OSError:
                continue
            if len(found) == 1:
                return found.pop()
        return None

    # ------------------------------------------------------------------ GPUDirect

    def _gpudirect(
        self, ctx: CollectContext, host: HostFacts, links: dict[str, PcieLinkFacts]
    ) -> None:
        """The peer-memory module and the IOMMU mode: GPUDirect RDMA's prerequisites."""
        modules, why = read_file(ctx.path("proc", "modules"))
        loaded = {ln.split(" ", 1)[0] for ln in (modules or "").splitlines() if ln}
        for name in PEERMEM_MODULES:
            if name in loaded or ctx.path("sys", "module", name).is_dir():
                host.peermem_loaded, host.peermem_module = True, name
                break
        else:
            if modules is not None or ctx.path("sys", "module").is_dir():
                host.peermem_loaded = False
            else:
                host.mark_unavailable(
                    "peermem_loaded",
                    why.reason if why else UnavailableReason.NOT_SUPPORTED,
                    "no /proc/modules or /sys/module",
                )
        cmdline, why = read_file(ctx.path("proc", "cmdline"))
        words = iommu_words(cmdline or "")
        host.iommu_cmdline = " ".join(words) or None
        try:
            units = sorted(p.name for p in ctx.path("sys", "class", "iommu").iterdir())
        except OSError:
            units = []
        types = set()
        for bdf, link in links.items():
            if link.device_class != "gpu":
                continue
            group = self._device_dir(
                ctx, ctx.path("sys", "bus", "pci", "devices", bdf, "iommu_group")
            )
            if group is not None:
                text, _ = read_file(group / "type")
                if text and text.strip():
                    types.add(text.strip())
        host.iommu_mode = iommu_mode(words, bool(units), types)

    # ------------------------------------------------------------------ PCI devices

    def _bridges(
        self, ctx: CollectContext, links: dict[str, PcieLinkFacts]
    ) -> dict[str, PcieLinkFacts]:
        """The bridges above each GPU and network adapter (from their sysfs paths), with
        their link, ACS control (config space) and what sits below them."""
        bridges: dict[str, PcieLinkFacts] = {}
        ancestry = []
        for bdf, link in links.items():
            if link.device_class not in ("gpu", "nic"):
                continue
            dev = self._device_dir(ctx, ctx.path("sys", "bus", "pci", "devices", bdf))
            if dev is None:
                continue
            above = []
            parent = dev.parent
            while _BDF.match(parent.name) and parent != parent.parent:
                name = parent.name.lower()
                above.append(name)
                if name not in bridges and name not in links:
                    bridges[name] = self._bridge(ctx, parent, name)
                parent = parent.parent
            ancestry.append((bdf, link.device_class, above))
        mark_by_ancestry(bridges, ancestry)
        return bridges

    def _bridge(self, ctx: CollectContext, path: Path, bdf: str) -> PcieLinkFacts:
        bridge = self._pcie_link(ctx, path, bdf, "bridge")
        try:
            with open(path / "config", "rb") as fh:  # sysfs attribute: no link to follow
                config = fh.read(CONFIG_SPACE)
        except OSError as exc:
            config, detail = b"", f"{path}/config: {exc.strerror}"
        else:
            detail = "only the first 256 bytes of config space are readable (not root)"
        flags = acs_from_config(config)
        if flags is None:
            for name in ACS_FACTS:
                bridge.mark_unavailable(name, UnavailableReason.NO_PERMISSION, detail)
        else:
            apply_acs(bridge, flags)
        return bridge

    def _pcie_link(self, ctx: CollectContext, dev: Path, bdf: str, kind: str) -> PcieLinkFacts:
        link = PcieLinkFacts(pci_bus_id=bdf.lower(), device_class=kind, source=str(dev))
        # 'Unknown speed' (device in D3cold, link down) or a missing attribute
        read_attributes(
            link,
            dev,
            UnavailableReason.NOT_SUPPORTED,
            (
                ("speed_gts", "current_link_speed", _first_number),
                ("speed_gts_max", "max_link_speed", _first_number),
                ("width", "current_link_width", lambda t: _int_or_none(t.lstrip("x"))),
                ("width_max", "max_link_width", lambda t: _int_or_none(t.lstrip("x"))),
                ("numa_node", "numa_node", _int_or_none),
            ),
        )
        return link

    def _gpus(self, ctx: CollectContext, host: HostFacts, links: dict[str, PcieLinkFacts]) -> None:
        try:
            devices = nvidia_pci_devices(ctx)
        except OSError as exc:
            host.mark_unavailable("gpu_count_pci", UnavailableReason.NOT_SUPPORTED, str(exc))
            return
        count = 0
        for dev, klass in devices:
            if not klass.startswith(GPU_CLASSES):
                continue  # NVSwitch, audio function, ...
            count += 1
            links[dev.name.lower()] = self._pcie_link(ctx, dev, dev.name, "gpu")
        host.gpu_count_pci = count

    def _device_dir(self, ctx: CollectContext, link: Path) -> Path | None:
        """Where a sysfs link (``device``, ``driver``) leads, or None when it leaves ``ctx.root``.

        sysfs links are relative, so a recorded tree resolves inside its root; a link that
        escapes it would read the live machine instead, so it counts as absent.
        """
        if not os.path.lexists(link):
            return None
        resolved = Path(os.path.realpath(link))
        root = Path(os.path.realpath(ctx.root))
        if resolved != root and root not in resolved.parents:
            return None
        return resolved

    def _pci_dir(self, ctx: CollectContext, link: Path) -> Path | None:
        """The PCI function directory at or above a ``device`` link (virtio sits below it)."""
        dev = self._device_dir(ctx, link)
        while dev is not None and dev != dev.parent and dev != ctx.root:
            if _BDF.match(dev.name):
                return dev
            dev = dev.parent
        return None

    def _nics(self, ctx: CollectContext, links: dict[str, PcieLinkFacts]) -> list[NicFacts]:
        base = ctx.path("sys", "class", "net")
        try:
            entries = sorted(base.iterdir())
        except OSError:
            return []
        nics: list[NicFacts] = []
        for iface in entries:
            if iface.name == "lo" or not (iface / "device").exists():
                continue  # virtual: bridges, veth, bonds, docker0 have no device link
            nic = NicFacts(name=iface.name, source=str(iface))
            text, why = read_file(iface / "speed")
            speed = _int_or_none(text) if text is not None else None
            if speed is not None and speed > 0:
                nic.speed_mbps = float(speed)
            else:
                # Reading speed of a down link fails with EINVAL; -1 means unknown.
                nic.mark_unavailable(
                    "speed_mbps",
                    why.reason if why else UnavailableReason.NOT_SUPPORTED,
                    why.detail if why else f"speed {(text or '').strip()}",
                )
            read_attributes(
                nic,
                iface,
                UnavailableReason.ERROR,
                (
                    ("mtu", "mtu", _int_or_none),
                    ("rx_errors", "statistics/rx_errors", _int_or_none),
                    ("tx_errors", "statistics/tx_errors", _int_or_none),
                    ("rx_dropped", "statistics/rx_dropped", _int_or_none),
                    ("tx_dropped", "statistics/tx_dropped", _int_or_none),
                ),
            )
            text, why = read_file(iface / "operstate")
            if text is not None:
                nic.operstate = text.strip()
            elif why:
                nic.mark_unavailable("operstate", why.reason, why.detail)
            driver = self._device_dir(ctx, iface / "device" / "driver")
            if driver is not None:
                nic.driver = driver.name
            else:
                nic.mark_unavailable("driver", UnavailableReason.NOT_SUPPORTED, "no driver link")
            pci = self._pci_dir(ctx, iface / "device")
            if pci is not None:
                nic.pci_bus_id = pci.name.lower()
                nic.numa_node = _int_or_none(read_file(pci / "numa_node")[0])
                links.setdefault(nic.pci_bus_id, self._pcie_link(ctx, pci, pci.name, "nic"))
            else:
                nic.mark_unavailable(
                    "pci_bus_id", UnavailableReason.NOT_SUPPORTED, "not a PCI device"
                )
            if nic.numa_node is None:
                nic.mark_unavailable(
                    "numa_node", UnavailableReason.NOT_SUPPORTED, "no numa_node for the device"
                )
            nics.append(nic)
        return nics

    def _ib(self, ctx: CollectContext, links: dict[str, PcieLinkFacts]) -> list[IbPortFacts]:
        base = ctx.path("sys", "class", "infiniband")
        try:
            cas = sorted(base.iterdir())
        except OSError:
            return []  # no RDMA stack: nothing to report, not an error
        ports: list[IbPortFacts] = []
        for ca in cas:
            pci = self._pci_dir(ctx, ca / "device")
            numa = _int_or_none(read_file(pci / "numa_node")[0]) if pci else None
            firmware, fw_why = read_short(ca / "fw_ver")
            if pci is not None:
                links.setdefault(pci.name.lower(), self._pcie_link(ctx, pci, pci.name, "nic"))
            try:
                port_dirs = sorted((ca / "ports").iterdir(), key=lambda p: p.name)
            except OSError:
                continue
            for pdir in port_dirs:
                port = IbPortFacts(
                    ca_name=ca.name,
                    port=_int_or_none(pdir.name),
                    source=str(pdir),
                    pci_bus_id=pci.name.lower() if pci else None,
                    numa_node=numa,
                    firmware_version=firmware,
                )
                if firmware is None:
                    port.mark_unavailable(
                        "firmware_version",
                        fw_why.reason if fw_why else UnavailableReason.NOT_SUPPORTED,
                        fw_why.detail if fw_why else f"{ca / 'fw_ver'} is empty",
                    )
                read_attributes(
                    port,
                    pdir,
                    UnavailableReason.ERROR,
                    (
                        ("state", "state", normalize_state),
                        ("phys_state", "phys_state", normalize_phys_state),
                        ("rate_gbps", "rate", parse_rate_gbps),
                        ("link_layer", "link_layer", lambda t: (t or "").strip().lower() or None),
                        ("symbol_errors", "counters/symbol_error", _int_or_none),
                        ("link_downed", "counters/link_downed", _int_or_none),
                        ("rcv_errors", "counters/port_rcv_errors", _int_or_none),
                        ("xmit_discards", "counters/port_xmit_discards", _int_or_none),
                    ),
                )
                ports.append(port)
        return ports
