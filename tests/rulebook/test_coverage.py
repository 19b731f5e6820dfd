"""Knowledge-map coverage: faithful/reasoned/partial per item from its decisions,
operational/mentioned from the measured fact producers; lint refuses unknown IDs."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

from gpu_triage.collectors.parsers.registry import PARSERS
from gpu_triage.engine.compiler import load_rulebook
from gpu_triage.engine.coverage import (
    CoverageDataError,
    Decision,
    KnowledgeItem,
    KnowledgeMap,
    State,
    coverage,
    coverage_command,
    coverage_json,
    coverage_text,
    load_decisions,
    load_knowledge_map,
    load_producers,
    parse_decisions,
    parse_producers,
)
from gpu_triage.engine.lint import lint

ROOT = Path(__file__).resolve().parents[2]


def _tool() -> ModuleType:
    path = ROOT / "tools" / "fact_producers.py"
    spec = importlib.util.spec_from_file_location("gpu_triage_tool_fact_producers", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


# --------------------------------------------------------------------------- the map


def test_knowledge_map_lists_every_id_of_the_shared_map() -> None:
    ids = load_knowledge_map().ids
    assert {"guide/CP1", "guide/T15", "guide/CM7", "guide/MS3", "guide/CD", "guide/Q8"} <= ids
    assert {"fleet/F1", "fleet/F9", "xid/CATALOG"} <= ids
    assert "fleet/F4" not in ids and "fleet/F5" not in ids
    guide = {i for i in ids if i.startswith(("guide/", "fleet/", "xid/"))}
    assert len(guide) == 49


def test_ask_items_are_flagged() -> None:
    asks = {i.id for i in load_knowledge_map().items if i.ask}
    assert asks == {"guide/CM2", "guide/CM4", "guide/CM6", "guide/CM7"}


def test_every_map_item_has_decisions_and_every_key_is_a_map_item() -> None:
    decisions = load_decisions()
    ids = load_knowledge_map().ids
    assert sorted(ids - set(decisions)) == []
    assert sorted(set(decisions) - ids) == []
    assert all(decisions[i] for i in ids)


def test_decision_rules_exist_in_the_builtin_rulebook(builtin_book) -> None:
    known = {r.id for r in builtin_book.rules}
    named = {
        rid
        for decs in load_decisions().values()
        for d in decs
        for rid in (*d.rules, *([d.ask] if d.ask else []))
    }
    assert sorted(named - known) == []


# --------------------------------------------------------------------------- decisions file


def test_decision_is_encoded_one_way_only() -> None:
    one_way = "guide/CP1: decision 1: Value error, a decision is encoded one way"
    with pytest.raises(CoverageDataError, match=one_way):
        parse_decisions("guide/CP1:\n  - {decision: abc, rules: [r], cannot: why not}\n")
    with pytest.raises(CoverageDataError, match="guide/CP1: decision 1: colour: Extra inputs"):
        parse_decisions("guide/CP1:\n  - {decision: abc, colour: red}\n")
    with pytest.raises(CoverageDataError, match="expected a list"):
        parse_decisions("guide/CP1: {decision: abc}\n")


def test_bad_yaml_names_the_file_and_line() -> None:
    with pytest.raises(CoverageDataError, match=r"knowledge_decisions.yaml:3:2: YAML"):
        parse_decisions("guide/CP1:\n  - decision: a\n rules: [x]\n")


def test_producers_file_shape_is_checked() -> None:
    assert parse_producers("fields:\n  gpu.name: [collector:nvml]\n") == {
        "gpu.name": ("collector:nvml",)
    }
    with pytest.raises(CoverageDataError, match="fields:"):
        parse_producers("gpu.name: [nvml]\n")


# --------------------------------------------------------------------------- verdicts

RULES = """\
id: both-tests
title: A rule with firing and non-firing tests
version: 1
severity: warning
stage: FD1
symptom: s
cause: c
fix: f
when: gpu.utilization_memory_pct > 80
references: [guide/ZZ1]
tests:
  - {name: fires, facts: {gpus: [{index: 0, utilization_memory_pct: 90}]}, expect: {fires: true}}
  - {name: quiet, facts: {gpus: [{index: 0, utilization_memory_pct: 10}]}, expect: {count: 0}}
---
id: only-fires
title: A rule with a firing test only
version: 1
severity: warning
stage: FD1
symptom: s
cause: c
fix: f
when: gpu.temperature_memory_c > 90
references: [guide/ZZ1]
tests:
  - {name: fires, facts: {gpus: [{index: 0, temperature_memory_c: 95}]}, expect: {status: fired}}
---
id: asks-slo
title: A question rule
version: 1
severity: info
stage: readiness
symptom: s
cause: c
fix: f
when: answer.slo_defined == false
questions:
  - {id: slo_defined, text: "Is a P99 latency SLO defined?", type: yes_no}
