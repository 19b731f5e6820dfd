"""Versioned snapshot files: the facts of one node at one time, and how they were collected."""

# No ``from __future__ import annotations``: pydantic would evaluate every field's
# annotation from its string at each start-up (see gpu_triage/model/facts.py).
import json
import os
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Any

from pydantic import (
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    ValidationError,
    model_serializer,
)

from gpu_triage import __version__
from gpu_triage.io import jsonio
from gpu_triage.model.facts import Facts
from gpu_triage.model.limits import (
    MAX_SNAPSHOT_BYTES,
    SnapshotTooLarge,
    check_counts,
    counts_of,
)
from gpu_triage.model.schema_cache import CachedModel

SCHEMA_VERSION = 1
# The status of the unattended history store: not a collection of this node's state.
HISTORY_SOURCE = "history"
# Statuses of what a person or an earlier run supplied rather than a look at the node:
# the history store, inventory and job-metrics files, pasted outputs ("text:PARSER:FILE").
SUPPLIED_SOURCES = (HISTORY_SOURCE, "inventory", "job_metrics", "answers")
TEXT_PREFIX = "text:"


def is_supplied(collector_name: str) -> bool:
    """Whether a status is of supplied input, not of a live collector of this node."""
    return collector_name in SUPPLIED_SOURCES or collector_name.startswith(TEXT_PREFIX)


def utc_now() -> datetime:
    """Now, in UTC: a named default factory (a lambda would keep the model's schema out
    of the schema cache, which pickles it)."""
    return datetime.now(UTC)


class CollectorState(StrEnum):
    """What became of a collector: *ok* (its output possibly cut at a cap: ``truncated``),
    *unavailable* (not present: nothing to look at on this node), *failed* or
    *timed_out* (it should have worked and did not)."""

    OK = "ok"
    UNAVAILABLE = "unavailable"  # the source is absent here (no driver, no kubectl)
    FAILED = "failed"  # it crashed or printed what could not be parsed
    TIMED_OUT = "timed_out"


class CollectorStatus(CachedModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)
    name: str
    state: CollectorState
    duration_s: float = 0.0
    error: str = ""
    kinds: list[str] = Field(default_factory=list, description="fact kinds it produced")
    truncated: bool | None = Field(
        default=None, description="true: some output was cut at the runner's cap (still ok)"
    )


class RawOutput(CachedModel):
    """A command output or file a collector parsed, kept so a snapshot can be re-parsed."""

    model_config = ConfigDict(extra="forbid", defer_build=True)
    collector: str
    source: str  # the command line or path
    text: str
    truncated: bool = False


class Snapshot(CachedModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)
    schema_version: int = SCHEMA_VERSION
    taken_at: datetime = Field(default_factory=utc_now)
    hostname: str = ""
    tool_version: str = __version__
    window_s: float = 0.0
    redacted: bool = False
    description: str = ""
    node_id: str = Field(
        default="", description="sha256 of the node's machine id: which machine this is"
    )
    boot_id: str = Field(default="", description="the kernel's boot id at collection")
    facts: Facts = Field(default_factory=Facts)
    collectors: list[CollectorStatus] = Field(default_factory=list)
    raw: list[RawOutput] = Field(default_factory=list)

    @model_serializer(mode="wrap")
    def _omit_unknown_identity(self, handler: SerializerFunctionWrapHandler) -> Any:
        # Snapshots from pastes, demos and older versions have no node identity: they are
        # written without the keys, as before.
        data = handler(self)
        if isinstance(data, dict):
            for key in ("node_id", "boot_id"):
                if not data.get(key, True):
                    del data[key]
        return data

    def collector(self, name: str) -> CollectorStatus | None:
        return next((c for c in self.collectors if c.name == name), None)


class SnapshotError(Exception):
    """A snapshot file that cannot be used; the message names the file and the problem."""


def load_snapshot(path: str | os.PathLike[str]) -> Snapshot:
    p = Path(path)
    try:
        size = p.stat().st_size
        if size > MAX_SNAPSHOT_BYTES:
            raise SnapshotError(
                f"{p}: {size:,} bytes, larger than a snapshot of one node can be "
                f"(at most {MAX_SNAPSHOT_BYTES:,})"
            )
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SnapshotError(f"{p}: no such snapshot file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SnapshotError(f"{p}: cannot read snapshot: {exc}") from None
    return parse_snapshot(text, str(p))


def parse_snapshot(text: str, name: str = "<snapshot>") -> Snapshot:
    try:
        data = jsonio.loads(text)
    except jsonio.NonFiniteNumber as exc:
        where = f"{name}:{exc.line}:{exc.col}"
        raise SnapshotError(f"{where}: {exc.token} is not a finite number") from None
    except json.JSONDecodeError as exc:
        raise SnapshotError(f"{name}:{exc.lineno}:{exc.colno}: not valid JSON: {exc.msg}") from None
    except RecursionError:
        raise SnapshotError(f"{name}: JSON nested too deeply") from None
    except ValueError as exc:  # e.g. an integer of thousands of digits
        raise SnapshotError(f"{name}: unreadable JSON value: {exc}") from None
    if not isinstance(data, dict):
        raise SnapshotError(f"{name}: a snapshot is a JSON object, got {type(data).__name__}")
    version = data.get("schema_version")
    if version != SCHEMA_VERSION:
        raise SnapshotError(
            f"{name}: unknown snapshot schema_version {version!r} "
            f"(this gpu-triage reads version {SCHEMA_VERSION})"
        )
    facts = data.get("facts")
    if isinstance(facts, dict):
        try:  # before validating: a snapshot ten times too large would take minutes
            check_counts(counts_of(facts), name)
        except SnapshotTooLarge as exc:
            raise SnapshotError(str(exc)) from None
    try:
        snap = Snapshot.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(x) for x in e['loc'])}: {e['msg']}" for e in exc.errors()[:5]
        )
        more = f" (and {exc.error_count() - 5} more)" if exc.error_count() > 5 else ""
        raise SnapshotError(f"{name}: invalid snapshot: {problems}{more}") from None
    # A float field given the string "nan" or "inf" reads as one: refused the same way.
    bad = jsonio.first_non_finite(snap.facts.model_dump(exclude_computed_fields=True), "facts")
    if bad is not None:
        raise SnapshotError(f"{name}: invalid snapshot: {bad}: not a finite number")
    return snap


def dump_snapshot(snapshot: Snapshot) -> str:
    return jsonio.dump_model(snapshot, exclude_none=True, exclude_computed_fields=True) + "\n"
