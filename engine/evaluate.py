"""evaluate(facts, rulebook) -> findings, on the durable_rules backend or the reference one.

Both backends decide, for every rule and binding, whether the condition is
true, false or unknown; everything else (bindings, conclusions between strata,
findings, ranking, evidence) is shared here, so the two can only differ in the
decision itself, which the differential tests compare.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gpu_triage.engine import expr as E
from gpu_triage.engine.backend import Backend, BackendFailure, ReferenceBackend
from gpu_triage.engine.compiler import CompiledRule, Rulebook
from gpu_triage.engine.durable_backend import shared_backend
from gpu_triage.engine.enrich import enrich
from gpu_triage.engine.findings import (
    EngineInfo,
    EvidenceItem,
    Finding,
    FindingsDocument,
    MissingFact,
    RulebookInfo,
    RuledOut,
    Status,
    Summary,
)
from gpu_triage.engine.inputs import Binding, EvalInput, bindings, subject_key, subject_label
from gpu_triage.engine.reference import Clause, Conclusions, Evaluator, Missing, Val
from gpu_triage.engine.verdict import judge
from gpu_triage.model.catalog import kinds
from gpu_triage.model.snapshot import Snapshot


@dataclass
class Decision:
    rule: CompiledRule
    binding: Binding
    index: int
    status: Status


def decide(inp: EvalInput, book: Rulebook, backend: Backend) -> tuple[list[Decision], Conclusions]:
    concl = Conclusions()
    decisions: list[Decision] = []
    for name in book.conclusions:
        concl.declare(name)
    for stratum in book.strata:
        binds = {r.id: bindings(inp, r.iter_kinds, r.join_gpu) for r in stratum}
        verdicts = backend.run_stratum(inp, stratum, binds, concl)
        for rule in stratum:
            for i, b in enumerate(binds[rule.id]):
                verdict = verdicts.get((rule.id, i), False)
                if rule.rule.concludes:
                    gpu = b.get("gpu")
                    bus = gpu.__dict__.get("pci_bus_id") if gpu is not None else None
                    concl.record(
                        rule.rule.concludes, bus if "gpu" in rule.iter_kinds else None, verdict
                    )
                if verdict is False:
                    continue
                status = Status.FIRED
                if verdict is None:
                    status = Status.CANNOT_EVALUATE
                decisions.append(Decision(rule, b, i, status))
    return decisions, concl


def evaluate(
    inp: EvalInput | Snapshot,
    book: Rulebook,
    *,
    engine: str = "auto",
    backend_factory: Callable[[Rulebook], Backend] | None = None,
    source: str = "",
) -> FindingsDocument:
    """Evaluate facts against a rulebook. ``engine``: auto, durable or reference.

    A failure of the durable backend never loses the evaluation: the reference
    evaluator takes over and the document says so."""
    collectors = []
    if isinstance(inp, Snapshot):
        collectors = inp.collectors
        inp = EvalInput.from_snapshot(inp)
    inp = enrich(inp, book)
    start = time.perf_counter()
    fallback: str | None = None
    backend: Backend = ReferenceBackend()
    if engine in ("auto", "durable"):
        try:
            backend = (backend_factory or shared_backend)(book)
        except BackendFailure as exc:
            fallback = str(exc)
    try:
        decisions, concl = decide(inp, book, backend)
    except BackendFailure as exc:
        fallback = f"{backend.name} failed: {exc}"
        backend = ReferenceBackend()
        decisions, concl = decide(inp, book, backend)
    elapsed = (time.perf_counter() - start) * 1000
    doc = build_document(inp, book, decisions, concl)
    doc.engine = EngineInfo(
        name=backend.name,
        requested=engine,
        fallback_reason=fallback,
        duration_ms=round(elapsed, 3),
        note=getattr(backend, "note", None),
    )
    doc.collectors = list(collectors)
    doc.snapshot_source = source
    code, doc.verdict = judge(doc.summary.critical, doc.summary.warning, doc.collectors, inp.facts)
    doc.exit_status = int(code)
    return doc


# --------------------------------------------------------------------------- findings


def build_document(
    inp: EvalInput, book: Rulebook, decisions: list[Decision], concl: Conclusions
) -> FindingsDocument:
    fired: list[Finding] = []
    unknown: list[Finding] = []
    confirm: list[Finding] = []
    fired_ids: set[str] = set()
    folded: dict[tuple[str, str], Finding] = {}
    for d in decisions:
        f = make_finding(inp, d, concl)
        if f.status is Status.FIRED:
            if d.rule.group_by:
                ev = Evaluator(inp, d.binding, concl)
                key = (d.rule.id, repr([ev.ref(r).value for r in d.rule.group_by]))
                first = folded.get(key)
                if first is not None:  # same rule, same grouping values: count it
                    first.occurrences += 1
                    if f.subject not in first.also_seen_on and f.subject != first.subject:
                        first.also_seen_on.append(f.subject)
                    continue
                folded[key] = f
            fired.append(f)
            fired_ids.add(f.rule_id)
        elif f.status is Status.NEEDS_CONFIRMATION:
            confirm.append(f)
        else:
            unknown.append(f)
    for f in fired:
        if f.group:
            f.competing = competing_causes(inp, book, f, concl)
    order = {r.id: r.order for r in book.rules}

    def rank(f: Finding) -> tuple[int, int, int, str]:
        return (*f.sort_key, order[f.rule_id], f.subject_key)

    fired.sort(key=rank)
    unknown.sort(key=rank)
    confirm.sort(key=rank)
    summary = Summary(
        critical=sum(f.severity == "critical" for f in fired),
        warning=sum(f.severity == "warning" for f in fired),
        info=sum(f.severity == "info" for f in fired),
        cannot_evaluate=len(unknown),
        needs_confirmation=len(confirm),
        rules_evaluated=len(book.rules),
        rules_fired=len(fired_ids),
    )
    return FindingsDocument(
        hostname=inp.hostname,
        snapshot_taken_at=inp.taken_at,
        engine=EngineInfo(name="", requested=""),
        rulebook=RulebookInfo(
            fingerprint=book.fingerprint,
            rules=len(book.rules),
            sources=book.sources,
            disabled=book.disabled,
        ),
        summary=summary,
        findings=fired,
        cannot_evaluate=unknown,
        needs_confirmation=confirm,
        conclusions=dict(concl.node),
    )


def make_finding(inp: EvalInput, d: Decision, concl: Conclusions) -> Finding:
    rule = d.rule
    ev = Evaluator(inp, d.binding, concl)
    status = d.status
    missing: list[MissingFact] = []
    questions = []
    if status is not Status.FIRED:
        val = ev.eval(rule.expr)
        seen: set[str] = set()
        for m in val.missing:
            if m.path not in seen:
                seen.add(m.path)
                missing.append(
                    MissingFact(path=m.path, reason=m.reason.reason.value, detail=m.reason.detail)
                )
        asked = {
            m.path.removeprefix("answer.") for m in val.missing if m.path.startswith("answer.")
        }
        questions = [q for q in rule.rule.questions if q.id in asked]
        # Only a person's answer is missing: ask. Collected facts are missing too: an
        # answer alone would not settle it, so it cannot be evaluated (the questions are
        # still listed).
        if asked and all(m.path.startswith("answer.") for m in val.missing):
            status = Status.NEEDS_CONFIRMATION
    return Finding(
        rule_id=rule.id,
        rule_version=rule.rule.version,
        title=render_text(rule.rule.title, ev),
        severity=rule.severity,
        stage=rule.rule.stage,
        status=status,
        rulebook=rule.rulebook,
        rule_file=rule.file,
        subject=subject_label(d.binding, inp.hostname),
        subject_key=subject_key(d.binding),
        symptom=render_text(rule.rule.symptom, ev),
        cause=render_text(rule.rule.cause, ev),
        fix=render_text(rule.rule.fix, ev),
        evidence=evidence(rule, ev),
        missing=missing,
        questions=questions,
        runbook=list(rule.rule.runbook),
        references=list(rule.rule.references),
        group=rule.rule.group,
        concludes=rule.rule.concludes,
        overridden_by=rule.overridden_by,
    )


_TEMPLATE = re.compile(r"\{([a-z_]+)\.([a-z0-9_]+)\}")


def render_text(text: str, ev: Evaluator) -> str:
    """Fill ``{kind.field}`` placeholders with the bound values ("?" when unknown)."""

    def sub(m: re.Match[str]) -> str:
        kind, name = m.group(1), m.group(2)
        if kind not in kinds() and kind not in ("answer", "concl"):
            return m.group(0)
        if kind in kinds() and name not in kinds()[kind].fields:
            return m.group(0)
        v = ev.ref(E.Ref(kind, name))
        return _fmt(v.value) if v.known else "?"

    return _TEMPLATE.sub(sub, text.strip())


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


def evidence(rule: CompiledRule, ev: Evaluator) -> list[EvidenceItem]:
    items: list[EvidenceItem] = []
    seen: set[str] = set()
    identity = [
        E.Ref(k, f)
        for k in rule.iter_kinds
        if ev.binding.get(k) is not None
        for f in kinds()[k].identity  # which item it is: always shown with the evidence
    ]
    refs = identity + [r for r in E.refs(rule.expr) if r.kind != "params"] + list(rule.evidence)
    for r in refs:
        if r.path in seen:
            continue
        seen.add(r.path)
        v = ev.ref(r)
        items.append(_evidence_item(r.path, v, r.kind, r.name, ev))
    for agg in E.aggregates(rule.expr):
        text = E.render(agg)
        if text in seen:
            continue
        seen.add(text)
        v = ev.aggregate(agg)
        items.append(
            EvidenceItem(
                path=text,
                value=v.value,
                unit="" if agg.func != "sum" else _unit(agg.kind, agg.field),
                meaning=f"{agg.func} over {agg.kind}",
                source=", ".join(kinds()[agg.kind].collectors[:1]),
                unavailable=_why(v),
            )
        )
    return items


def _evidence_item(path: str, v: Val, kind: str, name: str, ev: Evaluator) -> EvidenceItem:
    unit = meaning = source = ""
    if kind in kinds():
        fi = kinds()[kind].fields.get(name)
        if fi:
            unit, meaning = fi.unit, fi.meaning
        item = ev.binding.get(kind) if not kinds()[kind].singleton else ev.inp.singleton(kind)
        source = (item.source if item is not None else "") or kinds()[kind].collectors[0]
    elif kind == "answer":
        source = "answer"
    elif kind == "concl":
        source = "conclusion"
    return EvidenceItem(
        path=path, value=v.value, unit=unit, meaning=meaning, source=source, unavailable=_why(v)
    )


def _why(v: Val) -> str | None:
    if v.known or not v.missing:
        return None
    return str(v.missing[0].reason)


def _unit(kind: str, name: str | None) -> str:
    fi = kinds()[kind].fields.get(name or "")
    return fi.unit if fi else ""


def competing_causes(
    inp: EvalInput, book: Rulebook, f: Finding, concl: Conclusions
) -> list[RuledOut]:
    """For a fired finding, every other rule of its differential group and why it lost."""
    out: list[RuledOut] = []
    for other in book.rules:
        if other.id == f.rule_id or other.rule.group != f.group:
            continue
        binds = bindings(inp, other.iter_kinds, other.join_gpu)
        related = [b for b in binds if _same_gpu(b, f.subject_key)] or binds
        verdicts = []
        for b in related:
            trace: list[Clause] = []
            v = Evaluator(inp, b, concl, trace).evaluate(other.expr)
            verdicts.append((v, trace))
        title = render_text(other.rule.title, Evaluator(inp, related[0] if related else {}, concl))
        if any(v.value is True for v, _ in verdicts):
            out.append(RuledOut(rule_id=other.id, title=title, status="fired", reason="also holds"))
            continue
        unknown = next(((v, t) for v, t in verdicts if v.value is None), None)
        if unknown is not None:
            miss = ", ".join(str(m) for m in unknown[0].missing[:3])
            out.append(
                RuledOut(
                    rule_id=other.id,
                    title=title,
                    status="cannot_evaluate",
                    reason=miss or "unknown",
                )
            )
            continue
        reason = "no items to evaluate"
        if verdicts:
            failed = first_false_clause(verdicts[0][1])
            reason = failed or "condition false"
        out.append(RuledOut(rule_id=other.id, title=title, status="not_fired", reason=reason))
    return out


def _same_gpu(b: Binding, key: str) -> bool:
    gpu = b.get("gpu")
    bus = gpu.__dict__.get("pci_bus_id") if gpu is not None else None
    return bool(bus) and f"gpu:{bus}" in key


def first_false_clause(trace: list[Clause]) -> str | None:
    for c in trace:
        if c.result is False:
            vals = ", ".join(f"{k} = {_fmt(v)}" for k, v in c.values.items())
            return f"{c.text} is false ({vals})" if vals else f"{c.text} is false"
    return None


def missing_summary(missing: tuple[Missing, ...]) -> str:
    return "; ".join(str(m) for m in missing)
