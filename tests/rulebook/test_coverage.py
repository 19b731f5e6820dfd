"""Knowledge-map coverage: every ID is encoded by a tested rule; lint refuses unknown IDs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpu_triage.collectors.parsers.registry import PARSERS
from gpu_triage.engine.coverage import (
    KnowledgeItem,
    KnowledgeMap,
    coverage,
    coverage_command,
    load_knowledge_map,
)
from gpu_triage.engine.lint import lint

ROOT = Path(__file__).resolve().parents[2]


def test_knowledge_map_lists_every_id_of_the_shared_map() -> None:
    ids = load_knowledge_map().ids
    assert len({i for i in ids if not i.startswith("hw/")}) == 49
    assert {"guide/CP1", "guide/T15", "guide/CM7", "guide/MS3", "guide/CD", "guide/Q8"} <= ids
    assert {"fleet/F1", "fleet/F9", "xid/CATALOG"} <= ids
    assert "fleet/F4" not in ids and "fleet/F5" not in ids


def test_every_id_is_covered_by_a_tested_rule(builtin_book) -> None:
    cov = coverage(builtin_book)
    accepted = set(load_knowledge_map().uncovered)
    uncovered = [c.item.id for c in cov.items if not c.covered and c.item.id not in accepted]
    assert uncovered == [] and cov.ok
    assert cov.unknown == {}
    for c in cov.items:
        assert all(n >= 2 for _, n in c.rules), c.item.id


def test_ask_items_are_flagged() -> None:
    asks = {i.id for i in load_knowledge_map().items if i.ask}
    assert asks == {"guide/CM2", "guide/CM4", "guide/CM6", "guide/CM7"}


def test_coverage_command_text(builtin_book, capsys: pytest.CaptureFixture[str]) -> None:
    assert coverage_command(builtin_book, "text") == 0
    out = capsys.readouterr().out
    total = len(load_knowledge_map().ids)
    accepted = len(load_knowledge_map().uncovered)
    assert f"{total - accepted}/{total} knowledge-map IDs covered" in out
    assert "guide/CM1" in out and "input-bound-pipeline [" in out


def test_coverage_command_json(builtin_book, capsys: pytest.CaptureFixture[str]) -> None:
    assert coverage_command(builtin_book, "json") == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["ok"] is True and doc["summary"]["uncovered"] == []
    item = next(i for i in doc["items"] if i["id"] == "guide/Q7")
    assert {"id": "gpu-compute-bound", "tests": 5} in item["rules"]


def test_uncovered_id_fails_unless_a_reason_is_given(
    builtin_book, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import gpu_triage.engine.coverage as cov_mod

    extra = KnowledgeItem("guide/ZZ9", "an item no rule encodes")
    kmap = load_knowledge_map()
    bigger = KnowledgeMap((*kmap.items, extra))
    monkeypatch.setattr(cov_mod, "load_knowledge_map", lambda: bigger)
    assert coverage_command(builtin_book, "text") == 1
    assert "guide/ZZ9     UNCOVERED" in capsys.readouterr().out
    excused = KnowledgeMap(
        (*kmap.items, extra), {**kmap.uncovered, "guide/ZZ9": "needs fleet history"}
    )
    monkeypatch.setattr(cov_mod, "load_knowledge_map", lambda: excused)
    assert coverage_command(builtin_book, "text") == 0
    assert "UNCOVERED (accepted)" in capsys.readouterr().out


def test_cli_coverage_exit_code(capsys: pytest.CaptureFixture[str]) -> None:
    from gpu_triage.cli import main

    assert main(["rules", "coverage", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["summary"]["ids"] == len(load_knowledge_map().ids)


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


def test_hardware_items_of_the_audit_are_listed() -> None:
    """Audit §2-4's hardware checks are items of their own (hw/...), each cited by the
    rules that encode it or accepted as uncovered with the reason."""
    km = load_knowledge_map()
    hw = {i for i in km.ids if i.startswith("hw/")}
    assert {"hw/FM-SERVICE", "hw/FM-VERSION", "hw/PCIE-LIMIT", "hw/IB-FLAPS", "hw/DIAG"} <= hw
    assert {"hw/NCCL-TESTS", "hw/GSP-MODE", "hw/DCGM-WATCHES"} <= set(km.uncovered)
