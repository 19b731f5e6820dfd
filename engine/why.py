"""The condition as a tree of evaluated clauses, and the clauses that decide its value.

The evaluator short-circuits and records leaves only; an explanation needs every
operand's value and which of them settled each ``and``/``or``/``not``: a false ``and``
is decided by its first false operand, a true ``or`` by its first true one, a true
``and`` / false ``or`` by all operands, an unknown one by its unknown operands."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpu_triage.engine import expr as E
from gpu_triage.engine.reference import Clause, Evaluator


@dataclass
class WhyNode:
    text: str
    result: bool | None
    values: dict[str, Any] = field(default_factory=dict)
    op: str = ""  # "and" | "or" | "not" | "" for a leaf
    children: list[WhyNode] = field(default_factory=list)
    deciding: bool = True  # this node settles its parent's value


def why_tree(ev: Evaluator, e: E.Expr) -> WhyNode:
    """Evaluate ``e`` with every operand (no short-circuit) and mark the deciding ones."""
    if isinstance(e, E.BoolOp):
        kids = [why_tree(ev, o) for o in e.operands]
        decisive = e.op == "or"
        first = next((k for k in kids if k.result is decisive), None)
        if first is not None:
            result: bool | None = decisive
            for k in kids:
                k.deciding = k is first
        elif any(k.result is None for k in kids):
            result = None
            for k in kids:
                k.deciding = k.result is None
        else:
            result = not decisive
        return WhyNode(e.op, result, op=e.op, children=kids)
    if isinstance(e, E.Not) and not isinstance(e.operand, E.Ref | E.Aggregate):
        kid = why_tree(ev, e.operand)
        res = None if kid.result is None else not kid.result
        return WhyNode("not", res, op="not", children=[kid])
    trace: list[Clause] = []
    v = Evaluator(ev.inp, ev.binding, ev.concl, trace).evaluate(e)
    values: dict[str, Any] = {}
    for c in trace:
        values.update(c.values)
    result = v.value if isinstance(v.value, bool) or v.value is None else bool(v.value)
    return WhyNode(E.render(e), result, values)


def deciding_leaves(n: WhyNode) -> list[WhyNode]:
    """The leaf clauses that settle the value of the whole condition."""
    if not n.children:
        return [n]
    out: list[WhyNode] = []
    for k in n.children:
        if k.deciding:
            out += deciding_leaves(k)
    return out


def fmt(v: Any) -> str:
    if v is None:
        return "unavailable"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return f"{v:g}"
    return repr(v) if isinstance(v, str) else str(v)


def _mark(r: bool | None) -> str:
    return {True: "true ", False: "FALSE", None: "?    "}[r]


def leaf_text(n: WhyNode) -> str:
    vals = ", ".join(f"{k} = {fmt(v)}" for k, v in n.values.items())
    return n.text + (f" ({vals})" if vals else "")


def render_tree(n: WhyNode, indent: str = "  ") -> list[str]:
    """Nested lines: one per operand, ``*`` beside the deciding ones."""
    star = "*" if n.deciding else " "
    if n.children:
        head = f"{indent}{star}[{_mark(n.result)}] {n.op}"
        return [head] + [line for k in n.children for line in render_tree(k, indent + "    ")]
    return [f"{indent}{star}[{_mark(n.result)}] {leaf_text(n)}"]


def deciding_reason(n: WhyNode) -> str:
    """One line naming what decided the condition, e.g. for competing causes."""
    word = {True: "true", False: "false", None: "unknown"}
    leaves = deciding_leaves(n)
    parts = [f"{leaf_text(x)} is {word[x.result]}" for x in leaves[:4]]
    more = f" (+{len(leaves) - 4} more)" if len(leaves) > 4 else ""
    return "; ".join(parts) + more
