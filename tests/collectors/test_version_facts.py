"""What the golden image pins beside the driver (fleet/F1), as facts: BIOS version and
date (sysfs DMI), NIC and HCA firmware (sysfs fw_ver, ibstat, ibv_devinfo, ethtool -i), the
NVIDIA Container Toolkit version (nvidia-ctk / nvidia-container-cli --version), and the
site's pins as a site file writes them."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gpu_triage.collectors.base import CollectContext
from gpu_triage.collectors.from_text import intake_paste
from gpu_triage.collectors.host import HostCollector, read_short
from gpu_triage.collectors.parsers import ParseError
from gpu_triage.collectors.parsers.container_runtime import parse_toolkit_version, toolkit_version
from gpu_triage.collectors.parsers.ethtool import parse_ethtool_i
from gpu_triage.collectors.parsers.ibstat import parse_ibstat
from gpu_triage.collectors.parsers.ibv_devinfo import parse_ibv_devinfo
from gpu_triage.collectors.scheduler import ContainerRuntimeCollector
from gpu_triage.io.commands import CommandResult
from gpu_triage.model.facts import Facts, SiteInventory, UnavailableReason

try:
    from tests.collectors.fakeroot import FakeRoot, build_fake_root
except ImportError:  # tests/ is not a package: pytest put this folder on sys.path
    from fakeroot import FakeRoot, build_fake_root  # type: ignore[no-redef]

DATA = Path(__file__).resolve().parents[1] / "data"
HAND = DATA / "hand-written"
REAL_IB = DATA / "real-outputs" / "ib"


def read(rel: str) -> str:
    return (HAND / rel).read_text()


# --------------------------------------------------------------------------- BIOS, fw_ver


def collect_host(fake: FakeRoot) -> Facts:
    facts = Facts()
    HostCollector(sleep=fake.sleep).collect(CollectContext(root=fake.root), facts)
    return facts


def test_bios_version_and_date_from_dmi(tmp_path: Path) -> None:
    fake = build_fake_root(tmp_path)  # sysfs's /sys/class/dmi/id link to the DMI device
    host = collect_host(fake).host
    assert host is not None
    assert (host.bios_version, host.bios_date) == ("2.5.4", "09/14/2023")


def test_no_dmi_marks_bios_unavailable(tmp_path: Path) -> None:
    fake = build_fake_root(tmp_path)
    fake.remove("sys/devices/virtual/dmi/id")  # an ARM box without DMI, a container
    host = collect_host(fake).host
    assert host is not None and host.bios_version is None
    assert host.unavailable["bios_version"].reason is UnavailableReason.NOT_SUPPORTED


def test_bios_strings_are_one_printable_line(tmp_path: Path) -> None:
    fake = build_fake_root(tmp_path)
    fake.write("sys/devices/virtual/dmi/id/bios_version", "  U50 v2.80\x1b[31m \nsecond line\n")
    fake.write("sys/devices/virtual/dmi/id/bios_date", "   \n")
    host = collect_host(fake).host
    assert host is not None
    assert host.bios_version == "U50 v2.80[31m"
    assert host.bios_date is None and "bios_date" in host.unavailable


def test_a_planted_fifo_or_huge_file_does_not_block_or_flood(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "bios_version")
    text, why = read_short(tmp_path / "bios_version")
    assert text is None and why is not None and "not a regular file" in why.detail
    (tmp_path / "bios_date").write_text("09/14/2023\n" + "1" * 100_000)
    assert read_short(tmp_path / "bios_date") == ("09/14/2023", None)  # read 256 bytes at most
    (tmp_path / "bios_date").write_text("1" * 100_000)
    assert read_short(tmp_path / "bios_date") == (None, None)  # no whole line in them


def test_hca_firmware_from_sysfs(tmp_path: Path) -> None:
    facts = collect_host(build_fake_root(tmp_path))
    assert [p.firmware_version for p in facts.ib_ports] == ["28.39.1002"]
    assert facts.ib_ports[0].firmware_family == "28"
    # the interface's firmware is ethtool's to tell: the HCA's is not copied to it
    assert facts.nics[0].firmware_version is None


def test_no_fw_ver_leaves_the_firmware_unavailable(tmp_path: Path) -> None:
    fake = build_fake_root(tmp_path)
    fake.remove("sys/devices/pci0000:00/0000:3b:00.0/infiniband/mlx5_0/fw_ver")
    facts = collect_host(fake)
    assert facts.ib_ports[0].firmware_version is None
    assert facts.ib_ports[0].unavailable["firmware_version"].reason is (
        UnavailableReason.NOT_SUPPORTED
    )


# --------------------------------------------------------------------------- pastes


def test_real_ibstat_firmware_per_ca() -> None:
    (cx6,) = parse_ibstat(
        (REAL_IB / "ibstat-cx6-state-down-phys-linkup-sriov-pod-netop249.txt").read_text()
    )
    assert (cx6.ca_name, cx6.firmware_version, cx6.firmware_family) == (
        "mlx5_7",
        "20.28.4000",
        "20",
    )
    ports = parse_ibstat(
        (REAL_IB / "ibstat-mlx4-2port-ibwarn-debug-interleaved-rdmacore847.txt").read_text()
    )
    assert {p.firmware_version for p in ports} == {"2.42.5000"}  # ConnectX-3, both ports
    assert len(ports) == 2


def test_ibv_devinfo_fw_ver_belongs_to_its_device() -> None:
    ports = parse_ibv_devinfo(read("ib/ibv_devinfo-plain-roce-one-port.txt"))
    assert [p.firmware_version for p in ports] == ["22.36.1010"]
    two = (
        "hca_id:\tmlx5_0\n\tfw_ver:\t\t28.39.1002\n\t\tport:\t1\n\t\t\tstate:\tPORT_ACTIVE (4)\n"
        "hca_id:\tmlx5_1\n\t\tport:\t1\n\t\t\tstate:\tPORT_DOWN (1)\n"
    )
    assert [p.firmware_version for p in parse_ibv_devinfo(two)] == ["28.39.1002", None]


def test_ethtool_i_connectx_firmware_and_psid() -> None:
    (nic,) = parse_ethtool_i(read("ethtool/ethtool-i-connectx7-psid.txt"))
    assert (nic.driver, nic.firmware_version, nic.firmware_psid) == (
        "mlx5_core",
        "28.36.1010",
        "MT_0000000838",
    )
    assert (nic.pci_bus_id, nic.firmware_family) == ("0000:17:00.0", "28")


def test_ethtool_i_other_vendors_in_a_loop() -> None:
    nics = parse_ethtool_i(read("ethtool/ethtool-i-loop-intel-broadcom-virtio.txt"))
    assert [(n.driver, n.firmware_version) for n in nics] == [
        ("ice", "4.20 0x8001784e 1.3346.0"),
        ("bnxt_en", "222.0.150.0/pkg 22.21.06.80"),
        ("virtio_net", None),
    ]
    assert [n.firmware_family for n in nics] == [None, None, None]
    assert nics[0].pci_bus_id == "0000:31:00.0"


def test_ethtool_i_prompts_name_the_interface() -> None:
    text = (
        "$ ethtool -i ens1f0np0\n"
        + read("ethtool/ethtool-i-connectx7-psid.txt")
        + "$ ethtool -i eno1\ndriver: igb\nversion: 5.15.0\nfirmware-version: N/A\n"
        "bus-info: 01:00.0\n"
    )
    nics = parse_ethtool_i(text)
    assert [(n.name, n.firmware_version, n.pci_bus_id) for n in nics] == [
        ("ens1f0np0", "28.36.1010", "0000:17:00.0"),
        ("eno1", None, "0000:01:00.0"),
    ]


@pytest.mark.parametrize("text", ["", "garbage\n", "firmware-version: 1.2.3\n"])
def test_ethtool_i_without_a_driver_line_is_refused(text: str) -> None:
    with pytest.raises(ParseError, match="ethtool -i"):
        parse_ethtool_i(text)


def test_ethtool_i_is_recognised_in_a_paste() -> None:
    intake = intake_paste(
        "[root@n7 ~]# ethtool -i ens1f0np0\n" + read("ethtool/ethtool-i-connectx7-psid.txt"),
        "p.txt",
    )
    assert {p.parser for p in intake.pieces} == {"ethtool-i"}
    assert [(n.name, n.firmware_version) for n in intake.facts.nics] == [
        ("ens1f0np0", "28.36.1010")
    ]


@pytest.mark.parametrize(
    ("rel", "version"),
    [
        ("container/nvidia-ctk-version-1.14.3.txt", "1.14.3"),
        ("container/nvidia-container-cli-version-1.14.3.txt", "1.14.3"),
        ("container/nvidia-container-runtime-version-1.14.3-runc.txt", "1.14.3"),
    ],
)
def test_toolkit_version_of_each_binary(rel: str, version: str) -> None:
    assert toolkit_version(read(rel)) == version


@pytest.mark.parametrize(
    ("text", "version"),
    [
        ("NVIDIA Container Toolkit CLI version 1.17.4\ncommit: 9b69590c74\n", "1.17.4"),
        ("NVIDIA Container Toolkit CLI version 1.14.0-rc.2\ncommit: 0f7b3b1\n", "1.14.0-rc.2"),
        ("NVIDIA Container Runtime Hook version 1.13.5\ncommit: 6b8589d\n", "1.13.5"),
        ("version: 1.0.0\nbuild date: 2019-07-27T01:54+00:00\n", "1.0.0"),  # before 1.1
        ("runc version 1.1.9\ncommit: v1.1.9-0-gccaecfc\n", None),  # runc alone: no toolkit
        ("bash: nvidia-ctk: command not found\n", None),
    ],
)
def test_toolkit_version_variants(text: str, version: str | None) -> None:
    assert toolkit_version(text) == version


def test_toolkit_version_paste_and_refusal() -> None:
    intake = intake_paste(
        "$ nvidia-ctk --version\n" + read("container/nvidia-ctk-version-1.14.3.txt")
    )
    assert intake.facts.scheduler is not None
    assert intake.facts.scheduler.container_toolkit_version == "1.14.3"
    with pytest.raises(ParseError, match="Container Toolkit version"):
        parse_toolkit_version("runc version 1.1.9\n")


class _OnlyFakes(CollectContext):
    """The fake tools alone: any other command is missing, whatever this machine has."""

    def run(self, collector: str, argv: list[str], timeout_s: float | None = None) -> CommandResult:
        if not (Path(self.search_path or "") / argv[0]).exists():
            return CommandResult(argv=argv, missing=True, error="not found")
        return super().run(collector, argv, timeout_s)


def _tools(tmp: Path, outputs: dict[str, str]) -> str:
    bindir = tmp / "bin"
    bindir.mkdir()
    for name, out in outputs.items():
        (bindir / name).write_text(f"#!/bin/sh\ncat <<'EOF'\n{out}EOF\n")
        (bindir / name).chmod(0o755)
    return str(bindir)


def _runtime_facts(tmp: Path, outputs: dict[str, str]) -> Facts:
    (tmp / "root/etc/docker").mkdir(parents=True)
    (tmp / "root/etc/docker/daemon.json").write_text('{"runtimes": {"nvidia": {"path": "x"}}}')
    facts = Facts()
    ctx = _OnlyFakes(root=tmp / "root", search_path=_tools(tmp, outputs))
    ContainerRuntimeCollector().collect(ctx, facts)
    return facts


def test_live_toolkit_version_from_nvidia_ctk(tmp_path: Path) -> None:
    facts = _runtime_facts(
        tmp_path, {"nvidia-ctk": read("container/nvidia-ctk-version-1.14.3.txt")}
    )
    assert facts.scheduler is not None
    assert facts.scheduler.container_toolkit_version == "1.14.3"


def test_live_toolkit_version_from_the_old_cli(tmp_path: Path) -> None:
    facts = _runtime_facts(
        tmp_path,
        {"nvidia-container-cli": read("container/nvidia-container-cli-version-1.14.3.txt")},
    )
    assert facts.scheduler is not None
    assert facts.scheduler.container_toolkit_version == "1.14.3"


def test_live_without_the_toolkit_says_so(tmp_path: Path) -> None:
    facts = _runtime_facts(tmp_path, {})
    assert facts.scheduler is not None and facts.scheduler.container_toolkit_version is None
    why = facts.scheduler.unavailable["container_toolkit_version"]
    assert why.reason is UnavailableReason.NOT_SUPPORTED


# --------------------------------------------------------------------------- pins


def test_pins_as_site_files_write_them() -> None:
    site = SiteInventory.model_validate(
        {
            "pinned_kernel": " 5.15.0-105-generic\n",
            "pinned_cuda_version": 12.4,
            "pinned_container_toolkit_version": "v1.14.3",
            "pinned_nic_firmware": "28.39.1002",
            "pinned_bios_version": "",
        }
    )
    assert site.pinned_kernel == "5.15.0-105-generic"
    assert site.pinned_cuda_version == "12.4"
    assert site.pinned_container_toolkit_version == "1.14.3"
    assert site.pinned_nic_firmware_family == "28"
    assert site.pinned_bios_version is None  # an empty pin pins nothing
    assert SiteInventory(pinned_cuda_version="12.4.1").pinned_cuda_version == "12.4"
    # firmware is compared as printed: a BIOS called V2.80 keeps its V
    assert SiteInventory(pinned_bios_version="V2.80").pinned_bios_version == "V2.80"
    assert SiteInventory(
        pinned_fabric_manager_version="v550.54.15"
    ).pinned_fabric_manager_version == ("550.54.15")
    assert SiteInventory(pinned_driver_version=" 550.54.15").pinned_driver_version == "550.54.15"
