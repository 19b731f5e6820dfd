"""Container runtime configuration as facts: Docker's runtimes and default runtime
(``docker info`` in text or JSON, ``/etc/docker/daemon.json``), CDI specs (the spec files
of ``/etc/cdi`` and ``/var/run/cdi``, ``nvidia-ctk cdi list``) and the NVIDIA container
runtime's mode (``/etc/nvidia-container-runtime/config.toml``).

Read from pastes and by the live container-runtime collector alike."""

from __future__ import annotations

import json
import re
from typing import Any

from gpu_triage.collectors.parsers import ParseError
from gpu_triage.model.facts import Facts, NvmlInit, SchedulerFacts

CDI_GPU_KIND = "nvidia.com/gpu"
MAX_RUNTIMES = 32  # a daemon.json with more names is no real configuration

# `docker info` text: " Runtimes: io.containerd.runc.v2 nvidia runc" and
# " Default Runtime: runc" (Server section, any indentation; "Cgroup Driver: systemd")
_TEXT_RUNTIMES = re.compile(r"(?im)^[ \t]*Runtimes:[ \t]*(?P<names>[^\n]*)$")
_TEXT_DEFAULT = re.compile(r"(?im)^[ \t]*Default Runtime:[ \t]*(?P<name>\S+)[ \t]*$")
_TEXT_CGROUP = re.compile(r"(?im)^[ \t]*Cgroup Driver:[ \t]*(?P<name>\S+)[ \t]*$")
_RUNTIME_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,63}$")

# `nvidia-ctk cdi list`: 'INFO[0000] Found 9 CDI devices' then one 'vendor/class=name' a line
_CDI_FOUND = re.compile(r"(?i)\bFound\s+(?P<n>\d+)\s+CDI\s+devices?\b")
_CDI_DEVICE = re.compile(r"(?m)^[ \t]*(?P<kind>[a-z0-9.-]+/[a-z0-9.-]+)=(?P<name>\S+)[ \t]*$")

# config.toml of the NVIDIA container runtime: [nvidia-container-runtime] mode = "cdi"
_TOOLKIT_MODE = re.compile(r"""(?m)^[ \t]*mode[ \t]*=[ \t]*["'](?P<mode>[a-z-]{1,16})["']""")
_CONTAINERD_CDI = re.compile(r"(?m)^[ \t]*enable_cdi[ \t]*=[ \t]*(?P<on>true|false)\b")


def _names(values: list[str]) -> list[str]:
    out = [v for v in values if _RUNTIME_NAME.match(v)]
    return sorted(set(out))[:MAX_RUNTIMES]


def docker_info_facts(text: str, source: str = "docker info") -> SchedulerFacts | None:
    """Runtimes, default runtime and cgroup driver from ``docker info`` (text, a grep of
    it, or ``--format '{{json .}}'``); None when the text holds none of them."""
    stripped = text.strip()
    if stripped.startswith("{"):
        try:
            doc = json.loads(stripped)
        except ValueError:
            doc = None
        if isinstance(doc, dict):
            return _from_info_json(doc, source)
    runtimes = _TEXT_RUNTIMES.search(text)
    default = _TEXT_DEFAULT.search(text)
    cgroup = _TEXT_CGROUP.search(text)
    if not (runtimes or default):
        return None
    facts = SchedulerFacts(source=source)
    if runtimes:
        facts.docker_runtimes = _names(runtimes.group("names").split())
    if default and _RUNTIME_NAME.match(default.group("name")):
        facts.docker_default_runtime = default.group("name")
    if cgroup:
        facts.docker_cgroup_driver = cgroup.group("name").lower()[:32]
    return facts


