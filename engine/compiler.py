"""Compile loaded rules into the typed intermediate form both evaluators run.

The compiler resolves overlays, folds ``params.*`` into constants, checks every
fact reference and type against the fact catalogue, works out what each rule
iterates over (its subject: one GPU, one Xid event, the node ...) and orders
rules into strata so a conclusion is always computed before a rule reads it
(a cycle is refused: forward chaining cannot run away).
"""

from __future__ import annotations

import functools
import hashlib
import json
import pickle
import re
import string
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpu_triage.engine import expr as E
from gpu_triage.engine import rulebook_cache
from gpu_triage.engine.loader import (
    Diagnostic,
    LoadedOverlay,
    LoadedRule,
    RawRulebook,
    RulebookError,
    parse_sources,
    read_sources,
)
from gpu_triage.engine.model import (
    Nvlink5Rule,
    Question,
    QuestionType,
    Rule,
    Severity,
    SxidCode,
    XidCode,
    XidOverride,
    check_param_bounds,
)
from gpu_triage.engine.placeholders import placeholders
from gpu_triage.model.catalog import kinds

# How a disabled rule's reason names its overlay (see _Overlays.disable).
_OVERLAY_OF = re.compile(r"\(overlay '([^']+)'\)$")

# Kinds that are not collected facts.
SPECIAL_KINDS = {"params", "answer", "concl"}
MAX_BINDING_KINDS = 2


_RULE_PICKLED = "_rule_pickled"


@dataclass
class CompiledRule:
    rule: Rule
    rulebook: str
    file: str
    line: int
    order: int
    severity: Severity  # after overlays
    params: dict[str, Any]  # effective values
    expr: E.Expr  # params folded
    iter_kinds: tuple[str, ...]  # kinds this rule binds one item of (its subject)
    join_gpu: bool  # bind the GPU of an event/process/link through its PCI bus id
    used_kinds: frozenset[str]  # every collected kind it reads, aggregates included
    concl_deps: frozenset[str]
    evidence: tuple[E.Ref, ...]
    confirms: dict[int, E.Expr]  # runbook step index -> condition that confirms the cause
    group_by: tuple[E.Ref, ...] = ()
    stratum: int = 0
    overridden_by: list[str] = field(default_factory=list)
    reads: tuple[str, ...] = ()  # every kind.field it reads (see _reads), sorted

    # copied from the rule for speed (read for every rule in every evaluation), and so
    # that an evaluation need not read back the rule's pickled source (see __getstate__)
    id: str = ""
    group: str | None = None
    concludes: str | None = None
    tags: tuple[str, ...] = ()
    # kind bound -> fields of its item the verdict or the folding depends on
    bound_fields: dict[str, frozenset[str]] = field(default_factory=dict)
    # the condition's fact references and aggregates, walked once (read per finding)
    expr_refs: tuple[E.Ref, ...] = ()
    expr_aggregates: tuple[E.Aggregate, ...] = ()

    def __post_init__(self) -> None:
        self.id, self.group, self.concludes = self.rule.id, self.rule.group, self.rule.concludes
        self.tags = tuple(self.rule.tags)
        self.expr_refs = tuple(E.refs(self.expr))
        self.expr_aggregates = tuple(E.aggregates(self.expr))
        bound: dict[str, set[str]] = {k: set() for k in self.iter_kinds}
        for r in [*self.expr_refs, *self.group_by]:
            if r.kind in bound:
                bound[r.kind].add(r.name)
        if "gpu" in bound:
            bound["gpu"].add("pci_bus_id")  # conclusions are per GPU
        self.bound_fields = {k: frozenset(v) for k, v in bound.items()}

    # The rule's source (its texts, runbook, references and tests: most of the cached
    # rulebook) is pickled apart and read back the first time it is used: a process that
    # loads the rulebook from its cache reads only the sources of the rules it reports
    # on (a third of the cache's load time instead of all of it).
    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        if "rule" in state:  # else it is still pickled, and stays so
            state[_RULE_PICKLED] = pickle.dumps(state.pop("rule"), pickle.HIGHEST_PROTOCOL)
        return state

    def __getattr__(self, name: str) -> Any:
        # Called only for an attribute not set: ``rule`` of an instance read from a pickle.
        # Safe from several threads: each assignment is atomic, the first source read
        # back is kept, and one that finds it gone finds ``rule`` set.
        if name == "rule":
            got = self.__dict__
            pickled = got.get(_RULE_PICKLED)
            if pickled is not None:
                got.setdefault("rule", pickle.loads(pickled))  # noqa: S301 - our own cache
                got.pop(_RULE_PICKLED, None)
            if "rule" in got:
                return got["rule"]
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")


