"""Findings in the formats machines consume: a compact JSONL run record, Prometheus text.

The JSONL record is one line per run, small enough that a fleet's 30 days of hourly
history (1,250 nodes x 720 runs) can be read on one machine; the Prometheus text is for
node_exporter's textfile collector.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

from gpu_triage.engine.findings import Finding, FindingsDocument
from gpu_triage.io import jsonio
from gpu_triage.io.escape import prom_label
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
                # one number per GPU per run: the fleet ranks utilisation over the window (F9)
                "util": g.utilization_gpu_pct,
                # against its own history at this load (ops/baseline.py), when judged (F6)
                **({"temp_z": g.temp_robust_z} if g.temp_robust_z is not None else {}),
            }
            for g in facts.gpus
        ]
        rec["xids"] = sorted({x.code for x in facts.xids if x.code is not None})
        if versions := image_versions(facts):
            rec["versions"] = versions
        if facts.site is not None:
            rec["rack"], rec["row"] = facts.site.rack, facts.site.row
    return rec


def image_versions(facts: Facts) -> dict[str, str]:
    """What the golden image fixes beside the driver and VBIOS (fleet/F1), for the fleet's
    majority-against-outliers drift: kernel, CUDA, Fabric Manager, BIOS, container
    toolkit, and the NIC/HCA firmware of each adapter family ("nic_firmware:28"; every
    version of the family, comma-joined, when its adapters differ)."""
    out: dict[str, str] = {}
    host, fabric, sched = facts.host, facts.fabric, facts.scheduler
    for key, value in (
        ("kernel", host.kernel if host else None),
        ("cuda", host.cuda_version if host else None),
        ("bios", host.bios_version if host else None),
        ("fabric_manager", fabric.fm_version if fabric else None),
        ("container_toolkit", sched.container_toolkit_version if sched else None),
    ):
        if value:
            out[key] = value
    firmware: dict[str, set[str]] = {}
    adapters = [(p.firmware_version, p.firmware_family) for p in facts.ib_ports]
    adapters += [(n.firmware_version, n.firmware_family) for n in facts.nics]
    for version, family in adapters:
        if version and family:
            firmware.setdefault(family, set()).add(version)
    for family, found in sorted(firmware.items()):
        out[f"nic_firmware:{family}"] = ", ".join(sorted(found))
    return out


def jsonl_line(doc: FindingsDocument, facts: Facts | None = None) -> str:
    return jsonio.dumps(run_record(doc, facts), compact=True, sort_keys=True) + "\n"


# --------------------------------------------------------------------------- Prometheus

# Each family keeps one sample per label set: a duplicate (a saved snapshot that already
# holds the history collector, GPUs without or sharing a bus id) is folded by the family's
# rule instead of becoming a second series with the same labels, which Prometheus rejects.
Merge = Callable[[float, float], float]
_SUM: Merge = operator.add


def _last(_old: float, new: float) -> float:
    return new


class _Family:
    def __init__(
        self, name: str, help_text: str, labels: tuple[str, ...], merge: Merge = _last
    ) -> None:
        self.name, self.help, self.labels, self.merge = name, help_text, labels, merge
        self.samples: dict[tuple[str, ...], float] = {}

    def add(self, value: float, **labels: object) -> None:
        key = tuple(prom_label("" if labels[n] is None else labels[n]) for n in self.labels)
        v = float(value)
        old = self.samples.get(key)
        self.samples[key] = v if old is None else self.merge(old, v)

    def metric(self) -> Any:
        from prometheus_client.core import GaugeMetricFamily

        fam = GaugeMetricFamily(self.name, self.help, labels=list(self.labels))
        for key, value in sorted(self.samples.items()):
            fam.add_metric(list(key), value)
        return fam


class _Families:
    """What prometheus_client's exposition reads: an object with ``collect()``."""

    def __init__(self) -> None:
        self.families: list[_Family] = []

    def family(
        self, name: str, help_text: str, labels: tuple[str, ...] = (), merge: Merge = _last
    ) -> _Family:
        fam = _Family(name, help_text, labels, merge)
        self.families.append(fam)
        return fam

    def collect(self) -> Iterator[Any]:
        return (f.metric() for f in self.families)


def gpu_labels(gpus: list[Any]) -> list[str]:
    """One distinct ``gpu`` label per GPU: its bus id; ``index-N`` (or ``#position``)
    without one; ``<bus>#position`` for a second GPU claiming a bus id already used."""
    out: list[str] = []
    used: set[str] = set()
    for pos, g in enumerate(gpus):
        label = g.pci_bus_id or (f"index-{g.index}" if g.index is not None else f"#{pos}")
        if label in used:
            label = f"{label}#{pos}"
        used.add(label)
        out.append(label)
    return out


