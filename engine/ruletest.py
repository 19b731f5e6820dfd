"""Run every rule's embedded test cases, on one or several backends."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from pydantic import ValidationError

from gpu_triage.engine.backend import Backend
from gpu_triage.engine.compiler import CompiledRule, Rulebook, compile_rule
from gpu_triage.engine.durable_backend import DurableBackend
from gpu_triage.engine.enrich import enrich
from gpu_triage.engine.evaluate import Decision, decide, make_finding
from gpu_triage.engine.expr import Ref
from gpu_triage.engine.findings import Finding, Status
from gpu_triage.engine.inputs import EvalInput, bindings
from gpu_triage.engine.loader import LoadedRule
from gpu_triage.engine.model import RuleTest
from gpu_triage.engine.reference import Conclusions, Evaluator
from gpu_triage.io.yamlio import Located
from gpu_triage.model.facts import Facts, Unavailable, UnavailableReason


@dataclass
class CaseResult:
    rule_id: str
    name: str
    file: str
    problems: list[str] = field(default_factory=list)
    findings: dict[str, list[Finding]] = field(default_factory=dict)  # backend -> findings

    @property
    def passed(self) -> bool:
        return not self.problems


def test_input(case: RuleTest) -> EvalInput:
    facts = Facts.model_validate(case.facts)
    unavailable = {
        k: Unavailable(
            reason=UnavailableReason.COLLECTOR_FAILED, detail="collector failed (rule test)"
        )
        for k in case.unavailable
    }
    return EvalInput(facts, unavailable, hostname="test-node")


def rule_decisions(
    inp: EvalInput,
    book: Rulebook,
    rule: CompiledRule,
    backend: Backend,
    given: dict[str, bool] | None = None,
    target_backend: Backend | None = None,
) -> tuple[list[Decision], Conclusions]:
    """Evaluate one rule; conclusions it reads come from ``given`` or from the rulebook.
    ``target_backend`` decides the rule itself when it differs from the book's (a test
    that overrides params compiles its own copy)."""
    if given:
        concl = Conclusions()
        for name in book.conclusions:
            concl.declare(name)
        for name, value in given.items():
            concl.record(name, None, value)
    else:
        needed = _concluders(book, rule)
        sub = Rulebook(
            [r for r in book.rules if r.id in needed], book.questions, book.conclusions, {}, []
        )
        _, concl = decide(inp, sub, backend)
    binds = {rule.id: bindings(inp, rule.iter_kinds, rule.join_gpu)}
    verdicts = (target_backend or backend).run_stratum(inp, [rule], binds, concl)
    decisions = []
    for i, b in enumerate(binds[rule.id]):
        v = verdicts.get((rule.id, i), False)
        if v is not False:
            decisions.append(Decision(rule, b, i, Status.FIRED if v else Status.CANNOT_EVALUATE))
    if rule.rule.concludes:
        for i, b in enumerate(binds[rule.id]):
            gpu = b.get("gpu")
            concl.record(
                rule.rule.concludes,
                gpu.__dict__.get("pci_bus_id") if gpu is not None else None,
                verdicts.get((rule.id, i), False),
            )
    return decisions, concl


def _concluders(book: Rulebook, rule: CompiledRule) -> set[str]:
    out: set[str] = set()
    todo = list(rule.concl_deps)
    while todo:
        name = todo.pop()
        for rid in book.conclusions.get(name, []):
            if rid not in out:
                out.add(rid)
                dep = book.by_id(rid)
                if dep is not None:
                    todo.extend(dep.concl_deps)
    return out


def run_case(
    book: Rulebook, rule: CompiledRule, case: RuleTest, backends: list[Backend]
) -> CaseResult:
    res = CaseResult(rule.id, case.name, rule.file)
    try:
        inp = enrich(test_input(case), book)
    except ValidationError as exc:
        res.problems.append(
            f"facts do not match the fact models: {exc.errors()[0]['msg']} "
            f"at {'.'.join(str(x) for x in exc.errors()[0]['loc'])}"
        )
        return res
    target = rule
    if case.params:
        params = {**rule.params, **case.params}
        target = compile_rule(
            LoadedRule(rule.rule, Located(rule.file, rule.line), rule.rulebook, rule.order),
            params,
            book.questions,
            set(book.conclusions),
        )
        target = replace(target, severity=rule.severity, stratum=rule.stratum)
    outcomes: dict[str, Any] = {}
    for backend in backends:
        own = _backend_for(backend, target, book) if target is not rule else None
        try:
            decisions, concl = rule_decisions(inp, book, target, backend, case.conclusions, own)
        except Exception as exc:  # noqa: BLE001 - a backend failure is a test failure
            res.problems.append(f"[{backend.name}] evaluation failed: {exc}")
            continue
        finally:
            if own is not None and hasattr(own, "close"):
                own.close()
        findings = [make_finding(inp, d, concl) for d in decisions]
        res.findings[backend.name] = findings
        bound = [_bound_values(inp, d, concl, case) for d in decisions]
        for p in check_expectations(case, findings, concl, target, bound):
            res.problems.append(f"[{backend.name}] {p}")
        outcomes[backend.name] = sorted((f.subject_key, f.status.value) for f in findings)
    if len(set(map(str, outcomes.values()))) > 1:
        res.problems.append(f"backends disagree: {outcomes}")
    return res


def _bound_values(
    inp: EvalInput, d: Decision, concl: Conclusions, case: RuleTest
) -> dict[str, Any]:
    """The values of the paths a test expects bound, read from the decision's binding."""
    ev = Evaluator(inp, d.binding, concl)
    out: dict[str, Any] = {}
    for path in case.expect.bound:
        kind, _, name = path.partition(".")
        try:
            out[path] = ev.ref(Ref(kind, name)).value
        except (KeyError, AttributeError):
            out[path] = "<not a fact>"
    return out


