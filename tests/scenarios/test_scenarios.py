"""Scenario snapshots (guide/CM1..CM7, MS1..MS3 and more): each produces its expected
top finding on both evaluators, with identical findings (tests/scenarios/expected.yaml)."""

from __future__ import annotations

import functools
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpu_triage.engine.compiler import Rulebook, load_rulebook
from gpu_triage.engine.evaluate import evaluate
from gpu_triage.engine.findings import FindingsDocument
from gpu_triage.model.snapshot import CollectorState, Snapshot, load_snapshot
from tests.scenarios import build

HERE = Path(__file__).parent
ROOT = HERE.parents[1]
EXPECTED: dict[str, dict[str, Any]] = yaml.safe_load((HERE / "expected.yaml").read_text())
NAMES = sorted(EXPECTED)
ENGINES = ["reference", "durable"]
HEALTHY = [n for n in NAMES if EXPECTED[n].get("healthy")]
DIFFERENTIAL = [n for n in NAMES if "ruled_out" in EXPECTED[n]]
# Reasons that mean a collector did not deliver (as opposed to a question not answered).
COLLECTOR_REASONS = {"not_collected", "collector_failed", "timed_out", "error"}


@functools.cache
def book() -> Rulebook:
    return load_rulebook()


@functools.cache
def snapshot(name: str) -> Snapshot:
    return load_snapshot(HERE / f"{name}.json")


@functools.cache
def doc(name: str, engine: str) -> FindingsDocument:
    result = evaluate(snapshot(name), book(), engine=engine)
    assert result.engine.name == engine, result.engine.fallback_reason
    return result


def test_every_scenario_has_an_expectation_and_a_file() -> None:
    files = {p.stem for p in HERE.glob("*.json")}
    assert set(EXPECTED) == files == set(build.SCENARIOS)


def test_scenario_files_are_up_to_date() -> None:
    for name, text in build.build().items():
        assert (HERE / f"{name}.json").read_text(encoding="utf-8") == text, (
            f"{name}.json is stale: run python tests/scenarios/build.py"
        )


def test_demo_incidents_are_copies_of_their_scenarios() -> None:
    demos = ROOT / "gpu_triage" / "data" / "demos"
    assert {p.stem for p in demos.glob("*.json")} == set(build.DEMO_NAMES)
    for name in build.DEMO_NAMES:
        assert (demos / f"{name}.json").read_bytes() == (HERE / f"{name}.json").read_bytes()
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "data/demos/*.json" in pyproject["tool"]["setuptools"]["package-data"]["gpu_triage"]


@pytest.mark.parametrize("name", NAMES)
def test_scenario_is_a_consistent_node(name: str) -> None:
    snap = snapshot(name)
    facts = snap.facts
    assert snap.description.strip() and len(snap.description) > 80
    assert facts.host is not None and facts.host.hostname == snap.hostname
    assert len(facts.gpus) == 8 == facts.host.gpu_count_visible == facts.host.gpu_count_pci
    assert [g.index for g in facts.gpus] == list(range(8))
    for g in facts.gpus:
        if g.lost:
            assert g.unavailable["utilization_gpu_pct"].reason == "gpu_lost"
            continue
        assert g.driver_version == facts.host.driver_version
        held = [p for p in facts.processes if p.gpu_pci_bus_id == g.pci_bus_id]
        assert len(held) == g.process_count, g.index
        assert sum(p.used_memory_mib or 0 for p in held) <= (g.memory_used_mib or 0)
    buses = {g.pci_bus_id for g in facts.gpus} | {
        g.pci_bus_id for g in build.gpus() if g.pci_bus_id
    }
    for event in [*facts.xids, *facts.aers, *facts.bus_losses]:
        assert event.pci_bus_id in buses
        assert snap.hostname in event.raw
    for ev in facts.ooms:
        assert snap.hostname in ev.raw
    questions = {q.id for r in book().rules for q in r.rule.questions}
    assert set(facts.answers) <= questions
    assert all(c.state is CollectorState.OK for c in snap.collectors)


@pytest.mark.parametrize("name", NAMES)
def test_both_evaluators_agree(name: str) -> None:
    ref, dur = doc(name, "reference"), doc(name, "durable")
    for section in ("findings", "needs_confirmation", "cannot_evaluate"):
        a = [f.model_dump(mode="json") for f in getattr(ref, section)]
        b = [f.model_dump(mode="json") for f in getattr(dur, section)]
        assert a == b, section
    assert ref.conclusions == dur.conclusions


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("name", NAMES)
def test_expected_top_finding(name: str, engine: str) -> None:
    want = EXPECTED[name]
    d = doc(name, engine)
    fired = [f.rule_id for f in d.findings]
    if want["top"] is None:
        assert fired == [], fired
    else:
        assert fired and fired[0] == want["top"], fired
    assert set(want.get("also", [])) <= set(fired), fired
    if "needs_confirmation" in want:
        asking = {f.rule_id: f for f in d.needs_confirmation}
        assert want["needs_confirmation"] in asking, sorted(asking)
        assert asking[want["needs_confirmation"]].questions
        assert want["needs_confirmation"] not in fired


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("name", HEALTHY)
def test_healthy_nodes_have_nothing_to_report(name: str, engine: str) -> None:
    d = doc(name, engine)
    assert [f.rule_id for f in d.findings if f.severity.value != "info"] == []
    assert d.exit_code == 0
    assert all(c.state is CollectorState.OK for c in snapshot(name).collectors)
    starved = [
        (f.rule_id, m.path)
        for f in d.cannot_evaluate
        for m in f.missing
        if m.reason in COLLECTOR_REASONS
    ]
    assert starved == []


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("name", DIFFERENTIAL)
def test_differential_scenarios_rule_out_the_competing_causes(name: str, engine: str) -> None:
    want = EXPECTED[name]
    top = doc(name, engine).findings[0]
    assert top.group, top.rule_id
    competing = {c.rule_id: c for c in top.competing}
    group = {r.id for r in book().rules if r.rule.group == top.group}
    assert set(competing) == group - {top.rule_id}
    for rule_id in want["ruled_out"]:
        c = competing[rule_id]
        assert c.status == "not_fired" and c.reason, (rule_id, c)
    for rule_id in want.get("also_holds", []):
        assert competing[rule_id].status == "fired", rule_id
    undecided = [
        (c.rule_id, c.reason)
        for c in top.competing
        if c.status == "cannot_evaluate" and not c.reason.startswith("answer.")
    ]
    assert undecided == []
