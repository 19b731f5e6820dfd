"""The `when` expression language: parsed without eval into a small typed AST.

Python's ``ast`` module reads the text (so precedence is the familiar one:
``not`` > comparisons > ``and`` > ``or``); every node is then checked against a
whitelist and converted into the dataclasses below. Anything outside the
language (calls other than the aggregates, subscripts, lambdas, dunder names,
attribute walks deeper than ``kind.field``) is an :class:`ExprError` with the
column where it starts; nothing is ever evaluated by Python.

Examples::

    gpu.utilization_gpu_pct < params.low_util_pct and host.cpu_iowait_pct > 20
    count(xid, code == 79) >= 1
    count(xid, code in [48, 63, 64] and pci_bus_id == gpu.pci_bus_id) >= 2
    unavailable(gpu.power_draw_w) or gpu.power_draw_pct < 30
"""

from __future__ import annotations

import ast
import functools
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TypeGuard

MAX_EXPR_CHARS = 4000
MAX_DEPTH = 40
MAX_NODES = 400

AGGREGATES = {"count", "exists", "distinct", "max", "min", "sum"}
PREDICATES = {"unavailable", "available"}
CMP_OPS = {
    ast.Eq: "==",
    ast.NotEq: "!=",
    ast.Lt: "<",
    ast.LtE: "<=",
    ast.Gt: ">",
    ast.GtE: ">=",
    ast.In: "in",
    ast.NotIn: "not in",
}
ARITH_OPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/"}


class ExprError(ValueError):
    """An expression outside the language; ``col`` is 1-based within the expression."""

    def __init__(self, message: str, col: int = 1) -> None:
        self.message, self.col = message, col
        super().__init__(f"col {col}: {message}")


@dataclass(frozen=True)
class Node:
    col: int = field(default=1, compare=False, kw_only=True)


@dataclass(frozen=True)
class Const(Node):
    value: bool | int | float | str


@dataclass(frozen=True)
class ListLit(Node):
    items: tuple[Const, ...]


@dataclass(frozen=True)
class Ref(Node):
    """``kind.field`` (``gpu.pcie_link_width``), or a bare ``field`` inside an aggregate
    (``kind`` is then the aggregated kind and ``local`` is true)."""

    kind: str
    name: str
    local: bool = False

    @functools.cached_property
    def path(self) -> str:  # read for every value an evaluation shows: made once
        return f"{self.kind}.{self.name}"


@dataclass(frozen=True)
class Not(Node):
    operand: Expr


@dataclass(frozen=True)
class BoolOp(Node):
    op: str  # "and" | "or"
    operands: tuple[Expr, ...]


@dataclass(frozen=True)
class Compare(Node):
    op: str  # one of CMP_OPS values
    left: Expr
    right: Expr


@dataclass(frozen=True)
class Arith(Node):
    op: str
    left: Expr
    right: Expr


@dataclass(frozen=True)
class Neg(Node):
    operand: Expr


@dataclass(frozen=True)
class Availability(Node):
    """``unavailable(ref)`` / ``available(ref)``: never unknown."""

    ref: Ref
    negate: bool  # True for available()


@dataclass(frozen=True)
class Aggregate(Node):
    """``count(kind[, pred])``, ``exists(kind[, pred])``, ``distinct(kind, field[, pred])``,
    ``max/min/sum(kind, field[, pred])``."""

    func: str
    kind: str
    field: str | None
    where: Expr | None


Expr = Const | ListLit | Ref | Not | BoolOp | Compare | Arith | Neg | Availability | Aggregate


def parse_expr(text: str) -> Expr:
    """Parse a `when` expression (or an aggregate predicate) into the AST."""
    if len(text) > MAX_EXPR_CHARS:
        raise ExprError(f"expression longer than {MAX_EXPR_CHARS} characters")
    if not text.isascii():
        # Python folds look-alike letters (NFKC): a fullwidth g would read as 'g'. Refuse them.
        bad = next(i for i, ch in enumerate(text) if not ch.isascii())
        raise ExprError(f"non-ASCII character {text[bad]!r} in an expression", bad + 1)
    source = " ".join(text.split("\n"))  # YAML folded text: one logical line, columns kept
    try:
        with warnings.catch_warnings():  # e.g. "invalid decimal literal": ours to report
            warnings.simplefilter("ignore")
            tree = ast.parse(source.strip(), mode="eval")
    except SyntaxError as exc:
        raise ExprError(f"syntax error: {exc.msg}", exc.offset or 1) from None
    except (RecursionError, MemoryError, ValueError):
        raise ExprError("expression nested too deeply") from None
    count = sum(1 for _ in ast.walk(tree))
    if count > MAX_NODES:
        raise ExprError(f"expression too large ({count} nodes, at most {MAX_NODES})")
    return _Converter().convert(tree.body, 0, None)


