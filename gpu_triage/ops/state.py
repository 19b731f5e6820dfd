"""The unattended state file, read through pydantic models and kept bounded.

The state file is input like any other: another process, a full disk, an old version or
a person may have written it. It is read with a size cap, parsed by pydantic's JSON
parser (no Python recursion: a 100,000-deep array is an error, not a crash) and
validated strictly: the wrong shape (``{"seen": []}``, ``[]``, ``null``), a key that does
not parse (``0000:01:00.0|abc``), a number out of range (``1e400``) all make it
*invalid*. An invalid state file is moved aside under a timestamped name
(``STATE.invalid-20261201T201500Z``), reported once, and the run starts from a fresh
state: a damaged file costs first-seen times, never a run.

Bounds (README, SECURITY.md): a finding not seen for :data:`SEEN_MAX_AGE` is dropped
from the state; a finding that clears is listed under ``cleared`` once, and only when it
was seen within :data:`CLEARED_KEEP` (older ones are dropped silently, so a state left
over from long ago does not flood one run's document); at most :data:`MAX_SEEN`
findings and :data:`MAX_XID_KEYS` Xid ledger keys are kept (the most recent), and a
ledger key whose last Xid is older than :data:`XID_MAX_AGE` is pruned.
"""

from __future__ import annotations

import os
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
)

from gpu_triage.io.files import UnsafeFile, read_text
from gpu_triage.model.schema_cache import CachedModel

STATE_VERSION = 1
MAX_STATE_BYTES = 32 << 20
SEEN_MAX_AGE = timedelta(days=7)
CLEARED_KEEP = timedelta(days=1)
XID_MAX_AGE = timedelta(days=30)
MAX_SEEN = 20_000
MAX_CLEARED_PER_RUN = 1_000
MAX_XID_KEYS = 4_096  # 64 GPUs x 64 codes
MAX_EVENT_KEYS = 500  # per GPU and code: enough to count a storm
MAX_COUNT = 10**9
MAX_COUNTER_KEYS = 20_000
MAX_BASELINE_KEYS = 4_096
MAX_BASELINE_SAMPLES = 1_000  # per GPU and band (the ledger keeps fewer)

Text = Annotated[str, StringConstraints(max_length=4096)]
Count = Annotated[int, Field(ge=0, le=MAX_COUNT, strict=True)]
_BUS = re.compile(r"[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]")


def _utc(value: datetime) -> datetime:
    """Naive times (older versions wrote some) are UTC."""
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


Time = Annotated[datetime, AfterValidator(_utc)]


def _xid_key(key: str) -> str:
    bus, sep, code = key.rpartition("|")
    if not sep or not code.isdigit() or len(code) > 6 or (bus and not _BUS.fullmatch(bus)):
        raise ValueError("an Xid ledger key is 'PCI-BUS-ID|CODE'")
    return key


XidKey = Annotated[str, StringConstraints(max_length=64), AfterValidator(_xid_key)]


def valid_xid_key(key: str) -> bool:
    try:
        _xid_key(key)
    except ValueError:
        return False
    return len(key) <= 64


class _Model(CachedModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)


class SeenEntry(_Model):
    rule_id: Text
    title: Text
    severity: Literal["info", "warning", "critical"]
    subject_key: Text
    first_seen: Time
    last_seen: Time


class XidEntry(_Model):
    before: Count = 0
    since: list[Text] = Field(default_factory=list, max_length=MAX_EVENT_KEYS)
    last: Time | None = None
    last_before: Time | None = None


class XidLedgerState(_Model):
    boot: Time | None = None
    resets: Count = 0
    reset_time: Time | None = None
    entries: dict[XidKey, XidEntry] = Field(default_factory=dict)


class CounterState(_Model):
    """Counter values of the previous run (ops/counters.py), for the between-run deltas."""

    entries: dict[Text, dict[Text, Any]] = Field(default_factory=dict)


Reading = Annotated[float, Field(ge=-1e12, le=1e12, allow_inf_nan=False)]
BaselineSample = Annotated[list[Reading | None], Field(min_length=3, max_length=3)]


