"""kubectl text output -> SchedulerFacts: ``describe pod``, ``describe node``, events.

Sections are found by their titles (``Capacity:``, ``Containers:``, ``Events:`` ...),
not by exact indentation, since pastes flatten it. FailedScheduling lines are read
from a describe ``Events:`` table (Type Reason Age From Message, aligned or single
spaced), from ``kubectl get events`` (with or without NAMESPACE, old or new
columns), and the scheduler message ``0/3 nodes are available: 3 Insufficient
nvidia.com/gpu, ...`` is broken into counts.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from gpu_triage.model.facts import SchedulerFacts
from gpu_triage.model.gpu_models import (
    GPU_TYPE_LABELS,
    INSTANCE_TYPE_LABELS,
    gpu_type_wanted,
    instance_type_wanted,
)

GPU_RESOURCE = "nvidia.com/gpu"

# Top-level titles of `kubectl describe node|pod` (column 0 in unflattened output).
_NODE_SECTIONS = {
    "Capacity",
    "Allocatable",
    "System Info",
    "Allocated resources",
    "Non-terminated Pods",
    "Events",
    "Conditions",
    "Addresses",
    "Labels",
    "Annotations",
    "Taints",
    "Lease",
    "PodCIDR",
    "PodCIDRs",
    "ProviderID",
    "Name",
    "Roles",
    "CreationTimestamp",
    "Unschedulable",
}
_POD_SECTIONS = {
    "Name",
    "Namespace",
    "Priority",
    "Priority Class Name",
    "Service Account",
    "Node",
    "Start Time",
    "Labels",
    "Annotations",
    "Status",
    "Reason",
    "Message",
    "IP",
    "IPs",
    "Controlled By",
    "Init Containers",
    "Containers",
    "Conditions",
    "Volumes",
    "QoS Class",
    "Node-Selectors",
    "Tolerations",
    "Events",
    "Runtime Class Name",
    "Nominated Node Name",
}
_TITLE = re.compile(r"^([A-Z][A-Za-z -]*?)\s*:\s*(.*?)\s*$")
_KV = re.compile(r"^\s*([^:\s][^:]*?)\s*:\s+(.*?)\s*$")
_RESOURCE = re.compile(r"^\s*([a-z0-9][a-z0-9.\-/]*)\s*:\s+(\S+)\s*$")
_CONTAINER = re.compile(r"^(\s*)([A-Za-z0-9][\w.\-]*)\s*:\s*$")
_CONTAINER_KEYS = {
    "Limits",
    "Requests",
    "Environment",
    "Mounts",
    "State",
    "Last State",
    "Command",
    "Args",
    "Ports",
    "Host Ports",
    "Liveness",
    "Readiness",
    "Startup",
}
_AGE = re.compile(r"^(?:<unknown>|<invalid>|\d+(?:\.\d+)?[smhdy](?:\d+[smhdy])*)$")
_AGE_REPEAT = re.compile(r"^\s*\(x\d+\s+over\s+[^)]*\)")
_NODES = re.compile(r"(?<!\d)(\d{1,9})/(\d{1,9}) nodes are available")
_ITEM = re.compile(r"^\s*(\d{1,9})\s+(.+?)\.?\s*$")
# key=value of a label list or a node selector (Labels:, Node-Selectors:); a key may have
# a DNS prefix (nvidia.com/gpu.product), a value may be empty
_LABEL = re.compile(
    r"^\s*((?:[A-Za-z0-9.-]{1,253}/)?[A-Za-z0-9][A-Za-z0-9._-]{0,62})=(\S{0,63})\s*$"
)
# the Scheduled event: "Successfully assigned prod/infer-6c9c8d7f6f-kp2xw to gpu-node-12"
_ASSIGNED = re.compile(r"\bSuccessfully assigned (\S+) to (\S+?)\.?\s*$")


def parse_labels(lines: list[str]) -> dict[str, str]:
    """``key=value`` terms, one a line (``<none>`` and anything else skipped)."""
    out: dict[str, str] = {}
    for line in lines:
        m = _LABEL.match(line)
        if m:
            out[m.group(1)] = m.group(2)
    return out


def node_label_facts(labels: dict[str, str], facts: SchedulerFacts) -> None:
    """The node's GPU product and instance type from its labels (describe or JSON)."""
    facts.k8s_node_gpu_product = labels.get(GPU_TYPE_LABELS[0]) or None
    facts.k8s_node_instance_type = next(
        (labels[k] for k in INSTANCE_TYPE_LABELS if labels.get(k)), None
    )


