"""Symptom-first entry: `run --symptom` ranks the symptom's differential first within a
severity, and `--error-text` turns what the job printed into facts."""

from __future__ import annotations

import json
from pathlib import Path

from gpu_triage.cli import main
from gpu_triage.engine.compiler import load_rulebook
from gpu_triage.engine.evaluate import evaluate
from gpu_triage.engine.symptoms import SYMPTOMS, differential, symptom_choices
from gpu_triage.model.facts import Facts, GpuFacts, JobMetrics, Symptom
from gpu_triage.model.snapshot import Snapshot, dump_snapshot

INCIDENTS = Path(__file__).resolve().parents[1] / "data" / "incidents"


def two_warnings(symptom: str | None) -> Facts:
    # Memory held with no process (oom) and a loader warning (slow): both warnings.
    from gpu_triage.collectors.parsers.error_text import parse_error_text

    facts = parse_error_text(
        "UserWarning: The dataloader does not have many workers which may be a bottleneck."
    )
    facts.gpus = [GpuFacts(index=0, memory_used_mib=12799, memory_total_mib=16280, process_count=0)]
    facts.job = JobMetrics(symptom=symptom) if symptom else None
    return facts


def ranked(facts: Facts) -> list[str]:
    doc = evaluate(Snapshot(facts=facts), load_rulebook(), engine="reference")
    return [f.rule_id for f in doc.findings if f.severity.value == "warning"]


def test_the_symptom_puts_its_differential_first() -> None:
    oom = ranked(two_warnings("oom"))
    slow = ranked(two_warnings("slow"))
    assert oom[0] == "gpu-memory-held-without-process"
    assert slow[0] in {"dataloader-too-few-workers", "gpu-memory-held-without-process"}
    assert slow.index("dataloader-too-few-workers") < oom.index("dataloader-too-few-workers")


def test_every_symptom_has_a_choice_and_its_rules_exist() -> None:
    book = load_rulebook()
    ids = {r.id for r in book.rules}
    assert [c[0] for c in symptom_choices()] == [s.value for s in Symptom]
    for info in SYMPTOMS.values():
        assert set(info.rules) <= ids, set(info.rules) - ids
        assert differential(((r.id, r.rule.tags) for r in book.rules), info.symptom.value)


def test_hang_asks_the_p2p_question_first(tmp_path: Path) -> None:
    facts = Facts(job=JobMetrics(symptom=Symptom.HANG))
    doc = evaluate(Snapshot(facts=facts), load_rulebook(), engine="reference")
    book = load_rulebook()
    hang = differential(((r.id, r.rule.tags) for r in book.rules), "hang")
    asked = [f.rule_id for f in doc.needs_confirmation]
    assert "gpu-p2p-path-breaks-collectives" in asked
    in_hang = [rid in hang for rid in asked]
    assert in_hang == sorted(in_hang, reverse=True)  # the differential's questions first


def test_run_with_symptom_and_error_text(tmp_path: Path) -> None:
    snap = tmp_path / "snap.json"
    snap.write_text(dump_snapshot(Snapshot(facts=Facts())))
    out = tmp_path / "findings.json"
    err_file = INCIDENTS / "023-ecc-uncorrectable-bad-node-slurm-reschedules" / "job-error.txt"
    rc = main(
        [
            "run",
            "--snapshot",
            str(snap),
            "--symptom",
            "crash",
            "--error-text",
            str(err_file),
            "--engine",
            "reference",
            "--out",
            str(out),
        ]
    )
    doc = json.loads(out.read_text())
    assert rc == 2
    assert doc["findings"][0]["rule_id"] == "job-hit-uncorrectable-ecc"


def test_error_text_without_a_known_error_is_a_usage_error(tmp_path: Path) -> None:
    snap = tmp_path / "snap.json"
    snap.write_text(dump_snapshot(Snapshot(facts=Facts())))
    text = tmp_path / "log.txt"
    text.write_text("epoch 1 loss 0.3\n")
    rc = main(
        [
            "run",
            "--snapshot",
            str(snap),
            "--error-text",
            str(text),
            "--out",
            str(tmp_path / "f.json"),
        ]
    )
    assert rc == 64
