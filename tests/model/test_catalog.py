"""The per-kind catalogue entries: how items are matched, keyed and tied to their GPU."""

from __future__ import annotations

from gpu_triage.collectors.merge import update_facts
from gpu_triage.model.catalog import kinds
from gpu_triage.model.facts import Facts, GpuFacts, NvlinkFacts, XidEvent


def test_match_keys() -> None:
    gpu, nvlink, xid = kinds()["gpu"], kinds()["nvlink"], kinds()["xid"]
    assert gpu.match_key(GpuFacts(pci_bus_id="0000:18:00.0", index=1)) == "0000:18:00.0"
    assert gpu.match_key(GpuFacts(index=1)) == "#1"
    assert gpu.match_key(GpuFacts()) is None
    assert nvlink.match_key(NvlinkFacts(gpu_pci_bus_id="b", gpu_index=0, link=3)) == ("b", 0, 3)
    assert xid.match_key(XidEvent(code=79)) is None  # events are replaced, not matched


def test_a_gpu_known_by_index_only_is_updated_by_a_later_read_with_its_bus_id() -> None:
    base = Facts(gpus=[GpuFacts(index=0, temperature_gpu_c=50)])
    update_facts(base, Facts(gpus=[GpuFacts(index=0, pci_bus_id="0000:18:00.0")]))
    assert len(base.gpus) == 1 and base.gpus[0].pci_bus_id == "0000:18:00.0"
    assert base.gpus[0].temperature_gpu_c == 50


def test_the_gpu_an_item_belongs_to() -> None:
    assert kinds()["gpu"].gpu_of(GpuFacts(pci_bus_id="0000:18:00.0")) == "0000:18:00.0"
    assert kinds()["xid"].gpu_of(XidEvent(pci_bus_id="0000:3b:00.0")) == "0000:3b:00.0"
    assert kinds()["sxid"].gpu_key is None
