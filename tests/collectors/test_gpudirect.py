"""GPUDirect prerequisites from a live (fake) node and from lspci: the peer-memory module,
the IOMMU mode, and the bridges above GPUs and NICs with their ACS control."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpu_triage.collectors.base import CollectContext
from gpu_triage.collectors.host import HostCollector, iommu_mode, iommu_words
from gpu_triage.collectors.parsers.adapters import lspci
from gpu_triage.collectors.pcie_paths import ACS_EXT_CAP_ID, acs_from_config
from gpu_triage.engine.compiler import Rulebook
from gpu_triage.engine.evaluate import evaluate
from gpu_triage.engine.inputs import EvalInput
from gpu_triage.model.facts import Facts, GpuFacts, UnavailableReason
from tests.collectors.fakeroot import FakeRoot

LSPCI = Path(__file__).resolve().parents[1] / "data" / "hand-written" / "lspci"


def config_space(control: int | None, *, caps_before: int = 2) -> bytes:
    """A 4 KiB config space: a few other extended capabilities, then ACS (or none)."""
    data = bytearray(4096)
    offset = 0x100
    for i in range(caps_before):
        nxt = offset + 0x10
        data[offset : offset + 4] = (0x0001 + i | (1 << 16) | (nxt << 20)).to_bytes(4, "little")
        offset = nxt
    if control is not None:
        data[offset : offset + 4] = (ACS_EXT_CAP_ID | (1 << 16)).to_bytes(4, "little")
        data[offset + 4 : offset + 6] = (0x5F).to_bytes(2, "little")  # capabilities
        data[offset + 6 : offset + 8] = control.to_bytes(2, "little")
    return bytes(data)


def test_acs_control_bits() -> None:
    flags = acs_from_config(config_space(0x0D))  # SrcValid, ReqRedir, CmpltRedir
    assert flags is not None
    assert (flags["acs_src_valid"], flags["acs_trans_blk"]) == (True, False)
    assert (flags["acs_req_redir"], flags["acs_cmplt_redir"]) == (True, True)
    assert acs_from_config(config_space(0x00)) == dict.fromkeys(flags, False)


def test_no_acs_capability_and_unreadable_space() -> None:
    assert acs_from_config(config_space(None)) == {}
    assert acs_from_config(config_space(0x0D)[:256]) is None  # not root: 256 bytes


def test_a_capability_loop_ends() -> None:
    data = bytearray(4096)
    data[0x100:0x104] = (0x0001 | (1 << 16) | (0x100 << 20)).to_bytes(4, "little")
    assert acs_from_config(bytes(data)) == {}


def _node(tmp: Path, *, acs: int | None, peermem: bool, cmdline: str, group: str | None) -> Path:
    """Root port 00:01.0 -> switch 01:00.0 -> downstream ports 02:08.0 (GPU 03:00.0) and
    02:10.0 (NIC 04:00.0); another GPU on root port 80:01.0."""
    root = FakeRoot(tmp / "root")
    root.write("proc/stat", "cpu  1 0 1 100 0 0 0 0\n")
    base = "sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0"
    devs = {
        "0000:00:01.0": ("sys/devices/pci0000:00/0000:00:01.0", "0x8086", "0x060400"),
        "0000:01:00.0": (base, "0x1000", "0x060400"),
        "0000:02:08.0": (f"{base}/0000:02:08.0", "0x1000", "0x060400"),
        "0000:02:10.0": (f"{base}/0000:02:10.0", "0x1000", "0x060400"),
        "0000:03:00.0": (f"{base}/0000:02:08.0/0000:03:00.0", "0x10de", "0x030200"),
        "0000:04:00.0": (f"{base}/0000:02:10.0/0000:04:00.0", "0x15b3", "0x020700"),
        "0000:80:01.0": ("sys/devices/pci0000:80/0000:80:01.0", "0x1022", "0x060400"),
        "0000:81:00.0": ("sys/devices/pci0000:80/0000:80:01.0/0000:81:00.0", "0x10de", "0x030200"),
    }
    for bdf, (path, vendor, klass) in devs.items():
        for name, text in (
            ("vendor", vendor),
            ("class", klass),
            ("current_link_speed", "32.0 GT/s PCIe"),
            ("max_link_speed", "32.0 GT/s PCIe"),
            ("current_link_width", "16"),
            ("max_link_width", "16"),
            ("numa_node", "0"),
        ):
            root.write(f"{path}/{name}", text + "\n")
        if klass == "0x060400" and acs is not None:
            (root.root / path / "config").write_bytes(config_space(acs))
        root.link(f"sys/bus/pci/devices/{bdf}", path)
        if group is not None and vendor == "0x10de":
            root.write(f"sys/kernel/iommu_groups/{bdf[5:7]}/type", group + "\n")
            root.link(f"{path}/iommu_group", f"sys/kernel/iommu_groups/{bdf[5:7]}")
    # the HCA as the IB stack sees it
    root.link("sys/class/infiniband/mlx5_0/device", devs["0000:04:00.0"][0])
    root.write("sys/class/infiniband/mlx5_0/ports/1/state", "4: ACTIVE\n")
    root.write("sys/class/infiniband/mlx5_0/ports/1/link_layer", "InfiniBand\n")
    root.write(
        "proc/modules",
        "nvidia_uvm 1884160 0 - Live 0x0\n"
        + ("nvidia_peermem 16384 0 - Live 0x0\n" if peermem else "")
        + "nvidia 56680448 2 nvidia_uvm, Live 0x0\n",
    )
    root.mkdir("sys/module/nvidia")
    root.write("proc/cmdline", cmdline + "\n")
    if "iommu=off" not in cmdline and "intel_iommu=off" not in cmdline:
        root.mkdir("sys/class/iommu/dmar0")
    return root.root


def _collect(root: Path) -> Facts:
    facts = Facts()
    HostCollector(sleep=lambda s: None).collect(CollectContext(root=root, window_s=0), facts)
    return facts


def test_bridges_above_gpus_and_nics_with_acs(tmp_path: Path) -> None:
    facts = _collect(
        _node(tmp_path, acs=0x0D, peermem=True, cmdline="ro intel_iommu=on", group="DMA-FQ")
    )
    bridges = {b.pci_bus_id: b for b in facts.pcie_links if b.device_class == "bridge"}
    assert set(bridges) == {
        "0000:00:01.0",
        "0000:01:00.0",
        "0000:02:08.0",
        "0000:02:10.0",
        "0000:80:01.0",
    }
    top = bridges["0000:01:00.0"]
    assert (top.gpus_below, top.nics_below) == (1, 1)
    assert top.devices_below == "GPU 0000:03:00.0, NIC 0000:04:00.0"
    assert (bridges["0000:02:10.0"].gpus_below, bridges["0000:02:10.0"].nics_below) == (0, 1)
    assert top.acs_req_redir is True and top.acs_trans_blk is False
    host = facts.host
    assert host is not None
    assert (host.peermem_loaded, host.peermem_module) == (True, "nvidia_peermem")
    assert (host.iommu_mode, host.iommu_cmdline) == ("translated", "intel_iommu=on")


def test_not_root_leaves_acs_unknown(tmp_path: Path) -> None:
    root = _node(tmp_path, acs=None, peermem=False, cmdline="iommu=pt", group="identity")
    for cfg in root.rglob("0000:0*"):
        if cfg.is_dir() and not cfg.is_symlink():
            (cfg / "config").write_bytes(b"\x00" * 256)
    facts = _collect(root)
    bridge = next(b for b in facts.pcie_links if b.pci_bus_id == "0000:01:00.0")
    why = bridge.why_unavailable("acs_req_redir")
    assert why is not None and why.reason == UnavailableReason.NO_PERMISSION
    assert facts.host is not None
    assert (facts.host.peermem_loaded, facts.host.iommu_mode) == (False, "passthrough")


@pytest.mark.parametrize(
    ("words", "units", "types", "mode"),
    [
        (["intel_iommu=on"], True, set(), "translated"),
        (["intel_iommu=on", "iommu=pt"], True, set(), "passthrough"),
        (["amd_iommu=on", "iommu.passthrough=1"], True, set(), "passthrough"),
        (["intel_iommu=off"], False, set(), "off"),
        ([], False, set(), "absent"),
        (["intel_iommu=on"], True, {"identity"}, "passthrough"),  # the kernel's own answer
        (["iommu=pt"], True, {"DMA"}, "translated"),
    ],
)
def test_iommu_mode(words: list[str], units: bool, types: set[str], mode: str) -> None:
    assert iommu_mode(words, units, types) == mode


def test_iommu_words_are_bounded() -> None:
    assert iommu_words("BOOT_IMAGE=/vmlinuz ro intel_iommu=on quiet iommu=pt") == [
        "intel_iommu=on",
        "iommu=pt",
    ]
    assert len(iommu_words(" ".join(["iommu=pt"] * 5000))) <= 16


def test_live_node_fires_the_gpudirect_rules(tmp_path: Path, builtin_book: Rulebook) -> None:
    facts = _collect(
        _node(tmp_path, acs=0x0D, peermem=False, cmdline="intel_iommu=on", group="DMA")
    )
    facts.gpus = [
        GpuFacts(index=0, pci_bus_id="0000:03:00.0"),
        GpuFacts(index=1, pci_bus_id="0000:81:00.0"),
    ]
    doc = evaluate(EvalInput(facts), builtin_book, engine="reference")
    fired = {f.rule_id for f in doc.findings}
    assert {
        "gpudirect-peermem-not-loaded",
        "gpudirect-acs-redirects-peer-traffic",
        "gpudirect-iommu-translating",
    } <= fired
    acs = [f for f in doc.findings if f.rule_id == "gpudirect-acs-redirects-peer-traffic"]
    assert "GPU 0000:03:00.0" in acs[0].title


def test_lspci_bus_ranges_say_what_is_below(tmp_path: Path) -> None:
    text = (LSPCI / "lspci-vv-root-port-acs-redirect-gpu-hca-nvswitch.txt").read_text()
    facts = lspci(text)
    bridge = next(b for b in facts.pcie_links if b.pci_bus_id == "0000:00:01.0")
    assert (bridge.gpus_below, bridge.nics_below, bridge.acs_req_redir) == (1, 1, True)
    assert facts.fabric is not None and facts.fabric.nvswitch_count == 1
    # a bridge listed alone says nothing of what is below it
    alone = lspci(text.split("03:00.0")[0])
    assert alone.pcie_links[0].gpus_below is None and alone.fabric is None
