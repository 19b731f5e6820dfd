"""The durable_rules backend: the intermediate form compiled onto durable_rules' JSON rules.

What it emits is the subset that avoids durable_rules' verified failures
(``../shared/durable-rules-notes.md`` §7):

* one flat fact ("row") per rule and binding, holding the values the rule compares
  (fact fields, arithmetic and aggregates computed in Python); nothing nested, far
  under the 255-key limit;
* no cross-fact joins at all (they segfault), no ``$not`` patterns (order dependent),
  no regexes (``$mt`` gives false negatives): every pattern is one row matched against
  constants or columns of the same row (``$m``);
* facts, never events (an event fires only its first rule); a catch-all rule so no
  row is "unhandled" (an unhandled fact in a batch drops the whole batch);
* explicit ``$ex`` guards, because durable_rules compares a missing ``$m`` operand as
  if it were null and loosely coerces types;
* each rule twice: *strict* (fires when the condition is true with unknowns false)
  and *possible* (fires unless the condition is false with unknowns true). Conditions
  are put in negation normal form first, so strict = Kleene true and possible-but-not-
  strict = unknown, exactly what the reference evaluator decides.

durable_rules runs in a worker process (:mod:`gpu_triage.engine.durable_worker`): a
crash there raises :class:`BackendFailure` here and the caller falls back.
"""

from __future__ import annotations

import contextlib
import json
import select
import subprocess
import threading
from typing import Any

from gpu_triage.engine import durable_worker as worker
from gpu_triage.engine import expr as E
from gpu_triage.engine import rulebook_cache
from gpu_triage.engine.backend import BackendFailure, ReferenceBackend, Verdicts
from gpu_triage.engine.compiler import CompiledRule, Rulebook
from gpu_triage.engine.inputs import Binding, EvalInput, plain
from gpu_triage.engine.reference import Conclusions, Evaluator
from gpu_triage.model.catalog import kinds

ALWAYS = {"$ex": {"t": 1}}
NEVER = {"$nex": {"t": 1}}
_NEG = {
    "==": "!=",
    "!=": "==",
    "<": ">=",
    "<=": ">",
    ">": "<=",
    ">=": "<",
    "in": "not in",
    "not in": "in",
}
_MIRROR = {"==": "==", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}
_OPS = {"!=": "$neq", "<": "$lt", "<=": "$lte", ">": "$gt", ">=": "$gte"}
WORKER_TIMEOUT_S = 30.0
# durable_rules refuses a pattern of 16 and/or nodes or more ("error code: 113"); a rule
# larger than this is decided by the reference evaluator inside this backend, and the
# findings say so (EngineInfo.note).
MAX_PATTERN_EXPRESSIONS = 15


MAX_ROW_COLUMNS = 200  # durable_rules holds about 253 keys per fact
# durable_rules walks the patterns a fact may match with a fixed stack of 64 nodes
# (events.c, MAX_STACK_SIZE; "error code: 303" when full): a row shared by too many rules
# overflows it (measured: 180 Xid rules on one row). Rows are shared by at most this many.
MAX_GROUP_RULES = 24


class RowGroup:
    """Rules that bind the same kinds, in the same stratum, share one row per binding:
    durable_rules then matches every rule of the group against ~10 rows a snapshot
    instead of one row per rule and binding (its cost is per asserted fact)."""

    def __init__(self, index: int) -> None:
        self.index = index
        self.columns: dict[str, E.Expr] = {}  # column name -> expression computing it
        self.by_text: dict[str, str] = {}
        self.rule_ids: list[str] = []

    def col(self, e: E.Expr) -> str:
        text = _column_text(e)
        if text not in self.by_text:
            name = f"c{len(self.by_text)}"
            self.by_text[text] = name
            self.columns[name] = e
        return self.by_text[text]

    def row(self, inp: EvalInput, binding: Binding, b: int, concl: Conclusions) -> dict[str, Any]:
        ev: Evaluator | None = None
        row: dict[str, Any] = {"t": "row", "id": f"{self.index}-{b}", "g": self.index, "b": b}
        for name, e in self.columns.items():
            # A plain fact field needs only its value (absent = unknown): read it directly.
            # Anything else (arithmetic, aggregates, answers, conclusions) goes through the
            # reference evaluator, so both backends see the same values.
            if isinstance(e, E.Ref) and not e.local and e.kind in _FIELD_KINDS:
                item = inp.singleton(e.kind) if _FIELD_KINDS[e.kind] else binding.get(e.kind)
                value = plain(getattr(item, e.name, None)) if item is not None else None
            else:
                if ev is None:
                    ev = Evaluator(inp, binding, concl)
                value = plain(ev.eval(e).value)
            if value is not None:
                row[name] = value  # absent = unknown
        return row


