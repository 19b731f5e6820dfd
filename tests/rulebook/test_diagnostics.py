"""Rules on DCGM diagnostic results, from parsed dcgmi diag output."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpu_triage.collectors.parsers.registry import get_parser
from gpu_triage.engine.compiler import Rulebook
from gpu_triage.engine.evaluate import evaluate
from gpu_triage.engine.inputs import EvalInput

DCGM = Path(__file__).resolve().parents[1] / "data" / "hand-written" / "dcgm"
REAL = Path(__file__).resolve().parents[1] / "data" / "real-outputs" / "dcgm"


def findings(book: Rulebook, path: Path, engine: str) -> list[tuple[str, str]]:
    facts = get_parser("dcgmi-diag")(path.read_text(), path.name)
    doc = evaluate(EvalInput(facts), book, engine=engine)
    return sorted((f.rule_id, f.title) for f in doc.findings if f.rule_id.startswith("dcgm-"))


@pytest.mark.parametrize("engine", ["reference", "durable"])
def test_failing_run_reports_hardware_and_deployment(builtin_book: Rulebook, engine: str) -> None:
    got = findings(
        builtin_book, DCGM / "dcgmi-diag-r3-dcgm33-memory-fail-gpu1-wrapped-warning.txt", engine
    )
    assert ("dcgm-diag-failed", 'DCGM diagnostic "GPU Memory" failed on GPU 1') in got
    assert any(r == "dcgm-diag-failed" and "Page Retirement/Row Remap" in t for r, t in got)
    assert ("dcgm-diag-warning", 'DCGM diagnostic "Targeted Power" warns on GPU 3') in got
    assert ("dcgm-diag-skipped", 'DCGM diagnostic "Memory Bandwidth" did not run') in got
    assert not any(r == "dcgm-diag-deployment-failed" for r, _ in got)


def test_persistence_mode_is_a_deployment_failure(builtin_book: Rulebook) -> None:
    got = findings(builtin_book, DCGM / "dcgmi-diag-r1-dcgm2-persistence-fail-all.txt", "reference")
    assert got == [
        ("dcgm-diag-deployment-failed", 'DCGM deployment check "Persistence Mode" failed')
    ]


def test_json_failure_and_the_real_all_pass(builtin_book: Rulebook) -> None:
    got = findings(builtin_book, DCGM / "dcgmi-diag-r2-j-dcgm4-pcie-fail-entity.json", "reference")
    assert got == [("dcgm-diag-failed", 'DCGM diagnostic "pcie" failed on GPU 1')]
    real = REAL / "dcgmi-diag-r3-deployment-all-pass-fragment-dcgm55.txt"
    assert findings(builtin_book, real, "reference") == []