@dataclass
class Rulebook:
    rules: list[CompiledRule]
    questions: dict[str, Question]
    conclusions: dict[str, list[str]]  # name -> rule ids concluding it
    disabled: dict[str, str]  # rule id -> reason
    sources: list[str]
    warnings: list[Diagnostic] = field(default_factory=list)
    xid_codes: dict[int, XidCode] = field(default_factory=dict)
    sxid_codes: dict[int, SxidCode] = field(default_factory=dict)
    xid_site: dict[int, tuple[XidOverride, str]] = field(default_factory=dict)  # + overlay name
    catalog_name: str = ""
    # bucket name (and each alias in its key) -> meaning, from the catalogues' buckets:
    xid_buckets: dict[str, str] = field(default_factory=dict)
    # (register, bit) -> (class, meaning) for Xid 74; Xid -> decode rows for 144-150
    xid74_bits: dict[tuple[int, int], tuple[str, str]] = field(default_factory=dict)
    nvlink5_rules: dict[int, list[Nvlink5Rule]] = field(default_factory=dict)
    # what a backend compiles from this rulebook (the durable_rules ruleset), cached with it
    derived: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @functools.cached_property
    def overlays(self) -> list[str]:
        """The site overlays that changed this rulebook (params, severity, disabled), in
        the order first seen."""
        names = [n for r in self.rules for n in r.overridden_by]
        names += [m.group(1) for m in map(_OVERLAY_OF.search, self.disabled.values()) if m]
        return list(dict.fromkeys(names))

    @functools.cached_property
    def kind_fields(self) -> dict[str, tuple[str, ...]]:
        """Per kind, every item field any rule reads (conditions and aggregates): items
        equal in these are grouped once per evaluation."""
        out: dict[str, set[str]] = {}
        for r in self.rules:
            for ref in E.refs(r.expr, include_local=True):
                if ref.kind in kinds():
                    out.setdefault(ref.kind, set()).add(ref.name)
            for agg in E.aggregates(r.expr):
                names = out.setdefault(agg.kind, set())
                if agg.field:
                    names.add(agg.field)
        return {k: tuple(sorted(v)) for k, v in out.items()}

    @functools.cached_property
    def fingerprint(self) -> str:
        """A hash of the compiled rules: two equal rulebooks evaluate identically
        (computed once per rulebook object)."""
        h = hashlib.sha256()
        for r in self.rules:
            h.update(
                json.dumps(
                    [
                        r.id,
                        r.rule.version,
                        r.severity.value,
                        E.render(r.expr),
                        r.iter_kinds,
                        r.stratum,
                    ],
                    default=str,
                ).encode()
            )
        site = sorted((c, o.model_dump_json(), n) for c, (o, n) in self.xid_site.items())
        h.update(json.dumps([self.catalog_name, sorted(self.xid_codes), site]).encode())
        return h.hexdigest()[:16]

    def by_id(self, rule_id: str) -> CompiledRule | None:
        return next((r for r in self.rules if r.id == rule_id), None)

    @functools.cached_property
    def read_paths(self) -> frozenset[str]:
        """Every ``kind.field`` some rule reads (``CompiledRule.reads``) or fills into a
        runbook command: what an evaluation's findings can show."""
        paths = {p for r in self.rules for p in r.reads}
        for r in self.rules:
            for step in r.rule.runbook:
                if step.command:
                    paths.update(placeholders(step.command))
        return frozenset(paths)

    def readers(self) -> dict[str, list[str]]:
        """``kind.field`` -> the ids of the rules that read it, in rulebook order."""
        out: dict[str, list[str]] = {}
        for r in self.rules:
            for path in r.reads:
                out.setdefault(path, []).append(r.id)
        return out

    @property
    def strata(self) -> list[list[CompiledRule]]:
        top = max((r.stratum for r in self.rules), default=-1)
        return [[r for r in self.rules if r.stratum == s] for s in range(top + 1)]


class CompileError(Exception):
    def __init__(self, message: str, col: int = 1) -> None:
        self.message, self.col = message, col
        super().__init__(message)


