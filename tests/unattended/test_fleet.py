"""`gpu-triage fleet` over a generated history, findings documents and snapshots."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gpu_triage.ops.fleet import FleetReport, Inventory, analyse, fleet_markdown, read_fleet
from tests.conftest import ROOT, SNAPSHOTS


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("fleet")
    subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks/make_fleet_history.py"),
            str(d),
            "--nodes",
            "200",
            "--days",
            "2",
        ],
        check=True,
        capture_output=True,
    )
    return d


@pytest.fixture(scope="module")
def report(history: Path) -> FleetReport:
    nodes, runs, errors, files = read_fleet([history], workers=2)
    return analyse(nodes, runs, errors, files, Inventory.load(history / "inventory.csv"))


def test_counts(report: FleetReport) -> None:
    assert report.nodes == 200 and report.gpus == 1600 and report.runs == 200 * 48
    assert report.files == 200 and not report.errors


def test_repeat_offenders_follow_the_power_law(report: FleetReport) -> None:
    assert report.repeat_gpus and report.repeat_gpus[0].bad_runs > 5
    assert report.top1pct_share_pct > 50  # the generator's offenders dominate
    assert all(o.serial for o in report.repeat_gpus)


def test_driver_regression_and_drift(report: FleetReport) -> None:
    canary = next(x for x in report.xid_spread if x.code == 109)
    assert canary.driver == "575.51.03" and canary.verdict.startswith("driver regression")
    drivers = next(d for d in report.drift if d.what == "driver")
    assert drivers.majority == "570.86.15" and "575.51.03" in drivers.outliers
    vbios = next(d for d in report.drift if d.what == "vbios")
    assert vbios.scope == "NVIDIA H100 80GB HBM3" and "96.00.74.00.0B" in vbios.outliers


def test_hot_rack(report: FleetReport) -> None:
    assert [h.name for h in report.hot_spots if h.level == "rack"] == ["r007"]


def test_markdown_and_json_cli(history: Path, tmp_path: Path) -> None:
    out = tmp_path / "fleet.json"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "gpu_triage",
            "fleet",
            str(history),
            "--format",
            "json",
            "--out",
            str(out),
            "--inventory",
            str(history / "inventory.csv"),
        ],
        check=True,
    )
    rep = FleetReport.model_validate_json(out.read_text())
    assert rep.nodes == 200
    text = fleet_markdown(rep)
    assert "## Repeat offenders" in text and "rack r007" in text


def test_snapshots_findings_and_bad_files_mix(tmp_path: Path) -> None:
    d = tmp_path / "mixed"
    d.mkdir()
    for name in ("xid79.json", "healthy-busy.json"):
        (d / name).write_text((SNAPSHOTS / name).read_text())
    doc = subprocess.run(
        [
            sys.executable,
            "-m",
            "gpu_triage",
            "run",
            "--snapshot",
            str(SNAPSHOTS / "input-bound.json"),
        ],
        capture_output=True,
        text=True,
    )
    findings = json.loads(doc.stdout)
    findings["hostname"] = "other-node"
    (d / "findings.json").write_text(json.dumps(findings))
    (d / "broken.jsonl").write_text('{"host": "x"}\n{not json\n')
    nodes, runs, errors, files = read_fleet([d], workers=1)
    assert files == 4 and runs == 4
    assert set(nodes) == {"gpu-node-017", "other-node", "x"}
    assert len(errors) == 1 and "broken.jsonl:2" in errors[0]
