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
from gpu_triage.io import jsonio

NPD_OK, NPD_NONOK, NPD_UNKNOWN = 0, 1, 2
NPD_MAX_OUTPUT = 80  # node-problem-detector's default max_output_length
DRAIN_PREFIX = "gpu-triage:"
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
    if doc.exit_code == 3:
        return NPD_UNKNOWN, _short("gpu-triage: every collector failed", limit)
    return NPD_OK, _short(f"gpu-triage: no {severity} findings", limit)


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


def slurm_reason(f: Finding, limit: int = 120) -> str:
    # scontrol takes the reason as one argument; keep it printable and short.
    text = f"{DRAIN_PREFIX} {f.rule_id}: {f.title} on {f.subject}"
    text = re.sub(r"[^\x20-\x7e]", "?", text).replace('"', "'")
    return _short(text, limit)


def node_state(show_node_output: str) -> tuple[str, str]:
    """(State, Reason) from `scontrol show node` output."""
    state = re.search(r"\bState=(\S+)", show_node_output)
    reason = re.search(r"\bReason=(.*?)(?:\s+\[[^\]]*\]\s*)?$", show_node_output, re.MULTILINE)
    return (state.group(1) if state else "", reason.group(1).strip() if reason else "")


def slurm_healthcheck(
    doc: FindingsDocument | None, node: str, run: Runner, *, severity: str = "critical"
) -> tuple[int, str]:
    """Drain on findings at ``severity`` or above; resume only our own drains.

    Returns (exit status, what was done). A node whose findings cannot be read is left
    alone (exit 1): acting on no information would be worse than not acting."""
    if doc is None:
        return 1, "no findings: leaving the node as it is"
    rc, out = run(["scontrol", "show", "node", node])
    if rc != 0:
        return 1, f"scontrol show node {node} failed: {out.strip()[:200]}"
    state, reason = node_state(out)
    hits = at_least(doc, severity)
    if hits:
        why = slurm_reason(hits[0])
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