def _int(text: str | None) -> int | None:
    if text is None:
        return None
    m = re.match(r"^\s*(\d{1,18})(?!\d)", text)
    return int(m.group(1)) if m else None


# --------------------------------------------------------------------------- events


@dataclass
class SchedulingEvent:
    """One FailedScheduling event line and what its message says."""

    line: int
    message: str
    type: str | None = None  # Warning / Normal
    reason: str = "FailedScheduling"
    age: str | None = None  # Age (describe) or LAST SEEN (get events), as printed
    source: str | None = None  # From / SOURCE, e.g. default-scheduler
    object: str | None = None  # OBJECT of `get events`, e.g. pod/train-0
    namespace: str | None = None
    nodes_available: int | None = None
    nodes_total: int | None = None
    reasons: dict[str, int] = field(default_factory=dict)  # "Insufficient nvidia.com/gpu" -> 3

    @property
    def insufficient(self) -> dict[str, int]:
        """resource -> nodes lacking it, from 'N Insufficient <resource>' items."""
        return {
            k.split(None, 1)[1]: n
            for k, n in self.reasons.items()
            if k.startswith("Insufficient ") and len(k.split(None, 1)) == 2
        }

    @property
    def unschedulable_nodes(self) -> int | None:
        return self.reasons.get("node(s) were unschedulable")

    @property
    def wants_gpu(self) -> bool:
        return GPU_RESOURCE in self.insufficient


def parse_scheduler_message(message: str) -> tuple[int | None, int | None, dict[str, int]]:
    """'0/2 nodes are available: 1 Insufficient nvidia.com/gpu, 1 node(s) were unschedulable.'
    -> (0, 2, {'Insufficient nvidia.com/gpu': 1, 'node(s) were unschedulable': 1})."""
    m = _NODES.search(message)
    if not m:
        if "no nodes available" in message:
            return 0, 0, {}
        return None, None, {}
    # The 'preemption: ...' tail repeats the node count with other reasons: not ours.
    body = message[m.end() :].split(" preemption:")[0].lstrip(": ")
    reasons: dict[str, int] = {}
    for item in re.split(r",\s+(?=\d{1,9}\s)", body):
        im = _ITEM.match(item)
        if im:
            reasons[im.group(2)] = reasons.get(im.group(2), 0) + int(im.group(1))
    return int(m.group(1)), int(m.group(2)), reasons