def load_rulebook(
    paths: list[Path] | None = None, *, include_builtin: bool = True, allow_untrusted: bool = False
) -> Rulebook:
    """Load and compile; raises RulebookError with every problem located.

    The compiled rulebook is cached (engine.rulebook_cache), keyed by the text of every
    rule file: reading the files is cheap, parsing and compiling them is not."""
    sources, problems = read_sources(
        paths or [], include_builtin=include_builtin, allow_untrusted=allow_untrusted
    )
    key = rulebook_cache.key_of(sources) if not problems else None
    if key is not None:
        hit = rulebook_cache.get(key)
        if isinstance(hit, Rulebook):
            return hit
    raw = parse_sources(sources, problems)
    book, diags = compile_rulebook(raw)
    errors = raw.diagnostics + [d for d in diags if d.level == "error"]
    if errors:
        raise RulebookError(sorted(errors))
    if key is not None:
        rulebook_cache.put(key, book)
    return book


def compile_rulebook(raw: RawRulebook) -> tuple[Rulebook, list[Diagnostic]]:
    """Compile every loaded rule (overlays applied); problems come back as diagnostics."""
    diags: list[Diagnostic] = []
    loaded, seen = _unique_rules(raw.rules, diags)
    over = _Overlays()
    for lo in raw.overlays:  # in load order: later ones win
        over.apply(lo, seen, diags)
    questions = _questions(loaded, diags)
    conclusions = _conclusions(loaded, over.disabled)
    compiled = _compile_all(loaded, over, questions, conclusions, diags)
    _stratify(compiled, conclusions, diags)
    compiled.sort(key=lambda r: r.order)
    cat = _catalogues(raw)
    book = Rulebook(
        compiled,
        questions,
        conclusions,
        over.disabled,
        raw.sources,
        [d for d in diags if d.level != "error"],
        cat.xid_codes,
        cat.sxid_codes,
        over.xid_site,
        cat.name,
        cat.buckets,
        cat.xid74_bits,
        cat.nvlink5_rules,
    )
    return book, diags


def _unique_rules(
    rules: list[LoadedRule], diags: list[Diagnostic]
) -> tuple[list[LoadedRule], dict[str, LoadedRule]]:
    """The rules in load order, each id once (a duplicate is reported and dropped)."""
    seen: dict[str, LoadedRule] = {}
    loaded: list[LoadedRule] = []
    for lr in rules:
        if lr.rule.id in seen:
            first = seen[lr.rule.id]
            line, col = lr.loc.where(("id",))
            diags.append(
                Diagnostic(
                    lr.loc.file,
                    line,
                    col,
                    f"duplicate rule id '{lr.rule.id}' "
                    f"(first defined at {first.loc.file}:{first.loc.line})",
                )
            )
            continue
        seen[lr.rule.id] = lr
        loaded.append(lr)
    return loaded, seen


@dataclass
class _Overlays:
    """What the overlays change: parameters, severities, disabled rules, site Xid policy."""

    params: dict[str, dict[str, Any]] = field(default_factory=dict)
    severity: dict[str, Severity] = field(default_factory=dict)
    disabled: dict[str, str] = field(default_factory=dict)  # rule id -> reason
    names: dict[str, list[str]] = field(default_factory=dict)  # rule id -> overlays changing it
    xid_site: dict[int, tuple[XidOverride, str]] = field(default_factory=dict)

    def apply(
        self, lo: LoadedOverlay, seen: dict[str, LoadedRule], diags: list[Diagnostic]
    ) -> None:
        self._params(lo, seen, diags)
        self._severities(lo, seen, diags)
        for code, override in lo.overlay.xid.items():
            self.xid_site[code] = (override, lo.overlay.overlay)
        self._disable(lo, seen, diags)

    def _params(
        self, lo: LoadedOverlay, seen: dict[str, LoadedRule], diags: list[Diagnostic]
    ) -> None:
        ov = lo.overlay
        for key, value in ov.params.items():
            rid, _, pname = key.rpartition(".")
            target = seen.get(rid)
            line, col = lo.loc.where(("params", key))
            if target is None or pname not in target.rule.params:
                diags.append(
                    Diagnostic(
                        lo.loc.file,
                        line,
                        col,
                        f"overlay '{ov.overlay}': unknown rule parameter '{key}'",
                    )
                )
                continue
            try:
                check_param_bounds(target.rule.params[pname], value)
            except ValueError as exc:
                diags.append(
                    Diagnostic(lo.loc.file, line, col, f"overlay '{ov.overlay}': {key}: {exc}")
                )
                continue
            self.params.setdefault(rid, {})[pname] = value
            self.names.setdefault(rid, []).append(ov.overlay)

    def _severities(
        self, lo: LoadedOverlay, seen: dict[str, LoadedRule], diags: list[Diagnostic]
    ) -> None:
        ov = lo.overlay
        for rid, sev in ov.severity.items():
            if rid not in seen:
                line, col = lo.loc.where(("severity", rid))
                diags.append(
                    Diagnostic(
                        lo.loc.file, line, col, f"overlay '{ov.overlay}': unknown rule '{rid}'"
                    )
                )
                continue
            self.severity[rid] = sev
            self.names.setdefault(rid, []).append(ov.overlay)

    def _disable(
        self, lo: LoadedOverlay, seen: dict[str, LoadedRule], diags: list[Diagnostic]
    ) -> None:
        ov = lo.overlay
        for i, d in enumerate(ov.disable):
            if d.rule not in seen:
                line, col = lo.loc.where(("disable", i))
                diags.append(
                    Diagnostic(
                        lo.loc.file, line, col, f"overlay '{ov.overlay}': unknown rule '{d.rule}'"
                    )
                )
                continue
            self.disabled[d.rule] = f"{d.reason} (overlay '{ov.overlay}')"


