"""Findings in the formats machines consume: a compact JSONL run record, Prometheus text.

The JSONL record is one line per run, small enough that a fleet's 30 days of hourly
history (1,250 nodes x 720 runs) can be read on one machine; the Prometheus text is for
node_exporter's textfile collector.
"""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime
from typing import Any

from gpu_triage.engine.findings import Finding, FindingsDocument
from gpu_triage.model.facts import Facts

RECORD_VERSION = 1


def _gpu_of(f: Finding) -> str:
    return f.subject_key.gpu or ""


def _xid_code(f: Finding) -> int | None:
    for e in f.evidence:
        if e.path == "xid.code" and isinstance(e.value, int):
            return e.value
    return None


def run_record(doc: FindingsDocument, facts: Facts | None = None) -> dict[str, Any]:
    """The compact record of one run (one JSONL line)."""
    rec: dict[str, Any] = {
        "v": RECORD_VERSION,
        "ts": (doc.snapshot_taken_at or doc.generated_at).astimezone(UTC).isoformat(),
        "host": doc.hostname,
        "exit": int(doc.exit_code),
        "verdict": doc.verdict,
        "engine": doc.engine.name,
        "rulebook": doc.rulebook.fingerprint,
        "findings": [
            {
                "rule": f.rule_id,
                "sev": f.severity.value,
                "stage": f.stage.value,
                "subject": f.subject_key,
                "gpu": _gpu_of(f),
                "n": f.occurrences,
                **({"xid": code} if (code := _xid_code(f)) is not None else {}),
            }
            for f in doc.findings
        ],
        "unknown": sorted({f.rule_id for f in doc.cannot_evaluate}),
        "confirm": sorted({f.rule_id for f in doc.needs_confirmation}),
        "collectors": {c.name: c.state.value for c in doc.collectors},
        # findings of earlier runs that no longer hold (unattended history)
        "cleared": [
            {"rule": c.rule_id, "subject": c.subject_key, "first_seen": c.first_seen.isoformat()}
            for c in doc.cleared
        ],
    }
    if facts is not None:
        host = facts.host
        rec["driver"] = (host.driver_version if host else None) or next(
            (g.driver_version for g in facts.gpus if g.driver_version), None
        )
        rec["gpus"] = [
            {
                "bus": g.pci_bus_id,
                "uuid": g.uuid,
                "serial": g.serial,
                "name": g.name,
                "vbios": g.vbios_version,
                "temp": g.temperature_gpu_c,
            }
            for g in facts.gpus
        ]
        rec["xids"] = sorted({x.code for x in facts.xids if x.code is not None})
        if facts.site is not None:
            rec["rack"], rec["row"] = facts.site.rack, facts.site.row
    return rec


def jsonl_line(doc: FindingsDocument, facts: Facts | None = None) -> str:
    return json.dumps(run_record(doc, facts), separators=(",", ":"), sort_keys=True) + "\n"


# --------------------------------------------------------------------------- Prometheus


def _esc(value: object) -> str:
    return str(value).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(**labels: object) -> str:
    inner = ",".join(f'{k}="{_esc(v)}"' for k, v in labels.items() if v is not None)
    return "{" + inner + "}" if inner else ""


def _num(v: float) -> str:
    if isinstance(v, float) and not math.isfinite(v):
        return "NaN"
    return repr(float(v)) if isinstance(v, float) else str(v)


class _Metrics:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def family(
        self, name: str, typ: str, help_text: str, samples: list[tuple[dict[str, object], float]]
    ) -> None:
        self.lines.append(f"# HELP {name} {help_text}")
        self.lines.append(f"# TYPE {name} {typ}")
        for labels, value in samples:
            self.lines.append(f"{name}{_labels(**labels)} {_num(value)}")


