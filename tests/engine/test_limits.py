"""A snapshot beyond the bounds of one node is refused with a message, exit 3."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gpu_triage.engine.evaluate import evaluate
from gpu_triage.engine.inputs import EvalInput
from gpu_triage.model import limits
from gpu_triage.model.facts import Facts, XidEvent
from gpu_triage.model.snapshot import SnapshotError, load_snapshot, parse_snapshot
from tests.conftest import SNAPSHOTS


def _snapshot_text(**facts: object) -> str:
    data = json.loads((SNAPSHOTS / "healthy-busy.json").read_text())
    data["facts"].update(facts)
    return json.dumps(data)


def test_too_many_gpus_is_refused_before_validation() -> None:
    gpus = [{"index": i} for i in range(limits.MAX_GPUS + 1)]
    with pytest.raises(SnapshotError, match="4,097 GPUs"):
        parse_snapshot(_snapshot_text(gpus=gpus), "big.json")


def test_too_many_events_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(limits, "MAX_EVENTS", 10)
    text = _snapshot_text(xids=[{"code": 79}] * 6, aers=[{"severity": "corrected"}] * 5)
    with pytest.raises(SnapshotError, match="11 kernel-log events, more than 10"):
        parse_snapshot(text, "storm.json")
    # at the bound it is evaluated
    parse_snapshot(_snapshot_text(xids=[{"code": 79}] * 10), "storm.json")


def test_too_many_items_of_another_kind(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(limits, "MAX_ITEMS", 3)
    with pytest.raises(SnapshotError, match="4 processes"):
        parse_snapshot(_snapshot_text(processes=[{"pid": i} for i in range(4)]), "p.json")


def test_evaluate_refuses_a_live_collection_beyond_the_bounds(
    builtin_book, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(limits, "MAX_EVENTS", 2)
    facts = Facts(xids=[XidEvent(code=79, line=i) for i in range(3)])
    with pytest.raises(SnapshotError, match="3 kernel-log events"):
        evaluate(EvalInput(facts, hostname="node7"), builtin_book)


def test_cli_exits_unknown_with_the_reason(tmp_path: Path) -> None:
    big = tmp_path / "big.json"
    big.write_text(_snapshot_text(gpus=[{"index": i} for i in range(limits.MAX_GPUS + 1)]))
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "gpu_triage",
            "run",
            "--snapshot",
            str(big),
            "--format",
            "json",
            "--out",
            str(tmp_path / "out.json"),
        ],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 3
    assert "4,097 GPUs" in r.stderr and str(big) in r.stderr


def test_a_normal_snapshot_is_within_bounds() -> None:
    snap = load_snapshot(SNAPSHOTS / "healthy-busy.json")
    limits.check_counts(limits.counts_of(snap.facts))