def _questions(loaded: list[LoadedRule], diags: list[Diagnostic]) -> dict[str, Question]:
    """Every question by id; one declared differently in two rules is reported."""
    questions: dict[str, Question] = {}
    for lr in loaded:
        for q in lr.rule.questions:
            if q.id in questions and questions[q.id] != q:
                line, col = lr.loc.where(("questions",))
                diags.append(
                    Diagnostic(
                        lr.loc.file,
                        line,
                        col,
                        f"question '{q.id}' is declared differently elsewhere",
                    )
                )
            questions.setdefault(q.id, q)
    return questions


def _conclusions(loaded: list[LoadedRule], disabled: dict[str, str]) -> dict[str, list[str]]:
    """Conclusion name -> the enabled rules concluding it."""
    conclusions: dict[str, list[str]] = {}
    for lr in loaded:
        if lr.rule.concludes and lr.rule.enabled and lr.rule.id not in disabled:
            conclusions.setdefault(lr.rule.concludes, []).append(lr.rule.id)
    return conclusions


def _compile_all(
    loaded: list[LoadedRule],
    over: _Overlays,
    questions: dict[str, Question],
    conclusions: dict[str, list[str]],
    diags: list[Diagnostic],
) -> list[CompiledRule]:
    """Every enabled rule compiled with its effective parameters and severity."""
    compiled: list[CompiledRule] = []
    for lr in loaded:
        if not lr.rule.enabled:
            over.disabled.setdefault(lr.rule.id, "disabled in its rule file")
        if lr.rule.id in over.disabled:
            continue
        params = {k: p.default for k, p in lr.rule.params.items()}
        params.update(over.params.get(lr.rule.id, {}))
        try:
            cr = compile_rule(lr, params, questions, set(conclusions))
        except CompileError as exc:
            diags.append(_expr_diag(lr, ("when",), exc.message, exc.col))
            continue
        except _FieldCompileError as exc:
            diags.append(_expr_diag(lr, exc.loc, exc.message, exc.col))
            continue
        cr.severity = over.severity.get(lr.rule.id, lr.rule.severity)
        cr.overridden_by = over.names.get(lr.rule.id, [])
        compiled.append(cr)
    return compiled


@dataclass
class _Catalogues:
    xid_codes: dict[int, XidCode] = field(default_factory=dict)
    sxid_codes: dict[int, SxidCode] = field(default_factory=dict)
    name: str = ""
    buckets: dict[str, str] = field(default_factory=dict)
    xid74_bits: dict[tuple[int, int], tuple[str, str]] = field(default_factory=dict)
    nvlink5_rules: dict[int, list[Nvlink5Rule]] = field(default_factory=dict)


def _catalogues(raw: RawRulebook) -> _Catalogues:
    """The Xid and SXid codes, bucket meanings and decode tables; later catalogues extend
    or replace codes of earlier ones, a catalogue with decode rows replaces earlier rows."""
    out = _Catalogues()
    names = []
    for lc in raw.catalogs:
        cat = lc.catalog
        if cat.codes or cat.sxids:
            names.append(cat.xid_catalog)
        out.xid_codes.update({c.code: c for c in cat.codes})
        out.sxid_codes.update({c.code: c for c in cat.sxids})
        out.buckets.update(bucket_aliases(cat.buckets))
        for b in cat.xid74_bits:
            out.xid74_bits.update({(b.reg, bit): (b.bit_class, b.meaning) for bit in b.bits})
        if cat.nvlink5_rules:
            out.nvlink5_rules = {}
            for row in cat.nvlink5_rules:
                out.nvlink5_rules.setdefault(row.xid, []).append(row)
    out.name = " + ".join(names)
    return out