def _from_info_json(doc: dict[str, Any], source: str) -> SchedulerFacts | None:
    runtimes = doc.get("Runtimes")
    default = doc.get("DefaultRuntime")
    if not isinstance(runtimes, dict) and not isinstance(default, str):
        return None
    facts = SchedulerFacts(source=source)
    if isinstance(runtimes, dict):
        facts.docker_runtimes = _names([str(k) for k in runtimes])
    if isinstance(default, str) and _RUNTIME_NAME.match(default):
        facts.docker_default_runtime = default
    cgroup = doc.get("CgroupDriver")
    if isinstance(cgroup, str) and cgroup:
        facts.docker_cgroup_driver = cgroup.lower()[:32]
    return facts


def daemon_json_facts(text: str, source: str = "/etc/docker/daemon.json") -> SchedulerFacts | None:
    """``runtimes`` and ``default-runtime`` of daemon.json (Docker's own default, runc,
    when it names none); None when the file is not JSON."""
    try:
        doc = json.loads(text)
    except ValueError:
        return None
    if not isinstance(doc, dict):
        return None
    facts = SchedulerFacts(source=source)
    runtimes = doc.get("runtimes")
    names = [str(k) for k in runtimes] if isinstance(runtimes, dict) else []
    facts.docker_runtimes = _names(["runc", *names])  # runc is built in
    default = doc.get("default-runtime")
    facts.docker_default_runtime = (
        default if isinstance(default, str) and _RUNTIME_NAME.match(default) else "runc"
    )
    exec_opts = doc.get("exec-opts")
    if isinstance(exec_opts, list):
        for opt in exec_opts:
            m = re.fullmatch(r"native\.cgroupdriver=(\w{1,16})", str(opt).strip())
            if m:
                facts.docker_cgroup_driver = m.group(1).lower()
    return facts


def parse_docker_info(text: str, source: str = "docker info") -> SchedulerFacts:
    facts = docker_info_facts(text, source)
    if facts is None:
        raise ParseError(
            "not docker info output (no 'Runtimes:' or 'Default Runtime:' line, "
            "no Runtimes/DefaultRuntime in JSON)",
            source=source,
        )
    return facts


def cdi_list_facts(text: str, source: str = "nvidia-ctk cdi list") -> SchedulerFacts | None:
    """The nvidia.com/gpu devices ``nvidia-ctk cdi list`` names; None when it is not
    that output. 'Found 0 CDI devices' is a reading: zero."""
    found = _CDI_FOUND.search(text)
    devices = {
        m.group("name") for m in _CDI_DEVICE.finditer(text) if m.group("kind") == CDI_GPU_KIND
    }
    others = [m for m in _CDI_DEVICE.finditer(text) if m.group("kind") != CDI_GPU_KIND]
    if found is None and not devices and not others:
        return None
    facts = SchedulerFacts(source=source)
    facts.cdi_nvidia_devices = len(devices)
    return facts


def parse_cdi_list(text: str, source: str = "nvidia-ctk cdi list") -> SchedulerFacts:
    facts = cdi_list_facts(text, source)
    if facts is None:
        raise ParseError(
            "not nvidia-ctk cdi list output (no 'Found N CDI devices' line, no "
            "vendor/class=name device lines)",
            source=source,
        )
    return facts


def cdi_spec_devices(doc: Any) -> tuple[str | None, int]:
    """(kind, device count) of one parsed CDI spec (``kind: nvidia.com/gpu``,
    ``devices: [{name: ...}, ...]``); (None, 0) for anything else."""
    if not isinstance(doc, dict):
        return None, 0
    kind = doc.get("kind")
    devices = doc.get("devices")
    count = (
        sum(1 for d in devices if isinstance(d, dict) and d.get("name"))
        if isinstance(devices, list)
        else 0
    )
    return (kind if isinstance(kind, str) else None), count


def _uncommented(text: str) -> str:
    return "\n".join(ln for ln in text.splitlines() if not ln.lstrip().startswith("#"))


