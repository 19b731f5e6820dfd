"""Schedulers and container runtimes around the GPUs: Kubernetes, Docker/containerd, Slurm.

Each asks its tool about this node only. A tool that is not installed makes its
collector unavailable; a tool that answers with an error leaves the fields
unavailable with the reason, so the rules can tell "no GPUs advertised" (0) from
"could not ask" (None).
"""

from __future__ import annotations

import errno
import json
import os
import re
import socket
import stat
from typing import Any

from gpu_triage.collectors.base import CollectContext, CollectorUnavailable
from gpu_triage.collectors.merge import merge_fields
from gpu_triage.collectors.parsers.container_runtime import (
    CDI_GPU_KIND,
    cdi_list_facts,
    cdi_spec_devices,
    containerd_cdi_enabled,
    daemon_json_facts,
    docker_info_facts,
    toolkit_mode,
    toolkit_version,
)
from gpu_triage.collectors.parsers.kubectl import container_runtime_name, node_label_facts
from gpu_triage.io.commands import CommandResult
from gpu_triage.io.files import read_small
from gpu_triage.model.facts import Facts, SchedulerFacts, UnavailableReason
from gpu_triage.model.gpu_models import (
    GPU_TYPE_LABELS,
    INSTANCE_TYPE_LABELS,
    gpu_model,
    is_gpu_type_label,
)

GPU_RESOURCE = "nvidia.com/gpu"
COMMAND_TIMEOUT_S = 8.0  # per command; a hung API server must not eat the whole budget


def node_names(ctx: CollectContext, override: str | None = None) -> list[str]:
    """Names to ask for: the given one, else the hostname and its short form."""
    if override:
        return [override]
    try:
        host = ctx.path("proc", "sys", "kernel", "hostname").read_text().strip()
    except OSError:
        host = ""
    host = host or socket.gethostname()
    short = host.split(".")[0]
    return [host] if short == host else [host, short]


def _failure_reason(res: CommandResult) -> tuple[UnavailableReason, str]:
    if res.timed_out:
        return UnavailableReason.TIMED_OUT, f"{' '.join(res.argv)} timed out"
    err = (res.stderr or res.stdout).strip().splitlines()
    detail = err[-1] if err else f"exit status {res.returncode}"
    if res.denied or "forbidden" in detail.lower():
        return UnavailableReason.NO_PERMISSION, detail
    return UnavailableReason.ERROR, detail


def _int(value: Any) -> int:
    try:
        return int(str(value).strip())
    except (TypeError, ValueError):
        return 0


def pod_gpu_request(pod: dict[str, Any]) -> int:
    """GPUs a pod holds: max(sum over containers, largest init container).

    For extended resources a limit without a request implies the same request.
    """

    def gpus(container: dict[str, Any]) -> int:
        res = container.get("resources") or {}
        req = (res.get("requests") or {}).get(GPU_RESOURCE)
        lim = (res.get("limits") or {}).get(GPU_RESOURCE)
        return _int(req if req is not None else lim)

    spec = pod.get("spec") or {}
    app = sum(gpus(c) for c in spec.get("containers") or [])
    init = max((gpus(c) for c in spec.get("initContainers") or []), default=0)
    return max(app, init)


def _unschedulable_for_gpu(pod: dict[str, Any]) -> bool:
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "PodScheduled" and cond.get("status") == "False":
            return GPU_RESOURCE in (cond.get("message") or "")
    return False


MAX_GPU_DIRS = 64


def driver_gpu_names(ctx: CollectContext) -> list[str]:
    """The product names the loaded driver gives its GPUs (``Model:`` of
    /proc/driver/nvidia/gpus/*/information): what the node really has, whatever its labels
    say. Neither a linked folder nor a linked file is followed; only regular files are
    read, to 8 KiB."""
    try:
        with os.scandir(ctx.path("proc", "driver", "nvidia", "gpus")) as it:
            dirs = sorted(e.name for e in it if e.is_dir(follow_symlinks=False))[:MAX_GPU_DIRS]
    except OSError:
        return []
    names = []
    for d in dirs:
        text = read_small(ctx.path("proc", "driver", "nvidia", "gpus", d, "information"), 8192)
        m = re.search(r"^Model:\s*(.+?)\s*$", text or "", re.MULTILINE)
        if m:
            names.append(m.group(1)[:200])
    return names