def _column_text(e: E.Expr) -> str:
    return E.render(e) if not isinstance(e, E.Ref) or not e.local else f"@{e.name}"


class RuleProgram:
    """One rule compiled for durable_rules: its two conditions over its group's columns."""

    def __init__(self, index: int, rule: CompiledRule, group: RowGroup) -> None:
        self.index, self.rule, self.group = index, rule, group
        self.strict = _flatten(self._root(rule.expr, True))
        self.possible = _flatten(self._root(rule.expr, False))
        # and/or nodes in the larger of its two patterns, the root included: what
        # durable_rules caps (measured: 15 load, 16 fail with "error code: 113"). Counted
        # once, here: the programs are kept with the rulebook in its cache.
        self.size = max(
            _bool_nodes(self.pattern(self.strict)), _bool_nodes(self.pattern(self.possible))
        )

    def __getstate__(self) -> dict[str, Any]:
        # Kept in the rulebook cache without its two patterns: they are written into the
        # ruleset's text when it is compiled (kept beside it), and an evaluation needs
        # only the program's rule, group and size. A tenth of the cache's objects less.
        state = dict(self.__dict__)
        del state["strict"], state["possible"]
        return state

    def _col(self, e: E.Expr) -> str:
        return self.group.col(e)

    def _operand(self, e: E.Expr) -> tuple[str | None, Any]:
        """(column, None) for a computed operand, (None, constant) for a constant."""
        if isinstance(e, E.Const):
            return None, e.value
        return self._col(e), None

    # Each builder returns (condition, pending): in the *possible* variant, ``pending`` are
    # the columns whose absence makes a literal unknown; their ``$nex`` guards are OR-ed in
    # at the nearest AND (or the root). Under an OR they are hoisted, shared by every
    # literal on the same column: OR is associative, so this is the same condition with
    # fewer expressions (durable_rules refuses patterns of about 30 expressions).
    def _root(self, e: E.Expr, strict: bool) -> dict[str, Any]:
        cond, pending = self._bool(e, False, strict)
        return _with_unknown(cond, pending)

    def _bool(self, e: E.Expr, neg: bool, strict: bool) -> tuple[dict[str, Any], set[str]]:
        match e:
            case E.Const(value=v):
                return (ALWAYS if bool(v) != neg else NEVER), set()
            case E.Not(operand=o):
                return self._bool(o, not neg, strict)
            case E.BoolOp(op=op, operands=ops):
                is_and = (op == "and") != neg
                parts = [self._bool(o, neg, strict) for o in ops]
                if is_and:
                    # Literals unknown for the same columns share one guard:
                    # AND(Li or nex P) == AND(Li) or nex P.
                    groups: dict[frozenset[str], list[dict[str, Any]]] = {}
                    for c, p in parts:
                        groups.setdefault(frozenset(p), []).append(c)
                    terms = [
                        _with_unknown(cs[0] if len(cs) == 1 else {"$and": cs}, set(p))
                        for p, cs in groups.items()
                    ]
                    return (terms[0] if len(terms) == 1 else {"$and": terms}), set()
                return {"$or": [c for c, _ in parts]}, set().union(*(p for _, p in parts))
            case E.Availability(ref=r, negate=negate):
                col = self._col(r)
                return {"$ex" if negate != neg else "$nex": {col: 1}}, set()
            case E.Compare(op=op, left=left, right=right):
                return self._compare(_NEG[op] if neg else op, left, right, strict)
            case _:  # a boolean-valued operand: a yes/no fact, a conclusion, exists()
                col = self._col(e)
                # a missing attribute never equals a value: no guard needed when strict
                return {col: not neg}, (set() if strict else {col})

    def _compare(
        self, op: str, left: E.Expr, right: E.Expr, strict: bool
    ) -> tuple[dict[str, Any], set[str]]:
        if op in ("in", "not in"):
            assert isinstance(right, E.ListLit)
            col = self._col(left)
            values = [i.value for i in right.items]
            if not values:  # still unknown when the operand is (as the reference decides)
                lit: dict[str, Any] = NEVER if op == "in" else ALWAYS
            elif op == "in":
                lit = {"$or": [{col: v} for v in values]}
            else:
                lit = {"$and": [{"$neq": {col: v}} for v in values]}
            if strict and not values and op == "not in":
                return {"$and": [{"$ex": {col: 1}}, lit]}, set()
            return lit, (set() if strict else {col})
        lcol, lconst = self._operand(left)
        rcol, rconst = self._operand(right)
        if lcol is None:  # constant on the left: mirror so a column leads
            lcol, lconst, rcol, rconst, op = rcol, rconst, None, lconst, _MIRROR[op]
        assert lcol is not None
        rvalue: Any = {"$m": rcol} if rcol is not None else rconst
        lit = {lcol: rvalue} if op == "==" else {_OPS[op]: {lcol: rvalue}}
        cols = {c for c in (lcol, rcol) if c}
        if strict:
            # durable_rules compares a missing attribute as false, except a missing ``$m``
            # operand, which it reads as null: guard that one.
            return (lit if rcol is None else {"$and": [{"$ex": {rcol: 1}}, lit]}), set()
        return lit, cols

    def pattern(self, cond: dict[str, Any]) -> dict[str, Any]:
        head: list[dict[str, Any]] = [{"t": "row"}, {"g": self.group.index}]
        return {"$and": head + cond.get("$and", [cond])}

    def rules_json(self) -> dict[str, Any]:
        def pattern(cond: dict[str, Any]) -> dict[str, Any]:
            return {"all": [{"m": self.pattern(cond)}]}

        return {
            f"r{self.index}": {**pattern(self.strict), "run": f"r{self.index}"},
            f"r{self.index}?": {**pattern(self.possible), "run": f"r{self.index}?"},
        }


