"""What unattended runs remember between runs, in a small JSON state file: findings seen
(first/last seen, what cleared) and the Xid ledger split at reboots.

A systemd timer starts a new process each run; the state file lets it dedup as a loop does.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from gpu_triage.engine.findings import Cleared, FindingsDocument
from gpu_triage.io.files import read_text, write_atomic
from gpu_triage.model.facts import XidHistory
from gpu_triage.model.snapshot import HISTORY_SOURCE, CollectorState, CollectorStatus, Snapshot
from gpu_triage.ops.counters import CounterLedger


@dataclass
class Seen:
    rule_id: str
    title: str
    severity: str
    subject_key: str
    first_seen: datetime
    last_seen: datetime


MAX_EVENT_KEYS = 500  # per GPU and code: enough to count a storm, bounded in the file


@dataclass
class XidLedger:
    """Xids seen on each GPU, split at the last reboot (``host.boot_time``): the same code
    on the same GPU again after a reset points at hardware, not at the job. Feeds the
    ``xid_history`` facts the recurrence rules read."""

    boot: str | None = None
    resets: int = 0
    reset_time: str | None = None
    entries: dict[str, dict[str, Any]] = field(default_factory=dict)  # "bus|code" -> ...

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> XidLedger:
        return cls(
            data.get("boot"),
            int(data.get("resets", 0)),
            data.get("reset_time"),
            dict(data.get("entries", {})),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "boot": self.boot,
            "resets": self.resets,
            "reset_time": self.reset_time,
            "entries": self.entries,
        }

    def prepare(self, snap: Snapshot) -> None:
        """Note a reboot, then give the evaluation what came before it as facts."""
        host = snap.facts.host
        boot = host.boot_time.isoformat() if host and host.boot_time else None
        if boot and self.boot and boot != self.boot:  # rebooted since the last run
            self.resets += 1
            self.reset_time = boot
            for e in self.entries.values():
                e["before"] = e.get("before", 0) + len(e.get("since", []))
                e["last_before"] = e.get("last", e.get("last_before"))
                e["since"] = []
        self.boot = boot or self.boot
        for key, e in self.entries.items():
            if e.get("before"):
                bus, _, code = key.rpartition("|")
                snap.facts.xid_history.append(
                    XidHistory(
                        code=int(code),
                        pci_bus_id=bus or None,
                        count_before_reset=e["before"],
                        last_seen_before_reset=e.get("last_before"),
                        last_reset_time=self.reset_time,
                        resets_seen=self.resets,
                        source="gpu-triage history",
                    )
                )
        snap.collectors.append(
            CollectorStatus(name=HISTORY_SOURCE, state=CollectorState.OK, kinds=["xid_history"])
        )

    def record(self, snap: Snapshot, now: datetime) -> None:
        """Count this run's Xid events (each event once, however many runs read it)."""
        for x in snap.facts.xids:
            if x.code is None or x.pci_bus_id is None:
                continue
            e = self.entries.setdefault(f"{x.pci_bus_id}|{x.code}", {"before": 0, "since": []})
            ident = x.time_text or (f"{x.monotonic_s}" if x.monotonic_s is not None else x.raw)
            if ident not in e["since"]:
                e["since"] = [*e["since"], ident][-MAX_EVENT_KEYS:]
                e["last"] = (x.time or now).isoformat()


@dataclass
class History:
    """Findings seen by earlier runs: first/last seen, and which cleared. Persisted to a
    small JSON state file so a systemd timer (a new process each run) dedups as a loop does."""

    seen: dict[str, Seen] = field(default_factory=dict)
    path: Path | None = None
    xids: XidLedger = field(default_factory=lambda: XidLedger())
    counters: CounterLedger = field(default_factory=lambda: CounterLedger())

    @staticmethod
    def key(rule_id: str, subject_key: str) -> str:
        return f"{rule_id}|{subject_key}"

    @classmethod
    def load(cls, path: Path | None) -> History:
        h = cls(path=path)
        if path is None:
            return h
        try:
            text = read_text(path)  # no symlink, our own file (gpu_triage.io.files)
            if text is None:
                return h
            data = json.loads(text)
            for k, v in data.get("seen", {}).items():
                h.seen[k] = Seen(
                    v["rule_id"],
                    v["title"],
                    v["severity"],
                    v["subject_key"],
                    datetime.fromisoformat(v["first_seen"]),
                    datetime.fromisoformat(v["last_seen"]),
                )
            h.xids = XidLedger.from_json(data.get("xids") or {})
            h.counters = CounterLedger.from_json(data.get("counters") or {})
        except (OSError, ValueError, KeyError, TypeError) as exc:
            # A damaged state file costs the first-seen times, never the run.
            print(f"gpu-triage: ignoring unreadable state file {path}: {exc}", file=sys.stderr)
            h.seen.clear()
        return h

    def apply(self, doc: FindingsDocument, now: datetime) -> None:
        """Stamp first/last seen on the document's findings; list what cleared."""
        current: set[str] = set()
        for f in doc.findings:
            k = self.key(f.rule_id, f.subject_key)
            current.add(k)
            prev = self.seen.get(k)
            first = prev.first_seen if prev else now
            self.seen[k] = Seen(f.rule_id, f.title, f.severity.value, f.subject_key, first, now)
            f.first_seen, f.last_seen = first, now
        for k in [k for k in self.seen if k not in current]:
            s = self.seen.pop(k)
            doc.cleared.append(
                Cleared(
                    rule_id=s.rule_id,
                    title=s.title,
                    severity=s.severity,
                    subject_key=s.subject_key,
                    first_seen=s.first_seen,
                    last_seen=s.last_seen,
                    cleared_at=now,
                )
            )

    def save(self) -> None:
        if self.path is None:
            return
        data = {
            "seen": {
                k: {
                    "rule_id": s.rule_id,
                    "title": s.title,
                    "severity": s.severity,
                    "subject_key": s.subject_key,
                    "first_seen": s.first_seen.isoformat(),
                    "last_seen": s.last_seen.isoformat(),
                }
                for k, s in self.seen.items()
            },
            "xids": self.xids.to_json(),
            "counters": self.counters.to_json(),
        }
        write_atomic(self.path, json.dumps(data, indent=1) + "\n", mode=0o600)
