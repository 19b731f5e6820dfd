"""The Xid catalogue as rulebook data: annotation of events, site overrides, folding."""

from __future__ import annotations

from pathlib import Path

from gpu_triage.engine.compiler import load_rulebook
from gpu_triage.engine.evaluate import evaluate
from gpu_triage.engine.inputs import EvalInput
from gpu_triage.model.facts import Facts, XidEvent

CATALOG = """\
xid_catalog: test catalogue
codes:
  - {code: 13, mnemonic: GR_EXCEPTION, meaning: Graphics Engine Exception, immediate: RESTART_APP,
     investigatory: WORKFLOW_XID_13, severity: info, cause: application}
  - {code: 79, mnemonic: FALLEN_OFF_BUS, meaning: GPU has fallen off the bus, immediate: RESTART_BM,
     investigatory: CONTACT_SUPPORT, severity: critical, cause: bus}
  - {code: 9, meaning: Unused, severity: info, retired: true}
sxids:
  - {code: 12028, meaning: egress nonposted PRIV error, sxid_class: non_fatal}
---
id: xid-by-catalogue
title: Xid {xid.code} ({xid.mnemonic})
version: 1
severity: critical
stage: hardware
symptom: "{xid.meaning}"
cause: "{xid.cause_class}"
fix: "NVIDIA: {xid.nvidia_immediate} / {xid.nvidia_investigatory}[[; site: {xid.site_action}]]"
when: xid.known and not xid.retired and xid.severity == 'critical'
group_by: [xid.code, xid.pci_bus_id]
references: [xid/CATALOG]
tests:
  - name: Xid 79 fires
    facts: {xids: [{code: 79, pci_bus_id: "0000:01:00.0"}]}
    expect: {fires: true, bound: {xid.nvidia_immediate: RESTART_BM}}
  - name: Xid 13 is info in the catalogue
    facts: {xids: [{code: 13, pci_bus_id: "0000:01:00.0"}]}
    expect: {fires: false}
"""


def book_with(tmp_path: Path, overlay: str = ""):
    (tmp_path / "catalog.yaml").write_text(CATALOG)
    if overlay:
        (tmp_path / "site.yaml").write_text(overlay)
    return load_rulebook([tmp_path], include_builtin=False)


def test_events_are_annotated_and_repeats_fold(tmp_path: Path) -> None:
    book = book_with(tmp_path)
    xids = [XidEvent(code=79, pci_bus_id="0000:01:00.0", line=i) for i in range(5)]
    xids += [
        XidEvent(code=79, pci_bus_id="0000:02:00.0", line=9),
        XidEvent(code=9, line=10),
        XidEvent(code=4242, line=11),
    ]
    doc = evaluate(EvalInput(Facts(xids=xids)), book, engine="reference")
    assert [(f.subject_key.split("@")[0], f.occurrences) for f in doc.findings] == [
        ("xid:0000:01:00.0", 5),
        ("xid:0000:02:00.0", 1),
    ]
    f = doc.findings[0]
    assert f.title == "Xid 79 (FALLEN_OFF_BUS)" and f.symptom == "GPU has fallen off the bus"
    assert f.fix == "NVIDIA: RESTART_BM / CONTACT_SUPPORT"  # no site action: phrased around it
    # the caller's facts are not modified by the annotation
    assert xids[0].known is None


def test_site_overlay_changes_severity_and_action(tmp_path: Path) -> None:
    book = book_with(
        tmp_path,
        "overlay: dc-east\nxid:\n  13: {severity: critical, "
        "action: drain after three in an hour}\n",
    )
    doc = evaluate(EvalInput(Facts(xids=[XidEvent(code=13, pci_bus_id="0000:01:00.0")])), book)
    (f,) = doc.findings
    assert "NVIDIA: RESTART_APP / WORKFLOW_XID_13" in f.fix
    assert "site: drain after three in an hour (overlay 'dc-east')" in f.fix


def test_rule_tests_see_the_catalogue(tmp_path: Path) -> None:
    from gpu_triage.engine.backend import ReferenceBackend
    from gpu_triage.engine.ruletest import run_rule_tests

    results = run_rule_tests(book_with(tmp_path), [ReferenceBackend()])
    assert [r.problems for r in results] == [[], []]


def test_sxid_annotation(tmp_path: Path) -> None:
    from gpu_triage.engine.enrich import enrich
    from gpu_triage.model.facts import SxidEvent

    inp = enrich(
        EvalInput(Facts(sxids=[SxidEvent(code=12028), SxidEvent(code=1)])), book_with(tmp_path)
    )
    assert [(s.known, s.sxid_class) for s in inp.facts.sxids] == [
        (True, "non_fatal"),
        (False, None),
    ]
