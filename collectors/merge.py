"""Combining facts: collector parts into one snapshot, and parsed command output into
the facts a responder is looking at (the TUI's "run this step" loop)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import BaseModel

from gpu_triage.model.catalog import kinds
from gpu_triage.model.facts import FactModel, Facts


def merge_fields(into: BaseModel, part: BaseModel, *, overwrite: bool = False) -> None:
    """Field by field. ``overwrite=False``: the first value wins (several collectors fill
    ``host`` and ``scheduler``). ``overwrite=True``: ``part``'s values win (a newer reading).
    Reasons for missing values are kept only for fields still missing."""
    for name in type(part).model_fields:
        if name in ("unavailable", "source"):
            continue
        new = getattr(part, name)
        if new is None or new == [] or (not overwrite and getattr(into, name) not in (None, [])):
            continue
        setattr(into, name, new)
    if isinstance(into, FactModel) and isinstance(part, FactModel):
        for name, why in part.unavailable.items():
            if getattr(into, name, None) is None and (overwrite or name not in into.unavailable):
                into.unavailable[name] = why
        for name in list(into.unavailable):
            if getattr(into, name, None) is not None:
                del into.unavailable[name]
        if part.source and part.source not in into.source.split(","):
            into.source = f"{into.source},{part.source}" if into.source else part.source


# How items of a list kind are matched when newer facts arrive for them.
_IDENTITY: dict[str, Callable[[Any], Any]] = {
    "gpu": lambda g: g.pci_bus_id or (f"#{g.index}" if g.index is not None else None),
    "nvlink": lambda n: (n.gpu_pci_bus_id, n.gpu_index, n.link),
    "pcie": lambda p: p.pci_bus_id,
    "topo": lambda t: (t.a, t.b),
    "disk": lambda d: d.name,
    "nic": lambda n: n.name,
    "ib": lambda i: (i.ca_name, i.port),
}


def update_facts(base: Facts, update: Facts) -> list[str]:
    """Fold ``update`` (e.g. a runbook command's parsed output) into ``base``: newer values
    win; items are matched by identity (GPU by PCI bus id, disk by name ...); a newer read
    of events or processes replaces the older one. Returns the kinds that changed."""
    changed: list[str] = []
    for name, info in kinds().items():
        new = getattr(update, info.attr)
        if not new:
            continue
        changed.append(name)
        if info.singleton:
            cur = getattr(base, info.attr)
            if cur is None:
                setattr(base, info.attr, new.model_copy(deep=True))
            else:
                merge_fields(cur, new, overwrite=True)
            continue
        key = _IDENTITY.get(name)
        if key is None:  # events, processes: the newer read is the whole truth
            setattr(base, info.attr, [i.model_copy(deep=True) for i in new])
            continue
        current = getattr(base, info.attr)
        index = {key(i): i for i in current if key(i) is not None}
        for item in new:
            match = index.get(key(item))
            if match is None and name == "gpu" and item.index is not None:
                match = index.get(f"#{item.index}")
            if match is None:
                current.append(item.model_copy(deep=True))
            else:
                merge_fields(match, item, overwrite=True)
    base.answers.update(update.answers)
    return changed
