"""Symptom-first triage: what the responder sees selects the differential.

A symptom (``job.symptom``, from ``run --symptom`` or the TUI's first screen) names the
rules that explain it: those tagged ``symptom:<name>`` in the rulebook, plus the rules
listed here for rulebook files that predate the tags. Findings of those rules rank first
within their severity, and their questions are asked first.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

from gpu_triage.model.facts import Symptom


class SymptomInfo(NamedTuple):
    symptom: Symptom
    label: str  # what the responder picks on the first screen
    help: str
    rules: tuple[str, ...]  # rules of the differential that carry no tag


SYMPTOMS: dict[Symptom, SymptomInfo] = {
    s.symptom: s
    for s in (
        SymptomInfo(
            Symptom.HANG,
            "The job hangs or makes no progress",
            "Collectives that never finish, a job stuck at start-up or connection setup.",
            (
                "gpu-waiting-off-node",
                "rank-step-time-imbalance",
                "gpudirect-acs-redirects-peer-traffic",
                "ib-port-not-active",
                "ib-port-disabled-or-polling",
                "ib-port-flapping",
                "ib-port-errors",
                "nvlink-links-down",
                "gpu-lost-nvml",
                "host-oom-kill",
            ),
        ),
        SymptomInfo(
            Symptom.SLOW,
            "The job is slower than it should be",
            "Lower throughput than expected or than on other nodes, low GPU utilisation.",
            (
                "gpu-thermal-throttling",
                "gpu-power-brake",
                "gpu-utilisation-below-target",
                "gpu-compute-bound",
                "slower-than-baseline",
                "input-bound-pipeline",
                "cpu-preprocessing-bottleneck",
                "storage-read-slow",
                "host-memory-pressure",
                "host-cpu-contention",
                "pcie-link-downgraded",
                "nvlink-links-down",
                "network-throughput-low",
                "rank-step-time-imbalance",
                "scaling-worse-with-more-nodes",
                "gpu-shared-by-processes",
                "gpu-far-from-nic",
                "rdma-nic-numa-remote",
            ),
        ),
        SymptomInfo(
            Symptom.CRASH,
            "The job crashes or fails with an error",
            "Jobs exit with CUDA, NCCL or driver errors, or the node reboots under load.",
            (
                "gpu-ecc-uncorrectable",
                "gpu-row-remap-failure",
                "gpu-memory-repair-pending",
                "gpu-lost-nvml",
                "pcie-aer-uncorrected-gpu",
                "gpu-repeat-offender",
                "host-oom-kill",
            ),
        ),
        SymptomInfo(
            Symptom.MISSING_GPU,
            "A GPU is missing or cannot be used",
            "nvidia-smi fails or lists fewer GPUs, containers or pods get no GPU.",
            (
                "gpus-fewer-than-inventory",
                "gpus-missing-from-driver",
                "gpus-present-driver-unavailable",
                "gpu-lost-nvml",
                "container-runtime-cannot-see-gpus",
                "k8s-gpu-capacity-mismatch",
                "k8s-pods-pending-with-free-gpus",
                "k8s-pod-unschedulable",
                "slurm-gres-mismatch",
            ),
        ),
        SymptomInfo(
            Symptom.OOM,
            "The job runs out of memory",
            "CUDA out-of-memory errors, or processes killed by the host's OOM killer.",
            (
                "gpu-memory-exhaustion-risk",
                "gpu-shared-by-processes",
                "host-oom-kill",
                "host-memory-pressure",
            ),
        ),
        SymptomInfo(
            Symptom.LATENCY,
            "Inference latency spikes",
            "P99 latency far above P50, periodic spikes, slow first requests.",
            (
                "inference-p99-spikes",
                "persistence-mode-off-inference",
                "host-cpu-contention",
                "host-memory-pressure",
                "gpu-thermal-throttling",
            ),
        ),
    )
}


def symptom_choices() -> list[tuple[str, str, str]]:
    """(value, label, help) for each symptom, in the order a first screen shows them."""
    return [(s.symptom.value, s.label, s.help) for s in SYMPTOMS.values()]


def differential(rule_tags: Iterable[tuple[str, Iterable[str]]], symptom: str) -> set[str]:
    """The ids of the rules that explain ``symptom``: tagged ``symptom:<name>``, or listed
    in :data:`SYMPTOMS`. ``rule_tags`` is (rule id, tags) for each rule of the rulebook."""
    try:
        listed = set(SYMPTOMS[Symptom(symptom)].rules)
    except ValueError:
        return set()
    tag = f"symptom:{symptom}"
    return {rid for rid, tags in rule_tags if rid in listed or tag in tags}
