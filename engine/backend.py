"""The backend interface: what decides, for each rule and binding of a stratum, whether its
condition is true, false or unknown. The reference backend lives here; the durable_rules
one (``durable_backend``) implements the same interface in a worker process."""

from __future__ import annotations

from typing import Protocol

from gpu_triage.engine.compiler import CompiledRule
from gpu_triage.engine.inputs import Binding, EvalInput
from gpu_triage.engine.reference import Conclusions, Evaluator

# (rule id, binding index) -> True (fires) or None (unknown); false is absent.
Verdicts = dict[tuple[str, int], bool | None]


class Backend(Protocol):
    name: str

    def run_stratum(
        self,
        inp: EvalInput,
        rules: list[CompiledRule],
        binds: dict[str, list[Binding]],
        concl: Conclusions,
    ) -> Verdicts: ...


class BackendFailure(Exception):
    """The backend could not produce verdicts (crashed, timed out, not installed)."""


class ReferenceBackend:
    name = "reference"

    def run_stratum(
        self,
        inp: EvalInput,
        rules: list[CompiledRule],
        binds: dict[str, list[Binding]],
        concl: Conclusions,
    ) -> Verdicts:
        out: Verdicts = {}
        for rule in rules:
            for i, b in enumerate(binds[rule.id]):
                v = Evaluator(inp, b, concl).eval(rule.expr)
                if v.value is not False:
                    out[(rule.id, i)] = True if v.value else None
        return out