def prometheus_text(
    doc: FindingsDocument, facts: Facts | None = None, now: datetime | None = None
) -> str:
    """Text exposition format for node_exporter's textfile collector. The first line, a
    comment, says the exit code and why."""
    m = _Metrics()
    if doc.verdict:
        m.lines.append(f"# gpu-triage: {' '.join(doc.verdict.split())}")
    m.family(
        "gpu_triage_finding",
        "gauge",
        "A rule fired (value: occurrences folded into the finding).",
        [
            (
                {
                    "rule": f.rule_id,
                    "severity": f.severity.value,
                    "stage": f.stage.value,
                    "gpu": _gpu_of(f),
                    "subject": f.subject_key,
                },
                f.occurrences,
            )
            for f in doc.findings
        ],
    )
    m.family(
        "gpu_triage_findings",
        "gauge",
        "Findings of the last run by severity.",
        [({"severity": s}, getattr(doc.summary, s)) for s in ("critical", "warning", "info")],
    )
    m.family(
        "gpu_triage_cannot_evaluate",
        "gauge",
        "Rules that could not be evaluated for want of facts (by rule).",
        _count_by_rule(doc.cannot_evaluate),
    )
    m.family(
        "gpu_triage_needs_confirmation",
        "gauge",
        "Rules waiting for a person's answer (by rule).",
        _count_by_rule(doc.needs_confirmation),
    )
    m.family(
        "gpu_triage_collector_up",
        "gauge",
        "1 when the collector ran fine, 0 otherwise (state label says how; "
        "truncated: output cut at the cap, still fine).",
        [
            (
                {
                    "collector": c.name,
                    "state": c.state.value,
                    "truncated": "yes" if c.truncated else None,
                },
                1 if c.state.value == "ok" else 0,
            )
            for c in doc.collectors
        ],
    )
    m.family(
        "gpu_triage_collector_duration_seconds",
        "gauge",
        "Collector wall time.",
        [({"collector": c.name}, round(c.duration_s, 4)) for c in doc.collectors],
    )
    m.family(
        "gpu_triage_rules_evaluated",
        "gauge",
        "Rules in the rulebook evaluated.",
        [({}, doc.summary.rules_evaluated)],
    )
    m.family(
        "gpu_triage_rules_fired",
        "gauge",
        "Distinct rules that fired.",
        [({}, doc.summary.rules_fired)],
    )
    m.family(
        "gpu_triage_exit_code",
        "gauge",
        "0 healthy, 1 warning, 2 critical, 3 unknown.",
        [({}, int(doc.exit_code))],
    )
    m.family(
        "gpu_triage_engine_info",
        "gauge",
        "Evaluator used; fallback set when it changed.",
        [
            (
                {
                    "engine": doc.engine.name,
                    "requested": doc.engine.requested,
                    "fallback": "yes" if doc.engine.fallback_reason else "no",
                    "rulebook": doc.rulebook.fingerprint,
                },
                1,
            )
        ],
    )
    if facts is not None:
        host = facts.host
        driver = (host.driver_version if host else None) or next(
            (g.driver_version for g in facts.gpus if g.driver_version), None
        )
        cuda = (host.cuda_version if host else None) or next(
            (g.cuda_version for g in facts.gpus if g.cuda_version), None
        )
        site = facts.site
        m.family(
            "gpu_triage_node_info",
            "gauge",
            "Node software versions and placement.",
            [
                (
                    {
                        "driver_version": driver or "",
                        "cuda_version": cuda or "",
                        "rack": (site.rack if site else None) or "",
                        "row": (site.row if site else None) or "",
                    },
                    1,
                )
            ],
        )
        m.family(
            "gpu_triage_gpu_info",
            "gauge",
            "GPU identity and versions (for drift).",
            [
                (
                    {
                        "gpu": g.pci_bus_id,
                        "name": g.name,
                        "driver_version": g.driver_version,
                        "vbios_version": g.vbios_version,
                        "uuid": g.uuid,
                    },
                    1,
                )
                for g in facts.gpus
            ],
        )
        xids: dict[tuple[int, str], int] = {}
        for x in facts.xids:
            if x.code is not None:
                key = (x.code, x.pci_bus_id or "")
                xids[key] = xids.get(key, 0) + 1
        m.family(
            "gpu_triage_xid_events",
            "gauge",
            "Xid events in the kernel-log window.",
            [({"code": c, "gpu": g}, n) for (c, g), n in sorted(xids.items())],
        )
        temps: list[tuple[dict[str, object], float]] = [
            ({"gpu": g.pci_bus_id}, g.temperature_gpu_c)
            for g in facts.gpus
            if g.temperature_gpu_c is not None
        ]
        m.family("gpu_triage_gpu_temperature_celsius", "gauge", "GPU core temperature.", temps)
    stamp = (now or datetime.now(UTC)).timestamp()
    m.family(
        "gpu_triage_last_run_timestamp_seconds",
        "gauge",
        "When this run finished.",
        [({}, round(stamp, 3))],
    )
    return "\n".join(m.lines) + "\n"


def _count_by_rule(findings: list[Finding]) -> list[tuple[dict[str, object], float]]:
    counts: dict[str, int] = {}
    for f in findings:
        counts[f.rule_id] = counts.get(f.rule_id, 0) + 1
    return [({"rule": r}, n) for r, n in sorted(counts.items())]
