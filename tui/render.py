"""Text for the TUI's panes, built as rich ``Text`` (never markup: fact values, rule text
and command output are shown as they are, never interpreted).

Every pane is a :class:`SafeText`: each string put into it passes
:func:`gpu_triage.io.escape.visible` (control characters and escape sequences shown as
``\\x1b``-style text, line breaks kept), so a GPU name, a hostname or a process name cannot
move the cursor, retitle the terminal or hide text."""

from __future__ import annotations

import re
import shlex
from typing import Any

from rich.style import Style
from rich.text import Text

from gpu_triage.engine.findings import Finding, FindingsDocument, Status
from gpu_triage.engine.model import Question, QuestionType, RunbookStep
from gpu_triage.engine.occurrences import folded_subjects
from gpu_triage.io.escape import visible
from gpu_triage.model.catalog import kinds
from gpu_triage.model.facts import FactModel, Facts
from gpu_triage.model.snapshot import Snapshot

SEVERITY_WORD = {"critical": "CRITICAL", "warning": "WARNING", "info": "INFO"}
SEVERITY_STYLE = {"critical": "bold red", "warning": "bold yellow", "info": "cyan"}
STATUS_WORD = {
    Status.FIRED: "fired",
    Status.CANNOT_EVALUATE: "cannot evaluate",
    Status.NEEDS_CONFIRMATION: "needs confirmation",
}
OUTCOME_STYLE = {
    "confirmed": "bold red",
    "ruled out": "green",
    "inconclusive": "yellow",
    "failed": "magenta",
}

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[@-Z\\-_]")


class SafeText(Text):
    """rich ``Text`` that shows every string appended to it inertly (see the module doc)."""

    def __init__(self, text: str = "", *args: Any, **kw: Any) -> None:
        super().__init__(visible(text, multiline=True), *args, **kw)

    def append(self, text: str | Text, style: str | Style | None = None) -> Text:
        if isinstance(text, str):
            text = visible(text, multiline=True)
        return super().append(text, style)


def clean_line(line: str) -> str:
    """Command output as inert text: ANSI sequences dropped, other control characters
    shown as visible escapes, tabs expanded."""
    return visible(_ANSI.sub("", line).expandtabs(4))


def fmt_value(v: Any) -> str:
    if v is None:
        return "unavailable"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:g}"
    if isinstance(v, list):
        return ", ".join(fmt_value(x) for x in v) if v else "(empty)"
    if hasattr(v, "value") and not isinstance(v, int | str):
        return visible(v.value)
    return visible(v)


def argv_text(argv: list[str] | None) -> str:
    return shlex.join(argv) if argv else "(no command: a manual step)"


def severity_label(f: Finding) -> Text:
    """A fired finding's severity; a rule that did not fire shows what it is instead (a
    CRITICAL label on a rule that could not be evaluated reads as a critical fault)."""
    if f.status is Status.CANNOT_EVALUATE:
        return SafeText(f"{'UNKNOWN':<8}", style="dim")
    if f.status is Status.NEEDS_CONFIRMATION:
        return SafeText(f"{'ASK':<8}", style="magenta")
    sev = f.severity.value
    return SafeText(f"{SEVERITY_WORD[sev]:<8}", style=SEVERITY_STYLE[sev])


def summary_text(doc: FindingsDocument | None, *, host: str, source: str) -> Text:
    t = SafeText()
    t.append(host or "unknown host", style="bold")
    if source:
        t.append(f"  {source}", style="dim")
    if doc is None:
        t.append("\nevaluating…")
        return t
    s = doc.summary
    t.append("\n")
    t.append(f"{s.critical} critical", style="bold red" if s.critical else "")
    t.append(" · ")
    t.append(f"{s.warning} warning", style="bold yellow" if s.warning else "")
    t.append(f" · {s.info} info · ")
    t.append(f"{s.cannot_evaluate} cannot evaluate", style="yellow" if s.cannot_evaluate else "")
    t.append(" · ")
    t.append(
        f"{s.needs_confirmation} need confirmation",
        style="yellow" if s.needs_confirmation else "",
    )
    failed = [c for c in doc.collectors if c.state.value != "ok"]
    if failed:
        t.append(" · collectors not ok: ", style="yellow")
        t.append(", ".join(f"{c.name} ({c.state.value})" for c in failed), style="yellow")
    return t


def finding_line(f: Finding, marks: str = "") -> Text:
    t = SafeText(no_wrap=False)
    t.append_text(severity_label(f))
    t.append(" ")
    t.append(f.title)
    if f.occurrences > 1:
        t.append(f" · {folded_subjects(f, brief=True)}", style="dim")
    if marks:
        t.append(f" [{marks}]", style="bold")
    return t


