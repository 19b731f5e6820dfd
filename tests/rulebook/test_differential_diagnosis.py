"""Differential diagnosis of low GPU utilisation (guide/CM1, CP1, CP2, MS2, Q7, FD1-FD4).

One low-utilisation node, one candidate cause at a time: the candidate's rule ranks
first and every other rule of the group is listed as ruled out, with the reason."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from gpu_triage.engine.evaluate import evaluate
from gpu_triage.engine.findings import FindingsDocument
from gpu_triage.engine.inputs import EvalInput
from gpu_triage.model.facts import Facts

GROUP = "low-gpu-throughput"
BUS = "0000:18:00.0"


def low_util_node() -> dict[str, Any]:
    """A GPU 15% busy with a job loaded, and nothing wrong anywhere."""
    return {
        "host": {
            "hostname": "gpu-node-017",
            "cpu_count": 64,
            "cpu_iowait_pct": 1.0,
            "cpu_steal_pct": 0.0,
            "cpu_idle_pct": 85.0,
            "busiest_core": 3,
            "busiest_core_busy_pct": 30.0,
            "mem_total_mib": 1_000_000.0,
            "mem_available_mib": 700_000.0,
            "swap_in_pages_s": 0.0,
            "swap_out_pages_s": 0.0,
            "direct_reclaim_pages_s": 0.0,
            "psi_cpu_some_avg10": 1.0,
            "psi_memory_some_avg10": 0.0,
            "driver_version": "565.57.01",
            "gpu_count_visible": 1,
            "gpu_count_pci": 1,
        },
        "disks": [
            {"name": "nvme0n1", "util_pct": 4.0, "read_iops": 40.0, "read_request_kib": 128.0}
        ],
        "gpus": [
            {
                "index": 0,
                "name": "NVIDIA H100 80GB HBM3",
                "pci_bus_id": BUS,
                "utilization_gpu_pct": 15.0,
                "memory_used_mib": 60_000.0,
                "memory_total_mib": 81_559.0,
                "power_draw_w": 150.0,
                "power_limit_w": 700.0,
                "temperature_gpu_c": 55.0,
                "temperature_slowdown_c": 90.0,
                "throttle_gpu_idle": False,
                "throttle_sw_power_cap": False,
                "throttle_sw_thermal_slowdown": False,
                "throttle_hw_thermal_slowdown": False,
                "throttle_hw_power_brake_slowdown": False,
                "pcie_link_gen": 5,
                "pcie_link_gen_max": 5,
                "pcie_link_width": 16,
                "pcie_link_width_max": 16,
                "nvlink_links_total": 18,
                "nvlink_links_active": 18,
                "process_count": 1,
                "mig_mode": False,
            }
        ],
        "job": {"rank_step_times_ms": [100.0, 101.0]},
    }


def with_cause(cause: str) -> dict[str, Any]:
    facts = copy.deepcopy(low_util_node())
    host, gpu = facts["host"], facts["gpus"][0]
    match cause:
        case "storage":
            host["cpu_iowait_pct"] = 35.0
            facts["disks"][0]["util_pct"] = 99.0
        case "cpu":
            host["busiest_core_busy_pct"] = 99.5
        case "memory":
            host.update(swap_in_pages_s=4000.0, swap_out_pages_s=9000.0, psi_memory_some_avg10=30.0)
            host["mem_available_mib"] = 20_000.0
        case "nvlink":
            gpu["nvlink_links_active"] = 12
        case "pcie":
            gpu["pcie_link_width"] = 8
        case "ranks":
            facts["job"]["rank_step_times_ms"] = [100.0, 145.0]
        case "thermal":
            gpu.update(throttle_hw_thermal_slowdown=True, temperature_gpu_c=91.0)
        case "power":
            gpu["throttle_hw_power_brake_slowdown"] = True
        case "neighbour":
            gpu["process_count"] = 3
        case "none":
            pass
    return facts


CAUSES = {
    "storage": "input-bound-pipeline",
    "cpu": "cpu-preprocessing-bottleneck",
    "memory": "host-memory-pressure",
    "nvlink": "nvlink-links-down",
    "pcie": "pcie-link-downgraded",
    "ranks": "rank-step-time-imbalance",
    "thermal": "gpu-thermal-throttling",
    "power": "gpu-power-brake",
    "neighbour": "gpu-shared-by-processes",
}


def run(builtin_book, facts: dict[str, Any], engine: str) -> FindingsDocument:
    inp = EvalInput(Facts.model_validate(facts), {}, hostname="gpu-node-017")
    return evaluate(inp, builtin_book, engine=engine)


def group_rules(book) -> set[str]:
    return {r.id for r in book.rules if r.rule.group == GROUP}


def test_every_candidate_cause_is_in_the_group(builtin_book) -> None:
    assert set(CAUSES.values()) | {"gpu-waiting-off-node"} <= group_rules(builtin_book)


@pytest.mark.parametrize("engine", ["reference", "durable"])
@pytest.mark.parametrize("cause", sorted(CAUSES))
def test_candidate_ranks_first_and_others_are_ruled_out(
    builtin_book, cause: str, engine: str
) -> None:
    doc = run(builtin_book, with_cause(cause), engine)
    top = doc.findings[0]
    assert top.rule_id == CAUSES[cause], [f.rule_id for f in doc.findings]
    assert top.group == GROUP
    competing = {c.rule_id: c for c in top.competing}
    assert set(competing) == group_rules(builtin_book) - {top.rule_id}
    for other_cause, rule_id in CAUSES.items():
        if other_cause == cause:
            continue
        c = competing[rule_id]
        assert c.status == "not_fired", (rule_id, c)
        assert c.reason and "is false" in c.reason, (rule_id, c.reason)
    # no other cause of the group holds, and nothing of the group is left undecided
    # except by a question only a person can answer (is the dataset compressed?)
    assert not [
        c
        for c in top.competing
        if c.status == "cannot_evaluate" and not c.reason.startswith("answer.")
    ]


@pytest.mark.parametrize("engine", ["reference", "durable"])
def test_input_bound_conclusions(builtin_book, engine: str) -> None:
    storage = run(builtin_book, with_cause("storage"), engine)
    cpu = run(builtin_book, with_cause("cpu"), engine)
    memory = run(builtin_book, with_cause("memory"), engine)
    assert storage.conclusions["input_bound"] and cpu.conclusions["input_bound"]
    assert not storage.conclusions["compute_bound"]
    assert memory.conclusions["memory_pressure"] and not memory.conclusions["input_bound"]


@pytest.mark.parametrize("engine", ["reference", "durable"])
def test_no_cause_on_the_node_points_off_node(builtin_book, engine: str) -> None:
    doc = run(builtin_book, with_cause("none"), engine)
    assert all(f.severity.value == "info" for f in doc.findings)
    waiting = next(f for f in doc.findings if f.rule_id == "gpu-waiting-off-node")
    assert {c.status for c in waiting.competing} == {"not_fired"}
    assert {f.rule_id for f in doc.findings} == {
        "gpu-waiting-off-node",
        "gpu-utilisation-below-target",
    }


@pytest.mark.parametrize("engine", ["reference", "durable"])
def test_busy_gpu_is_compute_bound_not_input_bound(builtin_book, engine: str) -> None:
    facts = with_cause("none")
    facts["gpus"][0].update(utilization_gpu_pct=98.0, power_draw_w=640.0)
    doc = run(builtin_book, facts, engine)
    assert [f.rule_id for f in doc.findings] == ["gpu-compute-bound"]
    assert doc.conclusions["compute_bound"] is True
    assert doc.conclusions["input_bound"] is False


@pytest.mark.parametrize("engine", ["reference", "durable"])
def test_idle_gpu_power_saving_is_not_a_fault(builtin_book, engine: str) -> None:
    facts = with_cause("none")
    facts["gpus"][0].update(
        utilization_gpu_pct=0.0,
        memory_used_mib=0.0,
        process_count=0,
        throttle_gpu_idle=True,
        throttle_sw_power_cap=True,
        pcie_link_gen=1,
    )
    facts["site"] = {"expected_pcie_gen": 5, "expected_pcie_width": 16}
    doc = run(builtin_book, facts, engine)
    assert doc.findings == []