# fact kind -> whether it is one per node (read from the input) or bound per item
_FIELD_KINDS = {name: k.singleton for name, k in kinds().items()}


def _with_unknown(cond: dict[str, Any], pending: set[str]) -> dict[str, Any]:
    if not pending:
        return cond
    return {"$or": [cond, *({"$nex": {c: 1}} for c in sorted(pending))]}


def _bool_nodes(cond: dict[str, Any]) -> int:
    ((key, value),) = cond.items()
    if key in ("$and", "$or"):
        return 1 + sum(_bool_nodes(c) for c in value)
    return 0


def _flatten(cond: dict[str, Any]) -> dict[str, Any]:
    """Merge nested and/or of the same kind and unwrap single children: the same
    condition with fewer nodes."""
    ((key, value),) = cond.items()
    if key not in ("$and", "$or"):
        return cond
    items: list[dict[str, Any]] = []
    for child in (_flatten(c) for c in value):
        ((ck, cv),) = child.items()
        items.extend(cv if ck == key else [child])
    return items[0] if len(items) == 1 else {key: items}


def compile_ruleset(book: Rulebook) -> tuple[dict[str, Any], dict[str, RuleProgram]]:
    ruleset: dict[str, Any] = {
        "__mark__": {"all": [{"m": {"t": "__session__"}}], "run": "__mark__"},
        "__sink__": {"all": [{"m": {"t": "row"}}], "run": "__sink__"},
    }
    programs: dict[str, RuleProgram] = {}
    open_groups: dict[tuple[Any, ...], RowGroup] = {}
    count = 0
    for i, rule in enumerate(book.rules):
        trial = RuleProgram(i, rule, RowGroup(-1))  # its columns, to pick a group with room
        if trial.size > MAX_PATTERN_EXPRESSIONS:
            programs[rule.id] = trial  # decided by the reference evaluator
            continue
        signature = (rule.iter_kinds, rule.join_gpu, rule.stratum)
        group = open_groups.get(signature)
        if (
            group is None
            or len(set(group.by_text) | set(trial.group.by_text)) > MAX_ROW_COLUMNS
            or len(group.rule_ids) >= MAX_GROUP_RULES
        ):
            group = open_groups[signature] = RowGroup(count)
            count += 1
        group.rule_ids.append(rule.id)
        programs[rule.id] = prog = RuleProgram(i, rule, group)
        ruleset.update(prog.rules_json())
    return ruleset, programs


