"""Which GPUs an NVSwitch SXid is about: the GPU links whose far end is the switch.

An SXid line names the NVSwitch (its PCI address) and usually the switch link (port);
each GPU's NVLink knows its remote end (NVML's remote PCI info, ``nvidia-smi nvlink -R``
also the remote link number). A GPU link ending on that switch port is the GPU the error
is about (``gpus_by`` port); without the port, or without remote link numbers, every GPU
with a link to that switch is (``switch``); with no remote map at all, ``unknown``.

One pass over the links builds two maps; each SXid then costs a lookup.
"""

from __future__ import annotations

from gpu_triage.model.facts import Facts, SxidEvent

MAX_NAMED = 16  # GPUs named in the text: a full HGX baseboard is 8


def _label(index: int | None, bus: str) -> str:
    return f"GPU {index} ({bus})" if index is not None else f"GPU {bus}"


class SwitchMap:
    """(switch, port) -> GPUs and switch -> GPUs, from the facts' NVLinks."""

    def __init__(self, facts: Facts) -> None:
        index_of = {g.pci_bus_id: g.index for g in facts.gpus if g.pci_bus_id}
        self.by_port: dict[tuple[str, int], dict[str, int | None]] = {}
        self.by_switch: dict[str, dict[str, int | None]] = {}
        for lk in facts.nvlinks:
            remote, gpu = lk.remote_pci_bus_id, lk.gpu_pci_bus_id
            if not remote or not gpu or lk.remote_device_type == "gpu":
                continue
            index = lk.gpu_index if lk.gpu_index is not None else index_of.get(gpu)
            self.by_switch.setdefault(remote, {})[gpu] = index
            if lk.remote_link is not None:
                self.by_port.setdefault((remote, lk.remote_link), {})[gpu] = index

    def update(self, event: SxidEvent) -> dict[str, object]:
        """The fields that tie ``event`` to its GPUs (set only where the event lacks them)."""
        if event.gpus_by is not None or not event.pci_bus_id:
            return {}
        found: dict[str, int | None] | None = None
        by = "unknown"
        if event.link is not None:
            found = self.by_port.get((event.pci_bus_id, event.link))
            by = "port" if found else by
        if not found:
            found = self.by_switch.get(event.pci_bus_id)
            by = "switch" if found else "unknown"
        if not found:
            return {
                "gpus": f"the GPUs behind NVSwitch {event.pci_bus_id} (which ones is not known: "
                "no NVLink remote ends were read)",
                "gpus_by": by,
            }
        ordered = sorted(found.items(), key=lambda kv: (kv[1] is None, kv[1] or 0, kv[0]))
        names = [_label(i, b) for b, i in ordered[:MAX_NAMED]]
        if len(ordered) > MAX_NAMED:
            names.append(f"and {len(ordered) - MAX_NAMED} more")
        update: dict[str, object] = {
            "gpus": ", ".join(names),
            "gpu_count": len(ordered),
            "gpus_by": by,
        }
        if by == "port" and len(ordered) == 1 and event.gpu_index is None:
            update["gpu_index"] = ordered[0][1]
        return update
