"""Scheduler collectors (commands faked at the subprocess boundary) and the kubectl parsers."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpu_triage.collectors import base
from gpu_triage.collectors.base import CollectContext, CollectorUnavailable
from gpu_triage.collectors.parsers.kubectl import (
    parse_describe_node,
    parse_describe_node_detail,
    parse_describe_pod,
    parse_describe_pod_detail,
    parse_events,
    scheduler_facts_from_events,
)
from gpu_triage.collectors.scheduler import (
    ContainerRuntimeCollector,
    KubernetesCollector,
    SlurmCollector,
    containerd_uses_nvidia,
    docker_uses_nvidia,
    parse_gres_gpus,
)
from gpu_triage.io import commands
from gpu_triage.io.commands import CommandResult
from gpu_triage.model.facts import Facts, UnavailableReason

DATA = Path(__file__).resolve().parent.parent / "data" / "real-outputs"
# Hand-written inputs for formats the real samples do not cover.
HAND = Path(__file__).resolve().parent.parent / "data" / "hand-written"
KEY: dict[str, Any] = yaml.safe_load((DATA / "expected.yaml").read_text())
SAMPLES: dict[str, dict[str, Any]] = KEY["samples"]
META = {"kind", "format", "context", "expected_rule_signal", "other_facts", "note"}

Responder = Callable[[list[str]], CommandResult]


def ok(argv: list[str], stdout: str) -> CommandResult:
    return CommandResult(argv, 0, stdout, "", 0.01)


def fail(argv: list[str], stderr: str, rc: int = 1) -> CommandResult:
    return CommandResult(argv, rc, "", stderr, 0.01)


def missing(argv: list[str]) -> CommandResult:
    return CommandResult(argv, None, "", f"{argv[0]}: command not found", 0.0, missing=True)


class FakeCommands:
    """Stands in for run_command: answers by the command line's prefix, records the calls."""

    def __init__(self, answers: dict[str, Responder | str]) -> None:
        self.answers = answers
        self.calls: list[list[str]] = []

    def __call__(self, argv: list[str], timeout_s: float, **_: Any) -> CommandResult:
        self.calls.append(argv)
        line = " ".join(argv)
        for prefix, answer in self.answers.items():
            if line.startswith(prefix):
                return answer(argv) if callable(answer) else ok(argv, answer)
        return missing(argv)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    (tmp_path / "proc/sys/kernel").mkdir(parents=True)
    (tmp_path / "proc/sys/kernel/hostname").write_text("gpu-node-01.example.com\n")
    return tmp_path


def run(
    collector: Any, root: Path, fake: FakeCommands, monkeypatch: pytest.MonkeyPatch
) -> tuple[Facts, CollectContext]:
    monkeypatch.setattr(base, "run_command", fake)
    ctx = CollectContext(root=root)
    facts = Facts()
    collector.collect(ctx, facts)
    return facts, ctx


# --------------------------------------------------------------------------- recorded outputs

NODE_JSON = json.dumps(
    {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": "gpu-node-01",
            "labels": {
                "nvidia.com/gpu.present": "true",
                # GPU feature discovery's label (from the driver) and a hand-written one
                # left over from the node's previous GPUs
                "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB",
                "gpu-type": "h100",
                "node.kubernetes.io/instance-type": "p4d.24xlarge",
            },
        },
        "status": {
            "capacity": {
                "cpu": "192",
                "memory": "2113470400Ki",
                "nvidia.com/gpu": "8",
                "pods": "110",
            },
            "allocatable": {
                "cpu": "191",
                "memory": "2113368000Ki",
                "nvidia.com/gpu": "7",
                "pods": "110",
            },
        },
    }
)
NODE_NO_PLUGIN_JSON = json.dumps(
    {
        "kind": "Node",
        "metadata": {"name": "gpu-node-01"},
        "status": {"capacity": {"cpu": "12", "pods": "110"}, "allocatable": {"cpu": "12"}},
    }
)