def _wanted(pod: dict[str, Any], keys: Any) -> list[list[str]]:
    """``_requirements``; a spec of unexpected shape requires nothing."""
    try:
        return _requirements(pod, keys)
    except (AttributeError, TypeError):
        return []


def _requirements(pod: dict[str, Any], keys: Any) -> list[list[str]]:
    """Values a pod's placement requires of labels chosen by ``keys`` (a predicate): one
    list per requirement, each satisfied by any of its values. The nodeSelector is one
    requirement per key; required node affinity is one requirement when every one of its
    (ORed) terms has an ``In`` expression on such a label, else none (a term without one
    accepts any node)."""
    spec = pod.get("spec") or {}
    out: list[list[str]] = []
    for key, value in (spec.get("nodeSelector") or {}).items():
        if keys(str(key)):
            out.append([str(value)])
    affinity = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    terms = affinity.get("nodeSelectorTerms") or []
    union: list[str] = []
    for term in terms:
        values = [
            str(v)
            for expr in (term or {}).get("matchExpressions") or []
            if keys(str(expr.get("key", ""))) and expr.get("operator") == "In"
            for v in expr.get("values") or []
        ]
        if not values:
            return out
        union += values
    if union:
        out.append(union)
    return out


def wrong_gpu_type(pod: dict[str, Any], models: set[str], instance_type: str | None) -> str | None:
    """What the pod asks for that this node does not have (its GPU model, its instance
    type), or None. ``models``: this node's GPU models; values naming no model are not
    compared."""
    for values in _wanted(pod, is_gpu_type_label):
        asked = {m for v in values if (m := gpu_model(v))}
        if models and asked and not asked & models:
            return "GPU " + " or ".join(values)
    if instance_type:
        for values in _wanted(pod, lambda k: k in INSTANCE_TYPE_LABELS):
            if instance_type not in values:
                return "instance type " + " or ".join(values)
    return None


