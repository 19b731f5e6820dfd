"""Aggregates over items, computed once per evaluation into indexes keyed by what they join on.

The condition of an aggregate (``count(xid, code in [63, 64] and pci_bus_id ==
xid.pci_bus_id)``) is split into its top-level conjuncts:

* *gates* read only the rule's binding (``xid.code in [...]``): evaluated once per binding;
* *filters* read only the item (``code in [63, 64]``): evaluated once per distinct item;
* *keys* equate an item value with a binding value (``pci_bus_id == xid.pci_bus_id``): items
  are indexed by them once, and a binding looks up its bucket;
* anything else (*residual*: ``code != xid.code``, a disjunction mixing both) is evaluated
  for the candidate items of the bucket only, after gates, keys and filters.

Items are first grouped into *units*: items equal in every field the aggregate reads (an
Xid storm repeats the same line thousands of times). Every cost is then per unit, never
per item and binding.

The result is exactly the item-by-item (reference) result, in Kleene logic: the first
undecided item in order makes the result unknown (``exists``: unless an item holds), and
its missing facts are those of evaluating that one item in full.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from gpu_triage.engine import expr as E
from gpu_triage.engine.inputs import EvalInput, plain
from gpu_triage.model.facts import FactModel


class Evaluator(Protocol):
    """What the indexes need of the reference evaluator (which calls them)."""

    inp: EvalInput
    binding: Any

    def eval(self, e: Any, local: FactModel | None = None) -> Any: ...

    def _field(self, item: FactModel | None, kind: str, name: str) -> Any: ...

    def no_values(self, e: E.Aggregate) -> Any: ...

    def sibling(self, binding: Any) -> Evaluator:
        """An evaluator of the same input for another binding, recording no trace."""
        ...

    def val(self, value: Any, missing: tuple[Any, ...] = ()) -> Any: ...


@dataclass(frozen=True)
class Unit:
    """Items equal in the fields an aggregate reads: the first one stands for all."""

    first: int  # index of the first such item, in input order
    count: int
    item: FactModel


def group_units(
    items: list[Any],
    fields: tuple[str, ...],
    first: list[int] | None = None,
    counts: list[int] | None = None,
) -> list[Unit]:
    """Group ``items`` (in order) by the values of ``fields``; ``first``/``counts`` carry
    the indexes and multiplicities when ``items`` are themselves units' items."""
    if not items:
        return []
    if not fields:
        total = sum(counts) if counts is not None else len(items)
        return [Unit(first[0] if first is not None else 0, total, items[0])]
    getter = operator.attrgetter(*fields)
    slots: dict[Any, list[Any]] = {}
    try:
        for i, item in enumerate(items):
            key = getter(item)
            slot = slots.get(key)
            n = counts[i] if counts is not None else 1
            if slot is None:
                slots[key] = [first[i] if first is not None else i, n, item]
            else:
                slot[1] += n
    except TypeError:  # an unhashable value: no grouping, one unit per item
        return [
            Unit(first[i] if first is not None else i, counts[i] if counts is not None else 1, it)
            for i, it in enumerate(items)
        ]
    return [Unit(f, n, it) for f, n, it in slots.values()]


def units(inp: EvalInput, kind: str, fields: tuple[str, ...]) -> list[Unit]:
    """The items of ``kind`` grouped by ``fields``, cached for the evaluation. When the
    rulebook's fields of the kind are known (``inp.kind_fields``), all items are grouped
    once by those and every aggregate regroups these few units. Collapsed repeats
    (``inp.repeats``) count for their events."""
    cache = inp.aggregate_cache
    key = ("units", kind, fields)
    hit = cache.get(key)
    if hit is not None:
        return hit  # type: ignore[no-any-return]
    wide = inp.kind_fields.get(kind)
    rep = inp.repeats.get(kind)
    if wide is not None and rep is not None:
        wide = tuple(f for f in wide if f not in rep.varying)
    if wide is not None and fields != wide and set(fields) <= set(wide):
        base = units(inp, kind, wide)
        out = group_units(
            [u.item for u in base], fields, [u.first for u in base], [u.count for u in base]
        )
    else:
        first, counts = inp.weights(kind)
        out = group_units(inp.items(kind), fields, first, counts)
    cache[key] = out
    return out


class Values(frozenset[Any]):
    """The values of a field over the events one unit stands for (a field that differs
    between repeats: ``distinct`` counts them all)."""