def check_expectations(
    case: RuleTest,
    findings: list[Finding],
    concl: Conclusions,
    rule: CompiledRule,
    bound: list[dict[str, Any]] | None = None,
) -> list[str]:
    exp = case.expect
    fired = [f for f in findings if f.status is Status.FIRED]
    problems: list[str] = []
    if exp.fires is not None and bool(fired) != exp.fires:
        problems.append(
            f"expected the rule {'to fire' if exp.fires else 'not to fire'}, "
            f"it {'fired' if fired else 'did not'} "
            f"({_status(findings)})"
        )
    if exp.status is not None:
        got = _status(findings)
        if got != exp.status:
            problems.append(f"expected status {exp.status}, got {got}")
    if exp.count is not None and len(fired) != exp.count:
        problems.append(f"expected {exp.count} finding(s), got {len(fired)}")
    values = bound or [{} for _ in findings]
    for path, want in exp.bound.items():
        for f, vals in zip(findings, values, strict=False):
            if f.status is not Status.FIRED:
                continue
            got = vals.get(
                path, next((e.value for e in f.evidence if e.path == path), "<not bound>")
            )
            if got != want:
                problems.append(f"expected {path} = {want!r} in {f.subject}, got {got!r}")
    if exp.concludes is not None and rule.rule.concludes:
        got_c = concl.node.get(rule.rule.concludes)
        if got_c is not exp.concludes:
            problems.append(f"expected concl.{rule.rule.concludes} = {exp.concludes}, got {got_c}")
    return problems


def _status(findings: list[Finding]) -> str:
    statuses = {f.status for f in findings}
    for s in (Status.FIRED, Status.NEEDS_CONFIRMATION, Status.CANNOT_EVALUATE):
        if s in statuses:
            return s.value
    return "not_fired"


def run_rule_tests(
    book: Rulebook, backends: list[Backend], only: set[str] | None = None
) -> list[CaseResult]:
    results = []
    for rule in book.rules:
        if only and rule.id not in only:
            continue
        for case in rule.rule.tests:
            results.append(run_case(book, rule, case, backends))
    return results


def _backend_for(backend: Backend, rule: CompiledRule, book: Rulebook) -> Backend | None:
    """A backend that knows ``rule`` as compiled for this test (its own params)."""
    if isinstance(backend, DurableBackend):
        return DurableBackend(Rulebook([rule], book.questions, book.conclusions, {}, []))
    return None
