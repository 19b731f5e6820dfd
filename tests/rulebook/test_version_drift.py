"""The golden image's pins beyond driver and VBIOS (fleet/F1), from real and real-format
outputs pasted together, against a site file: kernel, CUDA, Fabric Manager, NIC/HCA
firmware, BIOS, container toolkit."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpu_triage.collectors.from_text import intake_paste
from gpu_triage.engine.compiler import Rulebook
from gpu_triage.engine.evaluate import evaluate
from gpu_triage.engine.inputs import EvalInput
from gpu_triage.model.facts import Facts, HostFacts, SiteInventory

DATA = Path(__file__).resolve().parents[1] / "data"
REAL_SMI = DATA / "real-outputs/nvidia-smi/table-8x-h100-sxm-565-new-format-thamada-nvsim.txt"
REAL_IB = DATA / "real-outputs/ib/ibstat-cx6-state-down-phys-linkup-sriov-pod-netop249.txt"
HAND = DATA / "hand-written"
DRIFT = {
    "cuda-version-drift",
    "fabric-manager-version-drift",
    "hca-firmware-drift",
    "container-toolkit-version-drift",
}


def session() -> str:
    return (
        "$ nvidia-smi\n"
        + REAL_SMI.read_text()
        + "$ ibstat\n"
        + REAL_IB.read_text()
        + "$ nvidia-ctk --version\n"
        + (HAND / "container/nvidia-ctk-version-1.14.3.txt").read_text()
        + "$ nv-fabricmanager --version\n"
        + (HAND / "fabric-manager/nv-fabricmanager-version.txt").read_text()
    )


def drift(book: Rulebook, facts: Facts, engine: str = "reference") -> dict[str, str]:
    doc = evaluate(EvalInput(facts), book, engine=engine)
    return {f.rule_id: f.title for f in doc.findings if f.rule_id.endswith("-drift")}


def pasted(site: SiteInventory) -> Facts:
    intake = intake_paste(session(), "session.txt")
    assert not intake.problems, [p.describe() for p in intake.problems]
    facts = intake.facts
    facts.site = site
    return facts


@pytest.mark.parametrize("engine", ["reference", "durable"])
def test_a_node_off_every_pin(builtin_book: Rulebook, engine: str) -> None:
    site = SiteInventory(
        pinned_cuda_version="12.4",
        pinned_fabric_manager_version="550.54.15",
        pinned_nic_firmware="20.31.1014",
        pinned_container_toolkit_version="1.17.4",
    )
    got = drift(builtin_book, pasted(site), engine)
    assert set(got) == DRIFT
    assert got["cuda-version-drift"].endswith(": 12.7, pinned 12.4")
    assert got["hca-firmware-drift"] == (
        "HCA mlx5_7 runs firmware other than the pinned version (20.28.4000)"
    )
    assert "1.14.3" in got["container-toolkit-version-drift"]


def test_a_node_on_every_pin(builtin_book: Rulebook) -> None:
    site = SiteInventory(
        pinned_cuda_version="12.7",
        pinned_fabric_manager_version="535.104.05",
        pinned_nic_firmware="20.28.4000",
        pinned_container_toolkit_version="v1.14.3",
        pinned_driver_version="565.57.01",
    )
    assert drift(builtin_book, pasted(site)) == {}


def test_a_pin_for_another_nic_family_holds_no_hca(builtin_book: Rulebook) -> None:
    got = drift(builtin_book, pasted(SiteInventory(pinned_nic_firmware="28.39.1002")))
    assert "hca-firmware-drift" not in got


def test_ethtool_output_holds_the_interface_to_the_pin(builtin_book: Rulebook) -> None:
    text = "$ ethtool -i ens1f0np0\n" + (HAND / "ethtool/ethtool-i-connectx7-psid.txt").read_text()
    facts = intake_paste(text, "p.txt").facts
    facts.site = SiteInventory(pinned_nic_firmware="28.39.1002")
    assert drift(builtin_book, facts) == {
        "nic-firmware-drift": "NIC ens1f0np0 runs firmware other than the pinned version "
        "(28.36.1010)"
    }


def test_kernel_and_bios_from_the_host_collector_facts(builtin_book: Rulebook) -> None:
    facts = Facts(
        host=HostFacts(kernel="5.15.0-107-generic", bios_version="2.3.5", bios_date="09/14/2023"),
        site=SiteInventory(pinned_kernel="5.15.0-105-generic", pinned_bios_version="2.5.4"),
    )
    got = drift(builtin_book, facts)
    assert got == {
        "kernel-version-drift": "The kernel differs from the pinned release: "
        "5.15.0-107-generic, pinned 5.15.0-105-generic",
        "bios-version-drift": "The system BIOS differs from the pinned version: 2.3.5, "
        "pinned 2.5.4",
    }


def test_a_pin_the_node_cannot_be_checked_against_is_not_a_pass(builtin_book: Rulebook) -> None:
    # the BIOS could not be read: the pin is not silently met
    facts = Facts(
        host=HostFacts(kernel="5.15.0-105-generic"), site=SiteInventory(pinned_bios_version="2.5.4")
    )
    doc = evaluate(EvalInput(facts), builtin_book, engine="reference")
    assert "bios-version-drift" in {c.rule_id for c in doc.cannot_evaluate}
