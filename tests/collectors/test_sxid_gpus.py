"""SXids tied to the GPUs behind the NVSwitch: the remote end of each GPU link from NVML and
from ``nvidia-smi nvlink -R`` (its format is recalled, not verified on a machine: the
fixture says so in its name), and the map the engine applies before evaluation."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from gpu_triage.collectors.base import CollectContext
from gpu_triage.collectors.nvml import NvmlCollector
from gpu_triage.collectors.parsers.nvlink import parse_nvlink_status
from gpu_triage.engine.sxid_gpus import SwitchMap
from gpu_triage.model.facts import Facts, GpuFacts, NvlinkFacts, SxidEvent

DATA = Path(__file__).resolve().parents[1] / "data" / "hand-written" / "nvidia-smi"


def _fake_nvml():  # type: ignore[no-untyped-def]
    path = Path(__file__).resolve().parents[1] / "fakes" / "fake_nvml.py"
    spec = importlib.util.spec_from_file_location("gpu_triage_tests_fake_nvml", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_nvlink_r_names_the_switch_port() -> None:
    links = parse_nvlink_status((DATA / "nvlink-R-h100-two-gpus-recalled.txt").read_text())
    got = [(lk.gpu_index, lk.link, lk.remote_pci_bus_id, lk.remote_link, lk.active) for lk in links]
    assert got == [
        (0, 0, "0000:05:00.0", 33, True),
        (0, 1, "0000:05:00.0", 34, True),
        (0, 2, "0000:06:00.0", 12, True),
        (1, 0, "0000:05:00.0", 40, True),
        (1, 1, None, None, False),
    ]


def test_nvml_reads_the_remote_end_of_active_links(tmp_path: Path) -> None:
    fk = _fake_nvml()
    gpu = fk.h100_sxm()
    gpu.nvlinks[0] = fk.FakeLink(remote_bus="00000000:05:00.0")
    gpu.nvlinks[1] = fk.FakeLink(active=False, remote_bus="00000000:05:00.0")
    facts = Facts()
    NvmlCollector(fk.FakeNvml([gpu])).collect(CollectContext(root=tmp_path, window_s=0.05), facts)
    first, second, third = facts.nvlinks[:3]
    assert (first.remote_pci_bus_id, first.remote_device_type) == ("0000:05:00.0", "switch")
    assert second.remote_pci_bus_id is None  # a link down has no far end to ask about
    assert third.remote_pci_bus_id is None and "remote_pci_bus_id" in third.unavailable


def _facts(**links: tuple[str, int | None]) -> Facts:
    gpus = [GpuFacts(index=i, pci_bus_id=f"0000:{0x18 + 0x10 * i:02x}:00.0") for i in range(4)]
    nvlinks = []
    for name, (switch, port) in links.items():
        i, k = (int(x) for x in name[1:].split("_"))
        nvlinks.append(
            NvlinkFacts(
                gpu_index=i,
                gpu_pci_bus_id=gpus[i].pci_bus_id,
                link=k,
                active=True,
                remote_pci_bus_id=switch,
                remote_link=port,
                remote_device_type="switch",
            )
        )
    return Facts(gpus=gpus, nvlinks=nvlinks)


def test_port_switch_and_unknown() -> None:
    facts = _facts(
        g0_0=("0000:05:00.0", 33), g1_0=("0000:05:00.0", 34), g2_0=("0000:06:00.0", None)
    )
    m = SwitchMap(facts)
    port = m.update(SxidEvent(code=23001, pci_bus_id="0000:05:00.0", link=34))
    assert port == {
        "gpus": "GPU 1 (0000:28:00.0)",
        "gpu_count": 1,
        "gpus_by": "port",
        "gpu_index": 1,
    }
    # a port no GPU link ends on (a trunk port): every GPU of that switch
    trunk = m.update(SxidEvent(code=12028, pci_bus_id="0000:05:00.0", link=60))
    assert trunk["gpus_by"] == "switch" and trunk["gpu_count"] == 2
    assert trunk["gpus"] == "GPU 0 (0000:18:00.0), GPU 1 (0000:28:00.0)"
    unknown = m.update(SxidEvent(code=12028, pci_bus_id="0000:99:00.0", link=1))
    assert unknown["gpus_by"] == "unknown" and "behind NVSwitch 0000:99:00.0" in unknown["gpus"]
    assert "gpu_count" not in unknown


def test_a_large_fabric_is_named_within_bounds() -> None:
    nvlinks = [
        NvlinkFacts(
            gpu_index=i,
            gpu_pci_bus_id=f"0001:{i:02x}:00.0",
            link=0,
            remote_pci_bus_id="0000:05:00.0",
        )
        for i in range(72)
    ]
    got = SwitchMap(Facts(nvlinks=nvlinks)).update(SxidEvent(code=1, pci_bus_id="0000:05:00.0"))
    assert got["gpu_count"] == 72
    assert str(got["gpus"]).endswith("and 56 more")
