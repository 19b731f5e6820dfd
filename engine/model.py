"""The rule file schema: what one YAML document of the rulebook may say.

These models are the only declaration of the rule language's structure; the
JSON Schema in ``rulebook/schema.json`` is generated from them
(``gpu-triage rules schema``) and a test keeps it fresh.
"""

# No ``from __future__ import annotations``: pydantic would evaluate every field's
# annotation from its string at each start-up (see gpu_triage/model/facts.py).
import math
import shlex
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    WithJsonSchema,
    field_validator,
    model_validator,
)

RULE_ID = r"^[a-z0-9][a-z0-9._-]{1,79}$"
NAME = r"^[a-z][a-z0-9_]{0,63}$"


class Severity(StrEnum):
    INFO = "info"
    WARNING = "warning"
    CRITICAL = "critical"

    @property
    def rank(self) -> int:
        return {"critical": 0, "warning": 1, "info": 2}[self.value]


class Stage(StrEnum):
    """The fast-diagnosis stages of the incident guide (guide/FD1..FD4), then the rest."""

    FD1 = "FD1"  # are the GPUs really busy?
    FD2 = "FD2"  # is the data pipeline feeding them?
    FD3 = "FD3"  # does multi-GPU scaling work?
    FD4 = "FD4"  # is the scheduler lying?
    HARDWARE = "hardware"
    READINESS = "readiness"

    @property
    def rank(self) -> int:
        return list(Stage).index(self)


STAGE_MEANING = {
    Stage.FD1: "Are the GPUs really busy?",
    Stage.FD2: "Is the data pipeline feeding them?",
    Stage.FD3: "Does multi-GPU scaling work, or are you paying for synchronisation?",
    Stage.FD4: "Is the scheduler lying?",
    Stage.HARDWARE: "Hardware faults",
    Stage.READINESS: "Readiness and configuration",
}


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


class Param(Strict):
    """A tunable threshold. Sites override it in an overlay, within min/max."""

    default: float | int | bool | str
    min: float | None = Field(default=None, allow_inf_nan=False)
    max: float | None = Field(default=None, allow_inf_nan=False)
    unit: str = ""
    doc: str = Field(default="", description="what the threshold means")

    @model_validator(mode="after")
    def _in_bounds(self) -> "Param":
        check_param_bounds(self, self.default)
        return self


def check_param_bounds(param: Param, value: Any) -> None:
    if type(value) is not type(param.default) and not (
        isinstance(value, int | float)
        and isinstance(param.default, int | float)
        and not isinstance(value, bool)
        and not isinstance(param.default, bool)
    ):
        raise ValueError(f"value {value!r} has the wrong type (default is {param.default!r})")
    if isinstance(value, int | float) and not isinstance(value, bool):
        if not math.isfinite(value):  # NaN compares false with everything: a silent off switch
            raise ValueError(f"value {value} is not a finite number")
        if param.min is not None and value < param.min:
            raise ValueError(f"value {value} is below the minimum {param.min}")
        if param.max is not None and value > param.max:
            raise ValueError(f"value {value} is above the maximum {param.max}")


class QuestionType(StrEnum):
    YES_NO = "yes_no"
    NUMBER = "number"
    CHOICE = "choice"


class Question(Strict):
    """Something only a person can tell; the answer becomes the fact ``answer.<id>``."""

    id: Annotated[str, Field(pattern=NAME)]
    text: str
    type: QuestionType
    unit: str = ""
    choices: list[str] = Field(default_factory=list)
    help: str = ""

    @model_validator(mode="after")
    def _choices(self) -> "Question":
        if self.type is QuestionType.CHOICE and len(self.choices) < 2:
            raise ValueError("a choice question needs at least two choices")
        if self.type is not QuestionType.CHOICE and self.choices:
            raise ValueError("only choice questions have choices")
        return self


class RunbookStep(Strict):
    """One confirmation step: a command, what its output means, what to decide."""

    title: str
    command: Annotated[
        list[str] | None,
        WithJsonSchema(
            {
                "anyOf": [
                    {"type": "array", "items": {"type": "string"}, "minItems": 1},
                    {"type": "string", "minLength": 1},
                    {"type": "null"},
                ]
            }
        ),
    ] = Field(
        default=None,
        description="argument list (a string is split like a shell would, but never run by one)",
    )
    meaning: str = Field(description="how to read the output")
    decision: str = Field(description="what to decide from it")
    changes_system: bool = False
    needs_root: bool = False
    parser: str | None = Field(default=None, description="parser turning the output into facts")
    timeout_s: float = Field(default=60.0, gt=0, le=3600)
    confirms_when: str | None = Field(
        default=None,
        description="expression over the facts parsed from the output: true confirms the cause",
    )

    @field_validator("command", mode="before")
    @classmethod
    def _split(cls, v: Any) -> Any:
        if isinstance(v, str):
            try:
                return shlex.split(v)
            except ValueError as exc:
                raise ValueError(f"cannot split command: {exc}") from None
        return v

    @field_validator("command")
    @classmethod
    def _non_empty(cls, v: list[str] | None) -> list[str] | None:
        if v is not None and (not v or not v[0]):
            raise ValueError("a command needs at least a program name")
        return v