def bucket_aliases(buckets: dict[str, str]) -> dict[str, str]:
    """Bucket meanings under every name a finding may print: the catalogue's keys carry
    notes and pairs ("WORKFLOW_NVLINK_ERR (Xid 74)", "IGNORE (sympathetic) /
    SYMPATHETIC_REPORT_SOLO")."""
    out: dict[str, str] = {}
    for key, meaning in buckets.items():
        out[key] = meaning
        for part in key.split(" / "):
            out.setdefault(part.strip(), meaning)
            out.setdefault(part.split(" (")[0].strip(), meaning)
    return out


class _FieldCompileError(Exception):
    def __init__(self, loc: tuple[Any, ...], message: str, col: int = 1) -> None:
        self.loc, self.message, self.col = loc, message, col


def _expr_diag(lr: LoadedRule, loc: tuple[Any, ...], message: str, col: int) -> Diagnostic:
    line, base_col = lr.loc.where(loc)
    value: Any = lr.rule
    for part in loc:  # the expression text, to tell a plain scalar from a block
        value = value[part] if isinstance(value, list | dict) else getattr(value, str(part), "")
    text = value if isinstance(value, str) else ""
    if "\n" in text.strip() or base_col == 1:
        # A block scalar: map the column to the line it falls on.
        stripped = text.lstrip("\n")
        offset = col - 1
        for i, part in enumerate(stripped.split("\n")):
            if offset <= len(part):
                return Diagnostic(
                    lr.loc.file, line + i + (1 if base_col else 0), offset + 1, message
                )
            offset -= len(part) + 1
    return Diagnostic(lr.loc.file, line, base_col + col - 1, message)


# --------------------------------------------------------------------------- one rule

_TEMPLATE_FIELD = re.compile(r"^[a-z_]+\.[a-z0-9_]+$")


def compile_rule(
    lr: LoadedRule, params: dict[str, Any], questions: dict[str, Question], conclusions: set[str]
) -> CompiledRule:
    rule = lr.rule
    checker = _Checker(params, questions, conclusions)
    tree = _condition(rule.when, checker)
    iter_kinds, join_gpu = _subject(tree)
    evidence = _evidence(rule, checker, iter_kinds)
    group_by = _group_by(rule, checker)
    _check_texts(rule, checker)
    confirms = _confirms(rule, checker)
    _check_questions_used(rule, tree, confirms)
    _check_tests(rule, params)
    return CompiledRule(
        rule=rule,
        rulebook=lr.rulebook,
        file=lr.loc.file,
        line=lr.loc.line,
        order=lr.order,
        severity=rule.severity,
        params=params,
        expr=tree,
        iter_kinds=iter_kinds,
        join_gpu=join_gpu,
        used_kinds=_used_kinds(tree),
        concl_deps=frozenset(r.name for r in E.refs(tree) if r.kind == "concl"),
        evidence=evidence,
        confirms=confirms,
        group_by=group_by,
        reads=_reads(rule, tree, confirms, evidence, group_by),
    )


def _condition(when: str, checker: _Checker) -> E.Expr:
    """``when`` parsed, params folded, type-checked: it must be true or false."""
    try:
        tree = E.parse_expr(when)
    except E.ExprError as exc:
        raise CompileError(exc.message, exc.col) from None
    tree = checker.fold(tree)
    typ = checker.type_of(tree, None)
    if typ != "boolean":
        raise CompileError(f"a condition must be true or false, this is a {typ}", 1)
    return tree


def _subject(tree: E.Expr) -> tuple[tuple[str, ...], bool]:
    """The kinds the rule binds one item of, and whether a GPU is joined to its event."""
    outer = [r for r in E.refs(tree) if r.kind not in SPECIAL_KINDS]
    iter_kinds = sorted({r.kind for r in outer if not kinds()[r.kind].singleton}, key=_kind_order)
    join_gpu = False
    if "gpu" in iter_kinds and len(iter_kinds) > 1:
        others = [k for k in iter_kinds if k != "gpu"]
        if len(others) == 1 and kinds()[others[0]].gpu_key:
            join_gpu = True  # "the GPU of this event", not every GPU
    if len(iter_kinds) > MAX_BINDING_KINDS:
        raise CompileError(
            f"a rule may bind at most {MAX_BINDING_KINDS} kinds of item at once, "
            f"this one binds {', '.join(iter_kinds)}",
            1,
        )
    return tuple(iter_kinds), join_gpu


