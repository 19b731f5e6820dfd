"""Combining facts: collector parts into one snapshot, and parsed command output into
the facts a responder is looking at (the TUI's "run this step" loop)."""

from __future__ import annotations

import heapq
from collections.abc import Sequence
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
            if match is None and name == "gpu":  # one side knows only the index (topo -m)
                match = _Gpus(current).match(item)
            if match is None:
                current.append(item.model_copy(deep=True))
            else:
                merge_fields(match, item, overwrite=True)
    base.answers.update(update.answers)
    return changed


class _Gpus:
    """Finds the GPU an item describes: same bus id, else (when one side has no bus id)
    the same index, so topo -m's GPU3 and nvidia-smi's GPU 3 at 0000:5d:00.0 are one.
    Dict lookups: folding many parts stays linear."""

    def __init__(self, current: list[Any]) -> None:
        self.by_bus: dict[str, Any] = {}
        self.by_index: dict[int, Any] = {}  # first GPU with this index
        self.no_bus: dict[int, Any] = {}  # first GPU with this index and no bus id
        for g in current:
            self.add(g)

    def add(self, g: Any) -> None:
        if g.pci_bus_id:
            self.by_bus.setdefault(g.pci_bus_id, g)
        index = g.index
        if index is not None:
            self.by_index.setdefault(index, g)
            if not g.pci_bus_id:
                self.no_bus.setdefault(index, g)
            elif self.no_bus.get(index) is g:  # it has a bus id now
                del self.no_bus[index]

    def match(self, item: Any) -> Any | None:
        if item.pci_bus_id and item.pci_bus_id in self.by_bus:
            return self.by_bus[item.pci_bus_id]
        if item.index is None:
            return None
        if not item.pci_bus_id:
            return self.by_index.get(item.index)
        return self.no_bus.get(item.index)


def _process_key(p: Any) -> tuple[Any, ...]:
    gpu = p.gpu_pci_bus_id or (f"#{p.gpu_index}" if p.gpu_index is not None else None)
    return (gpu, p.pid, p.name if p.pid is None else None)


def combine_facts(parts: Sequence[Facts]) -> Facts:
    """Facts read from several texts about one node, folded together: nothing is lost.

    Unlike :func:`update_facts` (a newer read replaces the older), events of every part
    are kept, interleaved by time (each part's own order kept where times are missing)
    with lines repeated across parts (the same log pasted twice) counted once;
    processes are joined by GPU and pid; other items match by identity and later parts
    fill or update their fields."""
    base = Facts()
    events: dict[str, list[list[Any]]] = {}
    indexes: dict[str, dict[Any, Any] | _Gpus] = {}  # per kind, kept across parts
    for part in parts:
        for name, info in kinds().items():
            new = getattr(part, info.attr)
            if not new:
                continue
            if info.event:
                events.setdefault(name, []).append(list(new))
                continue
            if info.singleton:
                cur = getattr(base, info.attr)
                if cur is None:
                    setattr(base, info.attr, new.model_copy(deep=True))
                else:
                    merge_fields(cur, new, overwrite=True)
                continue
            current = getattr(base, info.attr)
            if name == "process":
                seen = indexes.setdefault(name, {})
                assert isinstance(seen, dict)
                for p in new:
                    match = seen.get(_process_key(p))
                    if match is None:
                        current.append(p.model_copy(deep=True))
                        seen[_process_key(p)] = current[-1]
                    else:
                        merge_fields(match, p, overwrite=True)
                continue
            if name == "gpu":
                gpus = indexes.setdefault(name, _Gpus(current))
                assert isinstance(gpus, _Gpus)
                for item in new:
                    match = gpus.match(item)
                    if match is None:
                        current.append(item.model_copy(deep=True))
                        match = current[-1]
                    else:
                        merge_fields(match, item, overwrite=True)
                    gpus.add(match)
                continue
            index = indexes.setdefault(name, {})
            assert isinstance(index, dict)
            for item in new:
                k = info.match_key(item)
                match = index.get(k) if k is not None else None
                if match is None:
                    current.append(item.model_copy(deep=True))
                    if k is not None:
                        index[k] = current[-1]
                else:
                    merge_fields(match, item, overwrite=True)
        base.answers.update(part.answers)
    for name, lists in events.items():
        setattr(base, kinds()[name].attr, _interleave(lists))
    return base


def _interleave(lists: list[list[Any]]) -> list[Any]:
    """Events of several reads in time order, repeats across reads counted once."""
    if len(lists) == 1:
        return [e.model_copy(deep=True) for e in lists[0]]
    keep = _drop_repeats(lists)
    clock = "time" if all(any(e.time for e in lst) for lst in keep if lst) else "monotonic_s"
    keyed: list[list[tuple[float, int, int, Any]]] = []
    tail: list[Any] = []
    for n, lst in enumerate(keep):
        stamps = [_stamp(e, clock) for e in lst]
        known = [s for s in stamps if s is not None]
        if not known:
            tail.extend(lst)
            continue
        last = known[0]
        rows = []
        for pos, (e, s) in enumerate(zip(lst, stamps, strict=True)):
            last = s if s is not None else last  # an unstamped line follows its neighbour
            rows.append((last, n, pos, e))
        keyed.append(rows)
    merged = [row[3] for row in heapq.merge(*keyed, key=lambda r: (r[0], r[1], r[2]))]
    return [e.model_copy(deep=True) for e in merged + tail]


def _stamp(e: Any, clock: str) -> float | None:
    if clock == "time":
        return e.time.timestamp() if e.time is not None else None
    return e.monotonic_s


def _repeat_key(e: Any) -> tuple[str, str] | None:
    text = " ".join(e.raw.split())
    return (type(e).__name__, text) if text else None  # no raw text: nothing to compare


def _drop_repeats(lists: list[list[Any]]) -> list[list[Any]]:
    """A line that several reads hold (overlapping excerpts of one log) is kept as many
    times as the read holding it most often has it, not once per read."""
    budget: dict[tuple[str, str], int] = {}
    for lst in lists:
        counts: dict[tuple[str, str], int] = {}
        for e in lst:
            if (k := _repeat_key(e)) is not None:
                counts[k] = counts.get(k, 0) + 1
        for k, c in counts.items():
            budget[k] = max(budget.get(k, 0), c)
    out: list[list[Any]] = []
    for lst in lists:
        kept = []
        for e in lst:
            k = _repeat_key(e)
            if k is None:
                kept.append(e)
            elif budget.get(k, 0) > 0:
                budget[k] -= 1
                kept.append(e)
        out.append(kept)
    return out
