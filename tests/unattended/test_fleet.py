"""`gpu-triage fleet` over a generated history, findings documents and snapshots."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gpu_triage.ops.fleet import FleetReport, Inventory, analyse, fleet_markdown, read_fleet
from tests.conftest import ROOT, SNAPSHOTS

NODES, DAYS = 250, 2


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("fleet")
    subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks/make_fleet_history.py"),
            str(d),
            "--nodes",
            str(NODES),
            "--days",
            str(DAYS),
            "--canary-every",
            "25",
        ],
        check=True,
        capture_output=True,
    )
    return d


@pytest.fixture(scope="module")
def report(history: Path) -> FleetReport:
    read = read_fleet([history], workers=2)
    return analyse(read, Inventory.load(history / "inventory.csv"))


def test_counts(report: FleetReport) -> None:
    assert report.nodes == NODES and report.gpus == NODES * 8 and report.runs == NODES * DAYS * 24
    assert report.files == NODES and not report.errors and report.error_count == 0
    assert report.window_start.startswith("2026-10-01T00:00")
    assert report.window_end.startswith("2026-10-02T23:00")


def test_repeat_offenders_follow_the_power_law(report: FleetReport) -> None:
    assert report.repeat_gpus and report.repeat_gpus[0].bad_runs > 5
    assert report.top1pct_share_pct is not None and report.top1pct_share_pct > 50
    assert "worst 1% of GPUs (20 of 2000)" in report.top1pct_statement
    assert all(o.serial for o in report.repeat_gpus)
    assert report.repeat_gpus[0].severity == "critical"


def test_top_findings_worst_first(report: FleetReport) -> None:
    sevs = [t.severity for t in report.top_findings]
    rank = {"info": 0, "warning": 1, "critical": 2}
    assert sevs == sorted(sevs, key=lambda s: -rank[s])
    # the info finding fires on most nodes now, yet comes after every critical one
    info = next(t for t in report.top_findings if t.rule == "gpu-compute-bound")
    assert info.nodes_now > report.nodes // 2 and report.top_findings[-1] is info


def test_driver_regression_and_drift(report: FleetReport) -> None:
    canary = next(x for x in report.xid_spread if x.code == 109)
    assert canary.driver == "575.51.03" and canary.verdict.startswith("driver regression")
    assert (
        canary.nodes_on_driver == NODES // 25 and canary.nodes >= 8 and canary.other_nodes_with == 0
    )
    assert canary.p_value is not None and canary.p_value < 1e-6
    assert "Fisher" in canary.confidence and canary.severity == "critical"
    # the random faults on the majority driver are not a regression of it
    for x in report.xid_spread:
        if x.driver == "570.86.15":
            assert not x.verdict.startswith("driver regression"), x
    drivers = next(d for d in report.drift if d.what == "driver")
    assert drivers.majority == "570.86.15" and "575.51.03" in drivers.outliers
    vbios = next(d for d in report.drift if d.what == "vbios")
    assert vbios.scope == "NVIDIA H100 80GB HBM3" and "96.00.74.00.0B" in vbios.outliers


def test_hot_rack(report: FleetReport) -> None:
    hot = [h for h in report.hot_spots if h.level == "rack"]
    assert [h.name for h in hot] == ["r007"]
    assert 6.0 < hot[0].delta_c < 10.0 and hot[0].delta_ci95_c[0] > 0 and hot[0].gpus == 128


def test_utilisation_ranked(report: FleetReport) -> None:
    u = report.utilisation
    assert u is not None and u.target_pct == 85.0 and u.gpus_ranked == NODES * 8
    assert 0 < u.gpus_meeting_target < u.gpus_ranked
    means = [r.mean_pct for r in u.lowest_nodes]
    assert means == sorted(means) and means[0] < 10  # the generator's idle nodes first
    assert all(r.samples == DAYS * 24 * 8 for r in u.lowest_nodes)
    assert all(r.samples == DAYS * 24 for r in u.lowest_gpus)


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
    assert rep.nodes == NODES
    text = fleet_markdown(rep)
    assert "## Repeat offenders" in text and "rack r007" in text
    assert "## Utilisation against the target (fleet/F9)" in text
    # sections worst first: the critical ones before drift (warning) and utilisation (info)
    heads = [line for line in text.splitlines() if line.startswith("## ")]
    assert heads.index("## Top findings") < heads.index("## Version drift")
    assert heads.index("## The same Xid on many nodes") < heads.index("## Version drift")
    assert heads[-2:] == [
        "## Utilisation against the target (fleet/F9)",
        "## GPUs far from their own history",  # nothing to report: last
    ]


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
    read = read_fleet([d], workers=1)
    assert read.files == 4 and read.runs == 4
    assert set(read.nodes) == {"gpu-node-017", "other-node", "x"}
    assert read.error_count == 1 and read.errors == [f"{d / 'broken.jsonl'}:2: not JSON"]


def test_one_findings_document_counts_right(tmp_path: Path) -> None:
    doc = subprocess.run(
        [sys.executable, "-m", "gpu_triage", "run", "--snapshot", str(SNAPSHOTS / "xid79.json")],
        capture_output=True,
        text=True,
    )
    path = tmp_path / "findings.json"
    path.write_text(doc.stdout)
    rep = analyse(read_fleet([path], workers=1))
    assert rep.nodes == 1 and rep.gpus == 0 and rep.nodes_without_inventory == 1
    first = fleet_markdown(rep).splitlines()[2]
    assert first.startswith("1 node, 0 GPUs (plus 1 node known only from findings documents")
    assert "1 run read from 1 file." in first
