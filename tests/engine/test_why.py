"""The explanation tree names the deciding clause of and/or/not, fired or not."""

from pathlib import Path

import pytest

from gpu_triage.engine.compiler import load_rulebook
from gpu_triage.engine.explain import explain, render_explanation
from gpu_triage.engine.inputs import EvalInput
from gpu_triage.model.snapshot import load_snapshot

DEMO = Path(__file__).resolve().parents[2] / "gpu_triage/data/demos/cm1-input-bound-storage.json"


def test_or_true_is_not_blamed_and_not_decides() -> None:
    book = load_rulebook([])
    x = explain(EvalInput.from_snapshot(load_snapshot(DEMO)), book, "gpu-waiting-off-node")
    b = x.bindings[0]
    assert b.outcome == "not fired"
    assert b.decided_by.startswith("not concl.input_bound")
    assert b.first_failed is not None and b.first_failed.text == "not concl.input_bound"
    text = render_explanation(x)
    assert "      *[FALSE] not concl.input_bound" in text
    assert "*[true ] gpu.lost == false" in text


RULE = """\
id: t-why
title: a test rule
version: 1
severity: warning
stage: FD1
symptom: s
cause: c
fix: f
when: {when}
references: [guide/T1]
tests:
  - {{name: fires, facts: {{gpus: [{{index: 0, temperature_gpu_c: 90}}]}}, expect: {{fires: true}}}}
  - {{name: quiet, facts: {{gpus: []}}, expect: {{fires: false}}}}
"""


def _explain(tmp_path: Path, when: str, **gpu: object) -> tuple[str, str]:
    from gpu_triage.model.facts import Facts, GpuFacts
    from gpu_triage.model.snapshot import Snapshot

    (tmp_path / "r.yaml").write_text(RULE.format(when=when))
    book = load_rulebook([tmp_path], include_builtin=False, allow_untrusted=True)
    snap = Snapshot(facts=Facts(gpus=[GpuFacts(index=0, **gpu)]))
    b = explain(EvalInput.from_snapshot(snap), book, "t-why").bindings[0]
    return b.outcome, b.decided_by


@pytest.mark.parametrize(
    ("when", "gpu", "outcome", "decided"),
    [
        # a false `and`: its first false operand, not a later one
        ("gpu.temperature_gpu_c > 80 and gpu.power_draw_w > 500",
         {"temperature_gpu_c": 70, "power_draw_w": 100}, "not fired",
         "gpu.temperature_gpu_c > 80 (gpu.temperature_gpu_c = 70) is false"),
        # a true `and`: every operand
        ("gpu.temperature_gpu_c > 80 and gpu.power_draw_w > 500",
         {"temperature_gpu_c": 90, "power_draw_w": 600}, "fired",
         "gpu.temperature_gpu_c > 80 (gpu.temperature_gpu_c = 90) is true; "
         "gpu.power_draw_w > 500 (gpu.power_draw_w = 600) is true"),
        # a true `or`: its first true operand; the false one is not blamed
        ("gpu.temperature_gpu_c > 80 or gpu.power_draw_w > 500",
         {"temperature_gpu_c": 70, "power_draw_w": 600}, "fired",
         "gpu.power_draw_w > 500 (gpu.power_draw_w = 600) is true"),
        # a false `or`: every operand
        ("gpu.temperature_gpu_c > 80 or gpu.power_draw_w > 500",
         {"temperature_gpu_c": 70, "power_draw_w": 100}, "not fired",
         "gpu.temperature_gpu_c > 80 (gpu.temperature_gpu_c = 70) is false; "
         "gpu.power_draw_w > 500 (gpu.power_draw_w = 100) is false"),
        # `not` over an `or`: the true inner operand decides the false result
        ("gpu.index >= 0 and not (gpu.temperature_gpu_c > 80 or gpu.power_draw_w > 500)",
         {"temperature_gpu_c": 90, "power_draw_w": 100}, "not fired",
         "gpu.temperature_gpu_c > 80 (gpu.temperature_gpu_c = 90) is true"),
        # unknown: the operand that is missing
        ("gpu.temperature_gpu_c > 80 and gpu.power_draw_w > 500",
         {"temperature_gpu_c": 90}, "cannot evaluate", "gpu.power_draw_w > 500"),
    ],
)  # fmt: skip
def test_the_deciding_clause_of_and_or_not(
    tmp_path: Path, when: str, gpu: dict[str, object], outcome: str, decided: str
) -> None:
    got_outcome, got_decided = _explain(tmp_path, when, **gpu)
    assert got_outcome == outcome
    assert got_decided.startswith(decided), got_decided
