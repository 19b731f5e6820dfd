"""The ten real incidents (tests/data/incidents, copied from public threads) end to end:
`collect --from-text` on the pasted files, no kind named, plus what the responder says
(tests/data/incidents/responder.yaml) -> the established root cause is the top finding at
warning or above. No parser or rule here is written for one case."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest
import yaml

from gpu_triage.collectors.from_text import TextInput, snapshot_from_texts
from gpu_triage.engine.compiler import Rulebook, load_rulebook
from gpu_triage.engine.evaluate import evaluate
from gpu_triage.engine.findings import FindingsDocument
from gpu_triage.model.facts import JobMetrics
from gpu_triage.model.snapshot import Snapshot

HERE = Path(__file__).resolve().parents[1] / "data" / "incidents"
RESPONDER = yaml.safe_load((HERE / "responder.yaml").read_text())
CASES = sorted(p.name for p in HERE.iterdir() if p.is_dir())


@functools.cache
def book() -> Rulebook:
    return load_rulebook()


def diagnose(snap: Snapshot, said: dict) -> FindingsDocument:  # type: ignore[type-arg]
    if said.get("symptom"):
        snap.facts.job = JobMetrics(symptom=said["symptom"], source="responder")
    snap.facts.answers.update(said.get("answers", {}))
    return evaluate(snap, book(), engine="reference")


def top_of(doc: FindingsDocument) -> tuple[str, str]:
    assert doc.findings, [f.rule_id for f in doc.needs_confirmation]
    return doc.findings[0].rule_id, doc.findings[0].severity.value


def test_every_incident_has_a_responder_entry() -> None:
    assert sorted(RESPONDER) == CASES


@pytest.mark.parametrize("case", CASES)
def test_incident_root_cause_is_the_top_finding(case: str) -> None:
    files = sorted(p for p in (HERE / case).iterdir() if p.name != "case.yaml")
    snap = snapshot_from_texts([TextInput(p.read_text(), str(p)) for p in files])
    rule, severity = top_of(diagnose(snap, RESPONDER[case]))
    assert rule in RESPONDER[case]["root_cause"], rule
    assert severity in ("warning", "critical")


# Variations of the incidents, written from other threads' wording: other driver versions,
# fragments, prompts, wrapped lines, the same cause printed by another layer.
VARIATIONS: list[tuple[str, str, dict, str]] = [  # type: ignore[type-arg]
    (
        "mismatch, newer nvidia-smi with the library version and a dmesg paste",
        "$ nvidia-smi\nFailed to initialize NVML: Driver/library version mismatch\n"
        "NVML library version: 570.133\n$ sudo dmesg | tail -2\n"
        "[ 8812.102233] NVRM: API mismatch: the client has the version 570.133.20, but\n"
        "[ 8812.102236] NVRM: this kernel module has the version 570.86.15.  Please\n",
        {"symptom": "missing-gpu"},
        "driver-library-version-mismatch",
    ),
    (
        "module missing after a kernel update, modprobe's words",
        "root@ws:~# modprobe nvidia\nmodprobe: FATAL: Module nvidia not found in directory "
        "/lib/modules/6.8.0-45-generic\nroot@ws:~# nvidia-smi\nNVIDIA-SMI has failed because it\n"
        "couldn't communicate with the NVIDIA driver. Make sure that the latest NVIDIA driver is\n"
        "installed and running.\n",
        {},
        "nvidia-driver-not-loaded",
    ),
    (
        "ECC from PyTorch instead of the CUDA driver API",
        'Traceback (most recent call last):\n  File "train.py", line 88, in <module>\n'
        "    loss.backward()\nRuntimeError: CUDA error: uncorrectable ECC error encountered\n"
        "CUDA kernel errors might be asynchronously reported at some other API call\n",
        {"symptom": "crash"},
        "job-hit-uncorrectable-ecc",
    ),
    (
        "driver timeout under containerd and Kubernetes",
        "  Warning  Failed     12s   kubelet  Error: failed to create containerd task: failed to "
        "create shim task: OCI runtime create failed: runc create failed: unable to start "
        "container process: error during container init: error running hook #0: error running "
        "hook: exit status 1, stdout: , stderr: nvidia-container-cli.real: initialization error: "
        "driver rpc error: timed out: unknown\n",
        {},
        "container-driver-init-timeout",
    ),
    (
        "device plugin log instead of capacity 0",
        "I0306 19:30:01.000000       1 main.go:44] Loading NVML\n"
        "E0306 19:30:01.000000       1 main.go:46] Failed to initialize NVML: "
        "ERROR_LIBRARY_NOT_FOUND.\nE0306 19:30:01.000000       1 main.go:47] If this is a GPU "
        "node, did you set the docker default runtime to `nvidia`?\n",
        {"symptom": "missing-gpu"},
        "k8s-device-plugin-cannot-load-nvml",
    ),
    (
        "Unknown Error inside a pod, with kubectl exec",
        "$ kubectl exec -it trainer-0 -- nvidia-smi\nFailed to initialize NVML: Unknown Error\n"
        "command terminated with exit code 255\n",
        {"answers": {"gpu_error_only_in_running_containers": True}},
        "container-lost-gpu-access",
    ),
    (
        "newer Lightning wording of the loader warning",
        "/usr/lib/python3/site-packages/lightning/pytorch/trainer/connectors/data_connector.py:"
        "441: The 'train_dataloader' does not have many workers which may be a bottleneck. "
        "Consider increasing the value of the `num_workers` argument` to `num_workers=63`\n",
        {"symptom": "slow"},
        "dataloader-too-few-workers",
    ),
]


@pytest.mark.parametrize(
    ("name", "text", "said", "rule"), VARIATIONS, ids=[v[0] for v in VARIATIONS]
)
def test_variation_root_cause_is_the_top_finding(
    name: str,
    text: str,
    said: dict,
    rule: str,  # type: ignore[type-arg]
) -> None:
    snap = snapshot_from_texts([TextInput(text, "paste.txt")])
    assert top_of(diagnose(snap, said))[0] == rule


@pytest.mark.parametrize("answers", [{}, {"nccl_works_with_p2p_disabled": True}])
def test_acs_incident_with_the_bridges_pasted_names_acs(answers: dict) -> None:  # type: ignore[type-arg]
    """Incident 001 as the reporter found the cause: the topology plus `lspci -vvv` of the
    AMD root ports, ACS redirect on above both GPUs. The ACS finding is on top for a hang,
    whether or not the responder has tried NCCL_P2P_DISABLE yet."""
    case = HERE / "001-nccl-acs-p2p-deadlock"
    lspci = (
        HERE.parent
        / "hand-written"
        / "lspci"
        / ("lspci-vvv-amd-root-ports-acs-redirect-iommu-two-gpus.txt")
    )
    texts = [TextInput((case / "topo.txt").read_text(), "topo.txt")]
    texts.append(TextInput("$ sudo lspci -vvv\n" + lspci.read_text(), "session.txt"))
    doc = diagnose(snapshot_from_texts(texts), {"symptom": "hang", "answers": answers})
    rule, severity = top_of(doc)
    assert rule in RESPONDER["001-nccl-acs-p2p-deadlock"]["root_cause"], rule
    assert severity in ("warning", "critical")
    assert any(f.rule_id == "gpudirect-acs-redirects-peer-traffic" for f in doc.findings)