def section_header(label: str, count: int, note: str = "") -> Text:
    t = SafeText(f"── {label} ({count})", style="bold reverse" if count else "bold")
    if note:
        t.append(f" {note}", style="dim")
    return t


def _heading(t: Text, label: str) -> None:
    t.append(f"\n{label}\n", style="bold underline")


def detail_text(f: Finding, step_labels: list[str], answers: dict[str, Any]) -> Text:
    t = SafeText()
    sev = f.severity.value
    t.append(SEVERITY_WORD[sev], style=SEVERITY_STYLE[sev])
    t.append(f" · {STATUS_WORD[f.status]} · stage {f.stage.value}\n", style="dim")
    t.append(f.title + "\n", style="bold")
    t.append(folded_subjects(f), style="italic")
    if f.occurrences > 1:
        t.append(f" ({f.occurrences} occurrences)", style="dim")
    t.append("\n")
    for label, body in (("Symptom", f.symptom), ("Cause", f.cause), ("Fix", f.fix)):
        t.append(f"\n{label}: ", style="bold")
        t.append(body)
        t.append("\n")
    if f.missing:
        _heading(t, "Cannot evaluate: facts missing")
        for m in f.missing:
            t.append(f"  {m.path}", style="bold")
            t.append(f": {m.reason}" + (f" ({m.detail})" if m.detail else "") + "\n")
    if f.questions:
        _heading(t, "Needs confirmation: questions (press a)")
        for q in f.questions:
            t.append(f"  ? {q.text}", style="bold")
            t.append(f"  [{question_kind(q)}]")
            if q.id in answers:
                t.append(f"  answered: {fmt_value(answers[q.id])}", style="green")
            t.append("\n")
    if f.evidence:
        _heading(t, "Evidence")
        for e in f.evidence:
            t.append(f"  {e.path}", style="bold")
            if e.unavailable:
                t.append(" = unavailable: ", style="yellow")
                t.append(e.unavailable, style="yellow")
            else:
                t.append(f" = {fmt_value(e.value)}")
                if e.unit:
                    t.append(f" {e.unit}")
            if e.source:
                t.append(f"   from {e.source}", style="dim")
            t.append("\n")
    if f.competing:
        _heading(t, "Competing causes")
        for c in f.competing:
            word = {"not_fired": "ruled out", "fired": "also holds"}.get(
                c.status, c.status.replace("_", " ")
            )
            t.append(f"  {word}: ", style="green" if c.status == "not_fired" else "yellow")
            t.append(f"{c.title} ({c.rule_id})\n")
            t.append(f"    {c.reason}\n", style="dim")
    if f.runbook:
        _heading(t, "Runbook (enter opens it)")
        for i, step in enumerate(f.runbook):
            label = step_labels[i] if i < len(step_labels) else "not run"
            t.append(f"  {i + 1}. {step.title}")
            t.append(f"  [{label}]\n", style=OUTCOME_STYLE.get(label, "dim"))
            t.append(f"     $ {argv_text(step.command)}\n", style="dim")
    _heading(t, "Rule")
    t.append(f"  {f.rule_id} v{f.rule_version} ({f.rulebook}) from {f.rule_file}\n")
    if f.overridden_by:
        t.append(f"  overridden by: {', '.join(f.overridden_by)}\n")
    if f.references:
        t.append(f"  references: {', '.join(f.references)}\n")
    t.append("  w: why / why not (clause by clause)\n", style="dim")
    return t


def question_kind(q: Question) -> str:
    if q.type is QuestionType.YES_NO:
        return "yes / no"
    if q.type is QuestionType.NUMBER:
        return f"number{f' in {q.unit}' if q.unit else ''}"
    unit = f" ({q.unit})" if q.unit else ""
    return f"one of: {', '.join(q.choices)}{unit}"


def step_text(step: RunbookStep, index: int, label: str, detail: str, notes: list[str]) -> Text:
    t = SafeText()
    t.append(f"Step {index + 1}: {step.title}\n", style="bold")
    t.append("$ ", style="dim")
    t.append(argv_text(step.command) + "\n", style="bold")
    flags = []
    if step.changes_system:
        flags.append("CHANGES THE SYSTEM")
    if step.needs_root:
        flags.append("needs root")
    if flags:
        t.append("  ".join(flags) + "\n", style="bold red")
    t.append("Meaning: ", style="bold")
    t.append(step.meaning.strip() + "\n")
    t.append("Decision: ", style="bold")
    t.append(step.decision.strip() + "\n")
    extras = [f"timeout {step.timeout_s:g} s"]
    if step.parser:
        extras.append(f"parsed as {step.parser}")
    if step.confirms_when:
        extras.append(f"confirms when {step.confirms_when}")
    t.append(" · ".join(extras) + "\n", style="dim")
    t.append("Status: ", style="bold")
    t.append(label, style=OUTCOME_STYLE.get(label, ""))
    if detail:
        t.append(f" ({detail})")
    t.append("\n")
    for n in notes:
        t.append(f"Note: {n}\n", style="italic")
    return t