def _per_event_units(
    inp: EvalInput, kind: str, name: str, fields: tuple[str, ...]
) -> list[tuple[Unit, Values | None]] | None:
    """When ``name`` differs between the repeats of ``kind`` (None: it does not): units
    equal in ``fields`` (and in whether ``name`` is present), each with the values of
    ``name`` over all its events. Cached for the evaluation."""
    rep = inp.repeats.get(kind)
    if rep is None or name not in rep.varying:
        return None
    cache = inp.aggregate_cache
    key = ("per-event units", kind, name, fields)
    hit = cache.get(key)
    if hit is not None:
        return hit  # type: ignore[no-any-return]
    getter = operator.attrgetter(*fields) if fields else (lambda _item: ())
    slots: dict[Any, list[Any]] = {}
    firsts, counts = rep.firsts, rep.counts
    for r, (item, values) in enumerate(zip(rep.reps, rep.value_sets(name), strict=True)):
        # Present on every event of a group or on none (engine.repeats keys on that).
        present = None not in values
        k: Any
        try:
            k = (getter(item), present)
            slot = slots.get(k)
        except TypeError:  # an unhashable value: this representative on its own
            k, slot = ("alone", r), None
        if slot is None:
            slots[k] = [firsts[r], counts[r], item, set(values) if present else None]
        else:
            slot[1] += counts[r]
            if present:
                slot[3] |= values
    out = [
        (Unit(first, n, item), Values(vals) if vals is not None else None)
        for first, n, item, vals in slots.values()
    ]
    cache[key] = out
    return out


# --------------------------------------------------------------------------- plans


def _has_local(e: E.Expr) -> bool:
    return any(isinstance(n, E.Ref) and n.local for n in E.walk(e))


def _has_outer(e: E.Expr) -> bool:
    return any(isinstance(n, E.Ref) and not n.local for n in E.walk(e))


def _conjuncts(e: E.Expr) -> list[E.Expr]:
    if isinstance(e, E.BoolOp) and e.op == "and":
        return [c for o in e.operands for c in _conjuncts(o)]
    return [e]


@dataclass
class Plan:
    """How one aggregate node is computed (pure structure, shared by evaluations)."""

    agg: E.Aggregate
    gates: tuple[E.Expr, ...] = ()
    keys: tuple[tuple[E.Expr, E.Expr], ...] = ()  # (item side, binding side)
    filters: tuple[E.Expr, ...] = ()
    residual: tuple[E.Expr, ...] = ()
    fields: tuple[str, ...] = ()  # item fields read (grouping units)
    # what the filters read of an item: values, and fields only tested for presence
    # (``available(incident)``): units equal in these share the filters' verdict
    filter_values: tuple[str, ...] = ()
    filter_presence: tuple[str, ...] = ()

    @classmethod
    def of(cls, agg: E.Aggregate) -> Plan:
        plan = cls(agg)
        gates, keys, filters, residual = [], [], [], []
        for c in _conjuncts(agg.where) if agg.where is not None else []:
            local, outer = _has_local(c), _has_outer(c)
            if not local:
                gates.append(c)
            elif not outer:
                filters.append(c)
            elif isinstance(c, E.Compare) and c.op == "==" and _splits(c.left, c.right):
                keys.append((c.left, c.right) if not _has_outer(c.left) else (c.right, c.left))
            else:
                residual.append(c)
        plan.gates, plan.keys = tuple(gates), tuple(keys)
        plan.filters, plan.residual = tuple(filters), tuple(residual)
        names = (
            {r.name for r in E.refs(agg.where, include_local=True) if r.local}
            if (agg.where is not None)
            else set()
        )
        if agg.field is not None:
            names.add(agg.field)
        plan.fields = tuple(sorted(names))
        presence: set[str] = set()
        values: set[str] = set()
        for f in filters:
            tested = {id(n.ref) for n in E.walk(f) if isinstance(n, E.Availability)}
            for n in E.walk(f):
                if isinstance(n, E.Ref) and n.local:
                    (presence if id(n) in tested else values).add(n.name)
        plan.filter_values = tuple(sorted(values))
        plan.filter_presence = tuple(sorted(presence - values))
        return plan


def _splits(a: E.Expr, b: E.Expr) -> bool:
    """One side reads only the item, the other only the binding."""
    return (not _has_outer(a) and not _has_local(b)) or (not _has_outer(b) and not _has_local(a))


