"""Contracts with what a fleet already runs: node-problem-detector and Slurm.

* node-problem-detector custom plugin: print one short line, exit 0 (OK: condition
  false), 1 (NonOK: condition true) or 2 (Unknown). Kubernetes then sets a node condition
  that taints and drains can act on.
* Slurm HealthCheckProgram: drain the node with the finding as the reason; resume only
  nodes that this program drained (their reason starts with ``gpu-triage:``), never a
  node an operator drained.
"""

from __future__ import annotations

import re
import socket
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

from gpu_triage.engine.findings import Finding, FindingsDocument
from gpu_triage.engine.verdict import ExitCode
from gpu_triage.io import jsonio

NPD_OK, NPD_NONOK, NPD_UNKNOWN = 0, 1, 2
NPD_MAX_OUTPUT = 80  # node-problem-detector's default max_output_length
DRAIN_PREFIX = "gpu-triage:"
UNKNOWN_PREFIX = "gpu-triage: unknown:"  # a drain because it could not look
SEVERITY_ORDER = ("info", "warning", "critical")


def at_least(doc: FindingsDocument, severity: str) -> list[Finding]:
    floor = SEVERITY_ORDER.index(severity)
    return [f for f in doc.findings if SEVERITY_ORDER.index(f.severity.value) >= floor]


def _short(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def npd_verdict(
    doc: FindingsDocument | None, severity: str, *, error: str = "", limit: int = NPD_MAX_OUTPUT
) -> tuple[int, str]:
    """(exit status, message) in node-problem-detector's custom plugin protocol."""
    if doc is None:
        return NPD_UNKNOWN, _short(f"gpu-triage: {error or 'no findings'}", limit)
    hits = at_least(doc, severity)
    if hits:
        top = hits[0]
        more = f" (+{len(hits) - 1} more)" if len(hits) > 1 else ""
        return NPD_NONOK, _short(f"{top.rule_id}: {top.title}{more}", limit)
    if doc.exit_code == ExitCode.UNKNOWN:
        return NPD_UNKNOWN, _short(f"gpu-triage unknown: {unknown_reason(doc)}", limit)
    return NPD_OK, _short(f"gpu-triage: no {severity} findings", limit)


def unknown_reason(doc: FindingsDocument) -> str:
    """Why the run could not look, without the verdict's "UNKNOWN (exit 3): could not look"."""
    text = doc.verdict.split(": ", 1)[-1] if doc.verdict else "could not look"
    return text.removeprefix("could not look: ")


def read_recent_findings(path: Path, max_age_s: float) -> tuple[FindingsDocument | None, str]:
    """The findings file an unattended run wrote, if it is fresh enough to trust."""
    try:
        doc = FindingsDocument.model_validate(jsonio.loads(path.read_text()))
    except (OSError, ValueError) as exc:
        return None, f"cannot read {path}: {str(exc).splitlines()[0]}"
    age = datetime.now(UTC) - doc.generated_at
    if age > timedelta(seconds=max_age_s):
        return None, f"{path} is stale ({int(age.total_seconds())} s old)"
    return doc, ""


# --------------------------------------------------------------------------- Slurm

Runner = Callable[[list[str]], tuple[int, str]]


def _reason_text(text: str, limit: int) -> str:
    # scontrol takes the reason as one argument; keep it printable and short.
    text = re.sub(r"[^\x20-\x7e]", "?", text).replace('"', "'")
    return _short(text, limit)


def slurm_reason(f: Finding, limit: int = 120) -> str:
    return _reason_text(f"{DRAIN_PREFIX} {f.rule_id}: {f.title} on {f.subject}", limit)


def slurm_unknown_reason(why: str, limit: int = 120) -> str:
    """The drain reason when gpu-triage could not look: distinct from any finding's."""
    return _reason_text(f"{UNKNOWN_PREFIX} {why}", limit)


def node_state(show_node_output: str) -> tuple[str, str]:
    """(State, Reason) from `scontrol show node` output."""
    state = re.search(r"\bState=(\S+)", show_node_output)
    reason = re.search(r"\bReason=(.*?)(?:\s+\[[^\]]*\]\s*)?$", show_node_output, re.MULTILINE)
    return (state.group(1) if state else "", reason.group(1).strip() if reason else "")


def slurm_healthcheck(
    doc: FindingsDocument | None,
    node: str,
    run: Runner,
    *,
    severity: str = "critical",
    error: str = "",
) -> tuple[int, str]:
    """Drain on findings at ``severity`` or above, and when gpu-triage could not look
    (exit 3, or no fresh findings to read) with a distinct reason
    (``gpu-triage: unknown: ...``); resume only our own drains, once healthy.

    Returns (exit status, what was done): 0 when the node is as it should be, 1 when
    scontrol could not be asked or did not do it."""
    rc, out = run(["scontrol", "show", "node", node])
    if rc != 0:
        return 1, f"scontrol show node {node} failed: {out.strip()[:200]}"
    state, reason = node_state(out)
    hits = at_least(doc, severity) if doc is not None else []
    why: str | None = None
    if hits:
        why = slurm_reason(hits[0])
    elif doc is None:
        why = slurm_unknown_reason(error or "no findings to read")
    elif doc.exit_code == ExitCode.UNKNOWN:
        why = slurm_unknown_reason(unknown_reason(doc))
    if why is not None:
        if "DRAIN" in state and reason == why:
            return 0, f"already drained: {why}"
        if "DRAIN" in state and not reason.startswith(DRAIN_PREFIX):
            return 0, f"already drained by someone else ({reason}); not touching it"
        rc, out = run(["scontrol", "update", f"NodeName={node}", "State=DRAIN", f"Reason={why}"])
        return (0, f"drained: {why}") if rc == 0 else (1, f"drain failed: {out.strip()[:200]}")
    if "DRAIN" in state and reason.startswith(DRAIN_PREFIX):
        rc, out = run(["scontrol", "update", f"NodeName={node}", "State=RESUME"])
        return (
            (0, f"resumed (was: {reason})")
            if rc == 0
            else (1, f"resume failed: {out.strip()[:200]}")
        )
    return 0, "healthy" + (f"; drained by someone else ({reason})" if "DRAIN" in state else "")


def slurm_node_name() -> str:
    return socket.gethostname().split(".")[0]
