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
from gpu_triage.engine.why import WhyNode, deciding_reason, render_tree, why_tree


@dataclass
class BindingExplanation:
    subject: str
    outcome: str  # fired | not fired | cannot evaluate | needs confirmation
    clauses: list[Clause] = field(default_factory=list)
    first_failed: Clause | None = None
    missing: list[str] = field(default_factory=list)
    tree: WhyNode | None = None
    decided_by: str = ""


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
        ev = Evaluator(inp, b, concl, trace)
        v = ev.evaluate(rule.expr)
        tree = why_tree(ev, rule.expr)
        if v.value is True:
            outcome = "fired"
        elif v.value is None:
            asks = all(m.path.startswith("answer.") for m in v.missing) and bool(v.missing)
            outcome = "needs confirmation" if asks else "cannot evaluate"
        else:
            outcome = "not fired"
        first = None
        if v.value is False:
            leaf = next((n for n in _leaves(tree) if n.deciding and n.result is False), None)
            first = next((c for c in trace if leaf and c.text == leaf.text), None)
        out.append(
            BindingExplanation(
                subject_label(b, inp.hostname),
                outcome,
                trace,
                first,
                sorted({str(m) for m in v.missing}),
                tree,
                deciding_reason(tree),
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
        if b.tree is not None:
            lines += render_tree(b.tree)
            lines.append(f"  decided by: {b.decided_by}")
        for m in b.missing:
            lines.append(f"  missing: {m}")
    return "\n".join(lines)


def explanation_json(x: Explanation) -> dict[str, Any]:
    """The explanation as data: the same clauses, values and deciding marks as the text
    (``render_explanation``), the condition as a tree per binding."""
    r = x.rule
    return {
        "rule_id": r.id,
        "rule_version": r.rule.version,
        "title": r.rule.title,
        "severity": r.severity.value,
        "stage": r.rule.stage.value,
        "file": r.file,
        "when": x.condition,
        "params": x.params,
        "note": x.note,
        "bindings": [
            {
                "subject": b.subject,
                "outcome": b.outcome,
                "decided_by": b.decided_by,
                "missing": b.missing,
                "tree": _tree_json(b.tree) if b.tree is not None else None,
            }
            for b in x.bindings
        ],
    }


def _tree_json(n: WhyNode) -> dict[str, Any]:
    node: dict[str, Any] = {"result": n.result, "deciding": n.deciding}
    if n.children:
        node["op"] = n.op
        node["operands"] = [_tree_json(k) for k in n.children]
    else:
        node["clause"] = n.text
        node["values"] = {k: _json_value(v) for k, v in n.values.items()}
    return node


def _json_value(v: Any) -> Any:
    return v if v is None or isinstance(v, bool | int | float | str) else str(v)


def _leaves(n: WhyNode) -> list[WhyNode]:
    """Leaves on the deciding path, in order."""
    if not n.children:
        return [n]
    return [x for k in n.children if k.deciding for x in _leaves(k)]
