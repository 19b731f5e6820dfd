"""Sixteen more incident threads (tests/data/incidents-more, written from the kinds of
threads public trackers hold, not tuned for) end to end: the pastes read with no kind
named, what the responder says, and the established cause must be the top finding at
warning or above. No parser or rule is written for one case."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest
import yaml

from gpu_triage.collectors.from_text import TextInput, snapshot_from_texts
from gpu_triage.engine.compiler import Rulebook, load_rulebook
from gpu_triage.engine.evaluate import evaluate
from gpu_triage.model.facts import JobMetrics

HERE = Path(__file__).resolve().parents[1] / "data" / "incidents-more"
CASES = yaml.safe_load((HERE / "cases.yaml").read_text())


@functools.cache
def book() -> Rulebook:
    return load_rulebook()


def top(case: str) -> tuple[str | None, str | None, list[str]]:
    said = CASES[case]
    files = sorted(p for p in (HERE / case).iterdir() if p.is_file())
    snap = snapshot_from_texts([TextInput(p.read_text(), str(p)) for p in files])
    if said.get("symptom"):
        snap.facts.job = JobMetrics(symptom=said["symptom"], source="responder")
    snap.facts.answers.update(said.get("answers", {}))
    doc = evaluate(snap, book(), engine="reference")
    if not doc.findings:
        return None, None, []
    first = doc.findings[0]
    return first.rule_id, first.severity.value, [f.rule_id for f in doc.findings[:5]]


def test_every_folder_has_a_case() -> None:
    assert sorted(CASES) == sorted(p.name for p in HERE.iterdir() if p.is_dir())


@pytest.mark.parametrize("case", sorted(CASES))
def test_established_cause_is_the_top_finding(case: str) -> None:
    rule, severity, first = top(case)
    assert rule in CASES[case]["root_cause"], first
    assert severity in ("warning", "critical")
