"""HostCollector on a fake /proc + /sys tree, and once on this machine."""

from __future__ import annotations

import math
import os
from pathlib import Path

import pytest

from gpu_triage.collectors.base import CollectContext, CollectorUnavailable
from gpu_triage.collectors.host import HostCollector, read_file
from gpu_triage.model.facts import Facts, UnavailableReason

try:
    from tests.collectors.fakeroot import FakeRoot, build_fake_root
except ImportError:  # tests/ is not a package: pytest put this folder on sys.path
    from fakeroot import FakeRoot, build_fake_root  # type: ignore[no-redef]


def collect(fake: FakeRoot, window_s: float = 1.0) -> Facts:
    facts = Facts()
    HostCollector(sleep=fake.sleep).collect(
        CollectContext(root=fake.root, window_s=window_s), facts
    )
    return facts


@pytest.fixture
def fake(tmp_path: Path) -> FakeRoot:
    return build_fake_root(tmp_path)


def test_sleeps_for_the_window_between_samples(fake: FakeRoot) -> None:
    collect(fake, window_s=1.0)
    assert fake.sleeps == [1.0]


def test_cpu_from_two_samples(fake: FakeRoot) -> None:
    host = collect(fake).host
    assert host is not None
    assert host.cpu_count == 2
    assert host.cpu_user_pct == 45.0
    assert host.cpu_system_pct == 2.5
    assert host.cpu_iowait_pct == 10.0
    assert host.cpu_steal_pct == 0.0
    assert host.cpu_idle_pct == 42.5
    assert host.busiest_core == 0
    assert host.busiest_core_busy_pct == 95.0
    assert host.cores_saturated == 1


def test_vm_rates_use_the_window(fake: FakeRoot) -> None:
    host = collect(fake, window_s=2.0).host
    assert host is not None
    assert host.swap_in_pages_s == 100.0
    assert host.swap_out_pages_s == 0.0
    # kswapd 500 + direct 100 over 2 s; pgscan_direct_throttle is not a page count.
    assert host.reclaim_scan_pages_s == 300.0
    assert host.direct_reclaim_pages_s == 50.0


def test_disks_skip_partitions_and_loop(fake: FakeRoot) -> None:
    disks = {d.name: d for d in collect(fake).disks}
    assert set(disks) == {"nvme0n1", "sda"}
    nvme = disks["nvme0n1"]
    assert nvme.read_mib_s == 200.0
    assert nvme.write_mib_s == 50.0
    assert nvme.read_iops == 200.0
    assert nvme.write_iops == 100.0
    assert nvme.read_await_ms == 2.0
    assert nvme.write_await_ms == 4.0
    assert nvme.util_pct == 50.0
    assert nvme.rotational is False
    sda = disks["sda"]
    assert sda.read_iops == 0.0 and sda.read_await_ms == 0.0 and sda.util_pct == 0.0
    assert sda.rotational is None
    assert sda.unavailable["rotational"].reason is UnavailableReason.NOT_SUPPORTED


def test_partition_heuristic_without_sys_block(fake: FakeRoot) -> None:
    fake.remove("sys/block")
    names = {d.name for d in collect(fake).disks}
    assert names == {"nvme0n1", "sda"}


def test_one_shot_files(fake: FakeRoot) -> None:
    host = collect(fake).host
    assert host is not None
    assert (host.load_1m, host.load_5m, host.load_15m) == (12.5, 10.25, 8.0)
    assert host.mem_total_mib == 2048.0
    assert host.mem_available_mib == 1024.0
    assert host.mem_available_pct == 50.0
    assert host.swap_total_mib == 1024.0
    assert host.swap_used_mib == 256.0
    assert (host.hugepages_total, host.hugepages_free, host.hugepage_size_kib) == (16, 4, 2048)
    assert host.psi_cpu_some_avg10 == 1.5
    assert host.psi_io_some_avg10 == 12.25
    assert host.psi_io_full_avg10 == 10.5
    assert host.psi_memory_some_avg10 == 3.0
    assert host.psi_memory_full_avg10 == 2.25
    assert host.hostname == "gpu-node-01.example.com"
    assert host.kernel == "5.15.0-105-generic"
    assert host.numa_nodes == 2
    assert host.driver_version == "550.54.15"
    assert host.unavailable == {}


