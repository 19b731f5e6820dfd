"""The Xid policy errors of the knowledge audit (E1-E5), each shown with the hand-written
kernel log that exposed it, and the decode tables behind E4/E5: every Xid 74 register
class and every row of NVIDIA's Xid 144-150 decode sheet."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from gpu_triage.collectors.parsers.kernel_log import parse_kernel_log
from gpu_triage.engine.compiler import Rulebook
from gpu_triage.engine.evaluate import evaluate
from gpu_triage.engine.findings import Finding, FindingsDocument
from gpu_triage.engine.inputs import EvalInput
from gpu_triage.engine.model import Nvlink5Rule
from gpu_triage.model.facts import Facts, GpuFacts, HostFacts, XidEvent
from gpu_triage.model.snapshot import Snapshot
from gpu_triage.model.xid_message import parse_nvlink5, parse_recovery_action, parse_xid74
from gpu_triage.ops.history import XidLedger

LOGS = Path(__file__).resolve().parents[1] / "data" / "hand-written" / "kernel-log"
ENGINES = ["reference", "durable"]
NOW = datetime(2026, 12, 1, 18, 0, tzinfo=UTC)


def xids_of(name: str) -> list[XidEvent]:
    log = parse_kernel_log((LOGS / name).read_text(), source=name, year=2026, now=NOW)
    assert log.xids, name
    return log.xids


def run(book: Rulebook, engine: str = "reference", **facts: object) -> FindingsDocument:
    doc = evaluate(EvalInput(Facts(**facts)), book, engine=engine)  # type: ignore[arg-type]
    assert doc.engine.name == engine, doc.engine.fallback_reason
    return doc


def by_rule(doc: FindingsDocument, rule_id: str) -> list[Finding]:
    return [f for f in doc.findings if f.rule_id == rule_id]


def gpu(bus: str, index: int = 0, **kw: object) -> GpuFacts:
    return GpuFacts(index=index, pci_bus_id=bus, **kw)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- E1


@pytest.mark.parametrize("engine", ENGINES)
def test_e1_one_application_burst_is_not_a_repeat_offender(builtin_book: Rulebook, engine: str):
    xids = xids_of("e1-one-app-burst-xid13x3-xid43-dmesg-T.log")
    assert [x.code for x in xids] == [13, 13, 13, 43]
    doc = run(builtin_book, engine, gpus=[gpu("0000:3b:00.0")], xids=xids)
    rules = {f.rule_id for f in doc.findings}
    assert "gpu-repeat-offender" not in rules
    assert "xid-13-31-application" in rules  # NVIDIA's WORKFLOW_XID_13: the application


@pytest.mark.parametrize("engine", ENGINES)
def test_e1_separate_hardware_incidents_make_a_repeat_offender(builtin_book: Rulebook, engine: str):
    xids = xids_of("e1-three-gsp-timeouts-hours-apart-journal.log")
    assert len(xids) == 4  # the first two lines are one burst of one process
    doc = run(builtin_book, engine, gpus=[gpu("0000:3b:00.0")], xids=xids)
    assert len(by_rule(doc, "gpu-repeat-offender")) == 1
    # the same four lines from one process in one burst are one incident
    burst = [x.model_copy(update={"pid": 3310, "time": xids[0].time}) for x in xids]
    doc = run(builtin_book, engine, gpus=[gpu("0000:3b:00.0")], xids=burst)
    assert not by_rule(doc, "gpu-repeat-offender")


# --------------------------------------------------------------------------- E2


def _after_reboot(before: str, after: str) -> Facts:
    """Two runs of the unattended history: one before a reboot, one after it."""
    ledger = XidLedger()
    first = Snapshot(
        facts=Facts(
            host=HostFacts(boot_time=datetime(2026, 11, 30, tzinfo=UTC)), xids=xids_of(before)
        )
    )
    ledger.prepare(first)
    ledger.record(first, NOW)
    second = Snapshot(
        facts=Facts(
            host=HostFacts(boot_time=datetime(2026, 12, 1, 12, tzinfo=UTC)),
            gpus=[gpu("0000:3b:00.0")],
            xids=xids_of(after),
        )
    )
    ledger.prepare(second)
    assert second.facts.xid_history, "the ledger saw the reboot"
    return second.facts


@pytest.mark.parametrize("engine", ENGINES)
def test_e2_the_same_buggy_job_after_a_reboot_is_not_hardware(builtin_book: Rulebook, engine: str):
    facts = _after_reboot("e2-xid13-before-reboot-dmesg.log", "e2-xid13-after-reboot-dmesg.log")
    doc = evaluate(EvalInput(facts), builtin_book, engine=engine)
    assert not by_rule(doc, "xid-recurs-after-reset")
    assert by_rule(doc, "xid-13-31-application")


@pytest.mark.parametrize("engine", ENGINES)
def test_e2_a_dbe_after_a_reboot_still_escalates(builtin_book: Rulebook, engine: str):
    facts = _after_reboot("e2-xid48-before-reboot-dmesg.log", "e2-xid48-after-reboot-dmesg.log")
    doc = evaluate(EvalInput(facts), builtin_book, engine=engine)
    (f,) = by_rule(doc, "xid-recurs-after-reset")
    assert f.severity.value == "critical"


# --------------------------------------------------------------------------- E3


@pytest.mark.parametrize("engine", ENGINES)
def test_e3_a_remap_failure_beside_a_bus_loss_stays_critical(builtin_book: Rulebook, engine: str):
    xids = xids_of("e3-xid64-with-xid79-syslog.log")
    doc = run(builtin_book, engine, xids=xids)
    sympathetic = [f for f in by_rule(doc, "xid-sympathetic") if "Xid 64" in f.title]
    assert not sympathetic
    (f64,) = [f for f in by_rule(doc, "xid-critical") if f.title.startswith("Xid 64 ")]
    assert f64.severity.value == "critical" and "CONTACT_SUPPORT" in f64.fix
    assert by_rule(doc, "xid-79-fallen-off-bus")


# --------------------------------------------------------------------------- E4

# One line per register class in the log, in order: (rule, class, bit words).
E4_EXPECTED = [
    ("xid-74-hardware", "hardware", "Reg0 bit 8"),
    ("xid-74-benign", "sympathetic", "Reg0 bit 1"),
    ("xid-74-benign", "ignore", "Reg0 bit 0"),
    ("xid-74-nvlink", "ecc_parity", "Reg0 bit 5"),
    ("xid-74-nvlink", "signal_integrity", "Reg0 bit 22"),
    ("xid-74-nvlink", "report_if_repeated", "Reg0 bit 29"),
    ("xid-74-nvlink", "ecc_parity", "Reg2 bit 6"),
    ("xid-74-nvlink", "unexpected", "Reg2 bit 13"),
    ("xid-74-hardware", "field_diag", "Reg2 bit 19"),
    ("xid-74-nvlink", "report_if_repeated", "Reg2 bit 18"),
    ("xid-74-benign", "sympathetic", "Reg3 bit 17"),
    ("xid-74-fabric-reset", "fabric_reset", "Reg3 bit 18"),
    ("xid-74-nvlink", "ecc_parity", "Reg4 bit 19"),
    ("xid-74-nvlink", "ecc_threshold", "Reg4 bit 26"),
]
SEVERITY = {
    "xid-74-hardware": "critical",
    "xid-74-fabric-reset": "critical",
    "xid-74-nvlink": "warning",
    "xid-74-benign": "info",
}


def test_e4_log_covers_every_register_class(builtin_book: Rulebook) -> None:
    classes = {cls for cls, _ in builtin_book.xid74_bits.values()}
    assert classes == {cls for _, cls, _ in E4_EXPECTED}


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("n", range(len(E4_EXPECTED)))
def test_e4_each_xid74_register_class(builtin_book: Rulebook, engine: str, n: int) -> None:
    event = xids_of("e4-xid74-one-line-per-register-class-dmesg.log")[n]
    rule, cls, words = E4_EXPECTED[n]
    doc = run(builtin_book, engine, xids=[event])
    assert [f.rule_id for f in doc.findings] == [rule]
    f = doc.findings[0]
    assert f.severity.value == SEVERITY[rule]
    assert words in f.symptom
    values = {e.path: e.value for e in f.evidence}
    assert values.get("xid.xid74_class", cls) == cls


def test_e4_the_real_xid74_line_decodes_to_field_diagnostics(builtin_book: Rulebook) -> None:
    line = (
        "NVRM: Xid (PCI:0000:48:00): 74, pid=22884, name=VLLM::Worker_TP, NVLink: fatal error "
        "detected on link 8(0x0, 0x0, 0x10000, 0x0, 0x0, 0x0, 0x0)"
    )
    (event,) = parse_kernel_log(line).xids
    (f,) = run(builtin_book, xids=[event]).findings
    assert f.rule_id == "xid-74-hardware" and "Reg2 bit 16: field diags" in f.symptom
    assert "link 8" in f.title


# --------------------------------------------------------------------------- E5


@pytest.mark.parametrize("engine", ENGINES)
def test_e5_mse_watchdog_and_node_reboot_read_offline(builtin_book: Rulebook, engine: str):
    doc = run(builtin_book, engine, xids=xids_of("e5-xid150-xid154-node-reboot-iso.log"))
    (fatal,) = by_rule(doc, "xid-nvlink5-fatal")
    assert fatal.severity.value == "critical"
    assert "Drain first" in fatal.fix and "RESET_GPU" in fatal.fix
    assert "MSE_WATCHDOG errorStatus 0x0: RESET_GPU / Fatal" in fatal.symptom
    (reboot,) = by_rule(doc, "xid-154-recovery-offline")
    assert reboot.severity.value == "critical" and "node_reboot" in reboot.title
    assert not by_rule(doc, "xid-154-recovery-action")


@pytest.mark.parametrize("engine", ENGINES)
def test_e5_netir_link_down_with_its_companions(builtin_book: Rulebook, engine: str):
    doc = run(builtin_book, engine, xids=xids_of("e5-xid149-netir-link-down-xid145-journal.log"))
    got = sorted((f.rule_id, f.severity.value) for f in doc.findings)
    assert got == [
        ("xid-154-recovery-offline", "critical"),
        ("xid-nvlink5-attention", "warning"),  # 145 RLW_REMAP 0x4: XID_154_EVAL
        ("xid-nvlink5-attention", "warning"),  # 149 BER event: link SI and cables
        ("xid-nvlink5-fatal", "critical"),  # 149 link down, reason 4
        ("xid-nvlink5-ignore", "info"),  # 147 TREX 0x1
    ]
    drain = by_rule(doc, "xid-154-recovery-offline")[0]
    assert "drain_and_reset" in drain.title


def test_e5_xid154_with_nvml_answering_stays_a_warning(builtin_book: Rulebook) -> None:
    xids = xids_of("e5-xid150-xid154-node-reboot-iso.log")
    g = gpu("0008:01:00.0", recovery_action="node_reboot")
    doc = run(builtin_book, xids=xids, gpus=[g])
    assert by_rule(doc, "xid-154-recovery-action") and by_rule(doc, "xid-recovery-action")
    assert not by_rule(doc, "xid-154-recovery-offline")


def _message(row: Nvlink5Rule) -> str:
    unit = row.unit.split("/")[-1]
    word = "Nonfatal" if row.severity == "non_fatal" else "Fatal"
    intr = (row.reason or 0) << 20
    status = row.error_status or 0
    return f"{unit} {word} XC0 i0 Link 03 (0x{intr:08x} 0x{status:08x} 0x0 0x0 0x0 0x0)"


def _expected(row: Nvlink5Rule) -> tuple[str, str]:
    if row.immediate == "RESET_GPU" and row.severity in ("fatal", "link_fatal"):
        return "xid-nvlink5-fatal", "critical"
    quiet = row.immediate == "IGNORE" and row.severity == "non_fatal"
    if quiet and not row.investigatory and not row.promoted:
        return "xid-nvlink5-ignore", "info"
    return "xid-nvlink5-attention", "warning"


def _rows() -> list[Nvlink5Rule]:
    from gpu_triage.engine.compiler import load_rulebook

    return [r for rows in load_rulebook().nvlink5_rules.values() for r in rows]


ROWS = _rows()


def test_every_decode_row_of_the_sheet_is_loaded() -> None:
    assert len(ROWS) == 94
    assert {r.xid for r in ROWS} == set(range(144, 151))


@pytest.mark.parametrize("row", ROWS, ids=lambda r: f"{r.xid}-{r.unit}-{r.error_status}-{r.reason}")
def test_e5_each_nvlink5_decode_row(builtin_book: Rulebook, row: Nvlink5Rule) -> None:
    msg = _message(row)
    doc = run(builtin_book, xids=[XidEvent(code=row.xid, pci_bus_id="0000:03:00.0", message=msg)])
    rule, severity = _expected(row)
    assert [(f.rule_id, f.severity.value) for f in doc.findings] == [(rule, severity)], msg
    f = doc.findings[0]
    assert row.immediate in f.symptom
    if rule == "xid-nvlink5-fatal":
        assert "Drain first" in f.fix and "RESET_GPU" in f.fix


def test_r575_moves_the_subcode(builtin_book: Rulebook) -> None:
    msg = "NETIR_LINK_EVT Fatal XC0 i0 Link 04 (0x004005c6 0x00000000 0x0 0x0 0x0 0x0)"
    parsed = parse_nvlink5(msg)
    assert parsed is not None and parsed.reason == 4
    assert parsed.subcode(570) == (0x5C6 >> 5) & 0x1F and parsed.subcode(575) == 0x46
    assert parsed.subcode(None) is None
    from gpu_triage.engine.enrich import enrich

    for driver, sub in (("570.133.20", 14), ("575.51.03", 0x46)):
        inp = EvalInput(
            Facts(
                gpus=[gpu("0000:03:00.0", driver_version=driver)],
                xids=[XidEvent(code=149, pci_bus_id="0000:03:00.0", message=msg)],
            )
        )
        (x,) = enrich(inp, builtin_book).facts.xids
        assert x.nvlink_subcode == sub and x.decode_immediate == "RESET_GPU"


def test_message_parsers_survive_variants() -> None:
    assert parse_xid74("NVLink: fatal error detected on link 11(0x0,0x0,0x0,0x20000,0x0,0x0,0x0)")
    assert parse_xid74("NVLink: non-fatal error on link 2 (0x10, 0x0, 0x0, 0x0)").fatal is False  # type: ignore[union-attr]
    assert parse_xid74("GPU has fallen off the bus.") is None
    assert parse_nvlink5("garbage (0x1 0x2)") is None
    assert (
        parse_recovery_action(
            "GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)"
        )
        == "gpu_reset"
    )
    assert parse_recovery_action("GPU recovery action changed from 0x0 to 0x4") == "drain_and_reset"
    assert parse_recovery_action("something else") is None


# --------------------------------------------------------------------------- buckets


@pytest.mark.parametrize(
    ("code", "words"),
    [
        (137, "cuda-gdb/compute-sanitizer"),  # XID_137_FLOW
        (159, "If UVM/vGPU is in use RESET_GPU"),  # CHECK_UVM, SYMPATHETIC_REPORT_SOLO
        (136, "Access/trunk link telemetry"),  # INVESTIGATE_LINK_SI
    ],
)
def test_findings_expand_bucket_names(builtin_book: Rulebook, code: int, words: str) -> None:
    (f,) = run(builtin_book, xids=[XidEvent(code=code, pci_bus_id="0000:3b:00.0")]).findings
    assert words in f.fix
