"""`gpu-triage readiness`: pass/fail for putting a node into service, on the shipped
snapshot fixtures and on a live run whose collection and commands are stand-ins."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpu_triage.cli import main
from gpu_triage.engine.compiler import Rulebook
from gpu_triage.io.commands import CommandResult
from gpu_triage.model.facts import XidEvent
from gpu_triage.model.snapshot import Snapshot, load_snapshot
from gpu_triage.ops.readiness import Profile, ProfileCommand, check_live, default_profile

DATA = Path(__file__).resolve().parents[1] / "data"
SNAPS = DATA / "snapshots"
ALL_PASS = (
    DATA / "real-outputs" / "dcgm" / "dcgmi-diag-r3-deployment-all-pass-fragment-dcgm55.txt"
).read_text()
FAILING = (
    DATA / "hand-written" / "dcgm" / "dcgmi-diag-r3-j-dcgm33-memory-fail-gpu1.json"
).read_text()


def readiness(tmp_path: Path, *args: str) -> tuple[int, dict]:
    out = tmp_path / "readiness.json"
    rc = main(["readiness", *args, "--engine", "reference", "--out", str(out)])
    return rc, json.loads(out.read_text()) if out.exists() else {}


@pytest.mark.parametrize(
    ("fixture", "rc", "reason"),
    [
        ("readiness-healthy", 0, None),
        ("readiness-row-remap-pending", 2, "gpu-memory-repair-pending"),
        ("readiness-link-downgraded", 2, "pcie-link-downgraded"),
        ("readiness-diag-failed", 2, "dcgm-diag-failed"),
        ("readiness-fabric-manager-version-mismatch", 2, "fabric-manager-version-mismatch"),
    ],
)
def test_shipped_fixtures(tmp_path: Path, fixture: str, rc: int, reason: str | None) -> None:
    got, rep = readiness(tmp_path, "--snapshot", str(SNAPS / f"{fixture}.json"))
    assert got == rc == rep["exit_code"]
    assert rep["verdict"] == ("pass" if rc == 0 else "fail")
    assert [r["rule_id"] for r in rep["reasons"]] == ([reason] if reason else [])
    assert rep["commands"] == []  # a snapshot runs nothing
    if reason == "dcgm-diag-failed":
        assert "GPU 2" in rep["reasons"][0]["title"]


def test_markdown_report_names_the_reason(tmp_path: Path) -> None:
    out = tmp_path / "r.md"
    rc = main(
        [
            "readiness",
            "--snapshot",
            str(SNAPS / "readiness-link-downgraded.json"),
            "--format",
            "markdown",
            "--out",
            str(out),
            "--engine",
            "reference",
        ]
    )
    text = out.read_text()
    assert rc == 2 and "FAIL" in text and "pcie-link-downgraded" in text and "- none" in text


def test_gpus_unreadable_is_could_not_check(tmp_path: Path) -> None:
    rc, rep = readiness(tmp_path, "--snapshot", str(SNAPS / "no-gpu-collector.json"))
    assert rc == 3 and rep["verdict"] == "could_not_check"
    assert any("GPUs could not be read" in n for n in rep["not_checked"])


def test_bad_profile_is_a_usage_error(tmp_path: Path) -> None:
    bad = tmp_path / "profile.yaml"
    bad.write_text("fail_on: sometimes\n")
    rc, _ = readiness(
        tmp_path, "--profile", str(bad), "--snapshot", str(SNAPS / "readiness-healthy.json")
    )
    assert rc == 64


def test_default_profile_runs_dcgm_only_where_installed() -> None:
    assert default_profile(3, have=lambda name: "/usr/bin/dcgmi").commands[0].argv == [
        "dcgmi",
        "diag",
        "-r",
        "3",
        "-j",
    ]
    assert default_profile(1, have=lambda name: None).commands == []


class Stand:
    """Collection and command stand-ins: snapshots in turn, recorded command lines."""

    def __init__(self, snaps: list[Snapshot], outputs: dict[str, CommandResult]) -> None:
        self.snaps, self.outputs, self.ran = snaps, outputs, []

    def collect(self) -> Snapshot:
        return self.snaps.pop(0)

    def run(self, argv: list[str], timeout_s: float) -> CommandResult:
        self.ran.append(argv)
        return self.outputs[argv[0]]


def healthy() -> Snapshot:
    snap = load_snapshot(SNAPS / "readiness-healthy.json")
    snap.facts.diags = []  # a live node has diagnostics only once they run
    return snap


PROFILE = Profile(
    name="site",
    commands=[ProfileCommand(argv=["dcgmi", "diag", "-r", "1", "-j"], required=True)],
)


def test_live_run_passes_and_lists_its_commands(builtin_book: Rulebook) -> None:
    stand = Stand([healthy(), healthy()], {"dcgmi": CommandResult(["dcgmi"], 0, ALL_PASS)})
    rep = check_live(stand.collect, builtin_book, PROFILE, "reference", stand.run)
    assert stand.ran == [["dcgmi", "diag", "-r", "1", "-j"]]  # only what the profile names
    assert rep.verdict == "pass" and rep.exit_code == 0
    assert [(c.argv, c.status, c.results) for c in rep.commands] == [
        (["dcgmi", "diag", "-r", "1", "-j"], "ok", 9)
    ]


def test_live_diag_failure_exit_nonzero_still_read(builtin_book: Rulebook) -> None:
    stand = Stand([healthy(), healthy()], {"dcgmi": CommandResult(["dcgmi"], 226, FAILING)})
    rep = check_live(stand.collect, builtin_book, PROFILE, "reference", stand.run)
    assert rep.verdict == "fail"
    assert {r.rule_id for r in rep.reasons} == {"dcgm-diag-failed"}


def test_an_xid_during_the_diagnostic_fails_the_node(builtin_book: Rulebook) -> None:
    after = healthy()
    after.facts.xids.append(
        XidEvent(code=63, pci_bus_id="0000:18:00.0", time_text="12.5", line=9, message="row remap")
    )
    stand = Stand([healthy(), after], {"dcgmi": CommandResult(["dcgmi"], 0, ALL_PASS)})
    rep = check_live(stand.collect, builtin_book, PROFILE, "reference", stand.run)
    assert rep.verdict == "fail" and rep.exit_code == 2
    assert rep.watch == ["Xid 63 on 0000:18:00.0 during the diagnostics"]


def test_a_required_diagnostic_that_cannot_run_is_could_not_check(builtin_book: Rulebook) -> None:
    missing = CommandResult(["dcgmi"], None, "", "dcgmi: command not found", missing=True)
    stand = Stand([healthy(), healthy()], {"dcgmi": missing})
    rep = check_live(stand.collect, builtin_book, PROFILE, "reference", stand.run)
    assert rep.verdict == "could_not_check" and rep.exit_code == 3
    assert "not found" in rep.not_checked[0]


def test_fabric_manager_down_fails_with_the_reason(tmp_path: Path) -> None:
    """A failed Fabric Manager leaves every GPU waiting for the fabric: the node fails with
    the unit's state as the reason, and the GPUs' fabric findings beside it."""
    got, rep = readiness(tmp_path, "--snapshot", str(SNAPS / "readiness-fabric-manager-down.json"))
    assert got == 2 == rep["exit_code"]
    ids = [r["rule_id"] for r in rep["reasons"]]
    assert "fabric-manager-not-running" in ids
    assert "gpu-fabric-not-ready" in ids
    fm = next(r for r in rep["reasons"] if r["rule_id"] == "fabric-manager-not-running")
    assert "failed" in fm["title"]
