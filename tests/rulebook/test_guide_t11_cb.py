"""guide/T11 "pods landing on the wrong node type" and guide/CB "baselines beyond step
time" and "observability running": from the guide's own samples (tests/data/guide-samples),
real outputs and hand-written outputs in kubectl's format, parsed by the project's
parsers, with realistic variations."""

from __future__ import annotations

import functools
from pathlib import Path

from gpu_triage.collectors.from_text import TextInput, snapshot_from_texts
from gpu_triage.engine.compiler import Rulebook, load_rulebook
from gpu_triage.engine.evaluate import evaluate
from gpu_triage.engine.findings import FindingsDocument
from gpu_triage.model.facts import HostFacts
from gpu_triage.model.snapshot import Snapshot
from gpu_triage.model.supplied import read_job, read_site

DATA = Path(__file__).parents[1] / "data"
GUIDE = DATA / "guide-samples"
K8S = DATA / "hand-written" / "k8s"
WRONG = "k8s-pod-on-wrong-gpu-type"
NO_GPUS = "k8s-gpu-pod-on-node-without-gpus"


@functools.cache
def book() -> Rulebook:
    return load_rulebook()


def text(path: Path) -> str:
    return path.read_text()


def snap(*texts: tuple[str, str]) -> Snapshot:
    return snapshot_from_texts([TextInput(t, f"t-{p}", p) for p, t in texts])


def run(s: Snapshot) -> FindingsDocument:
    return evaluate(s, book(), engine="reference")


def fired(doc: FindingsDocument, rule: str) -> list[str]:
    return [f.subject for f in doc.findings if f.rule_id == rule]


def finding(doc: FindingsDocument, rule: str):  # type: ignore[no-untyped-def]
    return next(f for f in doc.findings if f.rule_id == rule)


# --------------------------------------------------------------- T11: the guide's sample

T11 = text(GUIDE / "t11.txt")
A100_TABLE = text(GUIDE / "t1.txt")  # the guide's T1: one A100-SXM4-80GB


def test_t11_the_guides_sample_is_a_pod_that_got_its_gpu() -> None:
    s = snap(("kubectl-describe-pod", T11), ("nvidia-smi", A100_TABLE))
    sched = s.facts.scheduler
    assert sched is not None
    assert (sched.k8s_pod_gpu_requested, sched.k8s_pod_scheduled) == (1, True)
    assert sched.k8s_pod_node == "gpu-node-12" and sched.k8s_pod_node_selector == "gpu=true"
    doc = run(s)
    for rule in (WRONG, NO_GPUS, "k8s-pod-unschedulable"):
        assert not fired(doc, rule), rule


def test_t11_recognised_without_naming_the_parser() -> None:
    s = snapshot_from_texts([TextInput(T11, "pasted")])
    assert s.facts.scheduler is not None and s.facts.scheduler.k8s_pod_gpu_requested == 1


def test_t11_a_pod_selecting_h100_on_the_guides_a100_fires() -> None:
    h100 = T11.replace(
        "Node-Selectors: gpu=true", "Node-Selectors: nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3"
    )
    doc = run(snap(("kubectl-describe-pod", h100), ("nvidia-smi", A100_TABLE)))
    f = finding(doc, WRONG)
    assert "nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3" in f.symptom
    assert "?" not in f.symptom and "None" not in f.symptom


def test_t11_a_pod_selecting_a100_on_the_guides_a100_is_quiet() -> None:
    a100 = T11.replace("Node-Selectors: gpu=true", "Node-Selectors: gpu-type=a100")
    assert not fired(run(snap(("kubectl-describe-pod", a100), ("nvidia-smi", A100_TABLE))), WRONG)


def test_t11_h100_selected_on_a_real_eight_h100_table_is_quiet() -> None:
    h100 = T11.replace("Node-Selectors: gpu=true", "Node-Selectors: gpu-type=h100")
    table = text(
        DATA / "real-outputs/nvidia-smi/table-8x-h100-sxm-565-new-format-thamada-nvsim.txt"
    )
    assert not fired(run(snap(("kubectl-describe-pod", h100), ("nvidia-smi", table))), WRONG)
    l40s = T11.replace("Node-Selectors: gpu=true", "Node-Selectors: gpu-type=l40s")
    assert fired(run(snap(("kubectl-describe-pod", l40s), ("nvidia-smi", table))), WRONG)


def test_t11_a_stale_hand_written_label_against_gfds() -> None:
    # The pod asks for gpu-type=h100; the node kept that label after its GPUs became A100s,
    # and GPU feature discovery labels it NVIDIA-A100-SXM4-80GB. No nvidia-smi needed.
    pod = text(K8S / "describe-pod-running-selects-h100-custom-label.txt")
    node = text(K8S / "describe-node-a100-gfd-labels-stale-gpu-type.txt")
    doc = run(snap(("kubectl-describe-pod", pod), ("kubectl-describe-node", node)))
    f = finding(doc, WRONG)
    assert "gpu-type=h100" in f.symptom and "NVIDIA-A100-SXM4-80GB" in f.symptom
    # the same pod described with another node's describe: not compared
    other = node.replace("Name:               gpu-a100-07", "Name:               gpu-a100-08")
    doc = run(snap(("kubectl-describe-pod", pod), ("kubectl-describe-node", other)))
    assert not fired(doc, WRONG)