class Expectation(Strict):
    status: Literal["fired", "not_fired", "cannot_evaluate", "needs_confirmation"] | None = None
    fires: bool | None = None
    count: int | None = Field(default=None, ge=0, description="number of findings (bindings)")
    bound: dict[str, Any] = Field(
        default_factory=dict, description="fact path -> value every finding must have bound"
    )
    concludes: bool | None = None


class RuleTest(Strict):
    """An embedded test: given facts, the rule fires or not, and binds what."""

    name: str
    facts: dict[str, Any] = Field(default_factory=dict, description="a Facts document")
    unavailable: list[str] = Field(
        default_factory=list, description="fact kinds whose collector failed"
    )
    params: dict[str, Any] = Field(default_factory=dict)
    conclusions: dict[str, bool] = Field(
        default_factory=dict, description="conclusions of other rules taken as given"
    )
    expect: Expectation


class Rule(Strict):
    id: Annotated[str, Field(pattern=RULE_ID)]
    title: str = Field(min_length=3, max_length=120)
    version: int = Field(ge=1)
    severity: Severity
    stage: Stage
    symptom: str
    cause: str
    fix: str
    when: str = Field(description="the condition, in the rule expression language")
    params: dict[Annotated[str, Field(pattern=NAME)], Param] = Field(default_factory=dict)
    evidence: list[str] = Field(
        default_factory=list, description="extra facts (kind.field) to show with a finding"
    )
    concludes: Annotated[str, Field(pattern=NAME)] | None = Field(
        default=None, description="an intermediate conclusion other rules may use as concl.<name>"
    )
    group: str | None = Field(
        default=None,
        description="differential-diagnosis group: rules that explain the same symptom",
    )
    questions: list[Question] = Field(default_factory=list)
    runbook: list[RunbookStep] = Field(default_factory=list)
    references: list[str] = Field(min_length=1)
    tests: list[RuleTest] = Field(default_factory=list)
    tags: list[str] = Field(default_factory=list)
    enabled: bool = True
    group_by: list[str] = Field(
        default_factory=list,
        description="facts (kind.field) whose equal values fold findings into one, with a count",
    )


class Disable(Strict):
    rule: str
    reason: str


class XidOverride(Strict):
    """A site's policy for one Xid code; findings show it beside NVIDIA's."""

    severity: Severity | None = None
    action: str | None = Field(default=None, description="what this site does, in words")


class XidCode(Strict):
    """One code of NVIDIA's Xid catalogue."""

    code: int = Field(ge=0, le=100_000)
    mnemonic: str = ""
    meaning: str
    applies_to: list[str] = Field(default_factory=list)
    immediate: str = Field(default="", description="NVIDIA's immediate action bucket")
    investigatory: str = Field(default="", description="NVIDIA's investigatory action bucket")
    severity: Severity = Field(description="the rulebook's severity for one occurrence")
    cause: str = Field(default="", description="likely cause class")
    retired: bool = False
    notes: str = ""


class SxidCode(Strict):
    """One NVSwitch SXid and its Fabric Manager class."""

    code: int = Field(ge=0, le=100_000)
    meaning: str
    sxid_class: Literal["non_fatal", "potentially_fatal", "always_fatal", "host"]


class Xid74Bits(Strict):
    """Bits of one Xid 74 register and what NVIDIA's WORKFLOW_NVLINK_ERR says of them."""

    reg: int = Field(ge=0, le=6, description="register index, Reg0 first")
    bits: list[Annotated[int, Field(ge=0, le=63)]] = Field(min_length=1)
    bit_class: str = Field(alias="class", pattern=NAME, description="e.g. hardware, sympathetic")
    meaning: str


class Nvlink5Rule(Strict):
    """One row of NVIDIA's "Xid 144-150 Decode" sheet."""

    xid: int = Field(ge=144, le=150)
    unit: str = Field(description="sub component(s) the row is for, e.g. TLW_RX/TLW_RX_PIPE0")
    error_status: int | None = Field(default=None, ge=0, description="errorStatus it matches")
    reason: int | None = Field(
        default=None, ge=0, le=63, description="IntrInfo[25:20] it matches (NETIR link events)"
    )
    immediate: str
    severity: Literal["fatal", "link_fatal", "non_fatal"]
    investigatory: str = ""
    note: str = Field(default="", description="the sheet's marks: * promoted, ** or ? unsure")
    promoted: str = Field(default="", description="the action when promoted (repeats)")


class XidCatalog(Strict):
    """The Xid and SXid catalogue, as data inside the rulebook."""

    xid_catalog: str = Field(description="catalogue name and version, e.g. NVIDIA 2025-09-30")
    source: str = ""
    buckets: dict[str, str] = Field(default_factory=dict, description="action bucket -> meaning")
    codes: list[XidCode] = Field(default_factory=list)
    sxids: list[SxidCode] = Field(default_factory=list)
    xid74_bits: list[Xid74Bits] = Field(default_factory=list)
    nvlink5_rules: list[Nvlink5Rule] = Field(default_factory=list)


class Overlay(Strict):
    """A site overlay: changes params, severities and enablement without forking rules."""

    overlay: str = Field(description="overlay name, e.g. a site or cluster")
    params: dict[str, Any] = Field(default_factory=dict, description="'<rule id>.<param>' -> value")
    severity: dict[str, Severity] = Field(default_factory=dict, description="rule id -> severity")
    disable: list[Disable] = Field(default_factory=list)
    xid: dict[int, XidOverride] = Field(
        default_factory=dict, description="Xid code -> the site's severity and action"
    )
