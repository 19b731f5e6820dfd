"""The findings document as a Markdown report for people.

Every value in it may come from the node (GPU names, hostnames, process names, log
lines): each goes through :func:`md_text` or :func:`md_code`, so none can end a table row,
start a heading or carry HTML into a rendered report."""

from __future__ import annotations

import shlex

from gpu_triage.engine.findings import Finding, FindingsDocument
from gpu_triage.engine.occurrences import folded_subjects
from gpu_triage.engine.unknowns import counted, group_unknowns
from gpu_triage.io.escape import md_code, md_text


def _value(v: object) -> str:
    if isinstance(v, float):
        return f"{v:g}"
    return "—" if v is None else md_text(v)


def _words(text: str) -> str:
    return md_text(" ".join(text.split()))


def findings_markdown(doc: FindingsDocument) -> str:
    s = doc.summary
    lines = [
        f"# gpu-triage report: {md_text(doc.hostname or 'unknown host')}"
        + (f" — {md_text(doc.verdict)}" if doc.verdict else ""),
        "",
        f"- Snapshot: {doc.snapshot_taken_at or 'unknown'} "
        f"({md_text(doc.snapshot_source or 'live')})",
        f"- Engine: {md_text(doc.engine.name)}"
        + (
            f" (fallback: {md_text(doc.engine.fallback_reason)})"
            if doc.engine.fallback_reason
            else ""
        ),
        f"- Rulebook: {doc.rulebook.rules} rules, fingerprint {md_text(doc.rulebook.fingerprint)}"
        + _overlays(doc),
        f"- Findings: {s.critical} critical, {s.warning} warning, {s.info} info; "
        f"{s.cannot_evaluate} cannot evaluate; {s.needs_confirmation} need confirmation",
        "",
    ]
    if doc.collectors:
        lines += ["| collector | state | seconds | error |", "|---|---|---|---|"]
        for c in doc.collectors:
            lines.append(
                f"| {md_text(c.name)} | {c.state.value} | {c.duration_s:.2f} | {md_text(c.error)} |"
            )
        lines.append("")
    if not doc.findings:
        lines += ["No rule fired.", ""]
    for f in doc.findings:
        lines += _finding(f)
    if doc.needs_confirmation:
        lines += ["## Needs confirmation", ""]
        for f in doc.needs_confirmation:
            qs = "; ".join(_words(q.text) for q in f.questions)
            who = md_text(folded_subjects(f))
            lines.append(f"- **{md_text(f.title)}** ({md_code(f.rule_id)}, {who}): {qs}")
        lines.append("")
    if doc.cannot_evaluate:
        lines += _cannot_evaluate(doc.cannot_evaluate)
    return "\n".join(lines).rstrip() + "\n"


def _overlays(doc: FindingsDocument) -> str:
    """The site's changes to the packaged rulebook, on the rulebook line."""
    rb = doc.rulebook
    out = ""
    if rb.overlays:
        out += "; overlays " + ", ".join(md_code(n) for n in rb.overlays)
    if rb.disabled:
        out += "; disabled: " + ", ".join(
            f"{md_code(rid)} ({md_text(why)})" for rid, why in sorted(rb.disabled.items())
        )
    return out


def _cannot_evaluate(findings: list[Finding]) -> list[str]:
    """One line per cause, the rules it stopped listed compactly (the JSON has each)."""
    groups = group_unknowns(findings)
    n_rules = len({f.rule_id for f in findings})
    out = [
        f"## Cannot evaluate ({counted(n_rules, 'rule')}, {counted(len(groups), 'cause')})",
        "",
    ]
    for g in groups:
        rules = ", ".join(md_code(r) for r in g.rules)
        where = f" on {g.subjects} subjects" if g.subjects > len(g.rules) else ""
        facts = f" ({md_text(', '.join(g.facts))})" if g.facts else ""
        out.append(
            f"- **{md_text(g.cause)}**{facts}: {counted(len(g.rules), 'rule')}{where}: {rules}"
        )
    out.append("")
    return out


def _finding(f: Finding) -> list[str]:
    out = [
        f"## [{f.severity.value.upper()}] {md_text(f.title)}",
        "",
        f"*{md_text(folded_subjects(f))}*"
        + (f" · {f.occurrences} occurrences" if f.occurrences > 1 else "")
        + f" · stage {f.stage.value} · rule {md_code(f.rule_id)} "
        f"v{f.rule_version} ({md_text(f.rulebook)})",
        "",
        f"- **Symptom:** {_words(f.symptom)}",
        f"- **Cause:** {_words(f.cause)}",
        f"- **Fix:** {_words(f.fix)}",
        "",
        "| evidence | value | unit | source |",
        "|---|---|---|---|",
    ]
    for e in f.evidence:
        value = (
            _value(e.value) if e.unavailable is None else f"unavailable ({md_text(e.unavailable)})"
        )
        out.append(
            f"| {md_code(e.path, in_table=True)} | {value} | {md_text(e.unit)} "
            f"| {md_text(e.source)} |"
        )
    out.append("")
    if f.competing:
        out += ["Competing causes:", ""]
        for c in f.competing:
            out.append(
                f"- {md_text(c.title)} ({md_code(c.rule_id)}): {md_text(c.status)}: "
                f"{md_text(c.reason)}"
            )
        out.append("")
    if f.runbook:
        out += ["Runbook:", ""]
        for i, step in enumerate(f.runbook, 1):
            cmd = f" {md_code(shlex.join(step.command))}" if step.command else ""
            out.append(f"{i}. {md_text(step.title)}{cmd}: {_words(step.decision)}")
        out.append("")
    out.append("References: " + ", ".join(md_text(r) for r in f.references))
    out.append("")
    return out
