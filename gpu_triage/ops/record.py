"""The incident record: what happened during a triage session, kept for the postmortem.

Every event (findings at each evaluation, commands run with their output and exit
status, answers, step marks, notes) is appended as one JSON line, fsynced at once, so
nothing is lost if the terminal drops. The record is exported as Markdown and JSON.
No Textual here: tests and other front ends use it directly.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from gpu_triage.io import jsonio
from gpu_triage.io.files import append_line, ensure_file, write_atomic

PRIVATE = 0o600  # incident records hold command output: their owner's only

RECORD_VERSION = 1
MAX_OUTPUT_IN_RECORD = 200_000  # characters of one command's output kept in the record


def default_dir() -> Path:
    """``$XDG_STATE_HOME/gpu-triage/incidents`` (default ``~/.local/state/...``)."""
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "gpu-triage" / "incidents"


def default_path(hostname: str = "", when: datetime | None = None) -> Path:
    when = when or datetime.now(UTC)
    host = "".join(c if c.isalnum() or c in "-_." else "_" for c in (hostname or "node"))
    return default_dir() / f"{when.strftime('%Y%m%dT%H%M%SZ')}-{host}.jsonl"


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


class IncidentRecord:
    """An append-only JSONL file of timestamped incident events."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        # Outputs may hold hostnames and process names: readable by its owner only.
        ensure_file(self.path, mode=PRIVATE)

    # ------------------------------------------------------------------ writing
    def append(self, kind: str, **data: Any) -> dict[str, Any]:
        entry: dict[str, Any] = {"ts": _now(), "kind": kind, **data}
        append_line(self.path, jsonio.dumps(entry, default=str), mode=PRIVATE)
        return entry

    def opened(
        self,
        *,
        source: str,
        hostname: str,
        rulebook: str,
        engine: str,
        node_id: str | None = None,
        resumed: bool = False,
    ) -> None:
        self.append(
            "opened",
            record_version=RECORD_VERSION,
            source=source,
            hostname=hostname,
            node_id=node_id,
            resumed=resumed,
            rulebook=rulebook,
            engine=engine,
            responder=_user(),
            terminal_host=socket.gethostname(),
        )

    def findings(self, doc: Any, reason: str) -> None:
        """``doc`` is a FindingsDocument; only what a postmortem needs is kept."""

        def brief(f: Any) -> dict[str, Any]:
            return {
                "rule_id": f.rule_id,
                "title": f.title,
                "severity": f.severity.value,
                "status": f.status.value,
                "subject": f.subject,
            }

        self.append(
            "findings",
            reason=reason,
            engine=doc.engine.name,
            summary=doc.summary.model_dump(),
            findings=[brief(f) for f in doc.findings],
            needs_confirmation=[brief(f) for f in doc.needs_confirmation],
            cannot_evaluate=[brief(f) for f in doc.cannot_evaluate],
        )

    def command(
        self,
        *,
        rule_id: str,
        subject: str,
        step: int,
        title: str,
        result: Any,
        outcome: str,
        parsed_kinds: Iterable[str] = (),
        parse_error: str = "",
        subject_key: str = "",
        parser: str | None = None,
        detail: str = "",
    ) -> None:
        """``result`` is an io.commands.CommandResult. ``subject_key`` and ``parser`` let
        a reopened record replay the step (its outcome, its output into the facts)."""
        output = result.output
        cut = len(output) > MAX_OUTPUT_IN_RECORD
        self.append(
            "command",
            rule_id=rule_id,
            subject=subject,
            subject_key=subject_key,
            parser=parser,
            detail=detail,
            step=step,
            title=title,
            argv=list(result.argv),
            status=result.status,
            returncode=result.returncode,
            timed_out=result.timed_out,
            cancelled=result.cancelled,
            duration_s=round(result.duration_s, 3),
            output=output[:MAX_OUTPUT_IN_RECORD],
            output_truncated=cut or result.truncated,
            error=result.error,
            outcome=outcome,
            parsed_kinds=list(parsed_kinds),
            parse_error=parse_error,
        )

    def answer(self, qid: str, value: Any, text: str = "") -> None:
        self.append("answer", question=qid, text=text, value=value)

    def mark(
        self,
        *,
        rule_id: str,
        subject: str,
        step: int,
        title: str,
        mark: str,
        subject_key: str = "",
    ) -> None:
        self.append(
            "step_mark",
            rule_id=rule_id,
            subject=subject,
            subject_key=subject_key,
            step=step,
            title=title,
            mark=mark,
        )

    def note(
        self,
        text: str,
        *,
        rule_id: str = "",
        subject: str = "",
        step: int | None = None,
        subject_key: str = "",
    ) -> None:
        self.append(
            "note", text=text, rule_id=rule_id, subject=subject, subject_key=subject_key, step=step
        )

    # ------------------------------------------------------------------ reading, export
    def entries(self) -> list[dict[str, Any]]:
        return read_entries(self.path)

    def export(self, directory: Path | None = None) -> tuple[Path, Path]:
        """Write ``<stem>.md`` and ``<stem>.json`` (atomically); return their paths."""
        entries = self.entries()
        directory = directory or self.path.parent
        md = directory / f"{self.path.stem}.md"
        js = directory / f"{self.path.stem}.json"
        write_atomic(md, to_markdown(entries), mode=PRIVATE)
        write_atomic(js, to_json(entries), mode=PRIVATE)
        return md, js