def test_t11_instance_type_selected_elsewhere() -> None:
    pod = text(K8S / "describe-pod-eks-selects-instance-type.txt")
    node = (
        "Name:               ip-10-0-41-17.us-west-2.compute.internal\n"
        "Labels:             node.kubernetes.io/instance-type=p4d.24xlarge\n"
        "                    topology.kubernetes.io/zone=us-west-2a\n"
        "Capacity:\n  nvidia.com/gpu:     8\nAllocatable:\n  nvidia.com/gpu:     8\n"
    )
    doc = run(snap(("kubectl-describe-pod", pod), ("kubectl-describe-node", node)))
    assert "p5.48xlarge" in finding(doc, WRONG).symptom
    same = node.replace("p4d.24xlarge", "p5.48xlarge")
    assert not fired(
        run(snap(("kubectl-describe-pod", pod), ("kubectl-describe-node", same))), WRONG
    )


def test_t11_the_guides_pod_on_a_real_node_without_gpus() -> None:
    # the real describe of a node whose device plugin registered no nvidia.com/gpu, named
    # as the node the guide's pod landed on
    node = "Name:               gpu-node-12\n" + text(
        DATA / "real-outputs/k8s/describe-node-no-nvidia-gpu-in-capacity-dp285.txt"
    )
    doc = run(snap(("kubectl-describe-pod", T11), ("kubectl-describe-node", node)))
    assert fired(doc, NO_GPUS)
    # unnamed, the describe may be any node's: not claimed
    unnamed = text(DATA / "real-outputs/k8s/describe-node-no-nvidia-gpu-in-capacity-dp285.txt")
    assert not fired(
        run(snap(("kubectl-describe-pod", T11), ("kubectl-describe-node", unnamed))), NO_GPUS
    )


def test_t11_a_pod_rejected_at_admission_for_want_of_gpus() -> None:
    pod = text(K8S / "describe-pod-failed-unexpected-admission-gpu.txt")
    doc = run(snap(("kubectl-describe-pod", pod)))
    assert fired(doc, NO_GPUS)
    f = finding(doc, NO_GPUS)
    assert "cpu-node-03" in f.symptom and "?" not in f.symptom


# --------------------------------------------------------------- CB: baselines

QUERY = text(DATA / "hand-written/query-gpu/query-gpu-h100-units-throttle-both-spellings.csv")


def test_cb_baselines_from_the_site_and_job_files(tmp_path: Path) -> None:
    site = tmp_path / "site.yaml"
    site.write_text(
        "baseline_step_time_ms: 410\n"
        "baseline_throughput_per_gpu: 3100   # tokens/s per GPU at burn-in\n"
        "baseline_latency_p99_ms: 85\n"
        "baseline_power_draw_w: 690\n"
        "baseline_temperature_c: 58\n"
    )
    job = tmp_path / "job.yaml"
    job.write_text("throughput_per_gpu: 2200\nlatency_p99_ms: 140\nlatency_p50_ms: 40\n")
    s = snap(("nvidia-smi-query-gpu", QUERY))
    s.facts.site, s.facts.job = read_site(site), read_job(job)
    doc = run(s)
    # GPU 1's PCIe link runs x8 of x16: that cause is named, not "slower than baseline"
    assert fired(doc, "pcie-link-downgraded") and not fired(doc, "throughput-below-baseline")
    s = snap(("nvidia-smi-query-gpu", QUERY.replace("5, 5, 8, 16", "5, 5, 16, 16")))
    s.facts.site, s.facts.job = read_site(site), read_job(job)
    doc = run(s)
    assert fired(doc, "throughput-below-baseline")
    assert "2200" in finding(doc, "throughput-below-baseline").symptom
    assert fired(doc, "inference-p99-above-baseline")
    # GPU 1: 97 % busy at 690 W (its baseline) and 71 °C (13 over 58); GPU 0 is idle at 30 °C
    assert not fired(doc, "gpu-power-below-baseline")
    hot = fired(doc, "gpu-temperature-above-baseline")
    assert len(hot) == 1 and "1" in hot[0]
    f = finding(doc, "gpu-temperature-above-baseline")
    assert "71" in f.symptom and "58" in f.symptom


def test_cb_a_busy_gpu_at_half_its_baseline_power(tmp_path: Path) -> None:
    site = tmp_path / "site.yaml"
    site.write_text("baseline_power_draw_w: 690\nbaseline_temperature_c: 75\n")
    halved = QUERY.replace("690.12 W", "341.50 W")
    s = snap(("nvidia-smi-query-gpu", halved))
    s.facts.site = read_site(site)
    doc = run(s)
    assert len(fired(doc, "gpu-power-below-baseline")) == 1  # not the idle GPU 0
    assert not fired(doc, "gpu-temperature-above-baseline")


def test_cb_baselines_refuse_bad_values(tmp_path: Path) -> None:
    import pytest

    site = tmp_path / "site.yaml"
    site.write_text("baseline_power_draw_w: lots\n")
    with pytest.raises(ValueError, match=r"site\.yaml: baseline_power_draw_w"):
        read_site(site)


# --------------------------------------------------------------- CB: observability


def test_cb_observability_on_a_gpu_node() -> None:
    s = snap(("nvidia-smi-query-gpu", QUERY))
    s.facts.host = HostFacts(
        node_exporter_running=False, dcgm_exporter_running=False, nv_hostengine_running=False
    )
    assert fired(run(s), "node-observability-missing")
    s.facts.host = HostFacts(
        node_exporter_running=True, dcgm_exporter_running=True, nv_hostengine_running=False
    )
    assert not fired(run(s), "node-observability-missing")
