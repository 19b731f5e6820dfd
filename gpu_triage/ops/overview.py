"""One row per GPU, as nvitop shows a node at a glance: utilisation, memory, power,
temperature, link, Xids and the worst finding about it.

No Textual here (the TUI's GPU screen renders these rows; tests read them alone). A value
that was not read is ``None`` and shown as "n/a" with the reason kept, never as 0. Costs
are linear: one pass over the GPUs, the Xid events and the findings."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from gpu_triage.engine.findings import Finding, FindingsDocument
from gpu_triage.model.facts import Facts, GpuFacts

_GPU_SUBJECT = re.compile(r"GPU (\d+)\b")
NA = "n/a"


@dataclass
class GpuRow:
    index: int | None
    bus_id: str
    name: str
    util: str
    memory: str
    power: str
    temperature: str
    link: str
    xids: str
    worst: Finding | None = None
    other_findings: int = 0  # fired findings about this GPU besides the worst
    unknown: list[str] = field(default_factory=list)  # the fields not read, with why
    lost: bool = False

    @property
    def label(self) -> str:
        return f"GPU {self.index}" if self.index is not None else self.bus_id or "GPU ?"


def _num(v: float | int | None) -> str:
    if v is None:
        return NA
    return f"{v:.0f}" if isinstance(v, float) else str(v)


def _pct(v: float | None) -> str:
    return NA if v is None else f"{v:.0f}%"


def _memory(g: GpuFacts) -> str:
    used, total = g.memory_used_mib, g.memory_total_mib
    if used is None and total is None:
        return NA
    gib = 1024.0
    if used is None:
        return f"?/{total / gib:.0f}G" if total is not None else NA
    if total is None:
        return f"{used / gib:.1f}G"
    return f"{used / gib:.1f}/{total / gib:.0f}G {100 * used / total:.0f}%" if total else NA


def _power(g: GpuFacts) -> str:
    if g.power_draw_w is None:
        return NA
    limit = f"/{g.power_limit_w:.0f}" if g.power_limit_w else ""
    return f"{g.power_draw_w:.0f}{limit}W"


def _temperature(g: GpuFacts) -> str:
    if g.temperature_gpu_c is None:
        return NA
    slow = g.temperature_slowdown_c
    return f"{g.temperature_gpu_c:.0f}°C" + (f"/{slow:.0f}" if slow else "")


def _link(g: GpuFacts) -> str:
    """PCIe "gen5 x16", with the maximum when below it ("gen4/5 x8/16"); NVLink active/total."""
    parts = []
    gen, gmax, w, wmax = (
        g.pcie_link_gen,
        g.pcie_link_gen_max,
        g.pcie_link_width,
        g.pcie_link_width_max,
    )
    if gen is not None or w is not None:
        gen_s = f"gen{_num(gen)}" + (f"/{gmax}" if gmax and gen is not None and gen < gmax else "")
        w_s = f"x{_num(w)}" + (f"/{wmax}" if wmax and w is not None and w < wmax else "")
        parts.append(f"{gen_s} {w_s}")
    if g.nvlink_links_total:
        parts.append(f"NVL {_num(g.nvlink_links_active)}/{g.nvlink_links_total}")
    return " ".join(parts) or NA


Key = int | str  # a GPU's index, or its bus id when NVML did not list it


def _keys_of(f: Finding, by_bus: dict[str, int]) -> set[Key]:
    """The GPUs a finding is about: its subject's GPU and those it was folded over."""
    out: set[Key] = set()
    bus = f.subject_key.gpu
    if bus is not None:
        out.add(by_bus.get(bus.lower(), bus.lower()))
    for s in [f.subject, *f.also_seen_on]:
        m = _GPU_SUBJECT.match(s)
        if m:
            out.add(int(m.group(1)))
    return out


def gpu_rows(facts: Facts, doc: FindingsDocument | None) -> list[GpuRow]:
    """A row per GPU NVML listed, then one per bus id that kernel events name but NVML
    did not list (a GPU that fell off the bus is missing from nvidia-smi: it must show)."""
    by_bus = {
        g.pci_bus_id.lower(): g.index for g in facts.gpus if g.pci_bus_id and g.index is not None
    }
    xids: dict[Key, list[int]] = {}
    for x in facts.xids:
        key: Key | None = x.gpu_index
        if key is None and x.pci_bus_id:
            key = by_bus.get(x.pci_bus_id.lower(), x.pci_bus_id.lower())
        if key is not None and x.code is not None:
            xids.setdefault(key, []).append(x.code)
    lost_bus = {e.pci_bus_id.lower(): True for e in facts.bus_losses if e.pci_bus_id}
    about: dict[Key, list[Finding]] = {}
    if doc is not None:
        for f in doc.findings:  # already ranked: the first about a GPU is its worst
            for fk in _keys_of(f, by_bus):
                about.setdefault(fk, []).append(f)
    rows = []
    for g in facts.gpus:
        k: Key = g.index if g.index is not None else (g.pci_bus_id or "").lower()
        mine = about.get(k, [])
        rows.append(
            GpuRow(
                index=g.index,
                bus_id=g.pci_bus_id or "",
                name=g.name or NA,
                util=_pct(g.utilization_gpu_pct),
                memory=_memory(g),
                power=_power(g),
                temperature=_temperature(g),
                link=_link(g),
                xids=_xid_text(xids.get(k, [])),
                worst=mine[0] if mine else None,
                other_findings=max(0, len(mine) - 1),
                unknown=_unknown(g),
                lost=bool(g.lost) or (g.pci_bus_id or "").lower() in lost_bus,
            )
        )
    listed = {(g.pci_bus_id or "").lower() for g in facts.gpus}
    unlisted = sorted({k for k in [*xids, *lost_bus] if isinstance(k, str) and k not in listed})
    for bus in unlisted:
        mine = about.get(bus, [])
        rows.append(
            GpuRow(
                index=None,
                bus_id=bus,
                name="not listed by NVML",
                util=NA,
                memory=NA,
                power=NA,
                temperature=NA,
                link=NA,
                xids=_xid_text(xids.get(bus, [])),
                worst=mine[0] if mine else None,
                other_findings=max(0, len(mine) - 1),
                unknown=["every value: NVML did not list this GPU"],
                lost=bus in lost_bus,
            )
        )
    return rows


def _xid_text(codes: Iterable[int]) -> str:
    counts: dict[int, int] = {}
    for c in codes:
        counts[c] = counts.get(c, 0) + 1
    if not counts:
        return "-"
    return ", ".join(f"{c}" + (f" ({n})" if n > 1 else "") for c, n in sorted(counts.items()))


_SHOWN = (
    "utilization_gpu_pct",
    "memory_used_mib",
    "power_draw_w",
    "temperature_gpu_c",
    "pcie_link_width",
)


def _unknown(g: GpuFacts) -> list[str]:
    out = []
    for name in _SHOWN:
        if getattr(g, name) is None:
            why = g.why_unavailable(name)
            out.append(f"{name}: {why}" if why else f"{name}: not read")
    return out
