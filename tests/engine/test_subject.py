"""Subject keys: the same strings as ever, with typed parts taken from the bound facts."""

from __future__ import annotations

import copy
import pickle

from gpu_triage.engine.subject import SubjectKey, SubjectPart
from gpu_triage.model.facts import GpuFacts, GpuProcess, IbPortFacts, XidEvent


def test_key_text_and_parts_from_a_binding() -> None:
    gpu = GpuFacts(index=0, pci_bus_id="0000:18:00.0", uuid="GPU-1")
    xid = XidEvent(code=79, pci_bus_id="0000:18:00.0", line=12)
    key = SubjectKey.of({"gpu": gpu, "xid": xid})
    assert key == "gpu:0000:18:00.0,xid:0000:18:00.0@12"
    assert key.parts == (
        SubjectPart("gpu", "0000:18:00.0", "0000:18:00.0"),
        SubjectPart("xid", "0000:18:00.0@12", "0000:18:00.0"),
    )
    assert key.gpu == "0000:18:00.0"


def test_the_gpu_of_an_item_comes_from_its_fact_not_from_the_text() -> None:
    # A process is keyed by its (attacker-controlled) name; its GPU is its gpu_pci_bus_id.
    proc = GpuProcess(name="train,py:x", gpu_pci_bus_id="0000:3b:00.0", pid=7)
    key = SubjectKey.of({"process": proc})
    assert key == "process:train,py:x" and key.gpu == "0000:3b:00.0"


def test_ports_unavailable_kinds_and_the_node() -> None:
    ib = IbPortFacts(ca_name="mlx5_0", port=1)
    assert SubjectKey.of({"ib": ib}) == "ib:mlx5_0/1"
    assert SubjectKey.of({"gpu": None}) == "gpu:-"
    assert SubjectKey.of({}) == "node" and SubjectKey.of({}).gpu is None


def test_a_key_read_back_is_parsed_once_and_survives_copies() -> None:
    key = SubjectKey("aer:0000:18:00.0@3,ib:mlx5_0/1")
    assert key.gpu == "0000:18:00.0" and key.parts[1] == SubjectPart("ib", "mlx5_0/1", None)
    for clone in (copy.deepcopy(key), pickle.loads(pickle.dumps(key))):
        assert clone == key and clone.parts == key.parts and isinstance(clone, SubjectKey)


def test_findings_documents_keep_the_string_form(builtin_book) -> None:
    from gpu_triage.engine.evaluate import evaluate
    from gpu_triage.engine.findings import FindingsDocument
    from gpu_triage.model.demos import demo_snapshot_path
    from gpu_triage.model.snapshot import load_snapshot

    doc = evaluate(load_snapshot(demo_snapshot_path()), builtin_book, engine="reference")
    f = next(f for f in doc.findings if f.subject_key.gpu)
    text = doc.model_dump_json()
    assert f'"subject_key":"{f.subject_key}"' in text
    back = FindingsDocument.model_validate_json(text)
    g = next(x for x in back.findings if x.rule_id == f.rule_id)
    assert isinstance(g.subject_key, SubjectKey) and g.subject_key.gpu == f.subject_key.gpu
