"""The pure-Python reference evaluator of the intermediate form.

Three-valued (Kleene) logic: a comparison that reads an unavailable fact is
*unknown*, ``and`` is false as soon as one side is false, ``or`` true as soon as
one side is true. A rule whose condition is unknown is reported as "cannot
evaluate" with the facts that were missing, never as healthy. The evaluator can
record a trace of every clause with its values; explain and why-not use it.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gpu_triage.engine import aggregates
from gpu_triage.engine import expr as E
from gpu_triage.engine.inputs import Binding, EvalInput, plain, quantise
from gpu_triage.model.catalog import kinds
from gpu_triage.model.facts import FactModel, Unavailable, UnavailableReason


@dataclass(frozen=True)
class Missing:
    path: str
    reason: Unavailable

    def __str__(self) -> str:
        return f"{self.path} unavailable ({self.reason})"


@dataclass(frozen=True)
class Val:
    value: Any  # None: unknown
    missing: tuple[Missing, ...] = ()

    @property
    def known(self) -> bool:
        return self.value is not None


@dataclass
class Clause:
    """One leaf of the condition as evaluated: its text, operand values and outcome."""

    text: str
    values: dict[str, Any]
    result: bool | None
    missing: tuple[Missing, ...] = ()


@dataclass
class Conclusions:
    """Values of intermediate conclusions: node-wide, and per GPU where the rule bound one."""

    node: dict[str, bool | None] = field(default_factory=dict)
    per_gpu: dict[str, dict[str, bool | None]] = field(default_factory=dict)

    def record(self, name: str, gpu_bus: str | None, value: bool | None) -> None:
        prev = self.node.get(name, False)
        self.node[name] = _or3(prev, value)
        if gpu_bus is not None:
            per = self.per_gpu.setdefault(name, {})
            per[gpu_bus] = _or3(per.get(gpu_bus, False), value)

    def declare(self, name: str) -> None:
        self.node.setdefault(name, False)

    def get(self, name: str, binding: Binding) -> bool | None:
        gpu = binding.get("gpu")
        per = self.per_gpu.get(name)
        if gpu is not None and per is not None:
            bus = gpu.__dict__.get("pci_bus_id")
            return per.get(bus, False) if bus is not None else False
        return self.node.get(name, False)


def _or3(a: bool | None, b: bool | None) -> bool | None:
    if a is True or b is True:
        return True
    if a is None or b is None:
        return None
    return False


# Shared reasons for values nobody recorded a reason for (built once: pydantic models).
_NOT_COLLECTED = {
    "": Unavailable(reason=UnavailableReason.NOT_COLLECTED),
    "site": Unavailable(reason=UnavailableReason.NOT_COLLECTED, detail="not in the site inventory"),
    "job": Unavailable(reason=UnavailableReason.NOT_COLLECTED, detail="not in the job metrics"),
}

_CMP: dict[str, Callable[[Any, Any], bool]] = {
    "==": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}
_ARITH: dict[str, Callable[[Any, Any], Any]] = {
    "+": operator.add,
    "-": operator.sub,
    "*": operator.mul,
    "/": operator.truediv,
}


class Evaluator:
    """Evaluates expressions for one binding of one input."""

    def __init__(
        self,
        inp: EvalInput,
        binding: Binding,
        concl: Conclusions,
        trace: list[Clause] | None = None,
    ) -> None:
        self.inp, self.binding, self.concl, self.trace = inp, binding, concl, trace

    # ---------------------------------------------------------------- references
    def ref(self, r: E.Ref, local: FactModel | None = None) -> Val:
        if r.local:
            return self._field(local, r.kind, r.name)
        if r.kind == "answer":
            v = self.inp.facts.answers.get(r.name)
            if v is None:
                return Val(
                    None,
                    (
                        Missing(
                            r.path,
                            Unavailable(
                                reason=UnavailableReason.NOT_ANSWERED, detail="a person must answer"
                            ),
                        ),
                    ),
                )
            return Val(v)
        if r.kind == "concl":
            v = self.concl.get(r.name, self.binding)
            if v is None:
                return Val(
                    None,
                    (
                        Missing(
                            r.path,
                            Unavailable(
                                reason=UnavailableReason.NOT_COLLECTED,
                                detail="the rules concluding it could not be evaluated",
                            ),
                        ),
                    ),
                )
            return Val(v)
        k = kinds()[r.kind]
        if k.singleton:
            item = self.inp.singleton(r.kind)
            if item is None:
                why = self.inp.kind_unavailable.get(r.kind) or Unavailable(
                    reason=UnavailableReason.NOT_COLLECTED,
                    detail="not supplied" if r.kind in ("site", "job") else "",
                )
                return Val(None, (Missing(r.path, why),))
            return self._field(item, r.kind, r.name)
        item = self.binding.get(r.kind)
        if item is None:
            absent = self.inp.kind_unavailable.get(r.kind)
            if absent is None and r.kind == "gpu":
                absent = Unavailable(
                    reason=UnavailableReason.NOT_COLLECTED,
                    detail="no GPU with this PCI bus id in the facts",
                )
            return Val(
                None,
                (Missing(r.path, absent or Unavailable(reason=UnavailableReason.NOT_COLLECTED)),),
            )
        return self._field(item, r.kind, r.name)

    def _field(self, item: FactModel | None, kind: str, name: str) -> Val:
        if item is None:
            return Val(None, (Missing(f"{kind}.{name}", _NOT_COLLECTED[""]),))
        value = plain(getattr(item, name, None))
        if value is None:
            why = (
                item.why_unavailable(name) or _NOT_COLLECTED[kind if kind in _NOT_COLLECTED else ""]
            )
            return Val(None, (Missing(f"{kind}.{name}", why),))
        return Val(value)

    # ---------------------------------------------------------------- expressions
    def eval(self, e: E.Expr, local: FactModel | None = None) -> Val:
        # A table keyed by node type: this is the evaluator's hot path, and a ``match``
        # over class patterns costs several isinstance checks per node.
        return _DISPATCH[type(e)](self, e, local)

    def _const(self, e: E.Const, local: FactModel | None) -> Val:
        return Val(e.value)

    def _list(self, e: E.ListLit, local: FactModel | None) -> Val:
        return Val(tuple(i.value for i in e.items))

    def _not(self, e: E.Not, local: FactModel | None) -> Val:
        o = e.operand
        v = self.eval(o, local)
        result = None if v.value is None else not v.value
        if self.trace is not None and isinstance(o, E.Ref | E.Aggregate):
            self._record(e, {E.render(o): v.value}, result, v.missing)
        return Val(result, v.missing)

    def _neg(self, e: E.Neg, local: FactModel | None) -> Val:
        v = self.eval(e.operand, local)
        return Val(None if v.value is None else plain(-v.value), v.missing)

    def _boolop(self, e: E.BoolOp, local: FactModel | None) -> Val:
        return self._and(e.operands, local) if e.op == "and" else self._or(e.operands, local)

    def _arith(self, e: E.Arith, local: FactModel | None) -> Val:
        va, vb = self.eval(e.left, local), self.eval(e.right, local)
        if va.value is None or vb.value is None:
            return Val(None, va.missing + vb.missing)
        if e.op == "/" and vb.value == 0:
            why = Unavailable(reason=UnavailableReason.ERROR, detail="division by zero")
            return Val(None, (Missing(E.render(e), why),))
        result = _ARITH[e.op](va.value, vb.value)
        return Val(quantise(result) if isinstance(result, float) else result)

    def _availability(self, e: E.Availability, local: FactModel | None) -> Val:
        r = e.ref
        v = self.ref(r, local)
        result = v.known if e.negate else not v.known
        if self.trace is not None:
            self._record(e, {r.path: v.value if v.known else "unavailable"}, result, ())
        return Val(result)

    def _aggregate(self, e: E.Aggregate, local: FactModel | None) -> Val:
        return self.aggregate(e)

    def evaluate(self, e: E.Expr) -> Val:
        """Evaluate a whole condition (a bare yes/no fact at the top is a clause too)."""
        return self._leaf(e, None)

    def _leaf(self, o: E.Expr, local: FactModel | None) -> Val:
        """Evaluate an operand of and/or/not; a bare yes/no fact is a clause of its own."""
        v = self.eval(o, local)
        if isinstance(o, E.Ref | E.Aggregate) and self.trace is not None:
            self._record(o, {E.render(o): v.value}, v.value, v.missing)
        return v

    def _and(self, ops: tuple[E.Expr, ...], local: FactModel | None) -> Val:
        return self._fold(ops, local, decisive=False)

    def _or(self, ops: tuple[E.Expr, ...], local: FactModel | None) -> Val:
        return self._fold(ops, local, decisive=True)

    def _fold(self, ops: tuple[E.Expr, ...], local: FactModel | None, decisive: bool) -> Val:
        """Kleene and/or: one ``decisive`` operand (false for and, true for or) settles it;
        otherwise any unknown operand makes the result unknown."""
        missing: tuple[Missing, ...] = ()
        unknown = False
        for o in ops:
            v = self._leaf(o, local)
            if v.value is decisive:
                return Val(decisive)
            if v.value is None:
                unknown, missing = True, missing + v.missing
        return Val(None, missing) if unknown else Val(not decisive)

    def _compare(self, e: E.Compare, local: FactModel | None) -> Val:
        va, vb = self.eval(e.left, local), self.eval(e.right, local)
        if va.value is None or vb.value is None:
            miss = va.missing + vb.missing
            if self.trace is not None:
                self._record(e, _values(e, va, vb), None, miss)
            return Val(None, miss)
        if e.op == "in":
            result = va.value in vb.value
        elif e.op == "not in":
            result = va.value not in vb.value
        else:
            result = _CMP[e.op](va.value, vb.value)
        if self.trace is not None:  # rendering the clause costs more than deciding it
            self._record(e, _values(e, va, vb), result, ())
        return Val(result)

    def _record(
        self, e: E.Expr, values: dict[str, Any], result: bool | None, missing: tuple[Missing, ...]
    ) -> None:
        if self.trace is not None:
            shown = {k: v for k, v in values.items() if not _is_literal(k)}
            self.trace.append(Clause(E.render(e), shown, result, missing))

    def sibling(self, binding: Binding) -> Evaluator:
        """An evaluator of the same input for another binding, recording no trace."""
        return Evaluator(self.inp, binding, self.concl, None)

    @staticmethod
    def val(value: Any, missing: tuple[Missing, ...] = ()) -> Val:
        return Val(value, missing)

    def aggregate(self, e: E.Aggregate) -> Val:
        if e.kind in self.inp.kind_unavailable:
            return Val(None, (Missing(e.kind, self.inp.kind_unavailable[e.kind]),))
        # Computed from indexes built once per evaluation (engine.aggregates), never by a
        # loop over the items per binding.
        v: Val = aggregates.compute(self, e)
        return v

    def aggregate_by_scan(self, e: E.Aggregate) -> Val:
        """The same value item by item: the definition the indexes are tested against."""
        if e.kind in self.inp.kind_unavailable:
            return Val(None, (Missing(e.kind, self.inp.kind_unavailable[e.kind]),))
        inner = Evaluator(self.inp, self.binding, self.concl, None)  # no trace per item
        chosen: list[FactModel] = []
        for item in self.inp.all_items(e.kind):
            if e.where is None:
                chosen.append(item)
                continue
            v = inner.eval(e.where, item)
            if v.value is None:
                if e.func == "exists":
                    continue  # a later true item still decides it
                return Val(None, v.missing)
            if v.value:
                chosen.append(item)
        if e.func == "exists":
            if chosen:
                return Val(True)
            # False only if no item was undecided.
            for item in self.inp.all_items(e.kind):
                v = inner.eval(e.where, item) if e.where is not None else Val(True)
                if v.value is None:
                    return Val(None, v.missing)
            return Val(False)
        if e.func == "count":
            return Val(len(chosen))
        assert e.field is not None
        values = []
        for item in chosen:
            v = inner._field(item, e.kind, e.field)
            if not v.known:
                return Val(None, v.missing)
            values.append(v.value)
        if e.func == "distinct":
            return Val(len(set(values)))
        if e.func == "sum":
            return Val(aggregates.aggregate_sum(values))
        if not values:
            return self.no_values(e)
        return Val(max(values) if e.func == "max" else min(values))

    def no_values(self, e: E.Aggregate) -> Val:
        return Val(
            None,
            (
                Missing(
                    f"{e.kind}.{e.field}",
                    Unavailable(
                        reason=UnavailableReason.NOT_COLLECTED,
                        detail=f"no {e.kind} to take the {e.func} of",
                    ),
                ),
            ),
        )


def _values(e: E.Compare, va: Val, vb: Val) -> dict[str, Any]:
    return {E.render(e.left): va.value, E.render(e.right): vb.value}


def _is_literal(text: str) -> bool:
    return text[:1].isdigit() or text[:1] in "-'\"[" or text in ("true", "false")


def evaluate_binding(
    inp: EvalInput,
    binding: Binding,
    expr: E.Expr,
    concl: Conclusions,
    trace: list[Clause] | None = None,
) -> Val:
    return Evaluator(inp, binding, concl, trace).evaluate(expr)


_DISPATCH: dict[type, Callable[[Evaluator, Any, FactModel | None], Val]] = {
    E.Const: Evaluator._const,
    E.ListLit: Evaluator._list,
    E.Ref: Evaluator.ref,
    E.Not: Evaluator._not,
    E.Neg: Evaluator._neg,
    E.BoolOp: Evaluator._boolop,
    E.Arith: Evaluator._arith,
    E.Availability: Evaluator._availability,
    E.Compare: Evaluator._compare,
    E.Aggregate: Evaluator._aggregate,
}