def _user() -> str:
    try:
        import pwd

        return pwd.getpwuid(os.getuid()).pw_name
    except (ImportError, KeyError):
        return os.environ.get("USER", "")


def read_entries(path: Path) -> list[dict[str, Any]]:
    """Every whole entry of a record; a line torn by a crash is skipped."""
    out: list[dict[str, Any]] = []
    try:
        text = Path(path).read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return out
    for line in text.splitlines():
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(entry, dict):
            out.append(entry)
    return out


def to_json(entries: list[dict[str, Any]]) -> str:
    return jsonio.dumps({"record_version": RECORD_VERSION, "events": entries}, indent=2) + "\n"


def _fence(text: str) -> str:
    fence = "```"
    while fence in text:
        fence += "`"
    return f"{fence}text\n{text}\n{fence}"


def to_markdown(entries: list[dict[str, Any]]) -> str:
    """The timeline of an incident, for a postmortem document."""
    opened = next((e for e in entries if e.get("kind") == "opened"), {})
    host = opened.get("hostname") or "unknown host"
    lines = [f"# Incident record: {host}", ""]
    if opened:
        lines += [
            f"- Opened: {opened.get('ts', '')} by {opened.get('responder') or 'unknown'}"
            f" on {opened.get('terminal_host', '')}",
            f"- Source: {opened.get('source', '')}",
            f"- Rulebook: {opened.get('rulebook', '')}; engine {opened.get('engine', '')}",
            "",
        ]
    last = next((e for e in reversed(entries) if e.get("kind") == "findings"), None)
    if last:
        s = last.get("summary", {})
        lines += [
            "## Findings at the end",
            "",
            f"{s.get('critical', 0)} critical, {s.get('warning', 0)} warning, "
            f"{s.get('info', 0)} info; {s.get('cannot_evaluate', 0)} cannot evaluate; "
            f"{s.get('needs_confirmation', 0)} need confirmation",
            "",
        ]
        for f in last.get("findings", []):
            lines.append(
                f"- **{f['severity'].upper()}** {f['title']} ({f['subject']}, `{f['rule_id']}`)"
            )
        for label, key in (
            ("needs confirmation", "needs_confirmation"),
            ("cannot evaluate", "cannot_evaluate"),
        ):
            for f in last.get(key, []):
                lines.append(f"- *{label}*: {f['title']} ({f['subject']}, `{f['rule_id']}`)")
        lines.append("")
    lines += ["## Timeline", ""]
    for e in entries:
        ts, kind = e.get("ts", ""), e.get("kind", "")
        if kind == "opened":
            what = "reopened" if e.get("resumed") else "opened"
            lines.append(f"- `{ts}` session {what} ({e.get('source', '')})")
        elif kind == "findings":
            s = e.get("summary", {})
            lines.append(
                f"- `{ts}` evaluated ({e.get('reason', '')}): {s.get('critical', 0)} critical, "
                f"{s.get('warning', 0)} warning, {s.get('info', 0)} info, "
                f"{s.get('cannot_evaluate', 0)} cannot evaluate, "
                f"{s.get('needs_confirmation', 0)} need confirmation"
            )
        elif kind == "command":
            argv = " ".join(e.get("argv", []))
            lines.append(
                f"- `{ts}` ran step {e.get('step', 0) + 1} of `{e.get('rule_id', '')}` on "
                f"{e.get('subject', '')}: `{argv}` → {e.get('status', '')} "
                f"in {e.get('duration_s', 0)} s; outcome: {e.get('outcome') or 'none'}"
            )
            if e.get("parse_error"):
                lines.append(f"  - parser: {e['parse_error']}")
            out = e.get("output", "")
            if out:
                more = " (truncated)" if e.get("output_truncated") else ""
                lines += ["", f"  Output{more}:", "", _indent(_fence(out)), ""]
        elif kind == "answer":
            lines.append(
                f"- `{ts}` answered {e.get('question', '')} ({e.get('text', '')}): "
                f"{e.get('value')!r}"
            )
        elif kind == "step_mark":
            lines.append(
                f"- `{ts}` marked step {e.get('step', 0) + 1} of `{e.get('rule_id', '')}` on "
                f"{e.get('subject', '')} as {e.get('mark', '')}"
            )
        elif kind == "symptom":
            lines.append(f"- `{ts}` the responder sees: {e.get('symptom') or 'nothing specific'}")
        elif kind == "paste":
            pieces = e.get("pieces") or []
            lines.append(
                f"- `{ts}` pasted {len(e.get('text') or '')} characters ({e.get('source', '')}):"
            )
            lines += [f"  - {p}" for p in pieces]
        elif kind == "note":
            where = f" (`{e['rule_id']}` {e.get('subject', '')})" if e.get("rule_id") else ""
            lines.append(f"- `{ts}` note{where}: {e.get('text', '')}")
        elif kind == "collect":
            lines.append(f"- `{ts}` collected facts again: {e.get('detail', '')}")
        else:
            lines.append(f"- `{ts}` {kind}")
    return "\n".join(lines).rstrip() + "\n"


def _indent(text: str) -> str:
    return "\n".join(f"  {line}" if line else "" for line in text.splitlines())
