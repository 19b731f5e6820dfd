"""Findings consistent by construction (#16): over every bundled demo and scenario, no
text shows a stand-in for a missing value, no title of a rule that did not fire names a
value, and no GPU with a critical finding is also reported healthy."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

from gpu_triage.engine.compiler import Rulebook, load_rulebook
from gpu_triage.engine.consistency import HEALTHY_TAG
from gpu_triage.engine.evaluate import evaluate
from gpu_triage.engine.findings import Finding, FindingsDocument
from gpu_triage.model.demos import demo_names, demo_snapshot_path
from gpu_triage.model.facts import XidEvent
from gpu_triage.model.snapshot import Snapshot, load_snapshot

TESTS = Path(__file__).parents[1]
SNAPSHOTS = sorted(
    [demo_snapshot_path(n) for n in demo_names()]
    + sorted((TESTS / "scenarios").glob("*.json"))
    + sorted((TESTS / "data" / "snapshots").glob("*.json")),
    key=str,
)


@functools.cache
def book() -> Rulebook:
    return load_rulebook()


def _doc(path: Path) -> FindingsDocument:
    return evaluate(load_snapshot(path), book(), engine="reference")


def _all_findings(doc: FindingsDocument) -> list[Finding]:
    return [*doc.findings, *doc.cannot_evaluate, *doc.needs_confirmation]


def test_there_are_snapshots_to_check() -> None:
    assert len(SNAPSHOTS) >= 30


@pytest.mark.parametrize("path", SNAPSHOTS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_no_text_stands_in_for_a_missing_value(path: Path) -> None:
    doc = _doc(path)
    rules = {r.id: r.rule for r in book().rules}
    for f in _all_findings(doc):
        rule = rules[f.rule_id]
        for key in ("title", "symptom", "cause", "fix"):
            shown, written = getattr(f, key), getattr(rule, key)
            # A "?" or "unknown" the rule did not write itself is a value that was missing.
            for word in ("?", "unknown"):
                assert shown.count(word) <= written.count(word), (f.rule_id, key, shown)
            assert "[[" not in shown and "]]" not in shown, (f.rule_id, key, shown)
        for c in f.competing:
            assert "?" not in c.title or "?" in rules[c.rule_id].title, c.title


def _gpus_named(f: Finding) -> set[str]:
    """Bus ids of the GPUs a finding speaks for (its subject and the GPUs folded in)."""
    out = {f.subject_key.gpu} if f.subject_key.gpu else set()
    for label in f.also_seen_on:
        if "(" in label:
            out.add(label.rsplit("(", 1)[1].rstrip(")"))
    return out


@pytest.mark.parametrize("path", SNAPSHOTS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_no_gpu_is_both_failing_and_healthy(path: Path) -> None:
    doc = _doc(path)
    healthy_rules = {r.id for r in book().rules if HEALTHY_TAG in r.rule.tags}
    failing = {f.subject_key.gpu for f in doc.findings if f.severity == "critical"} - {None}
    for f in doc.findings:
        if f.rule_id in healthy_rules:
            assert not (_gpus_named(f) & failing), (f.rule_id, _gpus_named(f) & failing)


def _busy_node_with_xid79(gpu: int) -> Snapshot:
    snap = load_snapshot(TESTS / "scenarios" / "healthy-busy.json")
    bus = snap.facts.gpus[gpu].pci_bus_id
    assert bus
    snap.facts.xids.append(
        XidEvent(
            code=79,
            pci_bus_id=bus,
            raw=f"NVRM: Xid (PCI:{bus}): 79, pid=1234, GPU has fallen off the bus.",
            line=1,
        )
    )
    return snap


def test_a_gpu_off_the_bus_is_left_out_of_the_compute_bound_finding() -> None:
    healthy = _doc(TESTS / "scenarios" / "healthy-busy.json")
    busy = [f for f in healthy.findings if f.rule_id == "gpu-compute-bound"]
    assert busy, "the busy twin reports compute-bound GPUs"
    for gpu in (0, 3):  # the GPU the finding is rendered from, and one folded into it
        doc = evaluate(_busy_node_with_xid79(gpu), book(), engine="reference")
        bus = load_snapshot(TESTS / "scenarios" / "healthy-busy.json").facts.gpus[gpu]
        assert bus.pci_bus_id
        critical = [f for f in doc.findings if f.severity == "critical"]
        assert any(f.subject_key.gpu == bus.pci_bus_id for f in critical)
        compute = [f for f in doc.findings if f.rule_id == "gpu-compute-bound"]
        assert len(compute) == 1
        assert bus.pci_bus_id not in _gpus_named(compute[0])
        assert f"GPU {gpu} at" not in compute[0].symptom
        assert compute[0].occurrences == busy[0].occurrences - 1


def test_every_gpu_failing_drops_the_reassurance() -> None:
    snap = load_snapshot(TESTS / "scenarios" / "healthy-busy.json")
    for g in snap.facts.gpus:
        assert g.pci_bus_id
        snap.facts.xids.append(XidEvent(code=79, pci_bus_id=g.pci_bus_id, raw="Xid 79", line=1))
    doc = evaluate(snap, book(), engine="reference")
    assert not [f for f in doc.findings if f.rule_id == "gpu-compute-bound"]