references: [guide/ZZ1]
tests:
  - {name: fires, facts: {answers: {slo_defined: false}}, expect: {fires: true}}
  - {name: quiet, facts: {answers: {slo_defined: true}}, expect: {fires: false}}
---
id: reads-nothing-produced
title: A rule reading a field no collector produces
version: 1
severity: info
stage: FD4
symptom: s
cause: c
fix: f
when: scheduler.container_sees_gpus == false
references: [guide/ZZ2]
tests:
  - {name: fires, facts: {scheduler: {container_sees_gpus: false}}, expect: {fires: true}}
  - {name: quiet, facts: {scheduler: {container_sees_gpus: true}}, expect: {fires: false}}
"""

ITEMS = KnowledgeMap(
    (
        KnowledgeItem("guide/ZZ1", "memory-bound and friends"),
        KnowledgeItem("guide/ZZ2", "a test container sees the GPUs"),
        KnowledgeItem("guide/ZZ3", "nothing recorded"),
    )
)
PRODUCED = {
    "gpu.utilization_memory_pct": ("collector:nvml",),
    "gpu.temperature_memory_c": ("collector:nvml",),
    "scheduler.container_sees_gpus": (),
}


@pytest.fixture(scope="module")
def book(tmp_path_factory: pytest.TempPathFactory):
    f = tmp_path_factory.mktemp("rules") / "r.yaml"
    f.write_text(RULES)
    return load_rulebook([f], include_builtin=False)


def _cov(book, decisions: dict[str, list[dict]]):  # type: ignore[no-untyped-def]
    decs = {k: [Decision.model_validate(d) for d in v] for k, v in decisions.items()}
    return coverage(book, ITEMS, decs, PRODUCED)


def test_encoded_and_asked_decisions_make_an_item_faithful(book) -> None:
    cov = _cov(
        book,
        {
            "guide/ZZ1": [
                {"decision": "memory-bound", "rules": ["both-tests"]},
                {"decision": "SLO defined", "ask": "asks-slo"},
            ]
        },
    )
    zz1 = cov.items[0]
    assert zz1.state is State.FAITHFUL and [d.how for d in zz1.decisions] == ["encoded", "asked"]
    assert zz1.operational and zz1.producers == ["collector:nvml", "responder"]


def test_a_rule_without_a_non_firing_test_leaves_the_decision_missing(book) -> None:
    cov = _cov(book, {"guide/ZZ1": [{"decision": "HBM hot", "rules": ["only-fires"]}]})
    zz1 = cov.items[0]
    assert zz1.state is State.PARTIAL
    assert zz1.missing[0].problems == ["only-fires has no non-firing test"]


@pytest.mark.parametrize(
    ("decision", "problem"),
    [
        ({"rules": ["no-such-rule"]}, "no-such-rule is not in the rulebook"),
        ({"rules": ["both-tests"]}, "both-tests does not cite guide/ZZ2"),
        ({"ask": "both-tests"}, "both-tests asks no question"),
        ({"rules": []}, None),
    ],
)
def test_missing_decisions_say_why(book, decision: dict, problem: str | None) -> None:
    cov = _cov(book, {"guide/ZZ2": [{"decision": "ddd", **decision}]})
    zz2 = cov.items[1]
    assert zz2.state is State.PARTIAL
    assert (problem in zz2.missing[0].problems) if problem else zz2.missing[0].problems == []
    text = coverage_text(cov)
    assert "guide/ZZ2     partial" in text and "MISSING  ddd" in text


def test_cannot_with_a_reason_is_reasoned_not_faithful(book) -> None:
    cov = _cov(
        book,
        {
            "guide/ZZ1": [
                {"decision": "memory-bound", "rules": ["both-tests"]},
                {"decision": "object-store quota", "cannot": "the node sees no bucket quota"},
            ]
        },
    )
    assert cov.items[0].state is State.REASONED
    assert "cannot   object-store quota: the node sees no bucket quota" in coverage_text(cov)


def test_an_item_without_decisions_is_partial(book) -> None:
    cov = _cov(book, {})
    assert [c.state for c in cov.items] == [State.PARTIAL] * 3
    assert not cov.ok
    assert "no decisions recorded" in coverage_text(cov)


def test_rule_reading_an_unproduced_field_is_mentioned_only(book) -> None:
    cov = _cov(book, {"guide/ZZ2": [{"decision": "sees", "rules": ["reads-nothing-produced"]}]})
    zz2 = cov.items[1]
    assert zz2.state is State.FAITHFUL and not zz2.operational
    assert zz2.unproduced == ["scheduler.container_sees_gpus"]
    assert "mentioned only (nothing produces scheduler.container_sees_gpus)" in coverage_text(cov)


def test_unknown_decision_item_fails_the_report(book) -> None:
    decs = {
        "guide/ZZ1": [{"decision": "mem", "rules": ["both-tests"]}],
        "guide/ZZ2": [{"decision": "sees", "rules": ["reads-nothing-produced"]}],
        "guide/ZZ3": [{"decision": "xxx", "cannot": "not on a node"}],
    }
    assert _cov(book, decs).ok
    stray = _cov(book, {**decs, "guide/NOPE": [{"decision": "xxx", "cannot": "why not"}]})
    assert not stray.ok and stray.unknown_decisions == ["guide/NOPE"]
    assert coverage_json(stray)["unknown_decision_items"] == ["guide/NOPE"]


# --------------------------------------------------------------------------- the real report


def test_builtin_report_counts_and_exit_code(builtin_book, capsys) -> None:
    cov = coverage(builtin_book)
    doc = coverage_json(cov)
    assert doc["summary"]["ids"] == len(load_knowledge_map().items)
    assert (
        doc["summary"]["faithful"] + doc["summary"]["reasoned"] + len(doc["summary"]["partial"])
        == doc["summary"]["ids"]
    )
    rc = coverage_command(builtin_book, "json")
    assert rc == (0 if cov.ok else 1)
    assert json.loads(capsys.readouterr().out)["ok"] is cov.ok
    assert cov.unknown == {}


def test_faithful_items_name_rules_with_both_kinds_of_test(builtin_book) -> None:
    for c in coverage(builtin_book).items:
        if c.state is not State.PARTIAL:
            assert c.decisions and not c.missing, c.item.id


def test_cli_coverage_exit_code(capsys: pytest.CaptureFixture[str]) -> None:
    from gpu_triage.cli import main

    rc = main(["rules", "coverage", "--format", "json"])
    doc = json.loads(capsys.readouterr().out)
    assert rc == (0 if doc["ok"] else 1)


def test_cli_coverage_bad_data_file_exits_unknown(
    builtin_book, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import gpu_triage.engine.coverage as cov_mod

    def broken() -> dict:
        raise CoverageDataError("knowledge_decisions.yaml:3:5: mapping values are not allowed")

    monkeypatch.setattr(cov_mod, "load_decisions", broken)
    assert coverage_command(builtin_book, "text") == 3
    assert "knowledge_decisions.yaml:3:5" in capsys.readouterr().err


# --------------------------------------------------------------------------- producers


def test_fact_producers_file_is_fresh() -> None:
    tool = _tool()
    committed = (ROOT / "gpu_triage" / "data" / "fact_producers.yaml").read_text()
    assert committed == tool.render(tool.measure()), (
        "gpu_triage/data/fact_producers.yaml is stale: run python tools/fact_producers.py"
    )


def test_producers_are_measured_not_declared() -> None:
    table = load_producers()
    # NVML and the nvidia-smi parsers produce GPU utilisation; a test container's view is
    # never collected live: only the parser of its output (the runbook step, a paste)
    # sets it.
    assert "collector:nvml" in table["gpu.utilization_gpu_pct"]
    assert "parser:nvidia-smi" in table["gpu.utilization_gpu_pct"]
    assert table["scheduler.container_sees_gpus"] == ("parser:docker-run-nvidia-smi",)
    assert "history:counters" in table["ib.link_downed_delta"]
    assert "engine:enrich" in table["xid.meaning"]
    assert table["site.expected_gpu_count"] == ("supplied:site",)


def test_produced_fields_sees_values_not_defaults() -> None:
    from gpu_triage.model.facts import Facts, GpuFacts, HostFacts

    tool = _tool()
    facts = Facts(host=HostFacts(cpu_iowait_pct=0.0), gpus=[GpuFacts(index=0, name="")])
    got = tool.produced_fields(facts)
    assert "host.cpu_iowait_pct" in got and "gpu.index" in got  # zero is a value
    assert "gpu.name" not in got and "host.hostname" not in got  # empty / unset are not


# --------------------------------------------------------------------------- lint

RULE = """\
id: cites-a-missing-id
title: A rule citing an ID the map does not have
version: 1
severity: info
stage: FD1
symptom: s
cause: c
fix: f
when: host.cpu_iowait_pct > 50
references: [guide/CM1, guide/T99]
tests:
  - {name: fires, facts: {host: {cpu_iowait_pct: 60}}, expect: {fires: true}}
  - {name: quiet, facts: {host: {cpu_iowait_pct: 1}}, expect: {fires: false}}
"""


def test_lint_reports_unknown_knowledge_map_id(tmp_path: Path) -> None:
    f = tmp_path / "r.yaml"
    f.write_text(RULE)
    diags = lint(PARSERS, [f])
    msgs = [(d.line, d.message) for d in diags]
    assert msgs == [(10, "reference 'guide/T99' is not a knowledge-map ID")]
    assert diags[0].level == "error"


def test_lint_accepts_known_ids_and_urls(tmp_path: Path) -> None:
    f = tmp_path / "r.yaml"
    f.write_text(RULE.replace("guide/T99", "https://docs.nvidia.com/deploy/xid-errors/"))
    assert lint(PARSERS, [f]) == []


def test_builtin_rulebook_lints_clean() -> None:
    assert lint(PARSERS, [], include_builtin=True) == []