def test_gpus_and_pcie_links(fake: FakeRoot) -> None:
    facts = collect(fake)
    assert facts.host is not None
    assert facts.host.gpu_count_pci == 2  # not the NVSwitch, not the Matrox VGA
    links = {link.pci_bus_id: link for link in facts.pcie_links}
    assert set(links) == {"0000:17:00.0", "0000:18:00.0", "0000:3b:00.0"}
    good, slow = links["0000:17:00.0"], links["0000:18:00.0"]
    assert good.device_class == "gpu"
    assert (good.speed_gts, good.speed_gts_max, good.width, good.width_max) == (16.0, 32.0, 16, 16)
    assert good.numa_node == 0
    assert (slow.speed_gts, slow.width, slow.numa_node) == (2.5, 8, 1)
    assert links["0000:3b:00.0"].device_class == "nic"


def test_nics_skip_virtual(fake: FakeRoot) -> None:
    nics = collect(fake).nics
    assert [n.name for n in nics] == ["ens1f0"]
    nic = nics[0]
    assert nic.pci_bus_id == "0000:3b:00.0"
    assert nic.numa_node == 0
    assert nic.driver == "mlx5_core"
    assert nic.speed_mbps == 100000.0
    assert nic.mtu == 9000
    assert nic.operstate == "up"
    assert (nic.rx_errors, nic.tx_errors, nic.rx_dropped, nic.tx_dropped) == (5, 0, 7, 0)


def test_nic_speed_unknown(fake: FakeRoot) -> None:
    fake.write("sys/devices/pci0000:00/0000:3b:00.0/net/ens1f0/speed", "-1\n")
    nic = collect(fake).nics[0]
    assert nic.speed_mbps is None
    assert nic.unavailable["speed_mbps"].reason is UnavailableReason.NOT_SUPPORTED


def test_ib_ports(fake: FakeRoot) -> None:
    fake.ib_port(
        "mlx5_0",
        "0000:3b:00.0",
        port=2,
        state="1: DOWN",
        phys_state="3: Disabled",
        rate="10 Gb/sec (4X SDR)",
    )
    ports = collect(fake).ib_ports
    assert [(p.ca_name, p.port) for p in ports] == [("mlx5_0", 1), ("mlx5_0", 2)]
    up, down = ports
    assert (up.state, up.phys_state, up.rate_gbps, up.link_layer) == (
        "active",
        "linkup",
        200.0,
        "infiniband",
    )
    assert (up.symbol_errors, up.link_downed, up.rcv_errors, up.xmit_discards) == (12, 1, 0, 3)
    assert (up.pci_bus_id, up.numa_node) == ("0000:3b:00.0", 0)
    assert (down.state, down.phys_state, down.rate_gbps) == ("down", "disabled", 10.0)


def test_missing_files_mark_only_their_fields(fake: FakeRoot) -> None:
    fake.remove("proc/pressure")
    fake.remove("proc/vmstat")
    fake.remove("proc/loadavg")
    fake.remove("proc/driver")
    fake.remove("sys/devices/system/node")
    fake.remove("sys/devices/pci0000:00/0000:3b:00.0/infiniband/mlx5_0/ports/1/counters")
    fake.write("proc/meminfo", "MemTotal: 1024 kB\nMemFree: 512 kB\nSwapTotal: 0 kB\n")
    facts = collect(fake)
    host = facts.host
    assert host is not None
    for fld in (
        "psi_cpu_some_avg10",
        "psi_io_some_avg10",
        "psi_io_full_avg10",
        "psi_memory_some_avg10",
        "psi_memory_full_avg10",
    ):
        assert host.unavailable[fld].reason is UnavailableReason.NOT_SUPPORTED
        assert "PSI" in host.unavailable[fld].detail
    for fld in (
        "swap_in_pages_s",
        "swap_out_pages_s",
        "reclaim_scan_pages_s",
        "direct_reclaim_pages_s",
        "load_1m",
        "driver_version",
        "numa_nodes",
        "mem_available_mib",
        "hugepages_total",
    ):
        assert getattr(host, fld) is None
        assert host.unavailable[fld].reason is UnavailableReason.NOT_SUPPORTED, fld
    assert "3.14" in host.unavailable["mem_available_mib"].detail
    assert host.mem_total_mib == 1.0
    # Untouched sources still there.
    assert host.cpu_user_pct == 45.0
    assert host.gpu_count_pci == 2
    port = facts.ib_ports[0]
    assert port.state == "active" and port.symbol_errors is None
    assert "symbol_errors" in port.unavailable


