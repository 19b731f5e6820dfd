"""Why a rule fired, or why it did not: clause by clause, with the values read."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpu_triage.engine import expr as E
from gpu_triage.engine.backend import ReferenceBackend
from gpu_triage.engine.compiler import CompiledRule, Rulebook
from gpu_triage.engine.enrich import enrich
from gpu_triage.engine.evaluate import decide
from gpu_triage.engine.inputs import EvalInput, bindings, subject_label
from gpu_triage.engine.reference import Clause, Conclusions, Evaluator


@dataclass
class BindingExplanation:
    subject: str
    outcome: str  # fired | not fired | cannot evaluate | needs confirmation
    clauses: list[Clause] = field(default_factory=list)
    first_failed: Clause | None = None
    missing: list[str] = field(default_factory=list)


@dataclass
class Explanation:
    rule: CompiledRule
    condition: str
    params: dict[str, Any]
    bindings: list[BindingExplanation]
    note: str = ""


def explain(inp: EvalInput, book: Rulebook, rule_id: str) -> Explanation:
    inp = enrich(inp, book)
    rule = book.by_id(rule_id)
    if rule is None:
        import difflib

        ids = [r.id for r in book.rules]
        close = [i for i in ids if i.startswith(rule_id)][:3] or difflib.get_close_matches(
            rule_id, ids, n=3, cutoff=0.5
        )
        hint = f" (did you mean {', '.join(close)}?)" if close else ""
        raise KeyError(
            f"no rule '{rule_id}' in the rulebook{hint}; `gpu-triage rules list` shows them all"
        )
    # Conclusions of the earlier strata, as the evaluation computed them.
    earlier = [r for r in book.rules if r.stratum < rule.stratum]
    concl = Conclusions()
    if earlier:
        sub = Rulebook(earlier, book.questions, book.conclusions, {}, [])
        _, concl = decide(inp, sub, ReferenceBackend())
    out: list[BindingExplanation] = []
    binds = bindings(inp, rule.iter_kinds, rule.join_gpu)
    for b in binds:
        trace: list[Clause] = []
        v = Evaluator(inp, b, concl, trace).evaluate(rule.expr)
        if v.value is True:
            outcome = "fired"
        elif v.value is None:
            asks = all(m.path.startswith("answer.") for m in v.missing) and bool(v.missing)
            outcome = "needs confirmation" if asks else "cannot evaluate"
        else:
            outcome = "not fired"
        first = next((c for c in trace if c.result is False), None) if v.value is False else None
        out.append(
            BindingExplanation(
                subject_label(b, inp.hostname),
                outcome,
                trace,
                first,
                sorted({str(m) for m in v.missing}),
            )
        )
    note = ""
    if not binds:
        kinds = ", ".join(rule.iter_kinds)
        note = f"nothing to evaluate: the facts hold no {kinds}"
    return Explanation(rule, E.render(rule.expr), rule.params, out, note)


def _fmt(v: Any) -> str:
    if v is None:
        return "unavailable"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return f"{v:g}"
    return repr(v) if isinstance(v, str) else str(v)


def render_explanation(x: Explanation) -> str:
    r = x.rule
    lines = [
        f"rule {r.id} v{r.rule.version} ({r.severity.value}, stage {r.rule.stage.value}) "
        f"from {r.file}",
        f"  {r.rule.title}",
        f"  when: {x.condition}",
    ]
    if x.params:
        lines.append("  params: " + ", ".join(f"{k} = {_fmt(v)}" for k, v in x.params.items()))
    if x.note:
        lines.append(f"  {x.note}")
    for b in x.bindings:
        lines.append("")
        lines.append(f"{b.subject}: {b.outcome.upper()}")
        for c in b.clauses:
            mark = {True: "true ", False: "FALSE", None: "?    "}[c.result]
            values = ", ".join(f"{k} = {_fmt(v)}" for k, v in c.values.items())
            lines.append(f"  [{mark}] {c.text}" + (f"    ({values})" if values else ""))
        if b.first_failed is not None:
            vals = ", ".join(f"{k} = {_fmt(v)}" for k, v in b.first_failed.values.items())
            lines.append(
                f"  first failing clause: {b.first_failed.text}" + (f" with {vals}" if vals else "")
            )
        for m in b.missing:
            lines.append(f"  missing: {m}")
    return "\n".join(lines)