def _used_kinds(tree: E.Expr) -> frozenset[str]:
    """Every collected kind the condition reads, aggregates included."""
    used = {r.kind for r in E.refs(tree, include_local=True) if r.kind not in SPECIAL_KINDS}
    used |= {a.kind for a in E.aggregates(tree)}
    return frozenset(used)


def _fact_path(checker: _Checker, loc: tuple[Any, ...], path: str) -> E.Ref:
    kind, _, name = path.partition(".")
    if not _TEMPLATE_FIELD.match(path) or checker.field_type(kind, name) is None:
        raise _FieldCompileError(loc, f"unknown fact '{path}'")
    return E.Ref(kind, name)


def _evidence(rule: Rule, checker: _Checker, iter_kinds: tuple[str, ...]) -> tuple[E.Ref, ...]:
    evidence: list[E.Ref] = []
    for i, path in enumerate(rule.evidence):
        ref = _fact_path(checker, ("evidence", i), path)
        kind = ref.kind
        if kind not in SPECIAL_KINDS and not kinds()[kind].singleton and kind not in iter_kinds:
            raise _FieldCompileError(
                ("evidence", i), f"evidence '{path}' names a {kind} the rule does not bind"
            )
        evidence.append(ref)
    return tuple(evidence)


def _group_by(rule: Rule, checker: _Checker) -> tuple[E.Ref, ...]:
    return tuple(_fact_path(checker, ("group_by", i), p) for i, p in enumerate(rule.group_by))


def _check_texts(rule: Rule, checker: _Checker) -> None:
    """Every ``{kind.field}`` in the texts names a fact."""
    for key, fname in _text_fields(rule):
        kind, _, name = fname.partition(".")
        if checker.field_type(kind, name) is None:
            raise _FieldCompileError((key,), f"unknown fact '{{{fname}}}' in the text")


def _text_fields(rule: Rule) -> list[tuple[str, str]]:
    return [
        (key, fname)
        for key in ("symptom", "cause", "fix", "title")
        for fname in _template_fields(getattr(rule, key))
    ]


def _confirms(rule: Rule, checker: _Checker) -> dict[int, E.Expr]:
    """Runbook step index -> its ``confirms_when``, compiled like ``when``."""
    confirms: dict[int, E.Expr] = {}
    for i, step in enumerate(rule.runbook):
        if not step.confirms_when:
            continue
        try:
            c = checker.fold(E.parse_expr(step.confirms_when))
            if checker.type_of(c, None) != "boolean":
                raise E.ExprError("confirms_when must be true or false")
        except (E.ExprError, CompileError) as exc:
            raise _FieldCompileError(
                ("runbook", i, "confirms_when"), exc.message, exc.col
            ) from None
        confirms[i] = c
    return confirms


def _answers_read(tree: E.Expr, confirms: dict[int, E.Expr]) -> set[str]:
    return {r.name for e in (tree, *confirms.values()) for r in E.refs(e) if r.kind == "answer"}


def _check_questions_used(rule: Rule, tree: E.Expr, confirms: dict[int, E.Expr]) -> None:
    """A declared question must be read by the condition or a step's confirms_when (as a
    reference: ``answer.gpu_ok`` does not use a question ``gpu``)."""
    read = _answers_read(tree, confirms)
    for i, q in enumerate(rule.questions):
        if q.id not in read:
            raise _FieldCompileError(
                ("questions", i), f"question '{q.id}' is declared but answer.{q.id} is unused"
            )


def _check_tests(rule: Rule, params: dict[str, Any]) -> None:
    for i, t in enumerate(rule.tests):
        unknown = [k for k in t.params if k not in params]
        if unknown:
            raise _FieldCompileError(("tests", i, "params"), f"unknown param '{unknown[0]}'")
        bad = [k for k in t.unavailable if k not in kinds()]
        if bad:
            raise _FieldCompileError(("tests", i, "unavailable"), f"unknown fact kind '{bad[0]}'")