def test_unreadable_file_is_no_permission(fake: FakeRoot, monkeypatch: pytest.MonkeyPatch) -> None:
    real = Path.read_text

    def read_text(self: Path, *args: object, **kwargs: object) -> str:
        if self.name == "meminfo":
            raise PermissionError(13, "Permission denied")
        return real(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Path, "read_text", read_text)
    host = collect(fake).host
    assert host is not None
    assert host.unavailable["mem_total_mib"].reason is UnavailableReason.NO_PERMISSION
    assert host.load_1m == 12.5


def test_read_file_einval_is_not_supported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def read_text(self: Path, *args: object, **kwargs: object) -> str:
        raise OSError(22, "Invalid argument")

    monkeypatch.setattr(Path, "read_text", read_text)
    text, why = read_file(tmp_path / "speed")
    assert text is None and why is not None
    assert why.reason is UnavailableReason.NOT_SUPPORTED


def test_stat_unchanged_marks_cpu_unavailable(fake: FakeRoot) -> None:
    fake.second.pop("proc/stat")
    host = collect(fake).host
    assert host is not None
    assert host.cpu_user_pct is None
    assert host.unavailable["cpu_user_pct"].reason is UnavailableReason.ERROR
    assert host.cpu_count == 2


def test_link_escaping_the_root_is_ignored(fake: FakeRoot) -> None:
    node = fake.root / "sys/devices/pci0000:00/0000:3b:00.0/net/ens1f0"
    (node / "device").unlink()
    os.symlink("/sys/devices", node / "device")  # absolute: would read the live machine
    nic = collect(fake).nics[0]
    assert nic.pci_bus_id is None


def test_no_proc_is_unavailable(tmp_path: Path) -> None:
    with pytest.raises(CollectorUnavailable):
        HostCollector(sleep=lambda s: None).collect(CollectContext(root=tmp_path), Facts())


def test_keeps_raw_evidence(fake: FakeRoot) -> None:
    ctx = CollectContext(root=fake.root, window_s=0.0)
    HostCollector(sleep=fake.sleep).collect(ctx, Facts())
    sources = {r.source for r in ctx.raw}
    assert {"/proc/meminfo", "/proc/pressure/io"} <= sources


@pytest.mark.skipif(not Path("/proc/stat").exists(), reason="needs a Linux /proc")
def test_real_machine() -> None:
    facts = Facts()
    HostCollector().collect(CollectContext(root=Path("/"), window_s=0.2), facts)
    host = facts.host
    assert host is not None
    assert host.cpu_count is not None and host.cpu_count >= 1
    assert host.mem_total_mib is not None and host.mem_total_mib > 0
    assert host.load_1m is not None and host.load_1m >= 0
    assert host.kernel and host.hostname
    if host.cpu_idle_pct is not None:  # a 0.2 s window always has ticks on a real host
        parts = (
            host.cpu_user_pct,
            host.cpu_system_pct,
            host.cpu_iowait_pct,
            host.cpu_steal_pct,
            host.cpu_idle_pct,
        )
        assert all(p is not None and 0.0 <= p <= 100.0 for p in parts)
        assert math.isclose(sum(p for p in parts if p is not None), 100.0, abs_tol=0.1)
    assert host.gpu_count_pci is not None or "gpu_count_pci" in host.unavailable
    for disk in facts.disks:
        assert disk.util_pct is not None and 0.0 <= disk.util_pct <= 100.0
