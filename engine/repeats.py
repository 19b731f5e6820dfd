"""Repeated kernel events collapsed into one representative each, counts and lines kept.

Collapsed: Xids and SXids (what a storm repeats and enrichment annotates). An Xid storm
logs the same line tens of thousands of times: the same code, GPU, process
and message, only the line number and the time move on. Nothing a rule decides can tell
those copies apart when the rulebook does not read the fields that differ, so each
group of them is evaluated once, through its first event (the *representative*), and
counts for all of them:

* the representative is the group's first event in input order: bindings, classes and
  findings built from it are those the first copy would have given;
* aggregates weigh a representative by its number of events (``EvalInput.weights``);
* a finding's occurrences and other subjects walk the events themselves, in input
  order (``evaluate.Members``, through :meth:`Repeats.ordered`), each annotated like
  its representative, so counts, line numbers and subjects are those of the events.

The fields allowed to differ inside a group (``varying``) are the per-line ones (line,
time, time stamp, age, raw text) that no rule reads, and the Xid incident when rules only
count distinct incidents (``distinct(xid, incident, ...)``): those aggregates read the
incidents of every event (:meth:`Repeats.value_sets`). Every other field is part of the group's key.
"""

from __future__ import annotations

import functools
import heapq
import operator
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from gpu_triage.engine import expr as E
from gpu_triage.engine.compiler import Rulebook
from gpu_triage.model.facts import FactModel

# What differs between two copies of one kernel log line.
PER_LINE_FIELDS = ("line", "time", "time_text", "monotonic_s", "age_s", "raw")
# Fields filled per event by enrichment from the sequence of events (not per line).
SEQUENCE_FIELDS = {"xid": ("incident",)}


@dataclass
class Repeats:
    """The events of one kind and the representative standing for each group of them."""

    events: list[Any]  # every event, in input order, as collected (not annotated)
    members: list[list[int]]  # representative -> the indexes of its events, ascending
    reps: list[Any] = field(default_factory=list)  # representative -> its annotated event
    varying: frozenset[str] = frozenset()  # fields that may differ within a group
    # field of ``varying`` filled per event (incident) -> its value per event index
    per_event: dict[str, list[Any]] = field(default_factory=dict)
    # how an event is annotated: (event, representative, event index) -> annotated copy
    annotate: Callable[[Any, int, int], Any] | None = None
    _value_sets: dict[str, list[frozenset[Any]]] = field(default_factory=dict, repr=False)

    @functools.cached_property
    def firsts(self) -> list[int]:
        """Representative -> the index of its first event (its place in input order)."""
        return [m[0] for m in self.members]

    @functools.cached_property
    def counts(self) -> list[int]:
        """Representative -> how many events it stands for."""
        return [len(m) for m in self.members]

    def event(self, rep: int, index: int) -> Any:
        """Event ``index`` (of representative ``rep``), annotated as the rules saw it."""
        if index == self.members[rep][0]:
            return self.reps[rep]
        assert self.annotate is not None
        return self.annotate(self.events[index], rep, index)

    def value_sets(self, name: str) -> list[frozenset[Any]]:
        """Per representative, the values of a varying field over its events (once)."""
        hit = self._value_sets.get(name)
        if hit is None:
            get = self.per_event[name].__getitem__
            hit = self._value_sets[name] = [frozenset(map(get, m)) for m in self.members]
        return hit

    def ordered(self, reps: list[int]) -> Iterator[tuple[int, int]]:
        """(event index, representative) of every event of ``reps`` (ascending), in
        input order. Lazy: a representative joins the merge only once its first event
        is next, so the first few events cost a few representatives, not all of them."""
        members = self.members
        if len(reps) == 1:
            r = reps[0]
            yield from ((i, r) for i in members[r])
            return
        heap: list[tuple[int, int, int]] = []  # (event index, representative, position)
        nxt = 0  # reps[nxt:] have not joined; their first events come later, in order
        while True:
            while nxt < len(reps) and (not heap or members[reps[nxt]][0] < heap[0][0]):
                r = reps[nxt]
                heapq.heappush(heap, (members[r][0], r, 0))
                nxt += 1
            if not heap:
                return
            i, r, pos = heap[0]
            yield i, r
            if pos + 1 < len(members[r]):
                heapq.heapreplace(heap, (members[r][pos + 1], r, pos + 1))
            else:
                heapq.heappop(heap)


_VARYING: dict[tuple[int, str], tuple[Rulebook, frozenset[str]]] = {}