class _Converter:
    def convert(self, node: ast.AST, depth: int, agg_kind: str | None) -> Expr:
        col = getattr(node, "col_offset", 0) + 1
        if depth > MAX_DEPTH:
            raise ExprError(f"expression nested deeper than {MAX_DEPTH} levels", col)
        d = depth + 1
        match node:
            case ast.BoolOp(op=op, values=values):
                name = "and" if isinstance(op, ast.And) else "or"
                return BoolOp(name, tuple(self.convert(v, d, agg_kind) for v in values), col=col)
            case ast.UnaryOp(op=ast.Not(), operand=operand):
                return Not(self.convert(operand, d, agg_kind), col=col)
            case ast.UnaryOp(op=ast.USub(), operand=ast.Constant(value=v)) if _is_number(v):
                return Const(-v, col=col)
            case ast.UnaryOp(op=ast.USub(), operand=operand):
                return Neg(self.convert(operand, d, agg_kind), col=col)
            case ast.Compare(left=left, ops=ops, comparators=comps):
                return self._compare(left, ops, comps, d, agg_kind, col)
            case ast.BinOp(op=op, left=left, right=right) if type(op) in ARITH_OPS:
                return Arith(
                    ARITH_OPS[type(op)],
                    self.convert(left, d, agg_kind),
                    self.convert(right, d, agg_kind),
                    col=col,
                )
            case ast.Constant(value=v) if isinstance(v, bool | int | float | str):
                if isinstance(v, float) and (v != v or v in (float("inf"), float("-inf"))):
                    raise ExprError("NaN and infinity are not allowed", col)
                if (
                    isinstance(v, int | float)
                    and not isinstance(v, bool)
                    and v
                    and not (1e-4 <= abs(v) <= 1e15)
                ):
                    # facts are quantised to this range (engine.inputs.quantise)
                    raise ExprError("numbers must be 0 or between 0.0001 and 1e15 in size", col)
                return Const(v, col=col)
            case ast.List(elts=elts) | ast.Tuple(elts=elts):
                items = tuple(self.convert(e, d, agg_kind) for e in elts)
                if not all(isinstance(i, Const) for i in items):
                    raise ExprError("a list may only hold constants", col)
                return ListLit(items, col=col)  # type: ignore[arg-type]
            case ast.Attribute():
                return self._ref(node, col)
            case ast.Name(id=name):
                if name in ("true", "false"):
                    return Const(name == "true", col=col)
                _check_name(name, col)
                if agg_kind is None:
                    raise ExprError(
                        f"'{name}' alone is not a fact: write kind.field, e.g. gpu.{name}", col
                    )
                return Ref(agg_kind, name, local=True, col=col)
            case ast.Call():
                return self._call(node, d, agg_kind, col)
        raise ExprError(f"'{type(node).__name__}' is not part of the rule language", col)

    def _compare(
        self,
        left: ast.expr,
        ops: list[ast.cmpop],
        comps: list[ast.expr],
        d: int,
        agg_kind: str | None,
        col: int,
    ) -> Expr:
        parts: list[Expr] = []
        lhs = self.convert(left, d, agg_kind)
        for op, comp in zip(ops, comps, strict=True):
            if type(op) not in CMP_OPS:
                raise ExprError(f"operator '{type(op).__name__}' is not allowed", col)
            rhs = self.convert(comp, d, agg_kind)
            name = CMP_OPS[type(op)]
            if name in ("in", "not in") and not isinstance(rhs, ListLit):
                raise ExprError(f"'{name}' needs a list of constants on its right", col)
            parts.append(Compare(name, lhs, rhs, col=col))
            lhs = rhs
        return parts[0] if len(parts) == 1 else BoolOp("and", tuple(parts), col=col)

    def _ref(self, node: ast.Attribute, col: int) -> Ref:
        if not isinstance(node.value, ast.Name):
            raise ExprError("only kind.field references are allowed (no deeper attributes)", col)
        _check_name(node.value.id, col)
        _check_name(node.attr, col)
        return Ref(node.value.id, node.attr, col=col)

    def _call(self, node: ast.Call, d: int, agg_kind: str | None, col: int) -> Expr:
        if not isinstance(node.func, ast.Name):
            raise ExprError("only the functions of the rule language may be called", col)
        func = node.func.id
        if node.keywords:
            raise ExprError(f"{func}() takes no keyword arguments", col)
        args = node.args
        if func in PREDICATES:
            if len(args) != 1:
                raise ExprError(f"{func}() takes one fact, e.g. {func}(gpu.power_draw_w)", col)
            ref = self.convert(args[0], d, agg_kind)
            if not isinstance(ref, Ref):
                raise ExprError(f"{func}() takes a fact reference", col)
            return Availability(ref, negate=(func == "available"), col=col)
        if func not in AGGREGATES:
            allowed = ", ".join(sorted(AGGREGATES | PREDICATES))
            raise ExprError(f"unknown function '{func}' (allowed: {allowed})", col)
        if agg_kind is not None:
            raise ExprError("aggregates cannot be nested", col)
        if not args or not isinstance(args[0], ast.Name):
            raise ExprError(f"{func}() needs a fact kind first, e.g. {func}(xid, ...)", col)
        kind = args[0].id
        _check_name(kind, col)
        needs_field = func in ("distinct", "max", "min", "sum")
        rest = args[1:]
        fld: str | None = None
        if needs_field:
            if not rest or not isinstance(rest[0], ast.Name):
                raise ExprError(
                    f"{func}() needs a field name second, e.g. {func}({kind}, code)", col
                )
            fld = rest[0].id
            _check_name(fld, col)
            rest = rest[1:]
        if len(rest) > 1:
            raise ExprError(f"{func}() takes at most one condition", col)
        where = self.convert(rest[0], d, kind) if rest else None
        return Aggregate(func, kind, fld, where, col=col)