def _reads(
    rule: Rule,
    tree: E.Expr,
    confirms: dict[int, E.Expr],
    evidence: tuple[E.Ref, ...],
    group_by: tuple[E.Ref, ...],
) -> tuple[str, ...]:
    """Every ``kind.field`` the rule reads: its condition (fields named inside aggregates,
    like ``width_max`` in ``count(pcie, width < width_max)``, and an aggregate's own field
    included), its steps' confirms_when, evidence, group_by and texts. Sorted."""
    paths: set[str] = set()
    for e in (tree, *confirms.values()):
        paths |= {r.path for r in E.refs(e, include_local=True) if r.kind != "params"}
        paths |= {f"{a.kind}.{a.field}" for a in E.aggregates(e) if a.field is not None}
    paths |= {r.path for r in (*evidence, *group_by)}
    paths |= {fname for _, fname in _text_fields(rule)}
    return tuple(sorted(paths))


def _template_fields(text: str) -> list[str]:
    try:
        return [f for _, f, _, _ in string.Formatter().parse(text) if f]
    except ValueError:
        return []


def _kind_order(kind: str) -> int:
    return list(kinds()).index(kind)


class _Checker:
    """Folds params into constants and type-checks against the fact catalogue."""

    def __init__(
        self, params: dict[str, Any], questions: dict[str, Question], conclusions: set[str]
    ) -> None:
        self.params, self.questions, self.conclusions = params, questions, conclusions

    def fold(self, e: E.Expr) -> E.Expr:
        match e:
            case E.Ref(kind="params", name=name):
                if name not in self.params:
                    known = ", ".join(sorted(self.params)) or "none declared"
                    raise CompileError(f"unknown param 'params.{name}' (known: {known})", e.col)
                return E.Const(self.params[name], col=e.col)
            case E.Not(operand=o):
                return E.Not(self.fold(o), col=e.col)
            case E.Neg(operand=o):
                return E.Neg(self.fold(o), col=e.col)
            case E.BoolOp(op=op, operands=ops):
                return E.BoolOp(op, tuple(self.fold(o) for o in ops), col=e.col)
            case E.Compare(op=op, left=a, right=b):
                return E.Compare(op, self.fold(a), self.fold(b), col=e.col)
            case E.Arith(op=op, left=a, right=b):
                return E.Arith(op, self.fold(a), self.fold(b), col=e.col)
            case E.Aggregate(where=w) if w is not None:
                return E.Aggregate(e.func, e.kind, e.field, self.fold(w), col=e.col)
        return e

    def field_type(self, kind: str, name: str) -> str | None:
        if kind == "answer":
            q = self.questions.get(name)
            if q is None:
                return None
            return {
                QuestionType.YES_NO: "boolean",
                QuestionType.NUMBER: "number",
                QuestionType.CHOICE: "string",
            }[q.type]
        if kind == "concl":
            return "boolean" if name in self.conclusions else None
        k = kinds().get(kind)
        if k is None or name not in k.fields:
            return None
        return k.fields[name].type

    def _ref_type(self, r: E.Ref) -> str:
        if r.kind == "answer" and r.name not in self.questions:
            raise CompileError(
                f"unknown question 'answer.{r.name}' (declare it in questions:)", r.col
            )
        if r.kind == "concl" and r.name not in self.conclusions:
            raise CompileError(f"no rule concludes 'concl.{r.name}'", r.col)
        if r.kind not in kinds() and r.kind not in SPECIAL_KINDS:
            raise CompileError(
                f"unknown fact kind '{r.kind}' (known: {', '.join(kinds())}, answer, concl, "
                "params)",
                r.col,
            )
        t = self.field_type(r.kind, r.name)
        if t is None:
            suggestion = _suggest(r.name, list(kinds()[r.kind].fields)) if r.kind in kinds() else ""
            raise CompileError(f"unknown fact '{r.kind}.{r.name}'{suggestion}", r.col)
        if t == "list":
            raise CompileError(f"'{r.path}' is a list; rules compare single values", r.col)
        return t

    def type_of(self, e: E.Expr, agg: str | None) -> str:
        match e:
            case E.Const(value=v):
                return _const_type(v)
            case E.ListLit():
                return "list"
            case E.Ref():
                return self._ref_type(e)
            case E.Not(operand=o):
                self._expect(o, agg, "boolean", "not")
                return "boolean"
            case E.Neg(operand=o):
                self._expect(o, agg, "number", "-")
                return "number"
            case E.BoolOp(op=op, operands=ops):
                for o in ops:
                    self._expect(o, agg, "boolean", op)
                return "boolean"
            case E.Arith(op=op, left=a, right=b):
                self._expect(a, agg, "number", op)
                self._expect(b, agg, "number", op)
                return "number"
            case E.Availability(ref=r):
                self._ref_type(r)
                return "boolean"
            case E.Compare():
                self._compare(e, agg)
                return "boolean"
            case E.Aggregate():
                return self._aggregate(e)
        raise CompileError("unsupported expression", getattr(e, "col", 1))

    def _expect(self, e: E.Expr, agg: str | None, want: str, op: str) -> None:
        got = self.type_of(e, agg)
        if not _compatible(got, want):
            raise CompileError(f"'{op}' needs a {want}, got {got} ({E.render(e)})", e.col)

    def _compare(self, e: E.Compare, agg: str | None) -> None:
        lt, rt = self.type_of(e.left, agg), self.type_of(e.right, agg)
        if e.op in ("in", "not in"):
            assert isinstance(e.right, E.ListLit)
            for item in e.right.items:
                if not _compatible(_const_type(item.value), lt):
                    raise CompileError(
                        f"'{E.render(item)}' is not a {lt} like {E.render(e.left)}", item.col
                    )
                self._check_choice(e.left, item)
            return
        if e.op in ("<", "<=", ">", ">=") and not (
            _compatible(lt, "number") and _compatible(rt, "number")
        ):
            raise CompileError(f"'{e.op}' compares numbers, got {lt} and {rt}", e.col)
        if not (_compatible(lt, rt) or _compatible(rt, lt)):
            raise CompileError(f"cannot compare a {lt} with a {rt} ({E.render(e)})", e.col)
        if isinstance(e.right, E.Const):
            self._check_choice(e.left, e.right)
        if isinstance(e.left, E.Const) and isinstance(e.right, E.Const):
            raise CompileError("comparison of two constants", e.col)

    def _check_choice(self, left: E.Expr, value: E.Const) -> None:
        if not isinstance(left, E.Ref):
            return
        choices: tuple[str, ...] | list[str] = ()
        if left.kind == "answer" and left.name in self.questions:
            choices = self.questions[left.name].choices
        elif left.kind in kinds() and left.name in kinds()[left.kind].fields:
            choices = kinds()[left.kind].fields[left.name].choices
        if choices and value.value not in choices:
            raise CompileError(f"'{value.value}' is not one of {', '.join(choices)}", value.col)

    def _aggregate(self, e: E.Aggregate) -> str:
        k = kinds().get(e.kind)
        if k is None:
            raise CompileError(f"unknown fact kind '{e.kind}'", e.col)
        if k.singleton:
            raise CompileError(f"{e.func}() counts items; '{e.kind}' is one per node", e.col)
        if e.where is not None:
            self._expect(e.where, e.kind, "boolean", e.func)
        if e.field is not None:
            ft = self.field_type(e.kind, e.field)
            if ft is None:
                raise CompileError(f"unknown fact '{e.kind}.{e.field}'", e.col)
            if e.func in ("max", "min", "sum") and not _compatible(ft, "number"):
                raise CompileError(f"{e.func}() needs a numeric field, '{e.field}' is {ft}", e.col)
        return {"count": "integer", "distinct": "integer", "exists": "boolean"}.get(
            e.func, "number"
        )