def pod(
    name: str,
    phase: str,
    *,
    requests: int | None = None,
    limits: int | None = None,
    init: int | None = None,
    node: str | None = "gpu-node-01",
    unschedulable: str | None = None,
    selector: dict[str, str] | None = None,
    affinity_in: tuple[str, list[str]] | None = None,
) -> dict[str, Any]:
    res: dict[str, Any] = {}
    if requests is not None:
        res["requests"] = {"nvidia.com/gpu": str(requests), "cpu": "1"}
    if limits is not None:
        res["limits"] = {"nvidia.com/gpu": str(limits)}
    spec: dict[str, Any] = {
        "containers": [{"name": "main", "resources": res}, {"name": "sidecar", "resources": {}}]
    }
    if init is not None:
        spec["initContainers"] = [
            {"name": "init", "resources": {"limits": {"nvidia.com/gpu": str(init)}}}
        ]
    if node:
        spec["nodeName"] = node
    if selector:
        spec["nodeSelector"] = selector
    if affinity_in:
        key, values = affinity_in
        expr = {"key": key, "operator": "In", "values": values}
        spec["affinity"] = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": [expr]}]
                }
            }
        }
    status: dict[str, Any] = {"phase": phase}
    if unschedulable:
        status["conditions"] = [
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "message": unschedulable,
            }
        ]
    return {"metadata": {"name": name, "namespace": "ml"}, "spec": spec, "status": status}


PODS_JSON = json.dumps(
    {
        "kind": "List",
        "items": [
            pod(
                "train-0",
                "Running",
                requests=4,
                limits=4,
                affinity_in=(
                    "nvidia.com/gpu.product",
                    ["NVIDIA-A100-SXM4-80GB", "NVIDIA-A100-SXM4-40GB"],
                ),
            ),
            # a limit alone implies the request; placed by the stale hand-written label
            pod("infer-0", "Running", limits=2, selector={"gpu-type": "h100"}),
            pod("done-0", "Succeeded", requests=1),  # finished: holds nothing
            pod("stuck-0", "Pending", requests=1, init=2),  # init container needs 2
            pod("web-0", "Running"),
        ],
    }
)
UNBOUND_JSON = json.dumps(
    {
        "kind": "List",
        "items": [
            pod(
                "want-gpu",
                "Pending",
                requests=1,
                node=None,
                unschedulable="0/3 nodes are available: 3 Insufficient nvidia.com/gpu.",
            ),
            pod(
                "want-cpu",
                "Pending",
                requests=1,
                node=None,
                unschedulable="0/3 nodes are available: 3 Insufficient cpu.",
            ),
            pod("new", "Pending", requests=1, node=None),
        ],
    }
)


def k8s_answers(**over: Responder | str) -> dict[str, Responder | str]:
    answers: dict[str, Responder | str] = {
        "kubectl get node gpu-node-01.example.com": lambda a: fail(
            a, 'Error from server (NotFound): nodes "gpu-node-01.example.com" not found'
        ),
        "kubectl get node gpu-node-01 ": NODE_JSON,
        "kubectl get pods -A --field-selector spec.nodeName=gpu-node-01 ": PODS_JSON,
        "kubectl get pods -A --field-selector spec.nodeName=,status.phase=Pending": UNBOUND_JSON,
    }
    return {**over, **{k: v for k, v in answers.items() if k not in over}}  # overrides first


# --------------------------------------------------------------------------- Kubernetes


