"""What an evaluation reads: the facts, which kinds could be collected, and rule bindings."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum
from typing import TYPE_CHECKING, Any

from gpu_triage.engine.subject import SubjectKey
from gpu_triage.model.catalog import kinds
from gpu_triage.model.facts import FactModel, Facts, Unavailable, UnavailableReason
from gpu_triage.model.snapshot import CollectorState, Snapshot

if TYPE_CHECKING:
    from gpu_triage.engine.repeats import Repeats

# A binding: for each kind the rule iterates over, the item bound (None: unavailable).
Binding = dict[str, FactModel | None]


@dataclass
class EvalInput:
    facts: Facts
    # kind -> why the whole kind is unavailable (absent: available)
    kind_unavailable: dict[str, Unavailable] = field(default_factory=dict)
    hostname: str = ""
    taken_at: datetime | None = None
    _gpu_by_bus: dict[str, FactModel] | None = None
    # aggregate indexes and item groupings of this evaluation (engine.aggregates)
    aggregate_cache: dict[Any, Any] = field(default_factory=dict)
    # kind -> every item field the rulebook reads: items equal in these are grouped once
    kind_fields: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # kind -> its repeated events collapsed (engine.repeats): items() are representatives
    repeats: dict[str, Repeats] = field(default_factory=dict)

    @classmethod
    def from_snapshot(cls, snap: Snapshot) -> EvalInput:
        return cls(snap.facts, kind_availability(snap), snap.hostname, snap.taken_at)

    def items(self, kind: str) -> list[FactModel]:
        """The items of a kind (the facts' own list: read it, do not change it)."""
        value = getattr(self.facts, _ATTR[kind])
        return value if isinstance(value, list) else ([value] if value is not None else [])

    def weights(self, kind: str) -> tuple[list[int] | None, list[int] | None]:
        """Per item of ``kind``: the input index of the first event it stands for and how
        many it stands for (None, None: each item is one event, at its own index)."""
        rep = self.repeats.get(kind)
        return (rep.firsts, rep.counts) if rep is not None else (None, None)

    def all_items(self, kind: str) -> list[FactModel]:
        """Every item of ``kind``, repeated events included, in input order."""
        rep = self.repeats.get(kind)
        if rep is None:
            return self.items(kind)
        out: list[FactModel] = [None] * len(rep.events)  # type: ignore[list-item]
        for r, members in enumerate(rep.members):
            for i in members:
                out[i] = rep.event(r, i)
        return out

    def singleton(self, kind: str) -> FactModel | None:
        value = getattr(self.facts, _ATTR[kind])
        return value if isinstance(value, FactModel) else None

    def gpu_by_bus(self, bus: str | None) -> FactModel | None:
        if self._gpu_by_bus is None:
            self._gpu_by_bus = {g.pci_bus_id: g for g in self.facts.gpus if g.pci_bus_id}
        return self._gpu_by_bus.get(bus) if bus else None


# Kinds people supply (inventory, job metrics, the error text a job printed): never
# "unavailable", their fields or items are just absent until supplied.
SUPPLIED_KINDS = ("site", "job", "error")

_ATTR = {name: k.attr for name, k in kinds().items()}  # kind -> Facts attribute

_REASON_FOR_STATE = {
    CollectorState.UNAVAILABLE: UnavailableReason.NOT_COLLECTED,
    CollectorState.FAILED: UnavailableReason.COLLECTOR_FAILED,
    CollectorState.TIMED_OUT: UnavailableReason.TIMED_OUT,
}


def kind_availability(snap: Snapshot) -> dict[str, Unavailable]:
    """A kind is available when some collector that produces it ran fine, or it has data.

    Person-supplied kinds (site, job) are never "unavailable": their fields are just
    unknown until supplied. A snapshot that records no collectors at all (hand-made)
    is taken at its word."""
    if not snap.collectors:
        return {}
    out: dict[str, Unavailable] = {}
    for name, k in kinds().items():
        if name in SUPPLIED_KINDS:
            continue
        tried = [c for c in snap.collectors if c.name in k.collectors or name in c.kinds]
        if any(c.state is CollectorState.OK for c in tried):
            continue
        value = getattr(snap.facts, k.attr)
        if value:  # data came from somewhere (e.g. pasted output)
            continue
        if tried:
            worst = tried[0]
            reason = _REASON_FOR_STATE.get(worst.state, UnavailableReason.ERROR)
            detail = "; ".join(
                f"{c.name} {c.state.value}" + (f": {c.error}" if c.error else "") for c in tried
            )
        else:
            reason, detail = UnavailableReason.NOT_COLLECTED, "no collector ran for it"
        out[name] = Unavailable(reason=reason, detail=detail)
    return out


def bindings(inp: EvalInput, iter_kinds: tuple[str, ...], join_gpu: bool) -> list[Binding]:
    """Every combination of items a rule is evaluated for."""
    if not iter_kinds:
        return [{}]
    if join_gpu:
        other = next(k for k in iter_kinds if k != "gpu")
        key = kinds()[other].gpu_key
        if other in inp.kind_unavailable:
            return [{other: None, "gpu": None}]
        return [
            {other: item, "gpu": inp.gpu_by_bus(getattr(item, key or "", None))}
            for item in inp.items(other)
        ]
    out: list[Binding] = [{}]
    for kind in iter_kinds:
        if kind in inp.kind_unavailable:
            items: list[FactModel | None] = [None]
        else:
            items = list(inp.items(kind))
        out = [{**b, kind: it} for b in out for it in items]
    return out


# durable_rules' C JSON parser crashes (SIGSEGV) on numbers such as 1e-05 or 1e+16
# (an exponent with no decimal point, which is how Python writes them). Both
# evaluators therefore read every float quantised into a range printed without an
# exponent: magnitudes under 1e-4 read as 0, over 1e15 are capped. No GPU or host
# metric lives outside that range.
FLOAT_FLOOR = 1e-4
FLOAT_CAP = 1e15


def quantise(value: float) -> float | None:
    if not math.isfinite(value):
        return None
    if abs(value) < FLOAT_FLOOR:
        return 0.0
    if abs(value) > FLOAT_CAP:
        return math.copysign(FLOAT_CAP, value)
    return value


def plain(value: Any) -> Any:
    """A fact value as rules see it: enums as their value, floats quantised, NaN/inf
    as missing."""
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, float):
        return quantise(value)
    return value