def _const_type(v: object) -> str:
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return "integer"
    if isinstance(v, float):
        return "number"
    return "string"


def _compatible(got: str, want: str) -> bool:
    if got == want:
        return True
    return {got, want} <= {"integer", "number"}


def _suggest(name: str, known: list[str]) -> str:
    import difflib

    close = difflib.get_close_matches(name, known, n=1)
    return f" (did you mean '{close[0]}'?)" if close else ""


def _stratify(
    rules: list[CompiledRule], conclusions: dict[str, list[str]], diags: list[Diagnostic]
) -> None:
    by_id = {r.id: r for r in rules}
    deps = {
        r.id: {p for c in r.concl_deps for p in conclusions.get(c, []) if p in by_id} for r in rules
    }
    level: dict[str, int] = {}
    visiting: set[str] = set()

    def depth(rid: str, chain: list[str]) -> int:
        if rid in level:
            return level[rid]
        if rid in visiting:
            cycle = " -> ".join([*chain[chain.index(rid) :], rid])
            raise CompileError(f"conclusions form a cycle: {cycle}")
        visiting.add(rid)
        d = 1 + max((depth(p, [*chain, rid]) for p in deps[rid]), default=-1)
        visiting.discard(rid)
        level[rid] = d
        return d

    for r in list(rules):
        try:
            r.stratum = depth(r.id, [])
        except CompileError as exc:
            diags.append(Diagnostic(r.file, r.line, 1, exc.message))
            rules.remove(r)
            level.clear()
            visiting.clear()
            return _stratify(rules, conclusions, diags)
    return None