_PLANS: dict[int, Plan] = {}


def plan_of(agg: E.Aggregate) -> Plan:
    """Keyed by node identity; the plan keeps its node alive, so the id is not reused."""
    plan = _PLANS.get(id(agg))
    if plan is None or plan.agg is not agg:
        plan = _PLANS[id(agg)] = Plan.of(agg)
    return plan


# --------------------------------------------------------------------------- indexes


@dataclass
class Candidate:
    unit: Unit
    state: bool | None  # the filters' verdict: True or None (false units are dropped)
    value: Any = None  # the aggregated field's value (None: missing)
    keys: tuple[Any, ...] = ()  # the item's side of the keys (None: unknown)


@dataclass
class Bucket:
    cands: list[Candidate] = field(default_factory=list)
    _stats: tuple[Any, ...] | None = None

    def stats(self, func: str) -> tuple[Any, ...]:
        """(first undecided unit, count of true items, first true item missing the field,
        the fields' values of the true items combined), computed once."""
        if self._stats is None:
            first_u: Unit | None = None
            count = 0
            first_missing: Candidate | None = None
            values: list[tuple[Any, int]] = []
            for c in self.cands:
                if c.state is None:
                    if first_u is None:
                        first_u = c.unit
                    continue
                count += c.unit.count
                if c.value is None:
                    if first_missing is None or c.unit.first < first_missing.unit.first:
                        first_missing = c
                else:
                    values.append((c.value, c.unit.count))
            self._stats = (first_u, count, first_missing, _combine(func, values))
        return self._stats


def _combine(func: str, values: list[tuple[Any, int]]) -> Any:
    if func == "distinct":
        seen: set[Any] = set()
        for v, _ in values:
            if isinstance(v, Values):
                seen |= v
            else:
                seen.add(v)
        return len(seen)
    if func == "sum":
        return aggregate_sum(v for v, n in values for _ in range(n))
    if func in ("max", "min") and values:
        pick = max if func == "max" else min
        return pick(v for v, _ in values)
    return None


def aggregate_sum(values: Any) -> Any:
    """Sum of a field: exact (``math.fsum``) when floats are involved, so the order the
    items come in does not change the result."""
    items = list(values)
    if all(isinstance(v, int) for v in items):
        return sum(items)
    return plain(math.fsum(items))


@dataclass
class Index:
    """One plan's index over one evaluation's items."""

    plan: Plan
    buckets: dict[Any, Bucket] = field(default_factory=dict)
    partial: list[tuple[tuple[Any, ...], Candidate]] = field(default_factory=list)
    live: list[Candidate] = field(default_factory=list)

    @classmethod
    def build(cls, plan: Plan, inp: EvalInput, ev: Evaluator) -> Index:
        idx = cls(plan)
        agg = plan.agg
        key_getters = [_getter(local) for local, _ in plan.keys]
        verdicts: dict[tuple[Any, ...], bool | None] = {}
        per_event = (
            _per_event_units(
                inp, agg.kind, agg.field, tuple(f for f in plan.fields if f != agg.field)
            )
            if agg.func == "distinct" and agg.field
            else None
        )
        pairs: Any = (
            per_event
            if per_event is not None
            else ((u, None) for u in units(inp, agg.kind, plan.fields))
        )
        for u, values in pairs:
            fkey = tuple(getattr(u.item, n, None) for n in plan.filter_values) + tuple(
                plain(getattr(u.item, n, None)) is None for n in plan.filter_presence
            )
            try:
                state = verdicts.get(fkey, _UNSET)
                shared = True
            except TypeError:  # an unhashable value: no sharing
                state, shared = _UNSET, False
            if state is _UNSET:
                state = _and3(ev.eval(f, u.item).value for f in plan.filters)
                if shared:
                    verdicts[fkey] = state
            if state is False:
                continue
            value = values
            if agg.field is not None and value is None:
                value = plain(getattr(u.item, agg.field, None))
            kv = tuple(g(ev, u.item) for g in key_getters)
            cand = Candidate(u, state, value, kv)
            idx.live.append(cand)
            if any(v is None for v in kv):
                idx.partial.append((kv, cand))
                continue
            key = kv if len(kv) != 1 else kv[0]
            bucket = idx.buckets.get(key)
            if bucket is None:
                bucket = idx.buckets[key] = Bucket()
            bucket.cands.append(cand)
        return idx