def subject_label(binding: Binding, hostname: str = "") -> str:
    """How a finding names what it is about."""
    if not binding:
        return f"node {hostname}".strip()
    parts: list[str] = []
    for kind, item in binding.items():
        if item is None:
            parts.append(f"{kind} (unavailable)")
            continue
        parts.append(describe(kind, item))
    return ", ".join(parts)


def describe(kind: str, item: FactModel) -> str:
    get = item.__dict__.get
    if kind == "gpu":
        idx, bus = get("index"), get("pci_bus_id")
        # Phrased around what is not known, never a "?" in its place.
        if idx is None:
            return f"GPU at {bus}" if bus else "a GPU with neither index nor bus id"
        return f"GPU {idx} ({bus})" if bus else f"GPU {idx} (bus id not known)"
    if kind in ("xid", "sxid"):
        return f"{kind.upper()} {get('code')} on {get('pci_bus_id') or 'unknown device'}" + (
            f" (line {get('line')})" if get("line") else ""
        )
    for key in ("name", "ca_name", "pci_bus_id"):
        if get(key):
            extra = f" port {get('port')}" if kind == "ib" and get("port") is not None else ""
            return f"{kind} {get(key)}{extra}"
    return kind


def subject_key(binding: Binding) -> SubjectKey:
    """A stable key for a binding (dedup across runs, history in fleet mode)."""
    return SubjectKey.of(binding)
