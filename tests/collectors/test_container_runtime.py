"""Docker's runtimes and default runtime, the toolkit's mode and CDI specs: from pastes
(docker info text and JSON, nvidia-ctk cdi list) and from a live node (daemon.json,
config.toml, spec folders read root-safely), with the rules that read them."""

from __future__ import annotations

import functools
import json
import os
import stat
from pathlib import Path

import pytest

from gpu_triage.collectors.base import CollectContext, CollectorUnavailable
from gpu_triage.collectors.from_text import intake_paste
from gpu_triage.collectors.parsers import ParseError
from gpu_triage.collectors.parsers.container_runtime import (
    cdi_list_facts,
    docker_info_facts,
    parse_docker_info,
)
from gpu_triage.collectors.parsers.kubectl import container_runtime_name
from gpu_triage.collectors.parsers.registry import get_parser
from gpu_triage.collectors.scheduler import ContainerRuntimeCollector, read_config
from gpu_triage.engine.compiler import Rulebook, load_rulebook
from gpu_triage.engine.evaluate import evaluate
from gpu_triage.model.facts import Facts
from gpu_triage.model.snapshot import Snapshot

DATA = Path(__file__).resolve().parents[1] / "data" / "hand-written" / "container"
DOCKER_INFO = DATA / "docker-info-24-runc-default-nvidia-registered.txt"
CDI_EMPTY = DATA / "nvidia-ctk-cdi-list-found-0.txt"
NODE = Path(__file__).resolve().parents[1] / "data" / "incidents"


@functools.cache
def book() -> Rulebook:
    return load_rulebook()


def fired(facts: Facts) -> list[str]:
    return [f.rule_id for f in evaluate(Snapshot(facts=facts), book(), engine="reference").findings]


# --------------------------------------------------------------------------- pastes


def test_docker_info_text_is_recognised_in_a_session() -> None:
    intake = intake_paste(DOCKER_INFO.read_text(), "docker.txt")
    assert [p.parser for p in intake.pieces] == ["docker-info"]
    s = intake.facts.scheduler
    assert s is not None
    assert s.docker_runtimes == ["io.containerd.runc.v2", "nvidia", "runc"]
    assert s.docker_default_runtime == "runc" and s.docker_cgroup_driver == "systemd"
    assert s.docker_nvidia_runtime_registered is True


@pytest.mark.parametrize(
    "text",
    [
        # docker info | grep -i runtime
        " Runtimes: io.containerd.runc.v2 runc\n Default Runtime: runc\n",
        # a chat paste that lost its indentation
        "Runtimes: io.containerd.runc.v2 runc\nDefault Runtime: runc\n",
    ],
    ids=["grep", "unindented"],
)
def test_docker_info_fragments(text: str) -> None:
    s = parse_docker_info(text)
    assert s.docker_default_runtime == "runc" and s.docker_nvidia_runtime_registered is False


def test_docker_info_json() -> None:
    doc = {
        "ServerVersion": "26.1.4",
        "DefaultRuntime": "nvidia",
        "Runtimes": {
            "io.containerd.runc.v2": {"path": "runc"},
            "nvidia": {"path": "nvidia-container-runtime"},
            "runc": {"path": "runc"},
        },
        "CgroupDriver": "cgroupfs",
    }
    s = docker_info_facts(json.dumps(doc))
    assert s is not None and s.docker_default_runtime == "nvidia"
    assert s.docker_runtimes == ["io.containerd.runc.v2", "nvidia", "runc"]
    assert s.docker_cgroup_driver == "cgroupfs"


def test_runtime_names_are_not_taken_from_anywhere() -> None:
    # node strings are attacker-controlled: odd names are dropped, not reported
    s = parse_docker_info(" Runtimes: runc $(reboot) \x1b[31mred\n Default Runtime: runc\n")
    assert s.docker_runtimes == ["runc"]
    with pytest.raises(ParseError, match="not docker info"):
        parse_docker_info("Containers: 3\nImages: 4\n")


def test_cdi_list_outputs() -> None:
    assert cdi_list_facts(CDI_EMPTY.read_text()).cdi_nvidia_devices == 0  # type: ignore[union-attr]
    listed = (
        "INFO[0000] Found 3 CDI devices\nnvidia.com/gpu=0\n"
        "nvidia.com/gpu=GPU-2b9d1ab5-7c3e-4c62-9a51-0c3e2f9a7f10\nnvidia.com/gpu=all\n"
    )
    assert cdi_list_facts(listed).cdi_nvidia_devices == 3  # type: ignore[union-attr]
    intake = intake_paste(CDI_EMPTY.read_text(), "cdi.txt")
    assert {p.parser for p in intake.pieces} == {"nvidia-ctk-cdi-list"}


