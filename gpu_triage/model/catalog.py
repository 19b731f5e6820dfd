"""The fact catalogue: every kind and field a rule may name, with unit and meaning.

Generated from the pydantic models in :mod:`gpu_triage.model.facts`, so the models
stay the only declaration of what a fact is.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache
from typing import Any, get_args, get_origin

from pydantic import BaseModel

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
    """A fact kind as rules see it (``gpu``, ``xid``, ``host`` ...)."""

    name: str
    attr: str  # attribute of Facts holding it
    model: type[BaseModel]
    singleton: bool
    meaning: str
    collectors: tuple[str, ...]  # collectors that produce it
    event: bool = False
    gpu_key: str | None = None  # field holding the PCI bus id of the GPU it belongs to
    fields: dict[str, FieldInfo] = field(default_factory=dict)


_KINDS: list[tuple[str, str, type[BaseModel], bool, tuple[str, ...], bool, str | None]] = [
    # name, Facts attribute, model, singleton, collectors, event, gpu join key
    ("host", "host", f.HostFacts, True, ("host", "text:host"), False, None),
    ("gpu", "gpus", f.GpuFacts, False, ("nvml", "text:gpu"), False, None),
    ("process", "processes", f.GpuProcess, False, ("nvml", "text:gpu"), False, "gpu_pci_bus_id"),
    ("nvlink", "nvlinks", f.NvlinkFacts, False, ("nvml", "text:nvlink"), False, "gpu_pci_bus_id"),
    ("pcie", "pcie_links", f.PcieLinkFacts, False, ("host", "text:pcie"), False, None),
    ("topo", "topology", f.TopoFacts, False, ("text:topo",), False, None),
    ("disk", "disks", f.DiskFacts, False, ("host", "text:disk"), False, None),
    ("nic", "nics", f.NicFacts, False, ("host", "text:nic"), False, None),
    ("ib", "ib_ports", f.IbPortFacts, False, ("host", "text:ib"), False, None),
    ("xid", "xids", f.XidEvent, False, ("kernel_log", "text:kernel_log"), True, "pci_bus_id"),
    ("sxid", "sxids", f.SxidEvent, False, ("kernel_log", "text:kernel_log"), True, None),
    ("aer", "aers", f.AerEvent, False, ("kernel_log", "text:kernel_log"), True, "pci_bus_id"),
    (
        "bus_loss",
        "bus_losses",
        f.BusLossEvent,
        False,
        ("kernel_log", "text:kernel_log"),
        True,
        "pci_bus_id",
    ),
    ("oom", "ooms", f.OomKillEvent, False, ("kernel_log", "text:kernel_log"), True, None),
    (
        "nvlink_error",
        "nvlink_errors",
        f.NvlinkErrorEvent,
        False,
        ("kernel_log", "text:kernel_log"),
        True,
        "pci_bus_id",
    ),
    ("xid_history", "xid_history", f.XidHistory, False, ("history",), False, "pci_bus_id"),
    ("driver", "driver", f.DriverFacts, True, ("nvml", "host", "text:driver"), False, None),
    # Error texts come from pastes and from collectors that failed in a known way; where
    # none was given there is nothing to find, never "could not collect".
    ("error", "errors", f.ErrorTextEvent, False, ("nvml", "text:error"), False, "pci_bus_id"),
    (
        "scheduler",
        "scheduler",
        f.SchedulerFacts,
        True,
        ("kubernetes", "container_runtime", "slurm", "text:scheduler"),
        False,
        None,
    ),
    ("site", "site", f.SiteInventory, True, ("inventory",), False, None),
    ("job", "job", f.JobMetrics, True, ("job_metrics",), False, None),
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
    if isinstance(t, type) and issubclass(t, f.StrEnum):
        return "string", tuple(m.value for m in t)
    return "string", ()


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
        typ, choices = _type_name(cinfo.return_type)
        out[name] = FieldInfo(
            kind, name, typ, str(extra.get("unit", "")), cinfo.description or "", choices
        )
    return out


@cache
def kinds() -> dict[str, KindInfo]:
    out: dict[str, KindInfo] = {}
    for name, attr, model, singleton, collectors, event, gpu_key in _KINDS:
        out[name] = KindInfo(
            name,
            attr,
            model,
            singleton,
            (model.__doc__ or "").strip(),
            collectors,
            event,
            gpu_key,
            _fields(name, model),
        )
    return out


def field_info(kind: str, name: str) -> FieldInfo | None:
    k = kinds().get(kind)
    return k.fields.get(name) if k else None


def catalog_markdown() -> str:
    """The fact catalogue as Markdown (docs/facts.md)."""
    lines = [
        "# Fact catalogue",
        "",
        "Generated from `gpu_triage/model/facts.py` by `gpu-triage facts docs`.",
        "",
    ]
    for k in kinds().values():
        many = "one per node" if k.singleton else "many per node"
        lines += [
            f"## `{k.name}`: {k.meaning}",
            "",
            f"{many}; produced by: {', '.join(k.collectors)}",
            "",
            "| field | type | unit | meaning |",
            "|---|---|---|---|",
        ]
        for fi in k.fields.values():
            typ = fi.type + (f" ({' / '.join(fi.choices)})" if fi.choices else "")
            lines.append(f"| `{fi.path}` | {typ} | {fi.unit} | {fi.meaning} |")
        lines.append("")
    return "\n".join(lines)