def toolkit_mode(text: str) -> str | None:
    """The NVIDIA container runtime's ``mode`` (auto, legacy, cdi, csv); None unset."""
    m = _TOOLKIT_MODE.search(_uncommented(text))
    return m.group("mode") if m else None


def containerd_cdi_enabled(text: str) -> bool | None:
    """containerd's ``enable_cdi`` (None when the config does not say)."""
    m = _CONTAINERD_CDI.search(_uncommented(text))
    return None if m is None else m.group("on") == "true"


# The toolkit's version, as its binaries print it:
#   nvidia-ctk --version                 "NVIDIA Container Toolkit CLI version 1.14.3"
#   nvidia-container-runtime --version   "NVIDIA Container Runtime version 1.14.3" (then runc's)
#   nvidia-container-runtime-hook ...    "NVIDIA Container Runtime Hook version 1.14.3"
#   nvidia-container-cli --version       "cli-version: 1.14.3" ("version: 1.0.0" before 1.1)
# each followed by "commit: <sha>" lines. runc's own "runc version 1.1.9" is not the toolkit.
_TOOLKIT_VERSION = r"(?P<v>\d{1,3}\.\d{1,3}(?:\.\d{1,4})?(?:[-~+][0-9A-Za-z.]{1,32})?)"
_TOOLKIT_LINES = (
    re.compile(
        r"(?im)^[ \t]*NVIDIA Container (?:Toolkit CLI|Runtime(?: Hook)?|Toolkit) version[ \t]+"
        + _TOOLKIT_VERSION
        + r"[ \t]*$"
    ),
    re.compile(r"(?im)^[ \t]*(?:cli-)?version:[ \t]*" + _TOOLKIT_VERSION + r"[ \t]*$"),
)


def toolkit_version(text: str) -> str | None:
    """The NVIDIA Container Toolkit version one of its binaries' ``--version`` prints;
    None when the text holds none."""
    for pattern in _TOOLKIT_LINES:
        if m := pattern.search(text):
            return m.group("v")
    return None


def parse_toolkit_version(text: str, source: str = "nvidia-ctk --version") -> SchedulerFacts:
    version = toolkit_version(text)
    if version is None:
        raise ParseError(
            "no NVIDIA Container Toolkit version line ('NVIDIA Container Toolkit CLI version "
            "X', 'cli-version: X')",
            source=source,
        )
    return SchedulerFacts(container_toolkit_version=version, source=source)


# `docker run --gpus all IMAGE nvidia-smi` (podman, nerdctl alike): the guide's test that
# a container sees the GPUs. It prints the GPU table, or the runtime's error instead.
_NO_DEVICES = re.compile(r"(?im)^\s*No devices were found\s*$")
_LISTED_GPU = re.compile(r"(?m)^\s*GPU \d{1,3}: .{1,120}\(UUID: GPU-[0-9a-fA-F-]{8,40}\)")  # -L


def container_gpu_test(text: str, source: str = "docker run --gpus all nvidia-smi") -> Facts:
    """Whether the test container saw the GPUs, and the errors it printed. The table's
    GPUs are the container's view of this node's: they are not taken as node facts."""
    from gpu_triage.collectors.parsers.error_text import scan_error_text
    from gpu_triage.collectors.parsers.nvidia_smi.table import parse_nvidia_smi_table

    events, driver = scan_error_text(text, source)
    seen: int | None
    try:
        seen = len(parse_nvidia_smi_table(text, source).gpus)
    except ParseError:
        seen = len(_LISTED_GPU.findall(text)) or None
    blocked = any(e.component == "container" for e in events) or (
        driver.nvml_init is not None and driver.nvml_init != NvmlInit.OK
    )
    if blocked or _NO_DEVICES.search(text):
        sees = False
    elif seen:
        sees = True
    else:
        raise ParseError(f"{source}: neither an nvidia-smi GPU table nor a container runtime error")
    return Facts(scheduler=SchedulerFacts(container_sees_gpus=sees, source=source), errors=events)
