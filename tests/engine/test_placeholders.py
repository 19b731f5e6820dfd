"""Runbook parameters: filled from a finding's bindings, asked for otherwise, never run raw."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpu_triage.collectors.parsers.registry import PARSERS
from gpu_triage.engine.compiler import load_rulebook
from gpu_triage.engine.evaluate import evaluate
from gpu_triage.engine.lint import lint
from gpu_triage.engine.placeholders import (
    bare_placeholders,
    fill,
    placeholders,
    supply,
    unknown_placeholders,
)
from gpu_triage.model.facts import Facts, GpuFacts
from gpu_triage.model.snapshot import Snapshot

VALUES = {
    ("gpu", "index"): 3,
    ("gpu", "pci_bus_id"): "0000:3b:00.0",
    ("gpu", "name"): "-rf",  # a hostile GPU name: could be read as an option
    ("gpu", "serial"): "1\n2",
    ("job", "command"): ["python", "train.py", "--lr", "0.1"],
}


def lookup(kind: str, name: str) -> object:
    return VALUES.get((kind, name))


def test_known_values_fill_and_unknown_stay() -> None:
    argv = ["nvidia-smi", "-r", "-i", "{gpu.pci_bus_id}", "--id={gpu.index}", "{host.nope}"]
    assert fill(argv, lookup) == ["nvidia-smi", "-r", "-i", "0000:3b:00.0", "--id=3", "{host.nope}"]
    assert placeholders(fill(argv, lookup)) == ["host.nope"]


def test_a_list_fact_becomes_several_arguments() -> None:
    argv = ["compute-sanitizer", "--tool", "memcheck", "{job.command}"]
    assert fill(argv, lookup)[3:] == ["python", "train.py", "--lr", "0.1"]


@pytest.mark.parametrize("field", ["name", "serial"])
def test_values_that_could_be_options_or_hold_control_characters_are_asked(field: str) -> None:
    argv = ["tool", f"{{gpu.{field}}}"]
    assert fill(argv, lookup) == argv


def test_a_person_supplies_what_is_left() -> None:
    argv = ["compute-sanitizer", "{job.command}", "--x={input.peer_host}"]
    filled = supply(argv, {"job.command": 'python "my train.py"', "input.peer_host": "node-2"})
    assert filled == ["compute-sanitizer", "python", "my train.py", "--x=node-2"]
    with pytest.raises(ValueError, match=r"job\.command"):
        supply(argv, {"job.command": "   "})
    with pytest.raises(ValueError, match=r"input\.peer_host"):
        supply(argv, {"input.peer_host": "a\x1b[2Jb"})


@pytest.mark.parametrize(
    ("argv", "bare"),
    [
        (["nvidia-smi", "-r", "-i", "GPU_INDEX"], ["GPU_INDEX"]),
        (["compute-sanitizer", "JOB_COMMAND"], ["JOB_COMMAND"]),
        (["iperf3", "-c", "HOST"], ["HOST"]),
        (["kubectl", "describe", "node", "<node-name>"], ["<node-name>"]),
        (["ping", "--dest=PEER_IP"], ["PEER_IP"]),
        (["nvidia-smi", "-q", "-d", "ECC,ROW_REMAPPER"], []),
        (["nvidia-smi", "-q", "-d", "PERFORMANCE,POWER"], []),
        (["ibstat"], []),
    ],
)
def test_bare_placeholders(argv: list[str], bare: list[str]) -> None:
    assert bare_placeholders(argv) == bare


def test_unknown_parameters() -> None:
    assert unknown_placeholders(["x", "{gpu.indx}", "{gpu.index}", "{input.any}"]) == ["gpu.indx"]
    assert unknown_placeholders(["{node.hostname}", "{node.ip}"]) == ["node.ip"]


RULE = """\
id: site-reset
title: reset the GPU
version: 1
severity: warning
stage: hardware
symptom: s
cause: c
fix: f
when: gpu.index >= 0
references: [guide/T1]
runbook:
  - title: reset
    command: [nvidia-smi, -r, -i, {arg}]
    meaning: m
    decision: d
tests:
  - {{name: fires, facts: {{gpus: [{{index: 0}}]}}, expect: {{fires: true}}}}
  - {{name: quiet, facts: {{gpus: []}}, expect: {{fires: false}}}}
"""


@pytest.mark.parametrize(
    ("arg", "message"),
    [
        ("GPU_INDEX", "'GPU_INDEX' is a bare placeholder"),
        ('"{gpu.indx}"', "parameter {gpu.indx} names no fact"),
    ],
)
def test_lint_refuses_placeholders_that_would_run_as_written(
    tmp_path: Path, arg: str, message: str
) -> None:
    f = tmp_path / "site.yaml"
    f.write_text(RULE.format(arg=arg))
    errors = [d for d in lint(PARSERS, [f]) if d.level == "error"]
    assert any(message in d.message and d.file == str(f) and d.line == 13 for d in errors), errors


def test_the_shipped_rulebook_has_no_bare_placeholder() -> None:
    book = load_rulebook()
    for rule in book.rules:
        for step in rule.rule.runbook:
            assert not bare_placeholders(step.command or []), (rule.id, step.command)
            assert not unknown_placeholders(step.command or []), (rule.id, step.command)


def test_findings_carry_commands_filled_from_their_binding() -> None:
    gpus = [
        GpuFacts(index=i, pci_bus_id=f"0000:{0x18 + i:02x}:00.0", remapped_rows_pending=True)
        for i in range(2)
    ]
    doc = evaluate(Snapshot(facts=Facts(gpus=gpus)), load_rulebook(), engine="reference")
    pending = [f for f in doc.findings if f.rule_id == "gpu-memory-repair-pending"]
    assert len(pending) == 2
    resets = [
        s.command or []
        for f in pending
        for s in f.runbook
        if s.command and s.command[:2] == ["nvidia-smi", "-r"]
    ]
    assert sorted(cmd[-1] for cmd in resets) == ["0000:18:00.0", "0000:19:00.0"]
    assert all(not placeholders(cmd) for cmd in resets)