def test_kubernetes_counts(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeCommands(k8s_answers())
    facts, ctx = run(KubernetesCollector(), root, fake, monkeypatch)
    s = facts.scheduler
    assert s is not None
    assert (s.k8s_node_gpu_capacity, s.k8s_node_gpu_allocatable) == (8, 7)
    assert s.k8s_gpu_requested == 4 + 2 + 2
    assert s.k8s_pods_with_gpu == 3
    assert s.k8s_pods_pending_gpu == 2  # stuck-0 here + want-gpu unbound
    assert s.unavailable == {}
    assert s.k8s_node_name == "gpu-node-01"
    assert s.k8s_node_gpu_product == "NVIDIA-A100-SXM4-80GB" and s.k8s_node_gpu_model == "a100"
    assert s.k8s_node_instance_type == "p4d.24xlarge"
    # no /proc/driver/nvidia here: compared with GFD's label; train-0's affinity matches
    assert s.k8s_pods_wrong_gpu_type == 1
    assert s.k8s_pods_wrong_gpu_type_detail == (
        "ml/infer-0 asks for GPU h100; the node has nvidia.com/gpu.product=NVIDIA-A100-SXM4-80GB"
    )
    # FQDN tried first, then the short name; every call has a request timeout.
    assert fake.calls[0][:4] == ["kubectl", "get", "node", "gpu-node-01.example.com"]
    assert fake.calls[1][:4] == ["kubectl", "get", "node", "gpu-node-01"]
    assert all(any(a.startswith("--request-timeout=") for a in c) for c in fake.calls)
    assert any("get node gpu-node-01 -o json" in r.source for r in ctx.raw)


def test_kubernetes_no_device_plugin_is_zero(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeCommands(k8s_answers(**{"kubectl get node gpu-node-01 ": NODE_NO_PLUGIN_JSON}))
    facts, _ = run(KubernetesCollector(), root, fake, monkeypatch)
    assert facts.scheduler is not None
    assert facts.scheduler.k8s_node_gpu_capacity == 0
    assert facts.scheduler.k8s_node_gpu_allocatable == 0


def test_kubernetes_missing_kubectl(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(CollectorUnavailable, match="kubectl not found"):
        run(KubernetesCollector(), root, FakeCommands({}), monkeypatch)


def test_kubernetes_missing_kubectl_real_runner(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The real run_command, with a PATH where kubectl cannot be found.
    monkeypatch.setattr(commands, "SAFE_PATH", str(root))
    with pytest.raises(CollectorUnavailable, match="kubectl not found"):
        KubernetesCollector().collect(CollectContext(root=root), Facts())


def test_kubernetes_no_cluster(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    refused = (
        "The connection to the server localhost:8080 was refused"
        " - did you specify the right host or port?"
    )
    fake = FakeCommands({"kubectl": lambda a: fail(a, refused)})
    with pytest.raises(CollectorUnavailable, match="cannot reach"):
        run(KubernetesCollector(), root, fake, monkeypatch)


def test_kubernetes_node_unknown(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeCommands(
        {
            "kubectl get node": lambda a: fail(
                a, f'Error from server (NotFound): nodes "{a[3]}" not found'
            )
        }
    )
    with pytest.raises(CollectorUnavailable, match="not part of the cluster"):
        run(KubernetesCollector(), root, fake, monkeypatch)


def test_kubernetes_forbidden_pods(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    forbidden = (
        'Error from server (Forbidden): pods is forbidden: User "system:node:x" cannot '
        'list resource "pods" in API group "" at the cluster scope'
    )
    fake = FakeCommands(k8s_answers(**{"kubectl get pods": lambda a: fail(a, forbidden)}))
    facts, _ = run(KubernetesCollector(node_name="gpu-node-01"), root, fake, monkeypatch)
    s = facts.scheduler
    assert s is not None
    assert s.k8s_node_gpu_capacity == 8
    assert s.k8s_gpu_requested is None
    assert s.unavailable["k8s_gpu_requested"].reason is UnavailableReason.NO_PERMISSION
    assert s.unavailable["k8s_pods_pending_gpu"].reason is UnavailableReason.NO_PERMISSION


def test_kubernetes_timeout(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def hang(a: list[str]) -> CommandResult:
        return CommandResult(a, None, "", "", 8.0, timed_out=True)

    fake = FakeCommands(
        k8s_answers(**{"kubectl get pods -A --field-selector spec.nodeName=g": hang})
    )
    facts, _ = run(KubernetesCollector(node_name="gpu-node-01"), root, fake, monkeypatch)
    assert facts.scheduler is not None
    assert facts.scheduler.unavailable["k8s_pods_with_gpu"].reason is UnavailableReason.TIMED_OUT
    assert facts.scheduler.k8s_node_gpu_capacity == 8


def test_kubernetes_bad_json(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeCommands(k8s_answers(**{"kubectl get node gpu-node-01 ": "not json"}))
    facts, _ = run(KubernetesCollector(), root, fake, monkeypatch)
    assert facts.scheduler is not None
    assert facts.scheduler.unavailable["k8s_node_gpu_capacity"].reason is UnavailableReason.ERROR
    assert facts.scheduler.k8s_gpu_requested == 8


# --------------------------------------------------------------------------- container runtime

DAEMON_JSON = json.dumps(
    {
        "runtimes": {"nvidia": {"args": [], "path": "nvidia-container-runtime"}},
        "default-runtime": "runc",
    }
)
CONTAINERD_TOML = """\
version = 2
[plugins]
  [plugins."io.containerd.grpc.v1.cri"]
    [plugins."io.containerd.grpc.v1.cri".containerd]
      default_runtime_name = "runc"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
        runtime_type = "io.containerd.runc.v2"
"""
CONTAINERD_NVIDIA_DROPIN = """\
version = 2
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]
  runtime_type = "io.containerd.runc.v2"
  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia.options]
    BinaryName = "/usr/bin/nvidia-container-runtime"
"""
NVIDIA_CTK = (
    "NVIDIA Container Toolkit CLI version 1.14.6\n"
    "commit: 5605d191332dcfeea802c4497360d60a65c7887e\n"
)
CLI_INFO = """\
NVRM version:   550.54.15
CUDA version:   12.4

Device Index:   0
Device Minor:   0
Model:          NVIDIA H100 80GB HBM3
"""


def write(root: Path, rel: str, text: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


TOOLKIT = {"nvidia-ctk --version": NVIDIA_CTK, "nvidia-container-cli info": CLI_INFO}


def test_runtime_docker_nvidia(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(root, "etc/docker/daemon.json", DAEMON_JSON)
    facts, ctx = run(ContainerRuntimeCollector(), root, FakeCommands(TOOLKIT), monkeypatch)
    assert facts.scheduler is not None
    assert facts.scheduler.container_runtime_nvidia is True
    assert "/etc/docker/daemon.json" in facts.scheduler.source
    assert "/etc/docker/daemon.json" in {r.source for r in ctx.raw}


def test_runtime_containerd_dropin(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(root, "etc/containerd/config.toml", CONTAINERD_TOML)
    facts, _ = run(ContainerRuntimeCollector(), root, FakeCommands(TOOLKIT), monkeypatch)
    assert facts.scheduler is not None and facts.scheduler.container_runtime_nvidia is False
    write(root, "etc/containerd/conf.d/99-nvidia.toml", CONTAINERD_NVIDIA_DROPIN)
    facts, _ = run(ContainerRuntimeCollector(), root, FakeCommands(TOOLKIT), monkeypatch)
    assert facts.scheduler is not None and facts.scheduler.container_runtime_nvidia is True


def test_runtime_configured_but_toolkit_missing(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(root, "etc/docker/daemon.json", DAEMON_JSON)
    facts, _ = run(ContainerRuntimeCollector(), root, FakeCommands({}), monkeypatch)
    assert facts.scheduler is not None and facts.scheduler.container_runtime_nvidia is False


def test_runtime_nothing_present(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(CollectorUnavailable):
        run(ContainerRuntimeCollector(), root, FakeCommands({}), monkeypatch)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (DAEMON_JSON, True),
        ('{"default-runtime": "nvidia", "runtimes": {}}', True),
        ('{"runtimes": {"gpu": {"path": "/usr/bin/nvidia-container-runtime"}}}', True),
        ('{"log-driver": "json-file"}', False),
        ('{"runtimes": {"nvidia": {"path": "nvidia-container-runtime"}},}', True),  # bad JSON
        ("[]", False),
    ],
)
def test_docker_uses_nvidia(text: str, expected: bool) -> None:
    assert docker_uses_nvidia(text) is expected


def test_containerd_commented_out() -> None:
    commented = "\n".join("# " + ln for ln in CONTAINERD_NVIDIA_DROPIN.splitlines())
    assert containerd_uses_nvidia(commented) is False
    assert containerd_uses_nvidia(CONTAINERD_NVIDIA_DROPIN) is True


# --------------------------------------------------------------------------- Slurm

SCONTROL = """\
NodeName=gpu-node-01 Arch=x86_64 CoresPerSocket=48
   CPUAlloc=0 CPUEfctv=192 CPUTot=192 CPULoad=0.52
   AvailableFeatures=(null)
   ActiveFeatures=(null)
   Gres=gpu:h100:8(S:0-1)
   NodeAddr=gpu-node-01 NodeHostName=gpu-node-01 Version=23.02.6
   RealMemory=2000000 AllocMem=0 FreeMem=1900000 Sockets=2 Boards=1
   State=IDLE ThreadsPerCore=2 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A
   Partitions=gpu
   CfgTRES=cpu=192,mem=2000000M,billing=192,gres/gpu=8
   AllocTRES=
"""


def test_slurm_gres(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeCommands({"scontrol show node gpu-node-01": SCONTROL})
    facts, _ = run(SlurmCollector(), root, fake, monkeypatch)
    assert facts.scheduler is not None and facts.scheduler.slurm_gres_gpus == 8
    assert fake.calls[0] == ["scontrol", "show", "node", "gpu-node-01"]  # short name first


def test_slurm_missing_and_unknown_node(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(CollectorUnavailable, match="scontrol not found"):
        run(SlurmCollector(), root, FakeCommands({}), monkeypatch)
    fake = FakeCommands({"scontrol": lambda a: fail(a, f"Node {a[3]} not found")})
    with pytest.raises(CollectorUnavailable, match="not a Slurm node"):
        run(SlurmCollector(), root, fake, monkeypatch)


def test_slurm_controller_down(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    err = "slurm_load_node error: Unable to contact slurm controller (connect failure)"
    fake = FakeCommands({"scontrol": lambda a: fail(a, err)})
    facts, _ = run(SlurmCollector(), root, fake, monkeypatch)
    assert facts.scheduler is not None
    assert facts.scheduler.unavailable["slurm_gres_gpus"].reason is UnavailableReason.ERROR


@pytest.mark.parametrize(
    ("text", "gpus"),
    [
        ("Gres=gpu:8 ", 8),
        ("Gres=gpu:a100:4,gpu:v100:2(S:0,1)", 6),
        ("Gres=gpu:1g.10gb:7", 7),
        ("Gres=(null)", 0),
        ("Gres=nvme:1", 0),
        ("NodeName=x CfgTRES=cpu=4,gres/gpu=4", 4),
        ("NodeName=x", None),
    ],
)
def test_parse_gres(text: str, gpus: int | None) -> None:
    assert parse_gres_gpus(text) == gpus


# --------------------------------------------------------------------------- kubectl parsers (key)


def k8s_samples(kind: str) -> list[str]:
    return sorted(n for n, s in SAMPLES.items() if n.startswith("k8s/") and s["kind"] == kind)


@pytest.mark.parametrize("name", k8s_samples("kubectl_describe_node"))
def test_describe_node_key(name: str) -> None:
    exp = SAMPLES[name]
    assert set(exp) - META <= {
        "capacity",
        "allocatable",
        "gpu_capacity",
        "gpu_allocatable",
        "system_info",
        "non_terminated_pods",
    }
    text = (DATA / name).read_text()
    node = parse_describe_node_detail(text)
    assert node.capacity == exp["capacity"]
    assert node.allocatable == exp["allocatable"]
    printed = {
        "kernel_version": "Kernel Version",
        "os_image": "OS Image",
        "container_runtime": "Container Runtime Version",
        "kubelet_version": "Kubelet Version",
        "architecture": "Architecture",
    }
    for key, value in exp["system_info"].items():
        assert node.system_info[printed[key]] == value
    assert node.non_terminated_pods == exp["non_terminated_pods"]
    facts = parse_describe_node(text, source=name)
    assert facts.k8s_node_gpu_capacity == exp["gpu_capacity"]
    assert facts.k8s_node_gpu_allocatable == exp["gpu_allocatable"]
    if "nvidia.com/gpu" not in exp["capacity"]:
        assert node.notes and "device plugin" in facts.source


@pytest.mark.parametrize("name", k8s_samples("kubectl_events"))
def test_events_key(name: str) -> None:
    exp = SAMPLES[name]
    assert set(exp) - META <= {"events"}
    events = {e.line: e for e in parse_events((DATA / name).read_text())}
    assert len(events) == len(exp["events"])
    for eev in exp["events"]:
        ev = events[eev["line"]]
        assert (ev.type, ev.reason, ev.age, ev.source, ev.message) == (
            eev["type"],
            eev["reason"],
            eev["age"],
            eev["from"],
            eev["message"],
        )
        assert ev.nodes_total == eev["nodes_total"]
        assert ev.insufficient == eev["insufficient"]
        assert ev.unschedulable_nodes == eev["unschedulable_nodes"]
    facts = scheduler_facts_from_events(list(events.values()))
    assert facts.k8s_pods_pending_gpu == 1
    assert facts.k8s_pod_unschedulable_reason == exp["events"][-1]["message"]


DESCRIBE_NODE_GPU = """\
Name:               gpu-node-01
Roles:              <none>
Capacity:
  cpu:                192
  memory:             2113470400Ki
  nvidia.com/gpu:     8
  pods:               110
Allocatable:
  cpu:                191
  memory:             2113368000Ki
  nvidia.com/gpu:     8
  pods:               110
Non-terminated Pods:          (3 in total)
  Namespace    Name         CPU Requests  CPU Limits  Memory Requests  Memory Limits  Age
  ---------    ----         ------------  ----------  ---------------  -------------  ---
  ml           train-0      8 (4%)        0 (0%)      64Gi (3%)        0 (0%)         2d
Allocated resources:
  (Total limits may be over 100 percent, i.e., overcommitted.)
  Resource           Requests      Limits
  --------           --------      ------
  cpu                8850m (4%)    100m (0%)
  memory             64Gi (3%)     340Mi (0%)
  nvidia.com/gpu     6             6
Events:              <none>
"""


def test_describe_node_with_gpus() -> None:
    facts = parse_describe_node(DESCRIBE_NODE_GPU)
    assert (facts.k8s_node_gpu_capacity, facts.k8s_node_gpu_allocatable) == (8, 8)
    assert facts.k8s_gpu_requested == 6
    node = parse_describe_node_detail(DESCRIBE_NODE_GPU)
    assert node.name == "gpu-node-01" and node.allocated_limits["nvidia.com/gpu"] == "6"
    assert node.notes == []


DESCRIBE_POD_PENDING = (HAND / "k8s/describe-pod-pending-insufficient-gpu.txt").read_text()

DESCRIBE_POD_RUNNING = """\
Name:         trainer-0
Namespace:    ml
Node:         gpu-node-01/10.0.0.12
Status:       Running
Init Containers:
  warmup:
    Limits:
      nvidia.com/gpu:  1
Containers:
  worker:
    Limits:
      cpu:             16
      nvidia.com/gpu:  4
    Requests:
      cpu:             8
      nvidia.com/gpu:  4
  helper:
    Limits:
      nvidia.com/gpu:  2
Conditions:
  Type              Status
  Initialized       True
  Ready             True
  PodScheduled      True
Events:           <none>
"""


def test_describe_pod_pending_for_gpu() -> None:
    facts = parse_describe_pod(DESCRIBE_POD_PENDING)
    assert facts.k8s_pod_gpu_requested == 2
    assert facts.k8s_pod_scheduled is False
    assert facts.k8s_pod_node is None
    assert facts.k8s_pod_unschedulable_reason is not None
    assert facts.k8s_pod_unschedulable_reason.startswith("0/3 nodes are available: 1 node(s)")
    pod = parse_describe_pod_detail(DESCRIBE_POD_PENDING)
    (ev,) = pod.events
    assert ev.age == "2m (x3 over 5m)" and ev.source == "default-scheduler"
    assert ev.insufficient == {"nvidia.com/gpu": 2} and ev.nodes_total == 3
    assert ev.line == 36
    assert pod.status == "Pending" and pod.scheduled_condition is False


def test_describe_pod_running() -> None:
    facts = parse_describe_pod(DESCRIBE_POD_RUNNING)
    assert facts.k8s_pod_gpu_requested == 6  # 4 + 2 (limit only); init needs just 1
    assert facts.k8s_pod_scheduled is True
    assert facts.k8s_pod_node == "gpu-node-01"
    assert facts.k8s_pod_unschedulable_reason is None


GET_EVENTS = (HAND / "k8s/get-events-A-failedscheduling.txt").read_text()


def test_get_events() -> None:
    events = parse_events(GET_EVENTS)
    assert [e.line for e in events] == [2, 3, 4, 5]
    first = events[0]
    assert (first.namespace, first.age, first.object) == ("ml", "2m10s", "pod/train-worker-0")
    assert first.insufficient == {"nvidia.com/gpu": 4}  # not counted twice via preemption
    assert events[3].insufficient == {"cpu": 4}
    facts = scheduler_facts_from_events(events)
    assert facts.k8s_pods_pending_gpu == 2


def test_get_events_without_namespace() -> None:
    text = (
        "LAST SEEN   TYPE      REASON             OBJECT        MESSAGE\n"
        "10s         Warning   FailedScheduling   pod/gpu-pod   0/1 nodes are available: "
        "1 Insufficient nvidia.com/gpu.\n"
    )
    (ev,) = parse_events(text)
    assert (ev.namespace, ev.age, ev.object, ev.nodes_available) == (None, "10s", "pod/gpu-pod", 0)
    assert ev.wants_gpu


@pytest.mark.parametrize(
    "text",
    [
        "",
        "garbage\n",
        "FailedScheduling",
        "Capacity:\n  x",
        "Containers:\n  a:\n    Limits:\n      nvidia.com/gpu: lots\n",
    ],
)
def test_kubectl_garbage(text: str) -> None:
    parse_events(text)
    parse_describe_node(text)
    facts = parse_describe_pod(text)
    assert facts.k8s_pod_gpu_requested in (0, None)


# --------------------------------------------------------------------------- wrong node type

A100_INFORMATION = """\
Model: \t\t NVIDIA A100-SXM4-80GB
IRQ:   \t\t 0
GPU UUID: \t GPU-9c4d7a2e-3b1f-4e8a-a6d2-1f0e3c5b7a9d
Video BIOS: \t 92.00.45.00.03
Bus Type: \t PCIe
DMA Size: \t 47 bits
DMA Mask: \t 0x7fffffffffff
Bus Location: \t 0000:07:00.0
Device Minor: \t 0
GPU Excluded:\t No
"""


def test_kubernetes_wrong_type_from_the_driver(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The driver's own names win over labels: a node whose GFD label was never set.
    for bus in ("0000:07:00.0", "0000:0f:00.0"):
        d = root / "proc/driver/nvidia/gpus" / bus
        d.mkdir(parents=True)
        (d / "information").write_text(A100_INFORMATION.replace("0000:07:00.0", bus))
    planted = root / "proc/driver/nvidia/gpus/0000:47:00.0"
    planted.symlink_to(root / "proc/driver/nvidia/gpus/0000:07:00.0")  # not followed
    node = json.loads(NODE_JSON)
    del node["metadata"]["labels"]["nvidia.com/gpu.product"]
    pods = {
        "kind": "List",
        "items": [
            pod(
                "a",
                "Running",
                requests=8,
                selector={"cloud.google.com/gke-accelerator": "nvidia-h100-80gb"},
            ),
            pod("b", "Running", requests=8, selector={"gpu": "true"}),  # names no model
            pod("c", "Running", requests=1, affinity_in=("gpu-type", ["a100", "h100"])),
            pod(
                "d",
                "Running",
                requests=1,
                selector={"node.kubernetes.io/instance-type": "p5.48xlarge"},
            ),
            pod("e", "Running", selector={"gpu-type": "h100"}),  # requests no GPU: not counted
        ],
    }
    fake = FakeCommands(
        k8s_answers(
            **{
                "kubectl get node gpu-node-01 ": json.dumps(node),
                "kubectl get pods -A --field-selector spec.nodeName=gpu-node-01 ": json.dumps(pods),
            }
        )
    )
    facts, _ = run(KubernetesCollector(), root, fake, monkeypatch)
    s = facts.scheduler
    assert s is not None and s.k8s_node_gpu_product is None
    assert s.k8s_pods_wrong_gpu_type == 2  # a (H100 on A100s) and d (instance type)
    assert s.k8s_pods_wrong_gpu_type_detail == (
        "ml/a asks for GPU nvidia-h100-80gb; the node has NVIDIA A100-SXM4-80GB"
    )


def test_kubernetes_wrong_type_nothing_to_compare(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    node = json.loads(NODE_JSON)
    node["metadata"]["labels"] = {}
    fake = FakeCommands(k8s_answers(**{"kubectl get node gpu-node-01 ": json.dumps(node)}))
    facts, _ = run(KubernetesCollector(), root, fake, monkeypatch)
    assert facts.scheduler is not None and facts.scheduler.k8s_pods_wrong_gpu_type is None


GUIDE_T11 = (Path(__file__).resolve().parents[1] / "data/guide-samples/t11.txt").read_text()


def test_describe_pod_the_guides_flattened_sample() -> None:
    # As the guide prints it: no Containers: title, no container name, no indentation.
    facts = parse_describe_pod(GUIDE_T11)
    assert facts.k8s_pod_gpu_requested == 1
    assert facts.k8s_pod_scheduled is True and facts.k8s_pod_node == "gpu-node-12"
    assert facts.k8s_pod_node_selector == "gpu=true"
    assert facts.k8s_pod_gpu_wanted is None  # a presence selector names no model


@pytest.mark.parametrize(
    "variant",
    [
        lambda t: t,
        lambda t: "\n".join("    " + line for line in t.splitlines()),  # quoted, indented
        lambda t: t.replace("\n", "\r\n"),
        lambda t: "cr0x@server:~$ kubectl describe pod infer-6c9c8d7f6f-kp2xw\n" + t,
        lambda t: t.replace("Limits:\nnvidia.com/gpu: 1\n", ""),  # requests only
    ],
)
def test_describe_pod_the_guides_sample_variations(variant: Callable[[str], str]) -> None:
    facts = parse_describe_pod(variant(GUIDE_T11))
    assert (facts.k8s_pod_gpu_requested, facts.k8s_pod_node) == (1, "gpu-node-12")


def test_describe_pod_selector_and_admission() -> None:
    f = parse_describe_pod(
        (HAND / "k8s/describe-pod-running-selects-h100-custom-label.txt").read_text()
    )
    assert (f.k8s_pod_gpu_requested, f.k8s_pod_node) == (8, "gpu-a100-07")
    assert f.k8s_pod_node_selector == "gpu-type=h100, kubernetes.io/os=linux"
    assert (f.k8s_pod_gpu_wanted_label, f.k8s_pod_gpu_wanted_model) == ("gpu-type", "h100")
    assert f.k8s_pod_gpu_admission_failed is None
    f = parse_describe_pod(
        (HAND / "k8s/describe-pod-failed-unexpected-admission-gpu.txt").read_text()
    )
    assert f.k8s_pod_gpu_admission_failed is True and f.k8s_pod_node == "cpu-node-03"
    assert f.k8s_pod_status_message is not None
    assert f.k8s_pod_status_message.startswith("Pod was rejected: Allocate failed")
    assert f.k8s_pod_node_selector is None  # <none>


def test_describe_node_labels() -> None:
    text = (HAND / "k8s/describe-node-a100-gfd-labels-stale-gpu-type.txt").read_text()
    node = parse_describe_node_detail(text)
    assert node.labels["gpu-type"] == "h100" and node.labels["nvidia.com/gpu.count"] == "8"
    f = parse_describe_node(text)
    assert (f.k8s_node_name, f.k8s_node_gpu_product) == ("gpu-a100-07", "NVIDIA-A100-SXM4-80GB")
    assert f.k8s_node_gpu_model == "a100" and f.k8s_node_instance_type is None
    flat = "\n".join(line.strip() for line in text.splitlines())  # a flattened paste
    assert parse_describe_node(flat).k8s_node_gpu_product == "NVIDIA-A100-SXM4-80GB"


@pytest.mark.parametrize(
    ("text", "model"),
    [
        ("NVIDIA H100 80GB HBM3", "h100"),
        ("NVIDIA-H100-80GB-HBM3", "h100"),
        ("NVIDIA A100-SXM4-80GB", "a100"),
        ("NVIDIA-A100-SXM4-40GB-MIG-1g.5gb", "a100"),
        ("nvidia-tesla-t4", "t4"),
        ("nvidia-h100-80gb", "h100"),
        ("NVIDIA L40S", "l40s"),
        ("NVIDIA A10G", "a10g"),
        ("NVIDIA A10", "a10"),
        ("NVIDIA GH200 480GB", "gh200"),
        ("NVIDIA H100 NVL", "h100"),
        ("NVIDIA RTX A6000", "a6000"),
        ("NVIDIA GeForce RTX 4090", "rtx4090"),
        ("Tesla V100-SXM2-32GB", "v100"),
        ("h100", "h100"),
        ("true", None),
        ("large", None),
        ("", None),
        (None, None),
        ("x" * 500, None),
    ],
)
def test_gpu_model(text: str | None, model: str | None) -> None:
    from gpu_triage.model.gpu_models import gpu_model

    assert gpu_model(text) == model


@pytest.mark.parametrize(
    "spec",
    [
        {"nodeSelector": ["gpu-type", "h100"]},
        {"affinity": {"nodeAffinity": "required"}},
        {
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [None, 3]
                    }
                }
            }
        },
        {
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {"key": "gpu-type", "operator": "In", "values": None}
                                ]
                            }
                        ]
                    }
                }
            }
        },
    ],
)
def test_wrong_gpu_type_odd_specs_require_nothing(spec: dict[str, Any]) -> None:
    from gpu_triage.collectors.scheduler import wrong_gpu_type

    assert wrong_gpu_type({"spec": spec}, {"a100"}, "p4d.24xlarge") is None
