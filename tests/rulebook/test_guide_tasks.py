"""The guide's own sample outputs for its tasks (tests/data/guide, copied verbatim)
parse with the project's parsers and lead to the decision the guide states, and so do
realistic variations of them (guide/T3, T5, T6, T7, T9, T14, T15; FD3, FD4)."""

from __future__ import annotations

import functools
from pathlib import Path

from gpu_triage.collectors.from_text import TextInput, snapshot_from_texts
from gpu_triage.engine.compiler import Rulebook, load_rulebook
from gpu_triage.engine.evaluate import evaluate
from gpu_triage.engine.findings import FindingsDocument
from gpu_triage.model.facts import JobMetrics, NicFacts, SiteInventory
from gpu_triage.model.snapshot import Snapshot

SAMPLES = Path(__file__).parents[1] / "data" / "guide-samples"


@functools.cache
def book() -> Rulebook:
    return load_rulebook()


def sample(n: int) -> str:
    return (SAMPLES / f"t{n}.txt").read_text()


def snap(*texts: tuple[str, str]) -> Snapshot:
    return snapshot_from_texts([TextInput(t, f"guide-{p}", p) for p, t in texts])


def run(s: Snapshot) -> FindingsDocument:
    return evaluate(s, book(), engine="reference")


def fired(doc: FindingsDocument, rule: str) -> list[str]:
    return [f.subject for f in doc.findings if f.rule_id == rule]


def status(doc: FindingsDocument, rule: str) -> set[str]:
    out = {"fired" for f in doc.findings if f.rule_id == rule}
    out |= {"cannot_evaluate" for f in doc.cannot_evaluate if f.rule_id == rule}
    out |= {"needs_confirmation" for f in doc.needs_confirmation if f.rule_id == rule}
    return out


# --------------------------------------------------------------- T3: NVLink speed


def test_t3_the_guides_a100_links_at_25_gbps_are_at_the_expected_bandwidth() -> None:
    s = snap(("nvidia-smi", sample(1)), ("nvidia-smi-nvlink", sample(3)))
    links = [n for n in s.facts.nvlinks if n.gpu_index == 0]
    assert [(n.link, n.active, n.speed_gbps) for n in links] == [(0, True, 25.0), (1, True, 25.0)]
    assert links[0].gpu_pci_bus_id == "0000:41:00.0"  # tied to the GPU table by its index
    doc = run(s)
    assert not status(doc, "nvlink-below-model-speed")
    assert not status(doc, "nvlink-links-down")


def test_t3_a_link_trained_at_half_rate_is_not_at_the_expected_bandwidth() -> None:
    half = sample(3).replace(
        "GPU 0: NVLink Status\nLink 0: 25 GB/s", "GPU 0: NVLink Status\nLink 0: 12.5 GB/s"
    )
    doc = run(snap(("nvidia-smi", sample(1)), ("nvidia-smi-nvlink", half)))
    assert len(fired(doc, "nvlink-below-model-speed")) == 1


def test_t3_an_h100_at_its_printed_26_562_passes_and_at_a100_rate_too() -> None:
    h100 = sample(1).replace("A100-SXM4-80GB", "H100 80GB HBM3")
    lines = "GPU 0: NVLink Status\n" + "".join(f"\tLink {i}: 26.562 GB/s\n" for i in range(18))
    assert not status(
        run(snap(("nvidia-smi", h100), ("nvidia-smi-nvlink", lines))), "nvlink-below-model-speed"
    )
    b200 = sample(1).replace("A100-SXM4-80GB", "B200")
    doc = run(snap(("nvidia-smi", b200), ("nvidia-smi-nvlink", lines)))
    assert len([f for f in doc.findings if f.rule_id == "nvlink-below-model-speed"]) == 18


# --------------------------------------------------------------- T9: iperf3


def test_t9_the_guides_32_gbps_where_100_is_expected_fires() -> None:
    s = snap(("iperf3", sample(9)))
    assert s.facts.host is not None and s.facts.host.net_throughput_gbps == 32.1
    # a paste knows no interface: the rule asks what the path should reach
    doc = run(s)
    assert status(doc, "network-throughput-low") == {"cannot_evaluate"}
    f = next(f for f in doc.cannot_evaluate if f.rule_id == "network-throughput-low")
    assert [q.id for q in f.questions] == ["expected_net_gbps"]
    s.facts.answers["expected_net_gbps"] = 100
    assert fired(run(s), "network-throughput-low")
    s.facts.nics = [NicFacts(name="ens1f0", operstate="up", speed_mbps=100000)]
    del s.facts.answers["expected_net_gbps"]
    assert fired(run(s), "network-throughput-low")