class KubernetesCollector:
    """GPU capacity of this node and the GPU pods on (or waiting for) it, via kubectl."""

    name = "kubernetes"
    kinds = ("scheduler",)
    budget_s = 3 * COMMAND_TIMEOUT_S + 2.0

    def __init__(self, node_name: str | None = None) -> None:
        self._node_name = node_name

    def _kubectl(self, ctx: CollectContext, args: list[str]) -> CommandResult:
        timeout = min(ctx.command_timeout_s, COMMAND_TIMEOUT_S)
        argv = ["kubectl", *args, f"--request-timeout={int(timeout)}s"]
        res = ctx.run(self.name, argv, timeout)
        if res.missing:
            raise CollectorUnavailable("kubectl not found")
        return res

    def collect(self, ctx: CollectContext, facts: Facts) -> None:
        sched = SchedulerFacts(source="kubectl")
        node_fields = ("k8s_node_gpu_capacity", "k8s_node_gpu_allocatable")
        node: dict[str, Any] | None = None
        name = ""
        res: CommandResult | None = None
        for name in node_names(ctx, self._node_name):
            res = self._kubectl(ctx, ["get", "node", name, "-o", "json"])
            if res.ok or "NotFound" not in res.stderr:
                break
        assert res is not None
        if not res.ok:
            if "NotFound" in res.stderr:
                raise CollectorUnavailable(f"node {name} is not part of the cluster kubectl sees")
            reason, detail = _failure_reason(res)
            if "refused" in detail or "no configuration" in detail.lower():
                raise CollectorUnavailable(f"kubectl cannot reach a cluster: {detail}")
            for fld in node_fields:
                sched.mark_unavailable(fld, reason, detail)
        else:
            node = self._json(res, sched, node_fields)
        if node is not None:
            status = node.get("status") or {}
            # An absent resource means the device plugin never registered: 0, not unknown.
            sched.k8s_node_gpu_capacity = _int((status.get("capacity") or {}).get(GPU_RESOURCE))
            sched.k8s_node_gpu_allocatable = _int(
                (status.get("allocatable") or {}).get(GPU_RESOURCE)
            )
            info = status.get("nodeInfo") or {}
            sched.k8s_container_runtime = container_runtime_name(
                str(info.get("containerRuntimeVersion") or "")
            )
            meta = node.get("metadata") or {}
            sched.k8s_node_name = str(meta.get("name") or "") or None
            labels = meta.get("labels") or {}
            if isinstance(labels, dict):
                node_label_facts({str(k): str(v) for k, v in labels.items()}, sched)

        pod_fields = ("k8s_gpu_requested", "k8s_pods_with_gpu", "k8s_pods_pending_gpu")
        res = self._kubectl(
            ctx, ["get", "pods", "-A", "--field-selector", f"spec.nodeName={name}", "-o", "json"]
        )
        pods = self._json(res, sched, pod_fields) if res.ok else None
        if not res.ok:
            reason, detail = _failure_reason(res)
            for fld in pod_fields:
                sched.mark_unavailable(fld, reason, detail)
        pending_here = 0
        if pods is not None:
            # Finished pods no longer hold their GPUs.
            live = [
                p
                for p in pods.get("items") or []
                if (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
            ]
            requests = [pod_gpu_request(p) for p in live]
            sched.k8s_gpu_requested = sum(requests)
            sched.k8s_pods_with_gpu = sum(1 for r in requests if r > 0)
            self._wrong_type(ctx, sched, [p for p, r in zip(live, requests, strict=True) if r])
            pending_here = sum(
                1
                for p, r in zip(live, requests, strict=True)
                if r > 0 and (p.get("status") or {}).get("phase") == "Pending"
            )

        # Pods the scheduler could not place for want of a GPU are bound to no node.
        res = self._kubectl(
            ctx,
            [
                "get",
                "pods",
                "-A",
                "--field-selector",
                "spec.nodeName=,status.phase=Pending",
                "-o",
                "json",
            ],
        )
        if pods is not None and res.ok:
            unbound = self._json(res, sched, ("k8s_pods_pending_gpu",))
            if unbound is not None:
                waiting = [
                    p
                    for p in unbound.get("items") or []
                    if pod_gpu_request(p) > 0 and _unschedulable_for_gpu(p)
                ]
                sched.k8s_pods_pending_gpu = pending_here + len(waiting)
        elif pods is not None:
            reason, detail = _failure_reason(res)
            sched.mark_unavailable("k8s_pods_pending_gpu", reason, detail)
        facts.scheduler = sched

    @staticmethod
    def _wrong_type(ctx: CollectContext, sched: SchedulerFacts, gpu_pods: list[Any]) -> None:
        """GPU pods here whose selector or required affinity names another GPU model or
        instance type than this node's (the driver's names first, then GFD's label)."""
        names = driver_gpu_names(ctx)
        models = {m for n in names if (m := gpu_model(n))}
        have = ", ".join(sorted(set(names)))
        if not models and sched.k8s_node_gpu_model:
            models, have = (
                {sched.k8s_node_gpu_model},
                f"{GPU_TYPE_LABELS[0]}={sched.k8s_node_gpu_product}",
            )
        if not models and not sched.k8s_node_instance_type:
            return  # nothing to compare with
        wrong = []
        for p in gpu_pods:
            asked = wrong_gpu_type(p, models, sched.k8s_node_instance_type)
            if asked:
                meta = p.get("metadata") or {}
                wrong.append((f"{meta.get('namespace', '')}/{meta.get('name', '')}", asked))
        sched.k8s_pods_wrong_gpu_type = len(wrong)
        if wrong:
            pod, asked = wrong[0]
            has = have if asked.startswith("GPU") else sched.k8s_node_instance_type
            sched.k8s_pods_wrong_gpu_type_detail = f"{pod} asks for {asked}; the node has {has}"[
                :300
            ]

    @staticmethod
    def _json(
        res: CommandResult, sched: SchedulerFacts, fields: tuple[str, ...]
    ) -> dict[str, Any] | None:
        try:
            doc = json.loads(res.stdout)
        except ValueError as exc:
            for fld in fields:
                sched.mark_unavailable(fld, UnavailableReason.ERROR, f"kubectl output: {exc}")
            return None
        return doc if isinstance(doc, dict) else None


# --------------------------------------------------------------------------- container runtime

_CONTAINERD_NVIDIA = re.compile(
    r"""runtimes\.["']?nvidia|nvidia-container-runtime|default_runtime_name\s*=\s*["']nvidia"""
)


def _uncommented(text: str) -> str:
    return "\n".join(ln for ln in text.splitlines() if not ln.lstrip().startswith("#"))


def docker_uses_nvidia(text: str) -> bool:
    """daemon.json registers the nvidia runtime (or makes it the default)."""
    try:
        doc = json.loads(text)
    except ValueError:
        return "nvidia-container-runtime" in text  # hand-edited, not valid JSON
    if not isinstance(doc, dict):
        return False
    runtimes = doc.get("runtimes") or {}
    paths = [str((r or {}).get("path", "")) for r in runtimes.values() if isinstance(r, dict)]
    return (
        "nvidia" in runtimes
        or doc.get("default-runtime") == "nvidia"
        or any("nvidia-container-runtime" in p for p in paths)
    )


def containerd_uses_nvidia(text: str) -> bool:
    """A containerd (or CRI-O) config declares an nvidia runtime."""
    return _CONTAINERD_NVIDIA.search(_uncommented(text)) is not None


MAX_CONFIG_BYTES = 1 << 20  # a runtime configuration or a CDI spec larger is no config
MAX_CDI_FILES = 64
CDI_DIRS = (("etc", "cdi"), ("var", "run", "cdi"))


def read_config(path: os.PathLike[str] | str, max_bytes: int = MAX_CONFIG_BYTES) -> str | None:
    """A system configuration file read as root safely: None when absent. A symbolic link,
    a FIFO or a device, a file owned by another user (not root, not us) or one larger than
    ``max_bytes`` is refused with an OSError naming it: never followed, blocked on or
    read whole."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise OSError(f"{os.fspath(path)}: is a symbolic link: not followed") from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(f"{os.fspath(path)}: not a regular file: not read")
        if st.st_uid not in (0, os.geteuid()):
            raise OSError(f"{os.fspath(path)}: owned by uid {st.st_uid}, not root: not read")
        chunks: list[bytes] = []
        size = 0
        while size <= max_bytes and (chunk := os.read(fd, 1 << 16)):
            chunks.append(chunk)
            size += len(chunk)
        if size > max_bytes:
            raise OSError(f"{os.fspath(path)}: larger than {max_bytes} bytes: not read")
    finally:
        os.close(fd)
    return b"".join(chunks).decode("utf-8", errors="replace")


class ContainerRuntimeCollector:
    """Is a container runtime wired to the NVIDIA container toolkit? Docker's runtimes and
    default runtime, containerd/CRI-O runtime entries, the toolkit's mode and CDI specs."""

    name = "container_runtime"
    kinds = ("scheduler",)

    def __init__(self) -> None:
        self._refused: list[str] = []

    def _read(self, ctx: CollectContext, *parts: str) -> str | None:
        path = ctx.path(*parts)
        try:
            text = read_config(path)
        except OSError as exc:
            self._refused.append(str(exc) if os.fspath(path) in str(exc) else f"{path}: {exc}")
            return None
        if text is not None:
            ctx.keep_raw(self.name, "/" + "/".join(parts), text)
        return text

    def _cdi_specs(self, ctx: CollectContext) -> tuple[int, int]:
        """(spec files, nvidia.com/gpu devices they define) in the CDI spec folders."""
        files = devices = 0
        for parts in CDI_DIRS:
            try:
                with os.scandir(ctx.path(*parts)) as it:
                    entries = sorted(
                        (e.name for e in it if e.is_file(follow_symlinks=False)),
                    )[:MAX_CDI_FILES]
            except OSError:
                continue
            for name in entries:
                if not name.endswith((".yaml", ".yml", ".json")):
                    continue
                text = self._read(ctx, *parts, name)
                if text is None:
                    continue
                files += 1
                # PyYAML is imported when a CDI spec is found, not by every collection
                from gpu_triage.io.yamlio import YamlError, load_one

                try:
                    kind, count = cdi_spec_devices(load_one(text, "/" + "/".join([*parts, name])))
                except YamlError:
                    continue
                if kind == CDI_GPU_KIND:
                    devices += count
        return files, devices

    def _docker(self, ctx: CollectContext, daemon_json: str | None) -> SchedulerFacts | None:
        res = ctx.run(
            self.name,
            ["docker", "info", "--format", "{{json .}}"],
            min(ctx.command_timeout_s, 10.0),
        )
        info = docker_info_facts(res.stdout, "docker info") if res.ok else None
        if daemon_json is not None:
            configured = daemon_json_facts(daemon_json)
            if info is None:
                return configured  # the daemon is down or the CLI is absent: its config
            if configured is not None:
                merge_fields(info, configured)
        return info

    def _dropins(self, ctx: CollectContext, *parts: str) -> list[tuple[str, str]]:
        folder = ctx.path(*parts)
        try:
            files = sorted(p for p in folder.iterdir() if p.is_file())
        except OSError:
            return []
        out = []
        for f in files:
            text = self._read(ctx, *parts, f.name)
            if text is not None:
                out.append(("/" + "/".join([*parts, f.name]), text))
        return out

    def collect(self, ctx: CollectContext, facts: Facts) -> None:
        configs: list[tuple[str, str, bool]] = []  # (path, runtime, nvidia?)
        docker = self._read(ctx, "etc", "docker", "daemon.json")
        if docker is not None:
            configs.append(("/etc/docker/daemon.json", "docker", docker_uses_nvidia(docker)))
        files: list[tuple[str, str]] = []
        main = self._read(ctx, "etc", "containerd", "config.toml")
        if main is not None:
            files.append(("/etc/containerd/config.toml", main))
        files += self._dropins(ctx, "etc", "containerd", "conf.d")
        crio = self._read(ctx, "etc", "crio", "crio.conf")
        if crio is not None:
            files.append(("/etc/crio/crio.conf", crio))
        files += self._dropins(ctx, "etc", "crio", "crio.conf.d")
        for path, text in files:
            runtime = "cri-o" if "/crio/" in path else "containerd"
            configs.append((path, runtime, containerd_uses_nvidia(text)))

        tools: list[str] = []
        version: str | None = None
        for argv in (["nvidia-ctk", "--version"], ["nvidia-container-cli", "info"]):
            res = ctx.run(self.name, argv, min(ctx.command_timeout_s, 10.0))
            if not res.missing:
                tools.append(argv[0])
                if argv[0] == "nvidia-ctk" and res.ok:
                    version = toolkit_version(res.stdout)
        if version is None and "nvidia-container-cli" in tools:
            # before nvidia-ctk (toolkit < 1.11), or without it: libnvidia-container's CLI
            res = ctx.run(
                self.name, ["nvidia-container-cli", "--version"], min(ctx.command_timeout_s, 10.0)
            )
            if res.ok:
                version = toolkit_version(res.stdout)
        docker_facts = self._docker(ctx, docker)
        toolkit = self._read(ctx, "etc", "nvidia-container-runtime", "config.toml")
        spec_files, spec_devices = self._cdi_specs(ctx)
        if not configs and not tools and docker_facts is None and not spec_files:
            raise CollectorUnavailable(
                "no Docker/containerd/CRI-O configuration and no NVIDIA container toolkit"
            )
        wired = [f"{path} ({runtime})" for path, runtime, nvidia in configs if nvidia]
        sched = SchedulerFacts(
            source="; ".join(
                [
                    f"nvidia runtime in: {', '.join(wired) or 'none'}",
                    f"toolkit: {', '.join(tools) or 'not installed'}",
                ]
            )
        )
        # A runtime entry pointing at an uninstalled toolkit fails at container start.
        sched.container_runtime_nvidia = bool(wired) and bool(tools)
        if version is not None:
            sched.container_toolkit_version = version
        else:
            sched.mark_unavailable(
                "container_toolkit_version",
                UnavailableReason.NOT_SUPPORTED if not tools else UnavailableReason.ERROR,
                "no NVIDIA container toolkit installed"
                if not tools
                else "nvidia-ctk / nvidia-container-cli --version printed no version",
            )
        if docker_facts is not None:
            merge_fields(sched, docker_facts)
        if toolkit is not None:
            sched.container_toolkit_mode = toolkit_mode(toolkit)
        for _path, text in files:
            if "/containerd/" in _path and sched.containerd_cdi_enabled is None:
                sched.containerd_cdi_enabled = containerd_cdi_enabled(text)
        sched.cdi_spec_files = spec_files
        sched.cdi_nvidia_devices = spec_devices
        if not spec_devices and "nvidia-ctk" in tools:
            # specs may live elsewhere (a configured spec dir): ask the toolkit
            res = ctx.run(
                self.name, ["nvidia-ctk", "cdi", "list"], min(ctx.command_timeout_s, 10.0)
            )
            listed = cdi_list_facts(res.stdout + "\n" + res.stderr) if res.ok else None
            if listed is not None and listed.cdi_nvidia_devices:
                sched.cdi_nvidia_devices = listed.cdi_nvidia_devices
        if self._refused:
            sched.source = "; ".join([sched.source or "", *self._refused[:4]])
            self._refused = []
        facts.scheduler = sched


# --------------------------------------------------------------------------- Slurm

_GRES = re.compile(r"\bGres=(\S*)")
_TRES_GPU = re.compile(r"\bCfgTRES=\S*?gres/gpu=(\d+)")
_GRES_GPU = re.compile(r"(?:^|,)gpu(?::[^:,]+)*?:(\d+)(?=,|$)")


def parse_gres_gpus(text: str) -> int | None:
    """GPUs in ``scontrol show node`` output: Gres=gpu:8, gpu:h100:8(S:0-1), gpu:a:2,gpu:b:2.

    ``Gres=(null)`` is 0; None when the output names no Gres at all.
    """
    m = _GRES.search(text)
    if m:
        # Socket lists like (S:0,1) contain commas: drop them before splitting.
        spec = re.sub(r"\([^)]*\)", "", m.group(1))
        counts = [int(g) for g in _GRES_GPU.findall(spec)]
        if counts or spec in ("(null)", "", "none"):
            return sum(counts)
        if "gpu" not in spec:
            return 0
    t = _TRES_GPU.search(text)
    return int(t.group(1)) if t else None


class SlurmCollector:
    """GPUs Slurm's GRES declares for this node (scontrol show node)."""

    name = "slurm"
    kinds = ("scheduler",)

    def __init__(self, node_name: str | None = None) -> None:
        self._node_name = node_name

    def collect(self, ctx: CollectContext, facts: Facts) -> None:
        sched = SchedulerFacts(source="scontrol show node")
        # Slurm node names are usually the short hostname: try it first.
        names = list(reversed(node_names(ctx, self._node_name)))
        res: CommandResult | None = None
        for name in names:
            res = ctx.run(self.name, ["scontrol", "show", "node", name])
            if res.missing:
                raise CollectorUnavailable("scontrol not found")
            if res.ok or "not found" not in (res.stdout + res.stderr).lower():
                break
        assert res is not None
        if not res.ok:
            if "not found" in (res.stdout + res.stderr).lower():
                raise CollectorUnavailable(f"node {names[0]} is not a Slurm node")
            reason, detail = _failure_reason(res)
            sched.mark_unavailable("slurm_gres_gpus", reason, detail)
        else:
            gpus = parse_gres_gpus(res.stdout)
            if gpus is None:
                sched.mark_unavailable(
                    "slurm_gres_gpus", UnavailableReason.NOT_SUPPORTED, "no Gres= in the output"
                )
            sched.slurm_gres_gpus = gpus
        facts.scheduler = sched
