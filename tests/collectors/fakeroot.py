"""Build a small fake /proc + /sys tree for the host collector.

Symlinks are relative, as in real sysfs, so they resolve inside the tree. The counter
files (/proc/stat, /proc/vmstat, /proc/diskstats) hold a first sample; ``sleep`` (pass
it as ``HostCollector(sleep=fake.sleep)``) rewrites them to the second one, which is
what the collector reads after its window.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

# cpu: user nice system idle iowait irq softirq steal guest guest_nice (jiffies)
STAT_1 = {
    "cpu": [1000, 0, 500, 8000, 100, 0, 0, 0, 0, 0],
    "cpu0": [500, 0, 250, 4000, 50, 0, 0, 0, 0, 0],
    "cpu1": [500, 0, 250, 4000, 50, 0, 0, 0, 0, 0],
}
# Over the window: cpu0 95% busy (90 user, 5 system, 5 idle), cpu1 idle 80 + iowait 20.
STAT_2 = {
    "cpu": [1090, 0, 505, 8085, 120, 0, 0, 0, 0, 0],
    "cpu0": [590, 0, 255, 4005, 50, 0, 0, 0, 0, 0],
    "cpu1": [500, 0, 250, 4080, 70, 0, 0, 0, 0, 0],
}
VMSTAT_1 = {
    "pswpin": 100,
    "pswpout": 50,
    "pgscan_kswapd": 1000,
    "pgscan_direct": 0,
    "pgscan_direct_throttle": 0,
}
VMSTAT_2 = {
    "pswpin": 300,
    "pswpout": 50,
    "pgscan_kswapd": 1500,
    "pgscan_direct": 100,
    "pgscan_direct_throttle": 999,
}
# name: reads merged sectors ms_read writes merged sectors ms_write inflight io_ms weighted_ms
DISKS_1 = {
    "nvme0n1": [1000, 0, 80000, 500, 2000, 0, 160000, 4000, 0, 1000, 4500],
    "nvme0n1p1": [1000, 0, 80000, 500, 2000, 0, 160000, 4000, 0, 1000, 4500],
    "sda": [10, 0, 80, 10, 10, 0, 80, 10, 0, 20, 20],
    "loop0": [5, 0, 10, 1, 0, 0, 0, 0, 0, 1, 1],
}
# nvme0n1 over 1 s: 200 reads of 2048 sectors (200 MiB), 2 ms each; 100 writes, 4 ms; 500 ms busy.
DISKS_2 = {
    "nvme0n1": [1200, 0, 489600, 900, 2100, 0, 160000 + 2048 * 50, 4400, 0, 1500, 5300],
    "nvme0n1p1": [1200, 0, 489600, 900, 2100, 0, 262400, 4400, 0, 1500, 5300],
    "sda": [10, 0, 80, 10, 10, 0, 80, 10, 0, 20, 20],
    "loop0": [9, 0, 20, 2, 0, 0, 0, 0, 0, 2, 2],
}
MEMINFO = """\
MemTotal:       2097152 kB
MemFree:         524288 kB
MemAvailable:   1048576 kB
Buffers:          10240 kB
Cached:          204800 kB
SwapTotal:      1048576 kB
SwapFree:        786432 kB
HugePages_Total:     16
HugePages_Free:       4
HugePages_Rsvd:       0
Hugepagesize:      2048 kB
"""
PRESSURE = {
    "cpu": "some avg10=1.50 avg60=1.00 avg300=0.50 total=123456\n"
    "full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n",
    "io": "some avg10=12.25 avg60=8.00 avg300=2.00 total=999999\n"
    "full avg10=10.50 avg60=7.00 avg300=1.00 total=888888\n",
    "memory": "some avg10=3.00 avg60=2.00 avg300=1.00 total=5555\n"
    "full avg10=2.25 avg60=1.00 avg300=0.50 total=4444\n",
}
NVIDIA_VERSION = (
    "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 22:23:56 UTC 2024\n"
    "GCC version:  gcc version 12.3.0 (Ubuntu 12.3.0-1ubuntu1~22.04)\n"
)


def _stat(cpus: dict[str, list[int]]) -> str:
    lines = [f"{name} {' '.join(map(str, vals))}" for name, vals in cpus.items()]
    return "\n".join([*lines, "intr 12345 0 0", "ctxt 999", "btime 1700000000", ""])


def _vmstat(values: dict[str, int]) -> str:
    return "".join(f"{k} {v}\n" for k, v in values.items())


def _diskstats(disks: dict[str, list[int]]) -> str:
    out = []
    for minor, (name, vals) in enumerate(disks.items()):
        # Kernels >= 4.18 add discard fields and >= 5.5 flush fields: keep them.
        out.append(f"   8   {minor} {name} {' '.join(map(str, vals))} 0 0 0 0 0 0")
    return "\n".join(out) + "\n"


@dataclass
class FakeRoot:
    """A recorded-looking /proc + /sys under ``root``."""

    root: Path
    sleeps: list[float] = field(default_factory=list)
    second: dict[str, str] = field(default_factory=dict)  # rel path -> text after the window

    def write(self, rel: str, text: str) -> Path:
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        return path

    def mkdir(self, rel: str) -> Path:
        path = self.root / rel
        path.mkdir(parents=True, exist_ok=True)
        return path

    def link(self, rel: str, target_rel: str) -> None:
        """Symlink ``rel`` -> ``target_rel`` (both relative to the root), as a relative link."""
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        (self.root / target_rel).mkdir(parents=True, exist_ok=True)
        os.symlink(os.path.relpath(self.root / target_rel, path.parent), path)

    def remove(self, rel: str) -> None:
        path = self.root / rel
        if path.is_dir() and not path.is_symlink():
            for child in sorted(path.rglob("*"), reverse=True):
                child.unlink() if not child.is_dir() or child.is_symlink() else child.rmdir()
            path.rmdir()
        else:
            path.unlink()
        self.second.pop(rel, None)

    def sleep(self, seconds: float) -> None:
        """The collector's sleep: move the counter files to their second sample."""
        self.sleeps.append(seconds)
        for rel, text in self.second.items():
            if (self.root / rel).exists():
                self.write(rel, text)

    # ------------------------------------------------------------------ devices

    def pci_device(
        self,
        bdf: str,
        vendor: str,
        klass: str,
        *,
        speed: str = "16.0 GT/s PCIe",
        max_speed: str = "16.0 GT/s PCIe",
        width: str = "16",
        max_width: str = "16",
        numa: str = "0",
    ) -> str:
        dev = f"sys/devices/pci0000:00/{bdf}"
        for name, text in (
            ("vendor", vendor),
            ("class", klass),
            ("current_link_speed", speed),
            ("max_link_speed", max_speed),
            ("current_link_width", width),
            ("max_link_width", max_width),
            ("numa_node", numa),
        ):
            self.write(f"{dev}/{name}", text + "\n")
        self.link(f"sys/bus/pci/devices/{bdf}", dev)
        return dev

    def nic(
        self,
        name: str,
        bdf: str | None,
        *,
        driver: str = "mlx5_core",
        speed: str = "100000",
        mtu: str = "9000",
        operstate: str = "up",
        rx_errors: int = 0,
    ) -> None:
        if bdf is None:
            node = f"sys/devices/virtual/net/{name}"
        else:
            dev = f"sys/devices/pci0000:00/{bdf}"
            node = f"{dev}/net/{name}"
            self.link(f"{node}/device", dev)
            self.link(f"{dev}/driver", f"sys/bus/pci/drivers/{driver}")
        for fname, text in (
            ("speed", speed),
            ("mtu", mtu),
            ("operstate", operstate),
            ("statistics/rx_errors", str(rx_errors)),
            ("statistics/tx_errors", "0"),
            ("statistics/rx_dropped", "7"),
            ("statistics/tx_dropped", "0"),
        ):
            self.write(f"{node}/{fname}", text + "\n")
        self.link(f"sys/class/net/{name}", node)

    def ib_port(
        self,
        ca: str,
        bdf: str,
        port: int = 1,
        *,
        state: str = "4: ACTIVE",
        phys_state: str = "5: LinkUp",
        rate: str = "200 Gb/sec (4X HDR)",
        link_layer: str = "InfiniBand",
        symbol_error: int = 0,
        link_downed: int = 0,
    ) -> None:
        dev = f"sys/devices/pci0000:00/{bdf}"
        node = f"{dev}/infiniband/{ca}"
        if not (self.root / node / "device").exists():
            self.link(f"{node}/device", dev)
            self.link(f"sys/class/infiniband/{ca}", node)
        pdir = f"{node}/ports/{port}"
        for fname, text in (
            ("state", state),
            ("phys_state", phys_state),
            ("rate", rate),
            ("link_layer", link_layer),
            ("counters/symbol_error", str(symbol_error)),
            ("counters/link_downed", str(link_downed)),
            ("counters/port_rcv_errors", "0"),
            ("counters/port_xmit_discards", "3"),
        ):
            self.write(f"{pdir}/{fname}", text + "\n")

    def roce_port(
        self,
        ca: str,
        bdf: str,
        netdev: str,
        *,
        port: int = 1,
        ecn_np: str = "00010000",
        ecn_rp: str = "00010000",
        hw_first: dict[str, int] | None = None,
        hw_second: dict[str, int] | None = None,
    ) -> None:
        """A RoCE port: an RDMA port with link layer Ethernet over interface ``netdev``,
        its ECN switches (one character per priority 0-7) and its hw_counters, which move
        from ``hw_first`` to ``hw_second`` at the collector's sleep."""
        self.nic(netdev, bdf)
        self.ib_port(ca, bdf, port, rate="100 Gb/sec (2X HDR)", link_layer="Ethernet")
        pdir = f"sys/devices/pci0000:00/{bdf}/infiniband/{ca}/ports/{port}"
        self.write(f"{pdir}/gid_attrs/ndevs/0", netdev + "\n")
        node = f"sys/devices/pci0000:00/{bdf}/net/{netdev}"
        for point, flags in (("roce_np", ecn_np), ("roce_rp", ecn_rp)):
            for prio, flag in enumerate(flags):
                self.write(f"{node}/ecn/{point}/enable/{prio}", flag + "\n")
        for name, value in (hw_first or {}).items():
            self.write(f"{pdir}/hw_counters/{name}", f"{value}\n")
        for name, value in (hw_second or {}).items():
            self.second[f"{pdir}/hw_counters/{name}"] = f"{value}\n"