def prometheus_text(
    doc: FindingsDocument, facts: Facts | None = None, now: datetime | None = None
) -> str:
    """Text exposition format for node_exporter's textfile collector, written by
    prometheus_client (its escaping is maintained upstream; label values pass
    :func:`prom_label` first for the control characters it leaves raw). The first
    line, a comment, says the exit code and why."""
    from prometheus_client.exposition import generate_latest

    reg = _Families()
    fam = reg.family(
        "gpu_triage_finding",
        "A rule fired (value: occurrences folded into the finding).",
        ("rule", "severity", "stage", "gpu", "subject"),
        _SUM,
    )
    for f in doc.findings:
        fam.add(
            f.occurrences,
            rule=f.rule_id,
            severity=f.severity.value,
            stage=f.stage.value,
            gpu=_gpu_of(f),
            subject=f.subject_key,
        )
    fam = reg.family("gpu_triage_findings", "Findings of the last run by severity.", ("severity",))
    for sev in ("critical", "warning", "info"):
        fam.add(getattr(doc.summary, sev), severity=sev)
    fam = reg.family(
        "gpu_triage_cannot_evaluate",
        "Rules that could not be evaluated for want of facts (by rule).",
        ("rule",),
        _SUM,
    )
    for f in doc.cannot_evaluate:
        fam.add(1, rule=f.rule_id)
    fam = reg.family(
        "gpu_triage_needs_confirmation",
        "Rules waiting for a person's answer (by rule).",
        ("rule",),
        _SUM,
    )
    for f in doc.needs_confirmation:
        fam.add(1, rule=f.rule_id)
    # One status per collector name, the last recorded (a re-evaluated snapshot carries
    # its own "history" status, then this run's).
    collectors = {c.name: c for c in doc.collectors}
    up = reg.family(
        "gpu_triage_collector_up",
        "1 when the collector ran fine, 0 otherwise (state label says how; truncated=yes: "
        "its output was cut at the cap, still fine).",
        ("collector", "state", "truncated"),
    )
    took = reg.family(
        "gpu_triage_collector_duration_seconds", "Collector wall time.", ("collector",)
    )
    for c in collectors.values():
        up.add(
            1 if c.state.value == "ok" else 0,
            collector=c.name,
            state=c.state.value,
            truncated="yes" if c.truncated else "no",
        )
        took.add(round(c.duration_s, 4), collector=c.name)
    reg.family("gpu_triage_rules_evaluated", "Rules in the rulebook evaluated.").add(
        doc.summary.rules_evaluated
    )
    reg.family("gpu_triage_rules_fired", "Distinct rules that fired.").add(doc.summary.rules_fired)
    reg.family("gpu_triage_exit_code", "0 healthy, 1 warning, 2 critical, 3 unknown.").add(
        int(doc.exit_code)
    )
    reg.family(
        "gpu_triage_engine_info",
        "Evaluator used; fallback set when it changed.",
        ("engine", "requested", "fallback", "rulebook"),
    ).add(
        1,
        engine=doc.engine.name,
        requested=doc.engine.requested,
        fallback="yes" if doc.engine.fallback_reason else "no",
        rulebook=doc.rulebook.fingerprint,
    )
    if facts is not None:
        _facts_families(reg, facts)
    stamp = (now or datetime.now(UTC)).timestamp()
    reg.family("gpu_triage_last_run_timestamp_seconds", "When this run finished.").add(
        round(stamp, 3)
    )
    text = generate_latest(reg).decode("utf-8")
    if doc.verdict:  # one line, printable: the verdict quotes collector errors
        text = f"# gpu-triage: {' '.join(doc.verdict.split())}\n" + text
    return text


def _facts_families(reg: _Families, facts: Facts) -> None:
    host = facts.host
    driver = (host.driver_version if host else None) or next(
        (g.driver_version for g in facts.gpus if g.driver_version), None
    )
    cuda = (host.cuda_version if host else None) or next(
        (g.cuda_version for g in facts.gpus if g.cuda_version), None
    )
    site = facts.site
    reg.family(
        "gpu_triage_node_info",
        "Node software versions and placement.",
        ("driver_version", "cuda_version", "rack", "row"),
    ).add(
        1,
        driver_version=driver or "",
        cuda_version=cuda or "",
        rack=(site.rack if site else None) or "",
        row=(site.row if site else None) or "",
    )
    labels = gpu_labels(facts.gpus)
    info = reg.family(
        "gpu_triage_gpu_info",
        "GPU identity and versions (for drift).",
        ("gpu", "name", "driver_version", "vbios_version", "uuid"),
    )
    temp = reg.family("gpu_triage_gpu_temperature_celsius", "GPU core temperature.", ("gpu",))
    for g, label in zip(facts.gpus, labels, strict=True):
        info.add(
            1,
            gpu=label,
            name=g.name,
            driver_version=g.driver_version,
            vbios_version=g.vbios_version,
            uuid=g.uuid,
        )
        if g.temperature_gpu_c is not None and math.isfinite(g.temperature_gpu_c):
            temp.add(g.temperature_gpu_c, gpu=label)
    xids: dict[tuple[int, str], int] = {}
    for x in facts.xids:
        if x.code is not None:
            key = (x.code, x.pci_bus_id or "")
            xids[key] = xids.get(key, 0) + 1
    fam = reg.family(
        "gpu_triage_xid_events", "Xid events in the kernel-log window.", ("code", "gpu"), _SUM
    )
    for (code, gpu), n in sorted(xids.items()):
        fam.add(n, code=code, gpu=gpu)
