"""What unattended runs remember between runs, in a small JSON state file: findings seen
(first/last seen, what cleared) and the Xid ledger split at reboots.

A systemd timer starts a new process each run; the state file lets it dedup as a loop does.
The file is read and bounded by :mod:`gpu_triage.ops.state` (pydantic models; an invalid
file is moved aside and reported once, the run goes on with a fresh state).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from gpu_triage.engine.findings import Cleared, FindingsDocument
from gpu_triage.io.files import write_atomic
from gpu_triage.model.facts import XidHistory
from gpu_triage.model.snapshot import HISTORY_SOURCE, CollectorState, CollectorStatus, Snapshot
from gpu_triage.ops.baseline import BaselineLedger
from gpu_triage.ops.counters import CounterLedger
from gpu_triage.ops.state import (
    CLEARED_KEEP,
    MAX_CLEARED_PER_RUN,
    MAX_EVENT_KEYS,
    StateFile,
    ledger_json,
    read_state,
    valid_xid_key,
)


@dataclass
class Seen:
    rule_id: str
    title: str
    severity: str
    subject_key: str
    first_seen: datetime
    last_seen: datetime


@dataclass
class XidLedger:
    """Xids seen on each GPU, split at the last reboot (``host.boot_time``): the same code
    on the same GPU again after a reset points at hardware, not at the job. Feeds the
    ``xid_history`` facts the recurrence rules read."""

    boot: str | None = None
    resets: int = 0
    reset_time: str | None = None
    entries: dict[str, dict[str, Any]] = field(default_factory=dict)  # "bus|code" -> ...
    notice: str = ""  # what was wrong with the state file: said once, in the first run

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
        boot = _iso(host.boot_time) if host and host.boot_time else None
        if boot and self.boot and boot != _iso(self.boot):  # rebooted since the last run
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
            CollectorStatus(
                name=HISTORY_SOURCE,
                state=CollectorState.OK,
                kinds=["xid_history"],
                error=self.notice,
            )
        )
        self.notice = ""

    def record(self, snap: Snapshot, now: datetime) -> None:
        """Count this run's Xid events (each event once, however many runs read it)."""
        for x in snap.facts.xids:
            if x.code is None or x.pci_bus_id is None:
                continue
            key = f"{x.pci_bus_id}|{x.code}"
            if not valid_xid_key(key):
                continue  # never write what the next run would refuse to read
            e = self.entries.setdefault(key, {"before": 0, "since": []})
            ident = x.time_text or (f"{x.monotonic_s}" if x.monotonic_s is not None else x.raw)
            if ident not in e["since"]:
                e["since"] = [*e["since"], ident][-MAX_EVENT_KEYS:]
                e["last"] = (x.time or now).isoformat()


def _iso(value: datetime | str) -> str:
    """One spelling of a time (the state file may say ``Z`` where a snapshot says ``+00:00``,
    or be naive): compared as text, two spellings of one boot would look like a reboot."""
    t = datetime.fromisoformat(value) if isinstance(value, str) else value
    return (t if t.tzinfo is not None else t.replace(tzinfo=UTC)).astimezone(UTC).isoformat()


@dataclass
class History:
    """Findings seen by earlier runs: first/last seen, and which cleared. Persisted to a
    small JSON state file so a systemd timer (a new process each run) dedups as a loop does."""

    seen: dict[str, Seen] = field(default_factory=dict)
    path: Path | None = None
    xids: XidLedger = field(default_factory=lambda: XidLedger())
    counters: CounterLedger = field(default_factory=lambda: CounterLedger())
    baselines: BaselineLedger = field(default_factory=lambda: BaselineLedger())

    @staticmethod
    def key(rule_id: str, subject_key: str) -> str:
        return f"{rule_id}|{subject_key}"

    @classmethod
    def load(cls, path: Path | None, now: datetime | None = None) -> History:
        h = cls(path=path)
        if path is None:
            return h
        state, notice = read_state(path, now)
        h.seen = {
            k: Seen(v.rule_id, v.title, v.severity, v.subject_key, v.first_seen, v.last_seen)
            for k, v in state.seen.items()
        }
        h.xids = XidLedger.from_json(ledger_json(state))
        h.counters = CounterLedger.from_json(state.counters.model_dump(mode="json"))
        h.baselines = BaselineLedger.from_json(state.baselines.model_dump(mode="json"))
        if notice:
            # said once: the file was moved aside, the next run reads a fresh one
            print(f"gpu-triage: warning: {notice}", file=sys.stderr)
            h.xids.notice = notice
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
        gone = [self.seen.pop(k) for k in [k for k in self.seen if k not in current]]
        # A finding last seen long ago (the node was not watched since) is dropped, not
        # listed: a state left over from long ago must not flood one run's document.
        recent = [s for s in gone if now - s.last_seen <= CLEARED_KEEP]
        recent.sort(key=lambda s: s.last_seen, reverse=True)
        for s in recent[:MAX_CLEARED_PER_RUN]:
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
            "version": 1,
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
            "baselines": self.baselines.to_json(),
        }
        # what is written is what the next run reads: validated by the same model
        text = StateFile.model_validate(data).model_dump_json(indent=1)
        write_atomic(self.path, text + "\n", mode=0o600)