def build_fake_root(root: Path) -> FakeRoot:
    """A two-GPU, one-NIC, one-HCA node with every file the host collector reads."""
    fake = FakeRoot(root)
    fake.write("proc/stat", _stat(STAT_1))
    fake.write("proc/vmstat", _vmstat(VMSTAT_1))
    fake.write("proc/diskstats", _diskstats(DISKS_1))
    fake.second = {
        "proc/stat": _stat(STAT_2),
        "proc/vmstat": _vmstat(VMSTAT_2),
        "proc/diskstats": _diskstats(DISKS_2),
    }
    fake.write("proc/loadavg", "12.50 10.25 8.00 3/1234 5678\n")
    fake.write("proc/meminfo", MEMINFO)
    for res, text in PRESSURE.items():
        fake.write(f"proc/pressure/{res}", text)
    fake.write("proc/sys/kernel/hostname", "gpu-node-01.example.com\n")
    fake.write("proc/sys/kernel/osrelease", "5.15.0-105-generic\n")
    fake.write("proc/driver/nvidia/version", NVIDIA_VERSION)
    fake.write(
        "proc/modules", "nvidia_uvm 1884160 0 - Live 0x0\nnvidia 56680448 1 nvidia_uvm, Live 0x0\n"
    )
    fake.write(
        "proc/cmdline",
        "BOOT_IMAGE=/boot/vmlinuz-5.15.0-105-generic ro quiet intel_iommu=on iommu=pt\n",
    )
    # Processes: the host PID namespace (kthreadd is PID 2), node exporter as Debian
    # packages it (comm cut at 15 characters), dcgm-exporter seen by its port (tcp6).
    fake.write("proc/1/comm", "systemd\n")
    fake.write("proc/2/comm", "kthreadd\n")
    fake.write("proc/812/comm", "prometheus-node\n")
    fake.write(
        "proc/812/cmdline",
        "/usr/bin/prometheus-node-exporter\0--collector.textfile.directory="
        "/var/lib/prometheus/node-exporter\0",
    )
    fake.write("proc/4242/comm", "python\n")
    hand = Path(__file__).resolve().parents[1] / "data" / "hand-written" / "proc"
    fake.write("proc/net/tcp", (hand / "net-tcp-node-exporter-listening.txt").read_text())
    fake.write("proc/net/tcp6", (hand / "net-tcp6-dcgm-exporter-listening.txt").read_text())
    fake.mkdir("sys/devices/system/node/node0")
    fake.mkdir("sys/devices/system/node/node1")
    fake.write("sys/devices/system/node/online", "0-1\n")
    # Block devices: sysfs lists whole disks only (partitions live below them).
    fake.write("sys/block/nvme0n1/queue/rotational", "0\n")
    fake.mkdir("sys/block/sda/queue")  # no rotational file: unavailable
    fake.mkdir("sys/block/loop0/queue")
    # Two GPUs (one at gen1 x8), an NVSwitch (not a GPU), a ConnectX NIC/HCA, a non-NVIDIA VGA.
    fake.pci_device("0000:17:00.0", "0x10de", "0x030200", max_speed="32.0 GT/s PCIe")
    fake.pci_device(
        "0000:18:00.0", "0x10de", "0x030000", speed="2.5 GT/s PCIe", width="8", numa="1"
    )
    fake.pci_device("0000:19:00.0", "0x10de", "0x068000")
    fake.pci_device("0000:03:00.0", "0x102b", "0x030000", speed="Unknown", numa="-1")
    fake.pci_device("0000:3b:00.0", "0x15b3", "0x020700", numa="0")
    fake.nic("ens1f0", "0000:3b:00.0", rx_errors=5)
    fake.nic("docker0", None, speed="-1")
    fake.nic("lo", None, driver="", mtu="65536", operstate="unknown")
    fake.ib_port("mlx5_0", "0000:3b:00.0", symbol_error=12, link_downed=1)
    fake.write("sys/devices/pci0000:00/0000:3b:00.0/infiniband/mlx5_0/fw_ver", "28.39.1002\n")
    fake.write("sys/devices/virtual/dmi/id/bios_version", "2.5.4\n")
    fake.write("sys/devices/virtual/dmi/id/bios_date", "09/14/2023\n")
    fake.link("sys/class/dmi/id", "sys/devices/virtual/dmi/id")
    return fake
