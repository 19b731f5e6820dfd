"""Error counters between runs: what grew since the previous unattended run.

Lifetime counters (corrected ECC errors, NVLink CRC/replay/recovery, IB link-downed)
say little on their own: a large count may be years old. Their growth since the last
run is the live signal. The ledger keeps each counter's last value and time in the
history state file and fills the ``*_delta`` facts (and ``counters_interval_s``) before
evaluation. A counter that went down was reset (GPU reset, driver reload, reboot): its
current value is what accrued since then.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from gpu_triage.model.facts import FactModel, UnavailableReason
from gpu_triage.model.snapshot import Snapshot

# kind -> (current counter field, delta field) pairs
_COUNTERS: dict[str, tuple[tuple[str, str], ...]] = {
    "gpu": (("ecc_aggregate_corrected", "ecc_corrected_delta"),),
    "nvlink": (
        ("crc_errors", "crc_errors_delta"),
        ("replay_errors", "replay_errors_delta"),
        ("recovery_errors", "recovery_errors_delta"),
    ),
    "ib": (
        ("link_downed", "link_downed_delta"),
        ("symbol_errors", "symbol_errors_delta"),
        ("rcv_errors", "rcv_errors_delta"),
    ),
}
# Clock-event reasons that mean the GPU is held down by heat or power delivery (the
# software power cap at the default limit is the limit working, not a fault).
_THROTTLE_REASONS = (
    "throttle_hw_slowdown",
    "throttle_hw_thermal_slowdown",
    "throttle_sw_thermal_slowdown",
    "throttle_hw_power_brake_slowdown",
)
STREAK = "throttled_streak"
MAX_ENTRIES = 4096  # GPUs, links and ports of one node, with room to spare
NO_HISTORY = "no earlier run in the history to compare with"


def _items(snap: Snapshot) -> list[tuple[str, str, FactModel]]:
    """(kind, stable key, fact) for every item that carries counters."""
    out: list[tuple[str, str, FactModel]] = []
    for g in snap.facts.gpus:
        ident = g.uuid or g.pci_bus_id
        if ident:
            out.append(("gpu", f"gpu|{ident}", g))
    for lk in snap.facts.nvlinks:
        if lk.gpu_pci_bus_id and lk.link is not None:
            out.append(("nvlink", f"nvlink|{lk.gpu_pci_bus_id}|{lk.link}", lk))
    for p in snap.facts.ib_ports:
        if p.ca_name and p.port is not None:
            out.append(("ib", f"ib|{p.ca_name}|{p.port}", p))
    return out


@dataclass
class CounterLedger:
    entries: dict[str, dict[str, Any]] = field(default_factory=dict)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> CounterLedger:
        entries = data.get("entries", {})
        return cls({k: v for k, v in entries.items() if isinstance(v, dict)})

    def to_json(self) -> dict[str, Any]:
        return {"entries": self.entries}

    def prepare(self, snap: Snapshot, now: datetime) -> None:
        """Fill the delta facts of ``snap`` from the previous run's values."""
        taken = snap.taken_at or now
        for kind, key, item in _items(snap):
            prev = self.entries.get(key)
            interval = _interval(prev, taken)
            for current, delta in _COUNTERS[kind]:
                value = getattr(item, current)
                before = prev.get(current) if prev else None
                if value is None:
                    why = item.why_unavailable(current)
                    item.mark_unavailable(
                        delta,
                        why.reason if why else UnavailableReason.NOT_COLLECTED,
                        f"{current} unavailable",
                    )
                elif not isinstance(before, int) or interval is None:
                    item.mark_unavailable(delta, UnavailableReason.NOT_COLLECTED, NO_HISTORY)
                else:
                    setattr(item, delta, value - before if value >= before else value)
            if kind == "gpu":
                _throttle_streak(item, prev)
            if interval is not None:
                item.counters_interval_s = interval  # type: ignore[attr-defined]
            else:
                item.mark_unavailable(
                    "counters_interval_s", UnavailableReason.NOT_COLLECTED, NO_HISTORY
                )

    def record(self, snap: Snapshot, now: datetime) -> None:
        taken = (snap.taken_at or now).isoformat()
        for kind, key, item in _items(snap):
            values = {c: getattr(item, c) for c, _ in _COUNTERS[kind]}
            known = {c: v for c, v in values.items() if isinstance(v, int)}
            streak = getattr(item, "throttled_runs", None) if kind == "gpu" else None
            if isinstance(streak, int) and not isinstance(streak, bool):
                known[STREAK] = streak
            if known:
                self.entries[key] = {"t": taken, **known}
        if len(self.entries) > MAX_ENTRIES:  # keep the newest
            newest = sorted(self.entries.items(), key=lambda kv: str(kv[1].get("t")))
            self.entries = dict(newest[-MAX_ENTRIES:])


def _throttled_now(gpu: FactModel) -> bool | None:
    """True when any heat/power reason is active, False when all are known inactive."""
    values = [getattr(gpu, name, None) for name in _THROTTLE_REASONS]
    if any(v is True for v in values):
        return True
    return None if any(v is None for v in values) else False


def _throttle_streak(gpu: FactModel, prev: dict[str, Any] | None) -> None:
    """``throttled_runs``: the previous run's streak plus this run, or 0."""
    now = _throttled_now(gpu)
    if now is None:
        gpu.mark_unavailable(
            "throttled_runs", UnavailableReason.NOT_SUPPORTED, "throttle reasons not read"
        )
        return
    before = prev.get(STREAK) if prev else None
    before = before if isinstance(before, int) and not isinstance(before, bool) else 0
    gpu.throttled_runs = before + 1 if now else 0  # type: ignore[attr-defined]


def _interval(prev: dict[str, Any] | None, taken: datetime) -> float | None:
    if not prev or not isinstance(prev.get("t"), str):
        return None
    try:
        then = datetime.fromisoformat(prev["t"])
        seconds = (taken - then).total_seconds()
    except (ValueError, TypeError, OverflowError):
        return None
    return seconds if seconds > 0 else None