def compiled(book: Rulebook) -> tuple[str, dict[str, RuleProgram]]:
    """The ruleset as the worker's load request reads it, and the programs: compiled once
    per rulebook and kept with it in the rulebook cache (a cold start reads them)."""
    done = book.derived.get(DERIVED)
    if done is None:
        done = book.derived[DERIVED] = _compile(book)
    text, programs = done
    return text, programs


def _compile(book: Rulebook) -> tuple[str, dict[str, RuleProgram]]:
    ruleset, programs = compile_ruleset(book)
    return json.dumps(ruleset), programs


DERIVED = "durable"
rulebook_cache.DERIVED[DERIVED] = _compile


class DurableBackend:
    name = "durable"

    def __init__(self, book: Rulebook, worker_argv: list[str] | None = None) -> None:
        self.ruleset_text, self.programs = compiled(book)
        self.fingerprint = book.fingerprint
        self.preloaded = False  # whether the worker had this ruleset loaded already
        self._by_index = {p.index: p for p in self.programs.values()}
        self.too_large = sorted(
            r for r, p in self.programs.items() if p.size > MAX_PATTERN_EXPRESSIONS
        )
        self.note = (
            f"{len(self.too_large)} rule(s) too large for durable_rules decided by the "
            f"reference evaluator: {', '.join(self.too_large)}"
            if self.too_large
            else None
        )
        self.worker_argv = worker_argv or worker.worker_argv()
        self._proc: subprocess.Popen[str] | None = None
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ worker
    def _start(self) -> None:
        spare = worker.take_spare() if self.worker_argv == worker.worker_argv() else None
        self._proc = spare or worker.spawn(self.worker_argv)
        fingerprint = json.dumps(self.fingerprint)
        reply = self._send('{"op": "load", "fingerprint": ' + fingerprint + "}")
        self.preloaded = bool(reply.get("preloaded"))
        if reply.get("need") == "ruleset":  # it preloaded another rulebook, or none
            load = '{"op": "load", "fingerprint": ' + fingerprint
            reply = self._send(load + ', "ruleset": ' + self.ruleset_text + "}")
            if reply.get("ok"):
                worker.remember_last(self.fingerprint, self.ruleset_text)
        if not reply.get("ok"):
            self.close()
            raise BackendFailure(reply.get("error", "durable_rules refused the ruleset"))

    def _request(self, req: dict[str, Any]) -> dict[str, Any]:
        return self._send(json.dumps(req))

    def _send(self, line: str) -> dict[str, Any]:
        proc = self._proc
        assert proc is not None and proc.stdin is not None and proc.stdout is not None
        try:
            proc.stdin.write(line + "\n")
            proc.stdin.flush()
            ready, _, _ = select.select([proc.stdout], [], [], WORKER_TIMEOUT_S)
            line = proc.stdout.readline() if ready else ""
        except (BrokenPipeError, OSError, ValueError):
            line = ""
        if not line:
            why = self._death()
            self.close()
            raise BackendFailure(why)
        reply: dict[str, Any] = json.loads(line)
        return reply

    def _death(self) -> str:
        proc = self._proc
        if proc is None:
            return "durable_rules worker not running"
        try:
            code = proc.wait(timeout=1.0)
        except subprocess.TimeoutExpired:
            return f"durable_rules worker did not answer within {WORKER_TIMEOUT_S:g} s"
        if code < 0:
            import signal

            try:
                sig = signal.Signals(-code).name
            except ValueError:
                sig = str(-code)
            return f"durable_rules worker crashed ({sig})"
        return f"durable_rules worker exited with status {code}"

    def close(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None:
            try:
                proc.kill()
                proc.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                pass
            for stream in (proc.stdin, proc.stdout):
                if stream is not None:
                    with contextlib.suppress(OSError):
                        stream.close()

    # ------------------------------------------------------------------ evaluate
    def run_stratum(
        self,
        inp: EvalInput,
        rules: list[CompiledRule],
        binds: dict[str, list[Binding]],
        concl: Conclusions,
    ) -> Verdicts:
        rows: list[dict[str, Any]] = []
        large = [r for r in rules if r.id in self.too_large]
        # Each rule brings the bindings it must decide (one per distinct set of values it
        # reads); the rules of a group share rows, so a group's rows are the union of its
        # rules' bindings, and each rule maps a row back to its own binding index.
        row_of: dict[tuple[int, int], int] = {}  # (group, id(binding)) -> row number
        local: dict[str, dict[int, int]] = {}  # rule id -> row number -> binding index
        for rule in rules:
            if rule.id in self.too_large:
                continue
            group = self.programs[rule.id].group
            mine = local[rule.id] = {}
            for i, b in enumerate(binds[rule.id]):
                slot = (group.index, id(b))
                r = row_of.get(slot)
                if r is None:
                    r = row_of[slot] = len(rows)
                    rows.append(group.row(inp, b, r, concl))
                mine[r] = i
        with self._lock:
            if self._proc is None or self._proc.poll() is not None:
                self.close()
                self._start()
            reply = self._request({"op": "eval", "rows": rows})
        if not reply.get("ok"):
            raise BackendFailure(reply.get("error", "durable_rules evaluation failed"))
        strict: set[tuple[str, int]] = set()
        possible: set[tuple[str, int]] = set()
        for name, _group, row in reply["hits"]:
            rule_id = self._by_index[int(name[1:].rstrip("?"))].rule.id
            index = local.get(rule_id, {}).get(row)
            if index is not None:
                (possible if name.endswith("?") else strict).add((rule_id, index))
        out: Verdicts = dict.fromkeys(possible, None)
        for key in strict:
            out[key] = True
        if large:
            out.update(ReferenceBackend().run_stratum(inp, large, binds, concl))
        return out


_SHARED: dict[str, DurableBackend] = {}
_UNAVAILABLE: list[str] = []
_SHARED_LOCK = threading.Lock()  # a warm-up thread and an evaluation may ask at once


def shared_backend(book: Rulebook) -> DurableBackend:
    """One worker per rulebook per process (a new rulebook = a new worker: durable_rules
    cannot unload a ruleset, so reloading in place would leak)."""
    with _SHARED_LOCK:
        return _shared_backend(book)


def _shared_backend(book: Rulebook) -> DurableBackend:
    if _UNAVAILABLE:
        raise BackendFailure(_UNAVAILABLE[0])
    key = book.fingerprint
    backend = _SHARED.get(key)
    if backend is None:
        for old in _SHARED.values():
            old.close()
        _SHARED.clear()
        backend = DurableBackend(book)
        try:
            with backend._lock:
                backend._start()
        except BackendFailure as exc:
            if "not importable" in str(exc):
                _UNAVAILABLE.append(str(exc))
            raise
        _SHARED[key] = backend
    return backend


def warm_up(book: Rulebook) -> None:
    """Load ``book`` into the shared worker in a background thread, so that it compiles
    the ruleset (in its own process) while the caller loads a snapshot or starts a UI,
    and the first evaluation finds it ready. A failure is left for that evaluation,
    which meets it again and reports it."""

    def start() -> None:
        with contextlib.suppress(Exception):  # reported by the evaluation, not here
            shared_backend(book)

    threading.Thread(target=start, name="durable-warm-up", daemon=True).start()
