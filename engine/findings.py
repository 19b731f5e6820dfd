"""What an evaluation produces: findings, and the document unattended runs write."""

# No ``from __future__ import annotations``: pydantic would evaluate every field's
# annotation from its string at each start-up (see gpu_triage/model/facts.py).
from datetime import datetime
from enum import StrEnum
from typing import Any

from pydantic import ConfigDict, Field

from gpu_triage import __version__
from gpu_triage.engine.model import Question, RunbookStep, Severity, Stage
from gpu_triage.engine.subject import SubjectKey
from gpu_triage.engine.verdict import ExitCode as ExitCode  # re-exported: its old home
from gpu_triage.model.schema_cache import CachedModel
from gpu_triage.model.snapshot import HISTORY_SOURCE, CollectorStatus, utc_now

FINDINGS_SCHEMA_VERSION = 1


class Status(StrEnum):
    FIRED = "fired"
    CANNOT_EVALUATE = "cannot_evaluate"  # facts it needs could not be collected
    NEEDS_CONFIRMATION = "needs_confirmation"  # a person must answer a question


class Model(CachedModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)


class EvidenceItem(Model):
    path: str = Field(description="fact (kind.field) or aggregate expression")
    value: Any = None
    unit: str = ""
    meaning: str = ""
    source: str = ""
    unavailable: str | None = Field(default=None, description="why the value is missing")


class MissingFact(Model):
    path: str
    reason: str
    detail: str = ""


class RuledOut(Model):
    """A competing cause in the same differential group, and why it does not hold."""

    rule_id: str
    title: str
    status: str  # not_fired | cannot_evaluate | needs_confirmation | fired
    reason: str


class Finding(Model):
    rule_id: str
    rule_version: int
    title: str
    severity: Severity
    stage: Stage
    status: Status
    rulebook: str
    rule_file: str
    subject: str
    subject_key: SubjectKey
    symptom: str
    cause: str
    fix: str
    evidence: list[EvidenceItem] = Field(default_factory=list)
    missing: list[MissingFact] = Field(default_factory=list)
    questions: list[Question] = Field(default_factory=list)
    runbook: list[RunbookStep] = Field(default_factory=list)
    references: list[str] = Field(default_factory=list)
    group: str | None = None
    concludes: str | None = None
    competing: list[RuledOut] = Field(default_factory=list)
    overridden_by: list[str] = Field(default_factory=list)
    occurrences: int = Field(default=1, description="bindings folded into this finding")
    also_seen_on: list[str] = Field(
        default_factory=list, description="other subjects folded into this finding"
    )
    first_seen: datetime | None = Field(
        default=None, description="first run that saw this finding (unattended history)"
    )
    last_seen: datetime | None = None

    @property
    def sort_key(self) -> tuple[int, int]:
        return (self.severity.rank, self.stage.rank)


class Cleared(Model):
    """A finding of an earlier run that no longer holds."""

    rule_id: str
    title: str
    severity: Severity
    subject_key: str
    first_seen: datetime
    last_seen: datetime
    cleared_at: datetime


class EngineInfo(Model):
    name: str = Field(description="the evaluator that produced these findings")
    requested: str
    fallback_reason: str | None = None
    note: str | None = Field(default=None, description="how the engine handled some rules")
    duration_ms: float = 0.0


class RulebookInfo(Model):
    fingerprint: str
    rules: int
    sources: list[str]
    disabled: dict[str, str] = Field(default_factory=dict)
    overlays: list[str] = Field(
        default_factory=list, description="site overlays that changed params, severities or rules"
    )


class Summary(Model):
    critical: int = 0
    warning: int = 0
    info: int = 0
    cannot_evaluate: int = 0
    needs_confirmation: int = 0
    rules_evaluated: int = 0
    rules_fired: int = 0


class FindingsDocument(Model):
    verdict: str = Field(
        default="",
        description="the exit code and why, in words (the first line of every report)",
    )
    exit_status: int | None = Field(
        default=None,
        description="0 healthy, 1 warning, 2 critical, 3 unknown (could not look)",
    )
    schema_version: int = FINDINGS_SCHEMA_VERSION
    generated_at: datetime = Field(default_factory=utc_now)
    tool_version: str = __version__
    hostname: str = ""
    snapshot_taken_at: datetime | None = None
    snapshot_source: str = ""
    engine: EngineInfo
    rulebook: RulebookInfo
    summary: Summary
    findings: list[Finding] = Field(default_factory=list, description="rules that fired, ranked")
    cannot_evaluate: list[Finding] = Field(default_factory=list)
    needs_confirmation: list[Finding] = Field(default_factory=list)
    collectors: list[CollectorStatus] = Field(default_factory=list)
    conclusions: dict[str, bool | None] = Field(default_factory=dict)
    cleared: list[Cleared] = Field(
        default_factory=list, description="findings of earlier runs that cleared in this one"
    )

    @property
    def exit_code(self) -> ExitCode:
        if self.exit_status is not None:
            return ExitCode(self.exit_status)
        # a document written before the verdict was stored
        if self.summary.critical:
            return ExitCode.CRITICAL
        collected = [c for c in self.collectors if c.name != HISTORY_SOURCE]
        if any(c.state in ("failed", "timed_out") for c in collected):
            return ExitCode.UNKNOWN
        return ExitCode.WARNING if self.summary.warning else ExitCode.OK