def test_container_runtime_of_the_kubelet() -> None:
    assert container_runtime_name("docker://20.10.7") == "docker"
    assert container_runtime_name("containerd://1.7.2") == "containerd"
    assert container_runtime_name("cri-o://1.28.1") == "cri-o"
    assert container_runtime_name("") is None
    text = (
        NODE / "008-k8s-gpu-zero-default-runtime-not-nvidia/kubectl-describe-node.txt"
    ).read_text()
    facts = get_parser("kubectl-describe-node")(text, "node.txt")
    assert facts.scheduler is not None
    assert facts.scheduler.k8s_container_runtime in ("docker", "containerd", None)


def test_docker_paste_with_a_docker_kubelet_is_the_top_finding() -> None:
    node = (
        "Name:               gpu-worker-03\nCapacity:\n  cpu:                64\n"
        "  memory:             527958292Ki\nAllocatable:\n  cpu:                64\n"
        "System Info:\n  Kernel Version:             5.15.0-91-generic\n"
        "  Container Runtime Version:  docker://24.0.7\n"
        "  Kubelet Version:            v1.23.17\n"
    )
    intake = intake_paste(
        "$ kubectl describe node gpu-worker-03\n" + node + DOCKER_INFO.read_text(), "p.txt"
    )
    assert fired(intake.facts)[0] == "docker-default-runtime-not-nvidia"


# --------------------------------------------------------------------------- live


def _node(tmp_path: Path) -> Path:
    (tmp_path / "etc/docker").mkdir(parents=True)
    (tmp_path / "etc/nvidia-container-runtime").mkdir(parents=True)
    (tmp_path / "etc/cdi").mkdir(parents=True)
    return tmp_path


def collect(root: Path) -> Facts:
    facts = Facts()
    ctx = CollectContext(root=root, search_path=str(root / "no-tools"))
    ContainerRuntimeCollector().collect(ctx, facts)
    return facts


def test_live_daemon_json_toolkit_mode_and_specs(tmp_path: Path) -> None:
    root = _node(tmp_path)
    (root / "etc/docker/daemon.json").write_text(
        json.dumps(
            {"runtimes": {"nvidia": {"path": "nvidia-container-runtime", "runtimeArgs": []}}}
        )
    )
    (root / "etc/nvidia-container-runtime/config.toml").write_text(
        '#mode = "legacy"\n[nvidia-container-runtime]\nmode = "cdi"\nruntimes = ["runc"]\n'
    )
    s = collect(root).scheduler
    assert s is not None
    assert s.docker_default_runtime == "runc"  # daemon.json names none: Docker's own
    assert s.docker_nvidia_runtime_registered is True
    assert s.container_toolkit_mode == "cdi"
    assert (s.cdi_spec_files, s.cdi_nvidia_devices) == (0, 0)
    assert "cdi-mode-without-specs" in fired(Facts(scheduler=s))
    spec = (
        "cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices:\n"
        "- name: '0'\n  containerEdits:\n    deviceNodes:\n    - path: /dev/nvidia0\n"
        "- name: all\n  containerEdits:\n    deviceNodes:\n    - path: /dev/nvidia0\n"
        "containerEdits:\n  deviceNodes:\n  - path: /dev/nvidiactl\n"
    )
    (root / "etc/cdi/nvidia.yaml").write_text(spec)
    s = collect(root).scheduler
    assert s is not None and (s.cdi_spec_files, s.cdi_nvidia_devices) == (1, 2)
    assert "cdi-mode-without-specs" not in fired(Facts(scheduler=s))


def test_planted_links_and_fifos_are_not_read(tmp_path: Path) -> None:
    root = _node(tmp_path)
    secret = tmp_path / "secret"
    secret.write_text('{"default-runtime": "nvidia"}')
    (root / "etc/docker/daemon.json").symlink_to(secret)
    os.mkfifo(root / "etc/cdi/nvidia.yaml")
    (root / "etc/cdi/other.yaml").symlink_to(secret)
    os.mkfifo(root / "etc/nvidia-container-runtime/config.toml")
    # nothing was followed or blocked on: with nothing readable left there is nothing to say
    with pytest.raises(CollectorUnavailable):
        collect(root)
    with pytest.raises(OSError, match="symbolic link"):
        read_config(root / "etc/docker/daemon.json")
    with pytest.raises(OSError, match="not a regular file"):
        read_config(root / "etc/nvidia-container-runtime/config.toml")


def test_an_oversized_config_is_refused(tmp_path: Path) -> None:
    big = tmp_path / "daemon.json"
    big.write_text(" " * (2 << 20))
    with pytest.raises(OSError, match="larger than"):
        read_config(big)
    assert read_config(tmp_path / "absent.json") is None
    assert stat.S_ISREG(os.stat(big).st_mode)