def varying_fields(book: Rulebook, kind: str) -> frozenset[str]:
    """The fields of ``kind`` no rule's verdict depends on (they may differ in a group).

    A field is read when a condition compares it, an aggregate reads it, or it keys
    the binding classes (a rule's bound fields, its grouping). Texts and evidence read
    the finding's own event and so may show any field. Worked out once per rulebook
    object (the entry keeps it alive, so its id is not reused while cached)."""
    hit = _VARYING.get((id(book), kind))
    if hit is not None and hit[0] is book:
        return hit[1]
    out = _varying(book, kind)
    if len(_VARYING) >= 64:
        _VARYING.clear()
    _VARYING[(id(book), kind)] = (book, out)
    return out


def _varying(book: Rulebook, kind: str) -> frozenset[str]:
    read = set(book.kind_fields.get(kind, ()))
    for r in book.rules:
        read |= r.bound_fields.get(kind, frozenset())
    out = {f for f in PER_LINE_FIELDS if f not in read}
    for name in SEQUENCE_FIELDS.get(kind, ()):
        if _only_distinct(book, kind, name):
            out.add(name)
    return frozenset(out)


def _only_distinct(book: Rulebook, kind: str, name: str) -> bool:
    """``name`` is read only by ``distinct(kind, name, where)`` aggregates whose ``where``
    tests it for presence alone: those count the values of every event."""
    for r in book.rules:
        if name in r.bound_fields.get(kind, frozenset()):
            return False
        for agg in E.aggregates(r.expr):
            if agg.kind != kind:
                continue
            if agg.field == name and agg.func != "distinct":
                return False
            if agg.where is not None and _reads_value(agg.where, name):
                return False
    return True


def _reads_value(e: E.Expr, name: str) -> bool:
    """The aggregate's condition reads the item's ``name`` other than for presence."""
    tested = {id(n.ref) for n in E.walk(e) if isinstance(n, E.Availability)}
    return any(
        isinstance(n, E.Ref) and n.local and n.name == name and id(n) not in tested
        for n in E.walk(e)
    )


def collapsible(book: Rulebook, kind: str) -> bool:
    """Bindings of ``kind`` map one to one onto its items (a rule binding it beside
    another kind without a GPU join would multiply them)."""
    return not any(
        kind in r.iter_kinds and len(r.iter_kinds) > 1 and not r.join_gpu for r in book.rules
    )


def fields_set(events: Sequence[FactModel]) -> set[str]:
    """The fields set on some event (by construction, copy or assignment): every other
    field holds its default in every event."""
    return set().union(*map(_FIELDS_SET, events))


_FIELDS_SET = operator.attrgetter("__pydantic_fields_set__")


def group(
    events: list[FactModel], varying: frozenset[str], was_set: set[str] | None = None
) -> list[list[int]] | None:
    """Indexes of the events equal in every field but ``varying``, groups in order of
    their first event; None when a value cannot be compared (no collapsing then).
    ``was_set``: ``fields_set(events)``, when the caller has it."""
    if not events:
        return []
    cls = type(events[0])
    if any(type(ev) is not cls for ev in events):
        return None
    # A field no event had set holds its default in every event: equal, not compared.
    # (pydantic records every field set, by construction, copy or assignment; the one
    # mutable default, ``unavailable``, is compared apart: it is changed in place.)
    if was_set is None:
        was_set = fields_set(events)
    names = [n for n in cls.model_fields if n in was_set and n not in varying]
    names = [n for n in names if n != "unavailable"]
    key = operator.itemgetter(*names) if names else (lambda _d: ())
    slots: dict[Any, list[int]] = {}
    try:
        for i, ev in enumerate(events):
            d = ev.__dict__
            why = d["unavailable"]
            k = key(d) if not why else _WithReasons(key(d), _reasons(why))
            slot = slots.get(k)
            if slot is None:
                slots[k] = [i]
            else:
                slot.append(i)
    except (TypeError, KeyError):
        return None
    return list(slots.values())


def _reasons(why: dict[str, Any]) -> tuple[tuple[str, Any, str], ...]:
    """An event's recorded reasons for unavailable values, hashable."""
    return tuple(sorted((n, u.reason, u.detail) for n, u in why.items()))


@dataclass(frozen=True)
class _WithReasons:
    """The key of an event that records reasons: never equal to a plain key."""

    values: Any
    reasons: tuple[tuple[str, Any, str], ...]