def parse_events(text: str, first_line: int = 1) -> list[SchedulingEvent]:
    """FailedScheduling lines of a describe Events table or ``kubectl get events``."""
    events: list[SchedulingEvent] = []
    for lineno, raw in enumerate(text.splitlines(), start=first_line):
        tokens = raw.split()
        if "FailedScheduling" not in tokens:
            continue
        idx = tokens.index("FailedScheduling")
        before = tokens[:idx]
        etype = before[-1] if before and before[-1] in ("Warning", "Normal") else None
        head = before[:-1] if etype else before
        rest = raw.split("FailedScheduling", 1)[1].strip()
        ev = SchedulingEvent(line=lineno, message=rest, type=etype)
        parts = rest.split(None, 1)
        if parts and _AGE.match(parts[0]) and len(parts) == 2:
            # describe: Age [(xN over T)] From Message
            ev.age, tail = parts[0], parts[1]
            rep = _AGE_REPEAT.match(tail)
            if rep:
                ev.age += " " + rep.group(0).strip()
                tail = tail[rep.end() :]
            src = tail.split(None, 1)
            if len(src) == 2:
                ev.source, ev.message = src[0], src[1].strip()
        elif parts and re.match(r"^[A-Za-z]+/\S+$", parts[0]) and len(parts) == 2:
            # get events: [NAMESPACE] LAST-SEEN TYPE REASON OBJECT MESSAGE
            ev.object, ev.message = parts[0], parts[1].strip()
            if head:
                ev.age = head[-1]
                ev.namespace = head[0] if len(head) > 1 else None
        elif parts and "scheduler" in parts[0] and len(parts) == 2:
            ev.source, ev.message = parts[0], parts[1].strip()  # old: ... REASON SOURCE MESSAGE
        ev.nodes_available, ev.nodes_total, ev.reasons = parse_scheduler_message(ev.message)
        events.append(ev)
    return events


def scheduler_facts_from_events(
    events: list[SchedulingEvent], source: str = "kubectl get events"
) -> SchedulerFacts:
    """Pending-for-GPU pod count and the latest FailedScheduling message."""
    facts = SchedulerFacts(source=source)
    if not events:
        return facts
    facts.k8s_pod_unschedulable_reason = events[-1].message
    gpu = [e for e in events if e.wants_gpu]
    # Repeated events of one pod are one pending pod; unnamed (describe) events are one pod.
    facts.k8s_pods_pending_gpu = len({(e.namespace, e.object) for e in gpu})
    return facts


# --------------------------------------------------------------------------- describe node


@dataclass
class NodeDescription:
    name: str | None = None
    capacity: dict[str, str] = field(default_factory=dict)
    allocatable: dict[str, str] = field(default_factory=dict)
    system_info: dict[str, str] = field(default_factory=dict)  # keys as printed
    allocated_requests: dict[str, str] = field(default_factory=dict)
    allocated_limits: dict[str, str] = field(default_factory=dict)
    non_terminated_pods: int | None = None
    events: list[SchedulingEvent] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    labels: dict[str, str] = field(default_factory=dict)


def _sections(text: str, titles: set[str]) -> list[tuple[str | None, str, int, str]]:
    """(section, inline value, line number, line) for each line, by the last title seen."""
    out: list[tuple[str | None, str, int, str]] = []
    section: str | None = None
    inline = ""
    lines = [line.expandtabs(8) for line in text.splitlines()]
    # a describe pasted indented (quoted, nested in other output): titles are the
    # least-indented lines, wherever that is
    indent = min((len(s) - len(s.lstrip()) for s in lines if s.strip()), default=0)
    for lineno, raw in enumerate(lines, start=1):
        raw = raw[indent:] if raw[:indent].isspace() else raw.lstrip()
        m = _TITLE.match(raw)
        if m and m.group(1) in titles:
            section, inline = m.group(1), m.group(2)
            out.append((section, inline, lineno, ""))
            continue
        out.append((section, inline, lineno, raw))
    return out