class BaselineState(_Model):
    """Each GPU's earlier readings per load band (ops/baseline.py): [time, temperature,
    power] lists, the newest last; under ``last``, the previous run's [time,
    temperature z, power z]."""

    entries: dict[
        Text,
        dict[
            Literal["idle", "light", "busy", "last"],
            Annotated[list[BaselineSample], Field(max_length=MAX_BASELINE_SAMPLES)],
        ],
    ] = Field(default_factory=dict)


class StateFile(_Model):
    version: Literal[1] = 1
    seen: dict[Text, SeenEntry] = Field(default_factory=dict)
    xids: XidLedgerState = Field(default_factory=XidLedgerState)
    counters: CounterState = Field(default_factory=CounterState)
    baselines: BaselineState = Field(default_factory=BaselineState)


def _problem(exc: ValidationError) -> str:
    e = exc.errors()[0]
    loc = ".".join(str(x) for x in e["loc"]) or "the file"
    more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
    return f"{loc}: {e['msg']}{more}"


def read_state(path: Path, now: datetime | None = None) -> tuple[StateFile, str]:
    """The state in ``path`` (pruned to its bounds), and a notice for people: empty when
    all was well, else what was wrong and where the file went. Never raises: an
    unusable file is moved aside and a fresh state returned."""
    now = now or datetime.now(UTC)
    try:
        # opened as gpu_triage.io.files opens our own files: a planted link is refused
        data = read_text(path, max_bytes=MAX_STATE_BYTES)
    except UnsafeFile as exc:
        if "larger than" not in str(exc):
            raise
        data = None
        problem = f"larger than {MAX_STATE_BYTES >> 20} MiB"
    except OSError as exc:
        return StateFile(), f"cannot read the state file {path}: {exc.strerror or exc}"
    else:
        if data is None:
            return StateFile(), ""
    if data is not None:
        try:
            state = StateFile.model_validate_json(data)
        except ValidationError as exc:
            problem = _problem(exc)
        else:
            return prune(state, now), ""
    return StateFile(), f"invalid state file {path} ({problem}): {_move_aside(path, now)}"


def _move_aside(path: Path, now: datetime) -> str:
    aside = path.with_name(f"{path.name}.invalid-{now.strftime('%Y%m%dT%H%M%S%fZ')}")
    try:
        os.rename(path, aside)
    except OSError as exc:
        return f"could not move it aside ({exc.strerror or exc}); starting from a fresh state"
    return f"moved aside to {aside.name}; starting from a fresh state"


def prune(state: StateFile, now: datetime) -> StateFile:
    """Hold the state to its bounds: ages first, then counts (the most recent kept)."""
    seen = {k: s for k, s in state.seen.items() if now - s.last_seen <= SEEN_MAX_AGE}
    if len(seen) > MAX_SEEN:
        keep = sorted(seen, key=lambda k: seen[k].last_seen, reverse=True)[:MAX_SEEN]
        seen = {k: seen[k] for k in keep}
    state.seen = seen
    entries = state.xids.entries

    def latest(e: XidEntry) -> datetime | None:
        times = [t for t in (e.last, e.last_before) if t is not None]
        return max(times) if times else None

    # an entry without any time is kept: nothing says it is old
    kept = {k: e for k, e in entries.items() if (t := latest(e)) is None or now - t <= XID_MAX_AGE}
    if len(kept) > MAX_XID_KEYS:
        oldest = datetime.min.replace(tzinfo=UTC)
        order = sorted(kept, key=lambda k: latest(kept[k]) or oldest, reverse=True)
        kept = {k: kept[k] for k in order[:MAX_XID_KEYS]}
    state.xids.entries = kept
    if len(state.counters.entries) > MAX_COUNTER_KEYS:  # by key: no time to go by
        keys = sorted(state.counters.entries)[:MAX_COUNTER_KEYS]
        state.counters.entries = {k: state.counters.entries[k] for k in keys}
    if len(state.baselines.entries) > MAX_BASELINE_KEYS:  # by key: as the counters
        keys = sorted(state.baselines.entries)[:MAX_BASELINE_KEYS]
        state.baselines.entries = {k: state.baselines.entries[k] for k in keys}
    return state


def ledger_json(state: StateFile) -> dict[str, Any]:
    """The Xid ledger as the plain dicts the history code works on."""
    return state.xids.model_dump(mode="json")
