"""The explanation tree names the deciding clause of and/or/not, fired or not."""

from pathlib import Path

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