def parse_describe_node_detail(text: str) -> NodeDescription:
    """Everything parse_describe_node uses, keyed as printed."""
    node = NodeDescription()
    for section, inline, lineno, raw in _sections(text, _NODE_SECTIONS):
        if not raw:
            if section == "Name":
                node.name = inline or None
            elif section == "Labels":
                node.labels.update(parse_labels([inline]))
            elif section == "Non-terminated Pods":
                m = re.search(r"\((\d+) in total\)", inline)
                node.non_terminated_pods = int(m.group(1)) if m else None
            continue
        if section in ("Capacity", "Allocatable"):
            m = _KV.match(raw)
            if m:
                target = node.capacity if section == "Capacity" else node.allocatable
                target[m.group(1)] = m.group(2)
        elif section == "System Info":
            m = _KV.match(raw)
            if m:
                node.system_info[m.group(1)] = m.group(2)
        elif section == "Allocated resources":
            tokens = raw.split()
            if len(tokens) >= 2 and re.match(r"^[a-z0-9][a-z0-9.\-/]*$", tokens[0]):
                node.allocated_requests[tokens[0]] = tokens[1]
                # Limits follow the request and its optional "(10%)".
                rest = tokens[2:]
                if rest and rest[0].startswith("("):
                    rest = rest[1:]
                if rest:
                    node.allocated_limits[tokens[0]] = rest[0]
        elif section == "Events":
            node.events.extend(parse_events(raw, lineno))
        elif section == "Labels":
            node.labels.update(parse_labels([raw]))
    if GPU_RESOURCE not in node.capacity:
        node.notes.append(
            f"{GPU_RESOURCE} absent from Capacity: the NVIDIA device plugin has not "
            "registered GPUs on this node (counted as 0)"
        )
    return node


def container_runtime_name(version: str | None) -> str | None:
    """``docker://20.10.7`` -> ``docker``; ``containerd://1.7.2`` -> ``containerd``."""
    if not version:
        return None
    m = re.match(r"\s*([a-z][a-z0-9.-]{0,31})://", version)
    return m.group(1) if m else None


def parse_describe_node(text: str, source: str = "kubectl describe node") -> SchedulerFacts:
    """GPU capacity/allocatable (absent -> 0, with the note in ``source``) and GPUs requested."""
    node = parse_describe_node_detail(text)
    facts = SchedulerFacts(source="; ".join([source, *node.notes]))
    facts.k8s_node_gpu_capacity = _int(node.capacity.get(GPU_RESOURCE, "0"))
    facts.k8s_node_gpu_allocatable = _int(node.allocatable.get(GPU_RESOURCE, "0"))
    facts.k8s_container_runtime = container_runtime_name(
        node.system_info.get("Container Runtime Version")
    )
    if node.allocated_requests:
        facts.k8s_gpu_requested = _int(node.allocated_requests.get(GPU_RESOURCE, "0"))
    facts.k8s_node_name = node.name
    node_label_facts(node.labels, facts)
    return facts


# --------------------------------------------------------------------------- describe pod


@dataclass
class ContainerResources:
    name: str
    init: bool = False
    requests: dict[str, str] = field(default_factory=dict)
    limits: dict[str, str] = field(default_factory=dict)

    @property
    def gpus(self) -> int:
        # Extended resources: a limit without a request implies an equal request.
        return _int(self.requests.get(GPU_RESOURCE) or self.limits.get(GPU_RESOURCE)) or 0


@dataclass
class PodDescription:
    name: str | None = None
    namespace: str | None = None
    node: str | None = None  # None when "<none>"
    status: str | None = None
    containers: list[ContainerResources] = field(default_factory=list)
    scheduled_condition: bool | None = None  # PodScheduled row of Conditions
    events: list[SchedulingEvent] = field(default_factory=list)
    node_selector: dict[str, str] = field(default_factory=dict)
    assigned_to: str | None = None  # node of the Scheduled event
    reason: str | None = None  # top-level Reason (a failed pod: UnexpectedAdmissionError)
    message: str | None = None

    @property
    def gpu_requested(self) -> int:
        """Effective pod request: max(sum of app containers, largest init container)."""
        app = sum(c.gpus for c in self.containers if not c.init)
        init = max((c.gpus for c in self.containers if c.init), default=0)
        return max(app, init)


