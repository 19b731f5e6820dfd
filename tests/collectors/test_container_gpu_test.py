"""The guide's T15 test, `docker run --gpus all IMAGE nvidia-smi`, pasted or run as the
runbook step: whether the container saw the GPUs becomes a fact the rule reads."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpu_triage.collectors.from_text import intake_paste
from gpu_triage.collectors.parsers import ParseError
from gpu_triage.collectors.parsers.container_runtime import container_gpu_test
from gpu_triage.engine.compiler import Rulebook
from gpu_triage.engine.evaluate import evaluate
from gpu_triage.engine.inputs import EvalInput
from gpu_triage.model.facts import Facts, SchedulerFacts

HAND = Path(__file__).resolve().parents[1] / "data" / "hand-written" / "container"


@pytest.mark.parametrize(
    ("name", "sees", "causes"),
    [
        ("docker-run-gpus-all-nvidia-smi-8x-h100-session.txt", True, set()),
        ("podman-run-cdi-nvidia-smi-list-2x-h100.txt", True, set()),
        (
            "docker-run-gpus-could-not-select-device-driver.txt",
            False,
            {"container_toolkit_missing"},
        ),
        # inside a container that worked earlier: its cgroup lost the device nodes
        ("docker-run-gpus-nvml-unknown-error.txt", False, {"nvml_unknown_error"}),
    ],
)
def test_a_pasted_session_is_read_as_the_container_test(
    name: str, sees: bool, causes: set[str]
) -> None:
    intake = intake_paste((HAND / name).read_text(), name)
    assert [p.parser for p in intake.pieces] == ["docker-run-nvidia-smi"], intake.statuses()
    facts = intake.facts
    assert facts.scheduler is not None and facts.scheduler.container_sees_gpus is sees
    assert {e.cause for e in facts.errors} == causes
    assert not facts.gpus  # the container's view of the GPUs is not taken as the node's


def test_the_same_table_without_the_docker_prompt_is_the_hosts() -> None:
    text = (HAND / "docker-run-gpus-all-nvidia-smi-8x-h100-session.txt").read_text()
    table = text[text.index("+----") :]
    intake = intake_paste(table, "nvidia-smi")
    assert [p.parser for p in intake.pieces] == ["nvidia-smi"]
    assert len(intake.facts.gpus) == 8 and intake.facts.scheduler is None


def test_no_devices_and_no_output_are_told_apart() -> None:
    facts = container_gpu_test("No devices were found\n")
    assert facts.scheduler is not None and facts.scheduler.container_sees_gpus is False
    with pytest.raises(ParseError, match="neither an nvidia-smi GPU table"):
        container_gpu_test("bash: nvidia-smi: command not found\n", "paste")


@pytest.mark.parametrize("engine", ["reference", "durable"])
def test_the_rule_fires_on_a_container_that_saw_no_gpu(builtin_book: Rulebook, engine: str) -> None:
    broken = intake_paste((HAND / "docker-run-gpus-could-not-select-device-driver.txt").read_text())
    facts = broken.facts
    assert facts.scheduler is not None
    facts.scheduler.container_runtime_nvidia = True  # configured, yet the container saw none
    doc = evaluate(EvalInput(facts), builtin_book, engine=engine)
    assert "container-runtime-cannot-see-gpus" in {f.rule_id for f in doc.findings}
    fine = Facts(scheduler=SchedulerFacts(container_runtime_nvidia=True, container_sees_gpus=True))
    doc = evaluate(EvalInput(fine), builtin_book, engine=engine)
    assert "container-runtime-cannot-see-gpus" not in {f.rule_id for f in doc.findings}
