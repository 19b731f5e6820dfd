"""The fact catalogue: every kind and field a rule may name, with unit and meaning.

Generated from the pydantic models in :mod:`gpu_triage.model.facts`, so the models
stay the only declaration of what a fact is.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from functools import cache
from typing import Any, get_args, get_origin, get_type_hints

from pydantic import BaseModel
from pydantic.fields import ComputedFieldInfo
from pydantic_core import PydanticUndefined

from gpu_triage.model import facts as f


@dataclass(frozen=True)
class FieldInfo:
    kind: str
    name: str
    type: str  # "number", "integer", "boolean", "string", "list"
    unit: str
    meaning: str
    choices: tuple[str, ...] = ()

    @property
    def path(self) -> str:
        return f"{self.kind}.{self.name}"


@dataclass(frozen=True)
class KindInfo:
    """A fact kind as rules see it (``gpu``, ``xid``, ``host`` ...), and everything the
    code knows per kind: the compiler (singleton, GPU join), evidence (identity), subject
    keys (key fields), exporters (the GPU an item belongs to), redaction, docs."""

    name: str
    attr: str  # attribute of Facts holding it
    model: type[BaseModel]
    singleton: bool
    meaning: str
    collectors: tuple[str, ...]  # collectors that produce it
    event: bool = False  # a kernel log event: its subject key carries the line
    gpu_key: str | None = None  # field holding the PCI bus id of the GPU it belongs to
    fields: dict[str, FieldInfo] = field(default_factory=dict)
    identity: tuple[str, ...] = ()  # fields that say which item a finding is about
    key_fields: tuple[str, ...] = ()  # subject key: the first of these that is set
    key_suffix: str | None = None  # subject key: a field appended after "/" (ports, links)
    process_fields: tuple[str, ...] = ()  # fields naming a process (redacted)
    # How newer facts find the item they update (a runbook step's parsed output): these
    # fields, else ``#`` + the fallback field; none: a newer read replaces the whole list.
    match_fields: tuple[str, ...] = ()
    match_fallback: str | None = None

    def match_key(self, item: BaseModel) -> Any:
        """The key newer facts about ``item`` are matched by (None: cannot be matched)."""
        if not self.match_fields:
            return None
        get = item.__dict__.get
        key = get(self.match_fields[0]) if len(self.match_fields) == 1 else None
        if len(self.match_fields) > 1:
            key = tuple(get(f) for f in self.match_fields)
        if not key and self.match_fallback and get(self.match_fallback) is not None:
            return f"#{get(self.match_fallback)}"
        return key or None

    def gpu_of(self, item: BaseModel) -> str | None:
        """The PCI bus id of the GPU this item is (a gpu) or belongs to."""
        key = "pci_bus_id" if self.name == "gpu" else self.gpu_key
        value = item.__dict__.get(key) if key else None
        return value if isinstance(value, str) and value else None


@dataclass(frozen=True)
class _Kind:
    """One catalogue entry as declared; the fields come from its pydantic model."""

    name: str
    attr: str
    model: type[BaseModel]
    collectors: tuple[str, ...]
    singleton: bool = False
    event: bool = False
    gpu_key: str | None = None
    identity: tuple[str, ...] = ()
    key_suffix: str | None = None
    process_fields: tuple[str, ...] = ()
    match_fields: tuple[str, ...] = ()
    match_fallback: str | None = None


# What identifies an item in a subject key, in order of preference (those the model has).
_KEY_FIELDS = ("pci_bus_id", "uuid", "name", "ca_name", "gpu_pci_bus_id", "mountpoint")
_KERNEL = ("kernel_log", "text:kernel_log")

_KINDS: list[_Kind] = [
    _Kind("host", "host", f.HostFacts, ("host", "text:host"), singleton=True),
    _Kind(
        "gpu",
        "gpus",
        f.GpuFacts,
        ("nvml", "text:gpu"),
        identity=("index", "pci_bus_id", "name"),
        match_fields=("pci_bus_id",),
        match_fallback="index",
    ),
    _Kind(
        "process",
        "processes",
        f.GpuProcess,
        ("nvml", "text:gpu"),
        gpu_key="gpu_pci_bus_id",
        identity=("gpu_pci_bus_id", "pid", "name"),
        process_fields=("name",),
    ),
    _Kind(
        "nvlink",
        "nvlinks",
        f.NvlinkFacts,
        ("nvml", "text:nvlink"),
        gpu_key="gpu_pci_bus_id",
        identity=("gpu_pci_bus_id", "link"),
        key_suffix="link",
        match_fields=("gpu_pci_bus_id", "gpu_index", "link"),
    ),
    _Kind(
        "pcie",
        "pcie_links",
        f.PcieLinkFacts,
        ("host", "text:pcie"),
        identity=("pci_bus_id", "device_class"),
        match_fields=("pci_bus_id",),
    ),
    _Kind(
        "topo",
        "topology",
        f.TopoFacts,
        ("text:topo",),
        identity=("a", "b"),
        match_fields=("a", "b"),
    ),
    _Kind(
        "disk",
        "disks",
        f.DiskFacts,
        ("host", "text:disk"),
        identity=("name",),
        match_fields=("name",),
    ),
    _Kind(
        "mount",
        "mounts",
        f.MountFacts,
        ("host", "text:mount"),
        identity=("mountpoint", "device"),
        match_fields=("mountpoint",),
    ),
    _Kind(
        "nic",
        "nics",
        f.NicFacts,
        ("host", "text:nic"),
        identity=("name", "pci_bus_id"),
        match_fields=("name",),
    ),
    _Kind(
        "ib",
        "ib_ports",
        f.IbPortFacts,
        ("host", "text:ib"),
        identity=("ca_name", "port"),
        key_suffix="port",
        match_fields=("ca_name", "port"),
    ),
    _Kind(
        "xid",
        "xids",
        f.XidEvent,
        _KERNEL,
        event=True,
        gpu_key="pci_bus_id",
        identity=("code", "pci_bus_id", "time_text"),
        process_fields=("process_name",),
    ),
    _Kind(
        "sxid",
        "sxids",
        f.SxidEvent,
        _KERNEL,
        event=True,
        identity=("code", "pci_bus_id", "time_text"),
    ),
    _Kind(
        "aer",
        "aers",
        f.AerEvent,
        _KERNEL,
        event=True,
        gpu_key="pci_bus_id",
        identity=("pci_bus_id", "severity", "time_text"),
    ),
    _Kind(
        "bus_loss",
        "bus_losses",
        f.BusLossEvent,
        _KERNEL,
        event=True,
        gpu_key="pci_bus_id",
        identity=("pci_bus_id", "time_text"),
    ),
    _Kind(
        "oom",
        "ooms",
        f.OomKillEvent,
        _KERNEL,
        event=True,
        identity=("process_name", "time_text"),
        process_fields=("process_name",),
    ),
    _Kind(
        "nvlink_error",
        "nvlink_errors",
        f.NvlinkErrorEvent,
        _KERNEL,
        event=True,
        gpu_key="pci_bus_id",
        identity=("pci_bus_id", "link"),
    ),
    _Kind(
        "pcie_limit",
        "pcie_limits",
        f.PcieLimitEvent,
        _KERNEL,
        event=True,
        gpu_key="pci_bus_id",
        identity=("pci_bus_id",),
    ),
    _Kind(
        "host_event",
        "host_events",
        f.HostEvent,
        _KERNEL,
        event=True,
        identity=("problem", "device"),
        process_fields=("process_name",),
    ),
    _Kind("xid_history", "xid_history", f.XidHistory, ("history",), gpu_key="pci_bus_id"),
    _Kind("driver", "driver", f.DriverFacts, ("nvml", "host", "text:driver"), singleton=True),
    _Kind("fabric", "fabric", f.FabricFacts, ("fabric_manager", "text:fabric"), singleton=True),
    # Error texts come from pastes and from collectors that failed in a known way; where
    # none was given there is nothing to find, never "could not collect".
    _Kind(
        "error",
        "errors",
        f.ErrorTextEvent,
        ("nvml", "text:error"),
        gpu_key="pci_bus_id",
        identity=("signature", "pci_bus_id", "value"),
    ),
    _Kind(
        "diag",
        "diags",
        f.DiagResult,
        ("dcgm_diag", "text:diag"),
        identity=("test", "gpu_index"),
        match_fields=("test", "gpu_index"),
    ),
    _Kind(
        "scheduler",
        "scheduler",
        f.SchedulerFacts,
        ("kubernetes", "container_runtime", "slurm", "text:scheduler"),
        singleton=True,
    ),
    _Kind("site", "site", f.SiteInventory, ("inventory",), singleton=True),
    _Kind("job", "job", f.JobMetrics, ("job_metrics",), singleton=True),
]

_SKIP = {"unavailable", "source"}


def _type_name(annotation: Any) -> tuple[str, tuple[str, ...]]:
    args = [a for a in get_args(annotation) if a is not type(None)] or [annotation]
    t = args[0]
    if get_origin(t) is list:
        return "list", ()
    if t is bool:
        return "boolean", ()
    if t is int:
        return "integer", ()
    if t is float:
        return "number", ()
    if isinstance(t, type) and issubclass(t, StrEnum):
        return "string", tuple(m.value for m in t)
    return "string", ()


def _return_type(model: type[BaseModel], cinfo: ComputedFieldInfo) -> Any:
    """What a computed field returns. The fact models are built on first use
    (``defer_build``): until then pydantic has not read the return annotation."""
    rt = cinfo.return_type
    if rt is PydanticUndefined or isinstance(rt, str):
        prop = cinfo.wrapped_property
        fget = prop.fget if isinstance(prop, property) else prop
        rt = get_type_hints(fget, vars(sys.modules[model.__module__]))["return"]
    return rt


def _fields(kind: str, model: type[BaseModel]) -> dict[str, FieldInfo]:
    out: dict[str, FieldInfo] = {}
    for name, info in model.model_fields.items():
        if name in _SKIP:
            continue
        extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
        typ, choices = _type_name(info.annotation)
        out[name] = FieldInfo(
            kind, name, typ, str(extra.get("unit", "")), info.description or "", choices
        )
    for name, cinfo in model.model_computed_fields.items():
        extra = cinfo.json_schema_extra if isinstance(cinfo.json_schema_extra, dict) else {}
        typ, choices = _type_name(_return_type(model, cinfo))
        out[name] = FieldInfo(
            kind, name, typ, str(extra.get("unit", "")), cinfo.description or "", choices
        )
    return out


@cache
def kinds() -> dict[str, KindInfo]:
    out: dict[str, KindInfo] = {}
    for k in _KINDS:
        fields = _fields(k.name, k.model)
        out[k.name] = KindInfo(
            k.name,
            k.attr,
            k.model,
            k.singleton,
            (k.model.__doc__ or "").strip(),
            k.collectors,
            k.event,
            k.gpu_key,
            fields,
            identity=k.identity,
            key_fields=tuple(n for n in _KEY_FIELDS if n in k.model.model_fields),
            key_suffix=k.key_suffix,
            process_fields=k.process_fields,
            match_fields=k.match_fields,
            match_fallback=k.match_fallback,
        )
    return out


def field_info(kind: str, name: str) -> FieldInfo | None:
    k = kinds().get(kind)
    return k.fields.get(name) if k else None


def catalog_markdown(used_by: Mapping[str, Sequence[str]] | None = None) -> str:
    """The fact catalogue as Markdown (docs/facts.md); with ``used_by`` (``kind.field`` ->
    rule ids, from the compiled rulebook) a column lists the rules reading each field."""
    lines = [
        "# Fact catalogue",
        "",
        "Generated from `gpu_triage/model/facts.py` by `gpu-triage facts docs`.",
        "",
    ]
    for k in kinds().values():
        many = "one per node" if k.singleton else "many per node"
        about = [many + (" (kernel log events)" if k.event else "")]
        about.append(f"produced by: {', '.join(k.collectors)}")
        if k.identity:
            about.append(f"identified by: {', '.join(k.identity)}")
        if k.gpu_key:
            about.append(f"belongs to the GPU at: {k.gpu_key}")
        lines += [
            f"## `{k.name}`: {k.meaning}",
            "",
            "; ".join(about),
            "",
            "| field | type | unit | meaning |" + (" used by |" if used_by is not None else ""),
            "|---|---|---|---|" + ("---|" if used_by is not None else ""),
        ]
        for fi in k.fields.values():
            typ = fi.type + (f" ({' / '.join(fi.choices)})" if fi.choices else "")
            row = f"| `{fi.path}` | {typ} | {fi.unit} | {fi.meaning} |"
            if used_by is not None:
                row += " " + ", ".join(used_by.get(fi.path, ())) + " |"
            lines.append(row)
        lines.append("")
    return "\n".join(lines)