def parse_describe_pod_detail(text: str) -> PodDescription:
    pod = PodDescription()
    block: str | None = None  # "Requests" / "Limits" inside a container
    container_section: str | None = None
    container_indent = 0
    bare = False  # Limits/Requests seen before any section title
    for section, inline, lineno, raw in _sections(text, _POD_SECTIONS):
        if not raw:
            block = None
            value = inline or None
            if section == "Name":
                pod.name = value
            elif section == "Namespace":
                pod.namespace = value
            elif section == "Status":
                pod.status = value
            elif section == "Node":
                pod.node = None if value in (None, "<none>") else value.split("/")[0]
            elif section == "Node-Selectors":
                pod.node_selector.update(parse_labels([inline]))
            elif section == "Reason":
                pod.reason = value
            elif section == "Message":
                pod.message = value
            continue
        if section is None and (bare or raw.strip() in ("Limits:", "Requests:")):
            # a shortened paste (the guide's own): Limits/Requests before any section
            # title, without Containers: and a container name, are one unnamed container
            section = "Containers"
            if not bare:
                bare = True
                pod.containers.append(ContainerResources(""))
                container_section, container_indent = section, len(raw) - len(raw.lstrip())
        if section in ("Containers", "Init Containers"):
            m = _CONTAINER.match(raw)
            # container names are the section's least-indented 'name:' lines (two
            # spaces in kubectl's output, more in some pastes); keys sit deeper
            if (
                m
                and m.group(2) not in _CONTAINER_KEYS
                and (section != container_section or len(m.group(1)) <= container_indent)
            ):
                container_section, container_indent = section, len(m.group(1))
                pod.containers.append(
                    ContainerResources(m.group(2), init=section == "Init Containers")
                )
                block = None
                continue
            stripped = raw.strip()
            if stripped in ("Limits:", "Requests:"):
                block = stripped[:-1]
                continue
            r = _RESOURCE.match(raw)
            if block and r and pod.containers:
                c = pod.containers[-1]
                (c.requests if block == "Requests" else c.limits)[r.group(1)] = r.group(2)
            else:
                block = None
        elif section == "Conditions":
            tokens = raw.split()
            if len(tokens) >= 2 and tokens[0] == "PodScheduled":
                pod.scheduled_condition = tokens[1] == "True"
        elif section == "Events":
            pod.events.extend(parse_events(raw, lineno))
            m = _ASSIGNED.search(raw)
            if m and ("Scheduled" in raw.split() or raw.lstrip().startswith("Successfully")):
                pod.assigned_to = m.group(2)
        elif section == "Node-Selectors":
            pod.node_selector.update(parse_labels([raw]))
    return pod


def parse_describe_pod(text: str, source: str = "kubectl describe pod") -> SchedulerFacts:
    """GPUs the pod requests, whether/where it was scheduled, and why not."""
    pod = parse_describe_pod_detail(text)
    facts = SchedulerFacts(source=source)
    facts.k8s_pod_gpu_requested = pod.gpu_requested
    facts.k8s_pod_node = pod.node or pod.assigned_to
    if pod.node_selector:
        facts.k8s_pod_node_selector = ", ".join(f"{k}={v}" for k, v in pod.node_selector.items())
        wanted = gpu_type_wanted(pod.node_selector)
        if wanted:
            facts.k8s_pod_gpu_wanted_label, facts.k8s_pod_gpu_wanted = wanted
        facts.k8s_pod_instance_type_wanted = instance_type_wanted(pod.node_selector)
    facts.k8s_pod_status_message = pod.message[:300] if pod.message else None
    if pod.reason == "UnexpectedAdmissionError" or GPU_RESOURCE in (pod.message or ""):
        facts.k8s_pod_gpu_admission_failed = (
            pod.reason == "UnexpectedAdmissionError" and GPU_RESOURCE in (pod.message or "")
        )
    if facts.k8s_pod_node is not None:
        facts.k8s_pod_scheduled = True
    elif pod.scheduled_condition is not None:
        facts.k8s_pod_scheduled = pod.scheduled_condition
    elif pod.status or pod.events:
        facts.k8s_pod_scheduled = False
    if facts.k8s_pod_scheduled is False and pod.events:
        facts.k8s_pod_unschedulable_reason = pod.events[-1].message
    return facts
