"""Combining facts: collector parts into one snapshot, and parsed command output into
the facts a responder is looking at (the TUI's "run this step" loop)."""

from __future__ import annotations

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
        if not info.match_fields:  # events, processes: the newer read is the whole truth
            setattr(base, info.attr, [i.model_copy(deep=True) for i in new])
            continue
        current = getattr(base, info.attr)
        index = {k: i for i in current if (k := info.match_key(i)) is not None}
        for item in new:
            match = index.get(info.match_key(item))
            fallback = info.match_fallback and item.__dict__.get(info.match_fallback)
            if match is None and fallback is not None:
                match = index.get(f"#{fallback}")
            if match is None:
                current.append(item.model_copy(deep=True))
            else:
                merge_fields(match, item, overwrite=True)
    base.answers.update(update.answers)
    return changed
