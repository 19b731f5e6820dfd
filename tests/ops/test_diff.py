"""`gpu-triage diff`: a slow node beside its healthy twin, the cause ranked on top."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from gpu_triage.engine.compiler import load_rulebook
from gpu_triage.engine.evaluate import evaluate
from gpu_triage.model.snapshot import load_snapshot
from gpu_triage.ops.diff import RANGE, diff_documents, diff_markdown

SCENARIOS = Path(__file__).resolve().parents[1] / "scenarios"
SLOW, HEALTHY = SCENARIOS / "cm1-input-bound-storage.json", SCENARIOS / "healthy-busy.json"


def _report(slow: Path, healthy: Path):  # type: ignore[no-untyped-def]
    book = load_rulebook()
    a, b = load_snapshot(slow), load_snapshot(healthy)
    return diff_documents(
        a.facts,
        evaluate(a, book, engine="reference"),
        b.facts,
        evaluate(b, book, engine="reference"),
        book,
    )


def test_the_slow_nodes_cause_ranks_on_top() -> None:
    report = _report(SLOW, HEALTHY)
    assert report.findings[0].side == "slow_only"
    assert report.findings[0].rule_id == "input-bound-pipeline"
    assert len(report.findings[0].subjects) == 8  # one line for the eight GPUs it starves
    healthy_only = [d.rule_id for d in report.findings if d.side == "healthy_only"]
    assert "gpu-compute-bound" in healthy_only
    paths = [d.path for d in report.facts]
    # what the storage rule reads differs, and FD1 facts come before FD2 facts
    assert "disk.util_pct" in paths and "host.psi_io_some_avg10" in paths
    stages = [d.stage.rank for d in report.facts if d.stage is not None]
    assert stages == sorted(stages)
    # facts no rule reads come last
    unread = [i for i, d in enumerate(report.facts) if d.stage is None]
    assert unread and unread == list(range(len(report.facts) - len(unread), len(report.facts)))


def test_a_node_compared_with_itself_or_with_noise_differs_in_nothing(tmp_path: Path) -> None:
    assert not _report(HEALTHY, HEALTHY).facts
    snap = load_snapshot(HEALTHY)
    for g in snap.facts.gpus:
        g.temperature_gpu_c = (g.temperature_gpu_c or 0) + 3  # within 5 °C
        g.utilization_gpu_pct = (g.utilization_gpu_pct or 0) - 2  # within 10 points
        g.power_draw_w = (g.power_draw_w or 0) * 1.05  # within 10 %
        g.serial = "another-serial"  # twins differ in what names them
    noisy = tmp_path / "noisy.json"
    noisy.write_text(snap.model_dump_json())
    report = _report(noisy, HEALTHY)
    assert not [d for d in report.facts if d.path.startswith("gpu.")], report.facts
    assert not report.findings


def test_markdown_folds_gpus_and_names_the_noise() -> None:
    text = diff_markdown(_report(SLOW, HEALTHY))
    assert f"| GPUs 0{RANGE}7 |" in text
    assert text.index("Only on slow") < text.index("Facts that differ")
    assert "Differs means:" in text and "°C" in text


def test_cli_diff_json(tmp_path: Path) -> None:
    out = tmp_path / "diff.json"
    r = subprocess.run(
        [sys.executable, "-m", "gpu_triage", "diff", str(SLOW), str(HEALTHY), "--format",
         "json", "--out", str(out)],
        capture_output=True,
        text=True,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    doc = json.loads(out.read_text())
    assert doc["findings"][0]["rule_id"] == "input-bound-pipeline"
    bad = subprocess.run(
        [sys.executable, "-m", "gpu_triage", "diff", str(tmp_path / "missing.json"), str(HEALTHY)],
        capture_output=True,
        text=True,
    )
    assert bad.returncode == 3 and "missing.json" in bad.stderr
