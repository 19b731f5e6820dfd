"""NVIDIA's Xid policy as rulebook data and rules (rulebook/xid/): every catalogued code
walked through the whole packaged rulebook, the conditional workflows, sympathetic
suppression, storms, SXid classes, history escalation and site overlays."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from gpu_triage.engine.compiler import Rulebook, load_rulebook
from gpu_triage.engine.evaluate import evaluate
from gpu_triage.engine.findings import Finding, FindingsDocument
from gpu_triage.engine.inputs import EvalInput
from gpu_triage.model.facts import (
    Facts,
    GpuFacts,
    NvlinkErrorEvent,
    RecoveryAction,
    SxidEvent,
    XidEvent,
    XidHistory,
)

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = ROOT.parent / "shared" / "xid-reference.md"
BUS = "0000:3b:00.0"
OTHER = "0000:5e:00.0"
ENGINES = ["reference", "durable"]

# Codes with a workflow rule of their own, and the rule one event of them goes to.
WORKFLOW_RULE = {
    13: "xid-13-31-application",
    31: "xid-13-31-application",
    45: "xid-45-solo",
    48: "xid-48-dbe",
    74: "xid-74-nvlink",
    79: "xid-79-fallen-off-bus",
    154: "xid-154-recovery-action",
    **dict.fromkeys(range(144, 151), "xid-nvlink5-error"),
}


@pytest.fixture(scope="module")
def book() -> Rulebook:
    return load_rulebook()


def run(book: Rulebook, engine: str = "reference", **facts: object) -> FindingsDocument:
    doc = evaluate(EvalInput(Facts(**facts)), book, engine=engine)  # type: ignore[arg-type]
    assert doc.engine.name == engine, doc.engine.fallback_reason
    return doc


def xid(code: int, bus: str | None = BUS, line: int = 1, **kw: object) -> XidEvent:
    return XidEvent(code=code, pci_bus_id=bus, line=line, **kw)  # type: ignore[arg-type]


def ids(doc: FindingsDocument) -> list[str]:
    return [f.rule_id for f in doc.findings]


def only(doc: FindingsDocument, rule_id: str) -> Finding:
    found = [f for f in doc.findings if f.rule_id == rule_id]
    assert len(found) == 1, ids(doc)
    return found[0]


# --------------------------------------------------------------------------- every code


def test_catalogue_is_loaded(book: Rulebook) -> None:
    live = [c for c in book.xid_codes.values() if not c.retired]
    assert book.catalog_name == "NVIDIA Xid catalog 2025-09-30"
    assert len(live) == 109 and len(book.xid_codes) - len(live) == 63
    assert len(book.sxid_codes) == 93
    assert {c.severity.value for c in live} == {"info", "warning", "critical"}
    assert all(c.cause for c in book.xid_codes.values())


@pytest.mark.parametrize("engine", ENGINES)
def test_every_live_code_yields_exactly_its_finding(book: Rulebook, engine: str) -> None:
    problems = []
    for code, entry in sorted(book.xid_codes.items()):
        if entry.retired:
            continue
        doc = run(book, engine, xids=[xid(code)])
        want = WORKFLOW_RULE.get(code, f"xid-{entry.severity.value}")
        got = [(f.rule_id, f.severity.value) for f in doc.findings]
        if got != [(want, entry.severity.value)]:
            problems.append(f"Xid {code}: want {want}/{entry.severity.value}, got {got}")
            continue
        f = doc.findings[0]
        if f.stage.value != "hardware" or "xid/CATALOG" not in f.references:
            problems.append(f"Xid {code}: stage {f.stage.value}, references {f.references}")
    assert not problems, "\n".join(problems)


def test_generic_findings_show_nvidia_and_site_actions(book: Rulebook) -> None:
    f = only(
        run(book, xids=[xid(119, message="Timeout after 6s of waiting for RPC")]), "xid-critical"
    )
    assert f.title == "Xid 119 (GSP_RPC_TIMEOUT) on 0000:3b:00.0"
    assert "GSP RPC Timeout" in f.symptom and "A100, H100, B100, GB200" in f.symptom
    assert "NVIDIA immediate action: RESET_GPU" in f.fix
    assert "NVIDIA investigatory action: INVESTIGATE_SW" in f.fix
    assert "Site action" not in f.fix and "?" not in f.fix  # no overlay: phrased around it
    assert "Likely cause: firmware" in f.cause
    assert {"journalctl", "nvidia-smi", "nvidia-bug-report.sh"} <= {
        s.command[0] for s in f.runbook if s.command
    }


@pytest.mark.parametrize("code", [1, 9, 14, 56, 81, 108, 138])
def test_retired_codes_are_labelled_retired(book: Rulebook, code: int) -> None:
    doc = run(book, xids=[xid(code)])
    f = only(doc, "xid-retired")
    assert ids(doc) == ["xid-retired"] and f.severity.value == "info"
    assert f.title == f"Retired Xid {code} on {BUS}"


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("code", [0, 173, 999, 65000])
def test_unknown_codes_are_reported_unknown(book: Rulebook, engine: str, code: int) -> None:
    doc = run(book, engine, xids=[xid(code)])
    assert ids(doc) == ["xid-unknown"]
    assert doc.findings[0].severity.value == "warning"
    assert "not in the catalogue" in doc.findings[0].title


def test_an_event_without_a_bus_id_still_gets_its_finding(book: Rulebook) -> None:
    for code, want in [(95, "xid-critical"), (13, "xid-13-31-application"), (45, "xid-45-solo")]:
        assert ids(run(book, xids=[xid(code, bus=None)])) == [want]


def test_repeats_fold_into_one_finding_with_a_count(book: Rulebook) -> None:
    doc = run(book, xids=[xid(119, line=i) for i in range(7)] + [xid(119, OTHER, 9)])
    found = [f for f in doc.findings if f.rule_id == "xid-critical"]
    assert [f.occurrences for f in found] == [7, 1]


# --------------------------------------------------------------------------- workflows


@pytest.mark.parametrize("engine", ENGINES)
def test_xid_45_solo_and_not_solo(book: Rulebook, engine: str) -> None:
    solo = run(book, engine, xids=[xid(45)])
    assert ids(solo) == ["xid-45-solo"]
    assert "nvidia-fabricmanager" in solo.findings[0].fix
    with_dbe = run(book, engine, xids=[xid(48, line=1), xid(45, line=2), xid(45, line=3)])
    assert sorted(ids(with_dbe)) == ["xid-45-with-others", "xid-48-dbe"]
    assert with_dbe.findings[0].rule_id == "xid-48-dbe"  # the primary ranks first
    assert only(with_dbe, "xid-45-with-others").occurrences == 2
    elsewhere = run(book, engine, xids=[xid(45, line=1), xid(48, OTHER, line=2)])
    assert sorted(ids(elsewhere)) == ["xid-45-solo", "xid-48-dbe"]


@pytest.mark.parametrize("engine", ENGINES)
def test_xid_48_solo_and_with_row_remapping(book: Rulebook, engine: str) -> None:
    solo = only(run(book, engine, xids=[xid(48)]), "xid-48-dbe")
    assert "RESET_GPU" in solo.fix and solo.severity.value == "critical"
    for remap, second in ((63, "xid-sympathetic"), (64, "xid-critical")):
        doc = run(book, engine, xids=[xid(48, line=1), xid(remap, line=2)])
        assert sorted(ids(doc)) == sorted(["xid-48-dbe-row-remap", second]), remap
        assert "DRAIN_AND_RESET" in only(doc, "xid-48-dbe-row-remap").fix
    # a remap on another GPU is that GPU's business
    doc = run(book, engine, xids=[xid(48, line=1), xid(63, OTHER, line=2)])
    assert sorted(ids(doc)) == ["xid-48-dbe", "xid-info"]


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("code", [13, 31])
def test_xid_13_31_same_gpu_vs_across_gpus(book: Rulebook, engine: str, code: int) -> None:
    one_run = run(book, engine, xids=[xid(code, pid=100, line=i) for i in range(5)])
    assert ids(one_run) == ["xid-13-31-application"]
    assert one_run.findings[0].severity.value == "warning"
    same_gpu = run(book, engine, xids=[xid(code, pid=100, line=1), xid(code, pid=200, line=2)])
    f = only(same_gpu, "xid-13-31-same-gpu")
    assert ids(same_gpu) == ["xid-13-31-same-gpu"] and f.severity.value == "critical"
    assert "dcgmi" in {s.command[0] for s in f.runbook if s.command}
    across = run(
        book,
        engine,
        xids=[
            xid(code, BUS, pid=100, line=1),
            xid(code, BUS, pid=200, line=2),
            xid(code, OTHER, pid=300, line=3),
        ],
    )
    f = only(across, "xid-13-31-application")
    assert ids(across) == ["xid-13-31-application"]
    assert f.occurrences == 3 and f.also_seen_on  # folded across the GPUs


@pytest.mark.parametrize("engine", ENGINES)
def test_xid_74_single_vs_several_links_or_gpus(book: Rulebook, engine: str) -> None:
    single = run(book, engine, xids=[xid(74)])
    assert ids(single) == ["xid-74-nvlink"] and single.findings[0].severity.value == "warning"
    assert "Reg0" in " ".join(s.meaning for s in single.findings[0].runbook)
    two_gpus = run(book, engine, xids=[xid(74, BUS, 1), xid(74, OTHER, 2)])
    f = only(two_gpus, "xid-74-nvlink-multi")
    assert ids(two_gpus) == ["xid-74-nvlink-multi"] and f.occurrences == 2
    links = [NvlinkErrorEvent(pci_bus_id=BUS, link=n) for n in (1, 7)]
    assert ids(run(book, engine, xids=[xid(74)], nvlink_errors=links)) == ["xid-74-nvlink-multi"]


def test_xid_144_150_decode_guidance(book: Rulebook) -> None:
    msg = "NETIR_LINK_EVT Fatal XC0 i0 Link 04 (0x00400004 0x00000000 0x0 0x0 0x0 0x0)"
    f = only(run(book, xids=[xid(149, message=msg)]), "xid-nvlink5-fatal")
    assert msg in f.symptom and "RESET_GPU / Link Fatal / INVESTIGATE_LINK_SI" in f.symptom
    undecoded = only(run(book, xids=[xid(149, message="garbled")]), "xid-nvlink5-error")
    assert "IntrInfo" in " ".join(s.meaning for s in undecoded.runbook)
    notes = book.xid_codes[149].notes
    assert "NETIR_LINK_EVT/NETIR_LINK_DOWN" in notes and "rsn=000100" in notes


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize(
    ("action", "rule", "words"),
    [
        (RecoveryAction.NODE_REBOOT, "xid-recovery-action", "reboot"),
        (RecoveryAction.GPU_RESET, "xid-recovery-action", "reset it"),
        (RecoveryAction.DRAIN_AND_RESET, "xid-recovery-action", "let running jobs finish"),
        (RecoveryAction.DRAIN_P2P, "xid-recovery-drain-p2p", "P2P"),
        (RecoveryAction.NONE, None, ""),
    ],
)
def test_xid_154_and_the_nvml_recovery_action(
    book: Rulebook, engine: str, action: RecoveryAction, rule: str | None, words: str
) -> None:
    gpu = GpuFacts(index=2, pci_bus_id=BUS, recovery_action=action)
    text = "GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)"
    doc = run(book, engine, gpus=[gpu], xids=[xid(95, line=1), xid(154, line=2, message=text)])
    got = {f.rule_id for f in doc.findings if f.rule_id.startswith("xid-")}
    assert {"xid-critical", "xid-154-recovery-action"} <= got
    assert text in only(doc, "xid-154-recovery-action").symptom
    if rule is None:
        assert not got & {"xid-recovery-action", "xid-recovery-drain-p2p"}
    else:
        f = only(doc, rule)
        assert words in f.fix and action.value in f.title


# --------------------------------------------------------------------------- sympathetic, storms


@pytest.mark.parametrize("engine", ENGINES)
def test_sympathetic_errors_do_not_make_their_own_top_finding(book: Rulebook, engine: str) -> None:
    xids = [xid(79, line=1), xid(95, line=2), xid(94, line=3), xid(43, line=4), xid(45, line=5)]
    doc = run(book, engine, xids=xids)
    assert doc.findings[0].rule_id == "xid-79-fallen-off-bus"
    assert [f.severity.value for f in doc.findings] == ["critical", "info", "info", "info", "info"]
    assert sorted(ids(doc)[1:]) == ["xid-45-with-others"] + ["xid-sympathetic"] * 3
    # alone, the same codes are findings of their own again
    alone = run(book, engine, xids=[xid(95, line=2), xid(94, line=3)])
    assert sorted(ids(alone)) == ["xid-critical", "xid-warning"]


@pytest.mark.parametrize("engine", ENGINES)
def test_one_event_is_not_a_storm_but_many_are(book: Rulebook, engine: str) -> None:
    assert ids(run(book, engine, xids=[xid(63)])) == ["xid-info"]
    storm = run(book, engine, xids=[xid(63, line=i) for i in range(10)])
    f = only(storm, "xid-storm")
    assert ids(storm) == ["xid-storm"] and f.severity.value == "critical" and f.occurrences == 10
    nine = run(book, engine, xids=[xid(94, line=i) for i in range(9)])
    assert ids(nine) == ["xid-warning"] and nine.findings[0].occurrences == 9
    # a storm of a critical code stays one critical finding with its count
    crit = run(book, engine, xids=[xid(95, line=i) for i in range(12)])
    assert ids(crit) == ["xid-critical"] and crit.findings[0].occurrences == 12


def test_storm_and_repeat_thresholds_agree(book: Rulebook) -> None:
    storm = {
        r: book.by_id(r).params["storm_count"] for r in ("xid-storm", "xid-warning", "xid-info")
    }  # type: ignore[union-attr]
    assert len(set(storm.values())) == 1, storm
    runs = {
        r: book.by_id(r).params["repeat_runs"]
        for r in ("xid-13-31-application", "xid-13-31-same-gpu")
    }  # type: ignore[union-attr]
    assert len(set(runs.values())) == 1, runs


def test_code_lists_agree_across_the_xid_rules() -> None:
    text = "\n".join(p.read_text() for p in sorted((ROOT / "rulebook" / "xid").glob("*.yaml")))
    lists = {
        "sympathetic": "[43, 63, 94, 95, 159, 171, 172]",
        "storm": "[63, 92, 94]",
        "workflow": "[13, 31, 45, 48, 74, 79, 144, 145, 146, 147, 148, 149, 150, 154]",
    }
    for name, literal in lists.items():
        assert literal in text, name
    norm = re.sub(r"\s+", " ", text)
    primaries = re.findall(r"code in \[(46, 48, [^\]]*)\]", norm)
    assert len(primaries) >= 4 and len(set(primaries)) == 1, primaries


# --------------------------------------------------------------------------- SXids, history


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize(
    ("code", "rule", "severity"),
    [
        (11012, "xid-sxid-non-fatal", "info"),
        (12022, "xid-sxid-potentially-fatal", "warning"),
        (20034, "xid-sxid-potentially-fatal", "warning"),
        (23001, "xid-sxid-always-fatal", "critical"),
        (10004, "xid-sxid-host", "info"),
        (31337, "xid-sxid-unknown", "warning"),
    ],
)
def test_sxid_classes(book: Rulebook, engine: str, code: int, rule: str, severity: str) -> None:
    doc = run(book, engine, sxids=[SxidEvent(code=code, pci_bus_id="0000:05:00.0", line=1)])
    assert [(f.rule_id, f.severity.value) for f in doc.findings] == [(rule, severity)]


def test_always_fatal_sxid_says_restart_the_host(book: Rulebook) -> None:
    f = only(
        run(book, sxids=[SxidEvent(code=22003, pci_bus_id="0000:05:00.0")]), "xid-sxid-always-fatal"
    )
    assert "restart it" in f.fix and "Fabric Manager" in f.fix


def test_sxid_20034_with_xid_79_is_a_link_down(book: Rulebook) -> None:
    doc = run(
        book,
        sxids=[SxidEvent(code=20034, pci_bus_id="0000:05:00.0", line=1)],
        xids=[xid(79, line=2)],
    )
    assert sorted(ids(doc)) == ["xid-79-fallen-off-bus", "xid-sxid-20034-link-down"]


@pytest.mark.parametrize("engine", ENGINES)
def test_history_escalation_after_a_reset(book: Rulebook, engine: str) -> None:
    hist = XidHistory(code=48, pci_bus_id=BUS, count_before_reset=1, resets_seen=1)
    doc = run(book, engine, xids=[xid(48)], xid_history=[hist])
    assert sorted(ids(doc)) == ["xid-48-dbe", "xid-recurs-after-reset"]
    f = only(doc, "xid-recurs-after-reset")
    assert f.severity.value == "critical" and "RMA" in f.fix
    # never seen before the reset, another GPU, or no history at all: nothing to escalate
    for facts in (
        {"xid_history": [XidHistory(code=48, pci_bus_id=BUS, count_before_reset=0)]},
        {"xid_history": [XidHistory(code=48, pci_bus_id=OTHER, count_before_reset=3)]},
        {},
    ):
        assert ids(run(book, engine, xids=[xid(48)], **facts)) == ["xid-48-dbe"]


def test_history_store_missing_is_not_a_cannot_evaluate(book: Rulebook) -> None:
    from gpu_triage.model.facts import Unavailable, UnavailableReason

    inp = EvalInput(
        Facts(xids=[xid(48)]),
        {"xid_history": Unavailable(reason=UnavailableReason.NOT_COLLECTED)},
    )
    doc = evaluate(inp, book, engine="reference")
    assert "xid-recurs-after-reset" not in {f.rule_id for f in doc.cannot_evaluate}


# --------------------------------------------------------------------------- site overlays


def test_site_overlay_changes_the_finding_and_shows_both_actions(tmp_path: Path) -> None:
    (tmp_path / "site.yaml").write_text(
        "overlay: dc-east\n"
        "xid:\n"
        "  13: {severity: critical, action: drain the GPU after three in an hour}\n"
        "  79: {action: open a ticket with the colo}\n"
    )
    site = load_rulebook([tmp_path])
    doc = run(site, xids=[xid(13, pid=7)])
    f = only(doc, "xid-critical")
    assert ids(doc) == ["xid-critical"] and f.severity.value == "critical"
    assert "NVIDIA immediate action: RESTART_APP" in f.fix
    assert "NVIDIA investigatory action: WORKFLOW_XID_13" in f.fix
    assert "drain the GPU after three in an hour (overlay 'dc-east')" in f.fix
    assert "effective critical" in f.cause and "rulebook severity warning" in f.cause
    # an action alone keeps the workflow rule and shows the site's action beside NVIDIA's
    f79 = only(run(site, xids=[xid(79)]), "xid-79-fallen-off-bus")
    assert "RESTART_BM" in f79.fix and "open a ticket with the colo (overlay 'dc-east')" in f79.fix


def test_site_overlay_can_lower_a_code(tmp_path: Path) -> None:
    (tmp_path / "site.yaml").write_text("overlay: lab\nxid:\n  95: {severity: info}\n")
    doc = run(load_rulebook([tmp_path]), xids=[xid(95)])
    assert ids(doc) == ["xid-info"]


# --------------------------------------------------------------------------- the reference


def _reference_table(text: str, heading: str) -> list[list[str]]:
    rows: list[list[str]] = []
    lines = text[text.index(heading) :].splitlines()[1:]
    for line in lines:
        if line.startswith("|"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if not set("".join(cells)) <= set("-: "):
                rows.append(cells)
        elif rows:
            break
    return rows[1:]


@pytest.mark.skipif(not REFERENCE.exists(), reason="../shared/xid-reference.md not beside the repo")
def test_catalogue_covers_every_code_of_the_reference(book: Rulebook) -> None:
    text = REFERENCE.read_text(encoding="utf-8")
    rows = _reference_table(text, "## Xid table")
    assert len(rows) == 109
    for row in rows:
        code = int(row[0])
        entry = book.xid_codes.get(code)
        assert entry is not None and not entry.retired, code
        assert (entry.mnemonic, entry.meaning, entry.immediate, entry.investigatory) == (
            row[1],
            row[2],
            row[4],
            row[5],
        ), code
    unused = re.search(r'Codes marked "Unused".*?:(.*?)\. GPUd also', text, re.S)
    assert unused is not None
    retired = {int(c) for c in re.findall(r"(\d+) \(", unused.group(1))}
    assert retired and all(book.xid_codes[c].retired for c in retired)
    assert {c for c, e in book.xid_codes.items() if e.retired} == retired
    buckets = {r[0]: r[1] for r in _reference_table(text, "## NVIDIA resolution buckets")}
    catalogue = yaml.safe_load((ROOT / "rulebook" / "xid" / "catalog.yaml").read_text())
    assert catalogue["buckets"] == buckets
    used = {e.immediate for e in book.xid_codes.values()} | {
        e.investigatory for e in book.xid_codes.values()
    }
    assert {"RESTART_APP", "RESET_GPU", "RESTART_BM", "WORKFLOW_XID_48"} <= used & set(buckets)
    sxids = _reference_table(text, "## SXid (NVSwitch) catalog")
    listed = {int(item.split()[0]) for row in sxids for item in row[2].split(";")}
    assert listed == set(book.sxid_codes)


def test_catalogue_file_is_small_and_has_no_anchors() -> None:
    path = ROOT / "rulebook" / "xid" / "catalog.yaml"
    assert path.stat().st_size < 1_000_000
    assert not re.search(r"[&*][A-Za-z0-9_]+\s*$", path.read_text(), re.M)