def test_t9_the_same_32_gbps_fills_a_25g_link() -> None:
    s = snap(("iperf3", sample(9)))
    s.facts.nics = [NicFacts(name="ens1f0", operstate="up", speed_mbps=25000)]
    assert not status(run(s), "network-throughput-low")
    s.facts.site = SiteInventory(expected_net_gbps=40)
    assert not status(run(s), "network-throughput-low")  # 32.1 of 40 is above 70 %


# --------------------------------------------------------------- T5: NUMA placement


def test_t5_topology_gives_each_gpu_its_cpus_and_node_and_a_rank_pinned_elsewhere_fires() -> None:
    s = snap(("nvidia-smi", sample(1)), ("nvidia-smi-topo", sample(5)))
    g0 = next(g for g in s.facts.gpus if g.index == 0)
    assert g0.cpu_affinity == "0-31" and g0.numa_node == 0
    s2 = snap(
        ("nvidia-smi", sample(1)),
        ("nvidia-smi-topo", sample(5)),
        ("nvidia-smi-compute-apps", sample(6)),
    )
    assert [p.pid for p in s2.facts.processes] == [23144]
    p = s2.facts.processes[0]
    p.gpu_pci_bus_id, p.gpu_index = "0000:41:00.0", 0
    p.cpus_allowed, p.cpus_pinned, p.gpu_numa_cpus_pct = "32-63", True, 0.0
    assert fired(run(s2), "gpu-process-pinned-off-numa-node")
    p.cpus_allowed, p.gpu_numa_cpus_pct = "0-31", 100.0
    assert not status(run(s2), "gpu-process-pinned-off-numa-node")


# --------------------------------------------------------------- T6 / T7 / T14 / T15


def test_t6_one_pid_holds_the_memory() -> None:
    s = snap(("nvidia-smi-compute-apps", sample(6)))
    assert [(p.pid, p.name, p.used_memory_mib) for p in s.facts.processes] == [
        (23144, "python", 61234.0)
    ]
    two = sample(6) + "23199, python, 10240 MiB\n"
    assert len(snap(("nvidia-smi-compute-apps", two)).facts.processes) == 2


def test_t7_one_core_at_99_with_a_waiting_gpu_is_the_bottleneck_and_steal_decides_hosts() -> None:
    waiting = sample(1).replace("92% Default", "18% Default")
    s = snap(("nvidia-smi", waiting), ("mpstat", sample(7)))
    assert s.facts.host is not None and s.facts.host.busiest_core == 7
    doc = run(s)
    assert fired(doc, "cpu-preprocessing-bottleneck")
    assert not fired(doc, "host-cpu-contention")  # %steal 0.0
    stolen = sample(7).replace("0.0 10.0", "12.5 10.0")
    assert fired(run(snap(("nvidia-smi", waiting), ("mpstat", stolen))), "host-cpu-contention")
    # the guide's own node: GPU at 92 % is not starved by that core
    assert not status(
        run(snap(("nvidia-smi", sample(1)), ("mpstat", sample(7)))), "cpu-preprocessing-bottleneck"
    )


def test_t14_no_hugepages_on_an_rdma_node() -> None:
    s = snap(("meminfo", sample(14)))
    assert s.facts.host is not None and s.facts.host.hugepages_total == 0
    s.facts.site = SiteInventory(rdma_configured=True)
    assert fired(run(s), "hugepages-missing-for-rdma")


def test_t15_the_containers_shortened_table_sees_the_gpu() -> None:
    s = snap(("nvidia-smi", sample(15)))
    assert [(g.index, g.pci_bus_id) for g in s.facts.gpus] == [(0, "0000:41:00.0")]
    assert s.facts.host is not None and s.facts.host.gpu_count_visible == 1


# --------------------------------------------------------------- FD3 ranking


def test_a_downtrained_link_ranks_in_fd3_before_the_scheduler_stage() -> None:
    r = {x.id: x for x in book().rules}
    assert r["pcie-link-downgraded"].rule.stage.value == "FD3"
    assert r["gpu-shared-by-processes"].rule.stage.value == "FD4"


def test_nic_neighbours_are_asked_only_of_multi_node_jobs() -> None:
    s = snap(("iperf3", sample(9)))
    s.facts.job = JobMetrics(nodes_in_job=4)
    assert status(run(s), "nic-shared-with-other-jobs") == {"needs_confirmation"}
    s.facts.job = JobMetrics(nodes_in_job=1)
    assert not status(run(s), "nic-shared-with-other-jobs")
