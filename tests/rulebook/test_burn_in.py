"""Burn-in coverage (fleet/F2): a node in validation must have run compute, memory
bandwidth, interconnect and thermal/power stress. From real and hand-written dcgmi diag
outputs, through the rules and the readiness command."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpu_triage.collectors.parsers.registry import get_parser
from gpu_triage.engine.compiler import Rulebook
from gpu_triage.engine.evaluate import evaluate
from gpu_triage.engine.inputs import EvalInput
from gpu_triage.io.commands import CommandResult
from gpu_triage.model.facts import DiagResult, Facts, HostFacts, SiteInventory, diag_area
from gpu_triage.model.snapshot import Snapshot
from gpu_triage.ops.readiness import (
    Profile,
    check_snapshot,
    default_profile,
    diag_level,
    run_commands,
)

DATA = Path(__file__).resolve().parents[1] / "data"
DCGM = DATA / "hand-written" / "dcgm"
REAL = DATA / "real-outputs" / "dcgm" / "dcgmi-diag-r3-deployment-all-pass-fragment-dcgm55.txt"
AREAS = {
    "burn-in-compute-not-validated",
    "burn-in-memory-bandwidth-not-validated",
    "burn-in-interconnect-not-validated",
    "burn-in-thermal-not-validated",
}


def burn_in_findings(
    book: Rulebook, path: Path | None, engine: str = "reference", *, burn_in: bool = True
) -> dict[str, str]:
    facts = get_parser("dcgmi-diag")(path.read_text(), path.name) if path else Facts()
    facts.site = SiteInventory(burn_in=burn_in)
    doc = evaluate(EvalInput(facts), book, engine=engine)
    return {f.rule_id: f.symptom for f in doc.findings if f.rule_id.startswith("burn-in-")}


@pytest.mark.parametrize("engine", ["reference", "durable"])
def test_the_real_deployment_fragment_validates_nothing(
    builtin_book: Rulebook, engine: str
) -> None:
    got = burn_in_findings(builtin_book, REAL, engine)
    assert set(got) == AREAS
    assert "Memory Bandwidth" in got["burn-in-memory-bandwidth-not-validated"]
    assert "Targeted Power" in got["burn-in-thermal-not-validated"]


def test_a_full_r3_run_covers_every_area(builtin_book: Rulebook) -> None:
    assert (
        set(burn_in_findings(builtin_book, DCGM / "dcgmi-diag-r3-dcgm33-all-pass-8gpu.txt"))
        == set()
    )


def test_an_r3_run_that_skipped_memory_bandwidth(builtin_book: Rulebook) -> None:
    # failures and warnings are tests that ran (their own rules judge them); the skip is not
    got = burn_in_findings(
        builtin_book, DCGM / "dcgmi-diag-r3-dcgm33-memory-fail-gpu1-wrapped-warning.txt"
    )
    assert set(got) == {"burn-in-memory-bandwidth-not-validated"}


def test_dcgm4_json_level_2_drives_the_links_only(builtin_book: Rulebook) -> None:
    got = burn_in_findings(builtin_book, DCGM / "dcgmi-diag-r2-j-dcgm4-pcie-fail-entity.json")
    assert set(got) == AREAS - {"burn-in-interconnect-not-validated"}


def test_dcgm2_level_1_and_no_diagnostic_at_all(builtin_book: Rulebook) -> None:
    assert (
        set(burn_in_findings(builtin_book, DCGM / "dcgmi-diag-r1-dcgm2-persistence-fail-all.txt"))
        == AREAS
    )
    assert set(burn_in_findings(builtin_book, None)) == AREAS


def test_outside_burn_in_nothing_is_asked_of_the_run(builtin_book: Rulebook) -> None:
    assert burn_in_findings(builtin_book, REAL, burn_in=False) == {}
    facts = get_parser("dcgmi-diag")(REAL.read_text(), REAL.name)
    doc = evaluate(EvalInput(facts), builtin_book, engine="reference")
    assert not [f for f in doc.findings if f.rule_id.startswith("burn-in-")]
    assert not [r for r in doc.needs_confirmation if r.rule_id.startswith("burn-in-")]


def test_burn_in_asks_for_the_all_node_nccl_test(builtin_book: Rulebook) -> None:
    facts = get_parser("dcgmi-diag")(
        (DCGM / "dcgmi-diag-r3-dcgm33-all-pass-8gpu.txt").read_text(), "r3"
    )
    facts.site = SiteInventory(burn_in=True)
    doc = evaluate(EvalInput(facts), builtin_book, engine="reference")
    asked = [
        r for r in doc.needs_confirmation if r.rule_id == "burn-in-multi-node-test-unconfirmed"
    ]
    assert asked and not doc.findings
    facts.answers = {"nccl_all_nodes_passed": False}
    doc = evaluate(EvalInput(facts), builtin_book, engine="reference")
    assert [f.rule_id for f in doc.findings] == ["burn-in-multi-node-test-unconfirmed"]


@pytest.mark.parametrize(
    ("test", "area"),
    [
        ("Diagnostic", "compute"),
        ("diagnostic", "compute"),
        ("SM Stress", "compute"),
        ("sm_stress", "compute"),
        ("Targeted Stress", "compute"),
        ("targeted_stress", "compute"),
        ("Memory Bandwidth", "memory_bandwidth"),
        ("memory_bandwidth", "memory_bandwidth"),
        ("PCIe", "interconnect"),
        ("pcie", "interconnect"),
        ("nvbandwidth", "interconnect"),
        ("Targeted Power", "thermal_power"),
        ("targeted_power", "thermal_power"),
        ("Pulse Test", "thermal_power"),
        ("pulse_test", "thermal_power"),
        ("GPU Memory", "memory"),
        ("memtest", "memory"),
        ("  Targeted  Power ", "thermal_power"),
        ("Denylist", None),
        ("software", None),
        ("Page Retirement/Row Remap", None),
        ("", None),
        (None, None),
    ],
)
def test_what_each_dcgm_test_validates(test: str | None, area: str | None) -> None:
    assert diag_area(test) == area
    assert DiagResult(test=test).validates == area


@pytest.mark.parametrize(
    ("argv", "level"),
    [
        (["dcgmi", "diag", "-r", "3", "-j"], 3),
        (["dcgmi", "diag", "-r4"], 4),
        (["dcgmi", "diag", "--run=2"], 2),
        (["dcgmi", "diag", "--run", "1"], 1),
        (["dcgmi", "diag", "-r", "pcie,memory"], None),
        (["dcgmi", "diag", "-r", "9"], None),
        (["dcgmi", "diag"], None),
    ],
)
def test_the_level_of_a_diag_command_line(argv: list[str], level: int | None) -> None:
    assert diag_level(argv) == level


def test_readiness_records_the_level_it_ran() -> None:
    out = (DCGM / "dcgmi-diag-r3-j-dcgm33-memory-fail-gpu1.json").read_text()
    profile = default_profile(have=lambda name: "/usr/bin/dcgmi", burn_in=True)
    assert profile.commands[0].argv == ["dcgmi", "diag", "-r", "3", "-j"]
    assert profile.commands[0].required and profile.burn_in
    facts = Facts()
    runs, not_checked = run_commands(
        profile, facts, lambda argv, t: CommandResult(argv=argv, returncode=226, stdout=out)
    )
    assert not_checked == [] and runs[0].results == len(facts.diags) > 0
    assert {d.run_level for d in facts.diags} == {3}
    assert default_profile(have=lambda name: "/usr/bin/dcgmi").commands[0].argv[3] == "1"


def test_readiness_of_a_snapshot_in_burn_in(builtin_book: Rulebook) -> None:
    facts = get_parser("dcgmi-diag")(REAL.read_text(), REAL.name)
    snap = Snapshot(facts=facts)
    quick = check_snapshot(
        snap.model_copy(deep=True), "s.json", builtin_book, Profile(), "reference"
    )
    assert not {r.rule_id for r in quick.reasons} & AREAS
    rep = check_snapshot(snap, "s.json", builtin_book, Profile(burn_in=True), "reference")
    assert rep.verdict == "fail"
    assert {r.rule_id for r in rep.reasons} >= AREAS
    site = SiteInventory(pinned_kernel="5.15.0-105-generic")
    node = Facts(diags=facts.diags, host=HostFacts(kernel="5.15.0-107-generic"))
    again = check_snapshot(
        Snapshot(facts=node), "s.json", builtin_book, Profile(burn_in=True), "reference", site
    )
    # the site file's pins and the burn-in flag both reach the rules
    assert {r.rule_id for r in again.reasons} >= AREAS | {"kernel-version-drift"}
    json.dumps(again.model_dump(mode="json"))