# --------------------------------------------------------------------------- facts browser

EVENT_KINDS = tuple(k.name for k in kinds().values() if k.event)
LINK_KINDS = ("nvlink", "pcie", "topo", "nic", "ib")


def _section(kind: str, item: FactModel, i: int) -> str:
    if kind == "gpu":
        idx = getattr(item, "index", None)
        return f"GPU {idx if idx is not None else f'#{i}'}"
    if kind == "host":
        return "host"
    if kind in EVENT_KINDS:
        return "events"
    if kind in LINK_KINDS:
        return "links"
    return kind


def _item_label(kind: str, item: FactModel, i: int) -> str:
    if kind in ("gpu", "host"):
        return _section(kind, item, i)
    get = item.__dict__.get
    for key in ("pci_bus_id", "gpu_pci_bus_id", "name", "ca_name", "pid", "a"):
        if get(key) not in (None, ""):
            extra = f"/{get('link')}" if kind == "nvlink" else ""
            extra += f"@{get('line')}" if kind in EVENT_KINDS and get("line") else ""
            return f"{kind} {get(key)}{extra}"
    return kind if i == 0 else f"{kind} #{i}"


FactRow = tuple[str, str, str, str, str, str]  # section, item, field, value, unit, source/why


def fact_rows(snapshot: Snapshot, kind_unavailable: dict[str, Any] | None = None) -> list[FactRow]:
    """Every known fact and every missing one with its reason, grouped for browsing."""
    facts: Facts = snapshot.facts
    rows: list[FactRow] = []
    order = ["host", "gpu"] + [k for k in kinds() if k not in ("host", "gpu")]
    for kind in order:
        info = kinds()[kind]
        value = getattr(facts, info.attr)
        items = value if isinstance(value, list) else ([value] if value is not None else [])
        if kind_unavailable and kind in kind_unavailable and not items:
            why = kind_unavailable[kind]
            section = "GPUs" if kind == "gpu" else _section(kind, FactModel(), 0)
            rows.append((section, kind, "(all)", "unavailable", "", visible(why)))
            continue
        for i, item in enumerate(items):
            section, label = _section(kind, item, i), visible(_item_label(kind, item, i))
            for name, fi in info.fields.items():
                v = getattr(item, name, None)
                if v is None or v == []:
                    why = item.why_unavailable(name)
                    if why is None:
                        continue
                    rows.append((section, label, name, "unavailable", fi.unit, visible(why)))
                    continue
                rows.append((section, label, name, fmt_value(v), fi.unit, visible(item.source)))
    for qid, ans in facts.answers.items():
        rows.append(("answers", "answer", visible(qid), fmt_value(ans), "", "responder"))
    return rows


_TOKEN = re.compile(r"[a-z0-9_.]+")


def row_matches(row: FactRow, query: str) -> bool:
    """Every word of ``query`` is in the row; a bare number must be a whole token of
    the item or fact name (``gpu 2`` finds GPU 2, not every value or bus id with a 2)."""
    hay = " ".join(row).lower()
    tokens: set[str] | None = None
    for word in query.lower().split():
        if word.isdigit():
            if tokens is None:
                where = " ".join(row[:3]).lower()  # section, item, fact: not values
                tokens = set(re.split(r"[^a-z0-9]+", where))
            if word not in tokens:
                return False
        elif word not in hay:
            return False
    return True


def history_text(entries: list[Any]) -> Text:
    t = SafeText()
    prev: set[tuple[tuple[str, str], str]] | None = None
    for h in entries:
        s = h.doc.summary
        t.append(f"{h.at.strftime('%H:%M:%S')} ", style="bold")
        t.append(f"{h.reason}: ")
        t.append(
            f"{s.critical} critical, {s.warning} warning, {s.info} info, "
            f"{s.cannot_evaluate} cannot evaluate, {s.needs_confirmation} need confirmation\n"
        )
        now = {
            (f.rule_id, f.subject_key): f"{f.title} ({STATUS_WORD[f.status]})"
            for f in [*h.doc.findings, *h.doc.needs_confirmation, *h.doc.cannot_evaluate]
        }
        keys = {(k, now[k]) for k in now}
        if prev is not None:
            for _, title in sorted(keys - prev):
                t.append(f"   + {title}\n", style="yellow")
            for _, title in sorted(prev - keys):
                t.append(f"   - {title}\n", style="green")
        prev = keys
    return t