def _is_number(v: object) -> TypeGuard[int | float]:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _check_name(name: str, col: int) -> None:
    # Refuse anything that could reach Python internals, even though nothing is evaluated.
    if name.startswith("_") or not name.isidentifier() or not name.isascii():
        raise ExprError(f"name '{name}' is not allowed", col)


def walk(expr: Expr) -> Iterator[Expr]:
    """Every node of an expression, depth first, aggregate conditions included."""
    yield expr
    match expr:
        case Not(operand=o) | Neg(operand=o):
            yield from walk(o)
        case BoolOp(operands=ops):
            for o in ops:
                yield from walk(o)
        case Compare(left=a, right=b) | Arith(left=a, right=b):
            yield from walk(a)
            yield from walk(b)
        case Availability(ref=r):
            yield r
        case Aggregate(where=w) if w is not None:
            yield from walk(w)


def refs(expr: Expr, *, include_local: bool = False) -> list[Ref]:
    """Every fact reference in an expression, in order (outer refs inside aggregates too)."""
    return [e for e in walk(expr) if isinstance(e, Ref) and (include_local or not e.local)]


def aggregates(expr: Expr) -> list[Aggregate]:
    return [e for e in walk(expr) if isinstance(e, Aggregate)]


def render(expr: Expr) -> str:
    """Back to readable text (docs, explain, every clause a finding explains). Nodes are
    immutable: each one's text is made once and kept on it."""
    text = expr.__dict__.get("_text")
    if text is None:
        text = _render(expr)
        object.__setattr__(expr, "_text", text)  # not a field: equality, hash, repr unchanged
    return text


def _render(expr: Expr) -> str:
    match expr:
        case Const(value=v):
            if isinstance(v, bool):
                return "true" if v else "false"
            return repr(v) if isinstance(v, str) else str(v)
        case ListLit(items=items):
            return "[" + ", ".join(render(i) for i in items) + "]"
        case Ref():
            return expr.name if expr.local else expr.path
        case Not(operand=o):
            return f"not {_paren(o)}"
        case Neg(operand=o):
            return f"-{_paren(o)}"
        case BoolOp(op=op, operands=ops):
            return f" {op} ".join(_paren(o) for o in ops)
        case Compare(op=op, left=a, right=b) | Arith(op=op, left=a, right=b):
            return f"{_paren(a)} {op} {_paren(b)}"
        case Availability(ref=r, negate=neg):
            return f"{'available' if neg else 'unavailable'}({render(r)})"
        case Aggregate(func=func, kind=kind, field=fld, where=w):
            args = [kind] + ([fld] if fld else []) + ([render(w)] if w is not None else [])
            return f"{func}({', '.join(args)})"
    raise TypeError(expr)


def _paren(e: Expr) -> str:
    text = render(e)
    return f"({text})" if isinstance(e, BoolOp | Compare | Arith) else text
