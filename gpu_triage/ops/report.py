"""The findings document as a Markdown report for people."""

from __future__ import annotations

import shlex

from gpu_triage.engine.findings import Finding, FindingsDocument


def _value(v: object) -> str:
    if isinstance(v, float):
        return f"{v:g}"
    return "—" if v is None else str(v)


def findings_markdown(doc: FindingsDocument) -> str:
    s = doc.summary
    lines = [
        f"# gpu-triage report: {doc.hostname or 'unknown host'}"
        + (f" — {doc.verdict}" if doc.verdict else ""),
        "",
        f"- Snapshot: {doc.snapshot_taken_at or 'unknown'} ({doc.snapshot_source or 'live'})",
        f"- Engine: {doc.engine.name}"
        + (f" (fallback: {doc.engine.fallback_reason})" if doc.engine.fallback_reason else ""),
        f"- Rulebook: {doc.rulebook.rules} rules, fingerprint {doc.rulebook.fingerprint}",
        f"- Findings: {s.critical} critical, {s.warning} warning, {s.info} info; "
        f"{s.cannot_evaluate} cannot evaluate; {s.needs_confirmation} need confirmation",
        "",
    ]
    if doc.collectors:
        lines += ["| collector | state | seconds | error |", "|---|---|---|---|"]
        for c in doc.collectors:
            lines.append(f"| {c.name} | {c.state.value} | {c.duration_s:.2f} | {c.error} |")
        lines.append("")
    if not doc.findings:
        lines += ["No rule fired.", ""]
    for f in doc.findings:
        lines += _finding(f)
    if doc.needs_confirmation:
        lines += ["## Needs confirmation", ""]
        for f in doc.needs_confirmation:
            qs = "; ".join(q.text.strip() for q in f.questions)
            lines.append(f"- **{f.title}** (`{f.rule_id}`, {f.subject}): {qs}")
        lines.append("")
    if doc.cannot_evaluate:
        lines += ["## Cannot evaluate", ""]
        for f in doc.cannot_evaluate:
            miss = "; ".join(
                f"{m.path} ({m.reason}{': ' + m.detail if m.detail else ''})" for m in f.missing
            )
            lines.append(f"- `{f.rule_id}` on {f.subject}: {miss}")
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def _finding(f: Finding) -> list[str]:
    out = [
        f"## [{f.severity.value.upper()}] {f.title}",
        "",
        f"*{f.subject}* · stage {f.stage.value} · rule `{f.rule_id}` v{f.rule_version} "
        f"({f.rulebook})",
        "",
        f"- **Symptom:** {' '.join(f.symptom.split())}",
        f"- **Cause:** {' '.join(f.cause.split())}",
        f"- **Fix:** {' '.join(f.fix.split())}",
        "",
        "| evidence | value | unit | source |",
        "|---|---|---|---|",
    ]
    for e in f.evidence:
        value = _value(e.value) if e.unavailable is None else f"unavailable ({e.unavailable})"
        out.append(f"| `{e.path}` | {value} | {e.unit} | {e.source} |")
    out.append("")
    if f.competing:
        out += ["Competing causes:", ""]
        for c in f.competing:
            out.append(f"- {c.title} (`{c.rule_id}`): {c.status}: {c.reason}")
        out.append("")
    if f.runbook:
        out += ["Runbook:", ""]
        for i, step in enumerate(f.runbook, 1):
            cmd = f" `{shlex.join(step.command)}`" if step.command else ""
            out.append(f"{i}. {step.title}{cmd}: {' '.join(step.decision.split())}")
        out.append("")
    out.append("References: " + ", ".join(f.references))
    out.append("")
    return out