_UNSET: Any = object()


def _getter(e: E.Expr) -> Callable[[Evaluator, FactModel], Any]:
    if isinstance(e, E.Ref) and e.local:
        name = e.name
        return lambda ev, item: plain(getattr(item, name, None))
    return lambda ev, item: ev.eval(e, item).value


def _and3(values: Any) -> bool | None:
    unknown = False
    for v in values:
        if v is False:
            return False
        if v is None:
            unknown = True
    return None if unknown else True


def compute(ev: Evaluator, agg: E.Aggregate) -> Any:
    """The aggregate's value for the evaluator's binding (see the module docstring)."""

    inp = ev.inp
    plan = plan_of(agg)
    cache = inp.aggregate_cache
    idx = cache.get(("index", id(agg)))
    if idx is None:
        idx = cache[("index", id(agg))] = Index.build(plan, inp, ev.sibling({}))
    inner = ev.sibling(ev.binding)  # no trace per item
    gate = _and3(ev.eval(g).value for g in plan.gates)
    func = agg.func

    if gate is False:
        return _result(inner, agg, None, 0, None, _combine(func, []))
    outer = tuple(ev.eval(o).value for _, o in plan.keys)
    if not plan.residual and gate is True and all(v is not None for v in outer):
        bucket = idx.buckets.get(outer if len(outer) != 1 else outer[0])
        in_bucket, n_true, missing, combined = (
            bucket.stats(func) if bucket is not None else (None, 0, None, _combine(func, []))
        )
        return _result(
            inner, agg, _min(in_bucket, _first_partial(idx, outer)), n_true, missing, combined
        )
    # The general case: scan the candidates (the bucket's when the keys are known; items
    # with an unknown key are undecided on it).
    cands: list[tuple[Candidate, bool | None]]
    if all(v is not None for v in outer):
        bucket = idx.buckets.get(outer if len(outer) != 1 else outer[0])
        cands = [(c, True) for c in bucket.cands] if bucket is not None else []
        cands += [(c, None) for kv, c in idx.partial if _matches(kv, outer)]
    else:  # a key unknown on the binding's side: undecided, unless a known one differs
        cands = [(c, None) for c in idx.live if _matches(c.keys, outer)]
    first_u: Unit | None = None
    count = 0
    first_missing: Candidate | None = None
    values: list[tuple[Any, int]] = []
    for c, key_state in cands:
        state = _and3([gate, key_state, c.state])
        if state is not False and plan.residual:
            if first_u is not None and c.unit.first > first_u.first and func != "exists":
                continue  # already unknown: only earlier items could change which one
            state = _and3([state, *(inner.eval(r, c.unit.item).value for r in plan.residual)])
        if state is False:
            continue
        if state is None:
            first_u = _min(first_u, c.unit)
            continue
        count += c.unit.count
        if c.value is None:
            if first_missing is None or c.unit.first < first_missing.unit.first:
                first_missing = c
        else:
            values.append((c.value, c.unit.count))
    return _result(inner, agg, first_u, count, first_missing, _combine(func, values))


def _first_partial(idx: Index, outer: tuple[Any, ...]) -> Unit | None:
    first = None
    for kv, c in idx.partial:
        if _matches(kv, outer):
            first = _min(first, c.unit)
    return first


def _matches(kv: tuple[Any, ...], outer: tuple[Any, ...]) -> bool:
    """No key known on both sides differs."""
    return all(a is None or b is None or a == b for a, b in zip(kv, outer, strict=True))


def _min(a: Unit | None, b: Unit | None) -> Unit | None:
    if a is None:
        return b
    return a if b is None or a.first <= b.first else b


def _result(
    inner: Evaluator,
    agg: E.Aggregate,
    first_u: Unit | None,
    count: int,
    first_missing: Candidate | None,
    combined: Any,
) -> Any:
    val = inner.val
    func = agg.func
    if func == "exists" and count:
        return val(True)
    if first_u is not None:
        assert agg.where is not None
        return val(None, inner.eval(agg.where, first_u.item).missing)
    if func == "exists":
        return val(False)
    if func == "count":
        return val(count)
    assert agg.field is not None
    if first_missing is not None:
        return inner._field(first_missing.unit.item, agg.kind, agg.field)
    if func in ("max", "min") and combined is None:
        return inner.no_values(agg)
    return val(combined)
