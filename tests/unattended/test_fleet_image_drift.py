"""Fleet drift beyond driver and VBIOS (fleet/F1): the run records carry the golden
image's versions (kernel, CUDA, Fabric Manager, BIOS, container toolkit, NIC firmware per
adapter family) and the fleet report names the majority and the outliers."""

from __future__ import annotations

from pathlib import Path

from gpu_triage.model.facts import (
    FabricFacts,
    Facts,
    HostFacts,
    IbPortFacts,
    NicFacts,
    SchedulerFacts,
)
from gpu_triage.ops.exporters import image_versions
from gpu_triage.ops.fleet import analyse, fleet_markdown, read_fleet
from gpu_triage.ops.fleet_read import image_versions as read_versions
from tests.unattended.fleet_records import record, write

GOLDEN = {
    "kernel": "5.15.0-105-generic",
    "cuda": "12.4",
    "bios": "2.5.4",
    "fabric_manager": "550.54.15",
    "container_toolkit": "1.14.3",
    "nic_firmware:28": "28.39.1002",
}


def test_the_record_carries_the_image_versions() -> None:
    facts = Facts(
        host=HostFacts(kernel="5.15.0-105-generic", cuda_version="12.4", bios_version="2.5.4"),
        fabric=FabricFacts(fm_version="550.54.15"),
        scheduler=SchedulerFacts(container_toolkit_version="1.14.3"),
        ib_ports=[
            IbPortFacts(ca_name="mlx5_0", port=1, firmware_version="28.39.1002"),
            IbPortFacts(ca_name="mlx5_1", port=1, firmware_version="28.36.1010"),
            IbPortFacts(ca_name="mlx5_2", port=1, firmware_version="32.41.1000"),  # BlueField-3
        ],
        nics=[NicFacts(name="eno1", firmware_version="4.20 0x8001784e 1.3346.0")],  # no family
    )
    assert image_versions(facts) == {
        **GOLDEN,
        "nic_firmware:28": "28.36.1010, 28.39.1002",
        "nic_firmware:32": "32.41.1000",
    }
    assert image_versions(Facts()) == {}


def test_bad_versions_in_a_record_are_left_out() -> None:
    assert read_versions(["kernel"]) == {}
    assert read_versions({"kernel": 5, "cuda": "", "bios": "x" * 500, "ok": "1"}) == {"ok": "1"}


def test_majority_and_outliers_of_each_version(tmp_path: Path) -> None:
    files = []
    for i in range(6):
        versions = dict(GOLDEN)
        if i == 4:
            versions["kernel"] = "5.15.0-107-generic"
        if i == 5:
            versions["nic_firmware:28"] = "28.36.1010"
            del versions["bios"]  # not read on this node: not an outlier
        files.append(write(tmp_path / f"n{i}.jsonl", [record(f"n{i}", 0, versions=versions)]))
    rep = analyse(read_fleet(files, workers=1))
    drift = {(d.what, d.scope): d for d in rep.drift}
    assert set(drift) == {("kernel", ""), ("NIC firmware", "family 28")}
    kernel = drift[("kernel", "")]
    assert kernel.majority == "5.15.0-105-generic" and kernel.majority_nodes == 5
    assert kernel.outliers == {"5.15.0-107-generic": ["n4"]}
    assert drift[("NIC firmware", "family 28")].outliers == {"28.36.1010": ["n5"]}
    text = fleet_markdown(rep)
    line = next(ln for ln in text.splitlines() if ln.startswith("- **kernel**"))
    assert "105-generic on 5 nodes" in line and line.endswith("107-generic on n4")
    assert "**NIC firmware (family 28)**" in text


def test_the_latest_run_decides(tmp_path: Path) -> None:
    old = dict(GOLDEN, kernel="5.15.0-100-generic")
    recs = [record("n0", 0, versions=old), record("n0", 1, versions=GOLDEN)]
    files = [
        write(tmp_path / "n0.jsonl", recs),
        write(tmp_path / "n1.jsonl", [record("n1", 0, versions=GOLDEN)]),
    ]
    assert analyse(read_fleet(files, workers=1)).drift == []
