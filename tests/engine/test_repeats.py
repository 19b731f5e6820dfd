"""Repeated events collapsed (engine.repeats) give exactly the findings of the events one by
one: counts, lines, subjects, the order of other subjects, on both evaluators, for the
packaged rulebook and for generated rules of every aggregate shape."""

from __future__ import annotations

import random
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpu_triage.engine import evaluate as evaluate_module
from gpu_triage.engine.compiler import compile_rulebook
from gpu_triage.engine.enrich import enrich, enrich_collapsed
from gpu_triage.engine.evaluate import evaluate
from gpu_triage.engine.inputs import EvalInput
from gpu_triage.engine.loader import RawRulebook, load_text
from gpu_triage.engine.repeats import Repeats, group, varying_fields
from gpu_triage.model.facts import (
    Facts,
    GpuFacts,
    SxidEvent,
    Unavailable,
    UnavailableReason,
    XidEvent,
)
from gpu_triage.model.snapshot import Snapshot, load_snapshot
from tests.engine.test_aggregates import aggregate

ROOT = Path(__file__).resolve().parents[2]
WHEN = datetime(2026, 11, 30, 3, 0, tzinfo=UTC)
BUSES = ["0000:1b:00.0", "0000:43:00.0", "0000:52:00.0"]
LINES = [  # (code, process, message): real Xid texts
    (79, None, "GPU has fallen off the bus."),
    (48, "python3", "An uncorrectable double bit error (DBE) has been detected on GPU"),
    (13, "python3", "Graphics SM Warp Exception on (GPC 1, TPC 1, SM 1): MMU Fault"),
    (94, "python3", "Contained: SM (0x1). RST: No, D-RST: No"),
    (63, "python3", "Row Remapper: New row (0x000000000c3a1f80) was marked for remapping"),
    (74, "VLLM::Worker_TP", "NVLink: fatal error detected on link 8(0x0, 0x0, 0x10000, 0x0)"),
    (154, None, "GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)"),
]


def storm(events: int, distinct: int, seed: int = 3, pids: int = 2) -> list[XidEvent]:
    """``events`` Xids repeating ``distinct`` lines (later lines, later times), a few
    processes per GPU, bursts per GPU with a gap now and then (new incidents)."""
    rnd = random.Random(seed)
    pid_of = {b: [rnd.randint(2000, 60000) for _ in range(pids)] for b in BUSES}
    templates = []
    for i in range(distinct):
        code, name, msg = LINES[rnd.randrange(len(LINES))]
        bus = BUSES[(i // 5) % len(BUSES)]
        templates.append(
            {
                "code": code,
                "pci_bus_id": bus,
                "pid": rnd.choice(pid_of[bus]) if name else None,
                "process_name": name,
                "message": msg if code in (74, 154) else f"{msg} (channel 0x{i:08x})",
            }
        )
    out = []
    seconds = 0.0
    for i in range(events):
        t = templates[i % len(templates)]
        seconds += 400.0 if rnd.random() < 0.02 else 1.0
        when = WHEN - timedelta(seconds=100_000 - seconds)
        out.append(
            XidEvent(
                **t,
                time=when,
                time_text=when.isoformat(),
                age_s=(WHEN - when).total_seconds(),
                line=100 + i,
                raw=f"NVRM: Xid (PCI:{t['pci_bus_id']}): {t['code']}, {t['message']}",
                source="journalctl -k",
            )
        )
    return out


def storm_snapshot(base: Snapshot, xids: list[XidEvent]) -> Snapshot:
    return base.model_copy(update={"facts": base.facts.model_copy(update={"xids": xids})})


def one_by_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """Evaluate without collapsing: every event enriched and bound on its own."""
    monkeypatch.setattr(evaluate_module, "enrich_collapsed", enrich)


def comparable(doc: Any) -> dict[str, Any]:
    d = doc.model_dump(mode="json")
    d.pop("generated_at")
    d["engine"].pop("duration_ms")
    return d  # type: ignore[no-any-return]


BASE = ROOT / "tests" / "scenarios" / "xid-storm-contained-ecc.json"


@pytest.mark.parametrize("engine_name", ["reference", "durable"])
@pytest.mark.parametrize(("events", "distinct", "pids"), [(600, 40, 2), (400, 7, 1), (50, 50, 3)])
def test_storm_findings_equal_one_by_one(
    builtin_book: Any,
    monkeypatch: pytest.MonkeyPatch,
    engine_name: str,
    events: int,
    distinct: int,
    pids: int,
) -> None:
    snap = storm_snapshot(load_snapshot(BASE), storm(events, distinct, pids=pids))
    collapsed = evaluate(snap, builtin_book, engine=engine_name)
    assert collapsed.engine.name == engine_name
    with monkeypatch.context() as m:
        one_by_one(m)
        plain = evaluate(snap, builtin_book, engine=engine_name)
    assert comparable(collapsed) == comparable(plain)
    # the storm is seen, counted in full: not a vacuous comparison
    assert sum(f.occurrences for f in collapsed.findings) >= events


def test_repeats_are_collapsed_and_counted(builtin_book: Any) -> None:
    xids = storm(600, 40)
    inp = enrich_collapsed(EvalInput(Facts(xids=xids)), builtin_book)
    rep = inp.repeats["xid"]
    assert len(inp.facts.xids) == len(rep.members) <= 40
    assert sum(rep.counts) == 600
    assert sorted(i for m in rep.members for i in m) == list(range(600))
    # the representative is its group's first event, annotated; the others are
    # annotated alike when walked, each with its own line and incident
    full = enrich(EvalInput(Facts(xids=xids)), builtin_book)
    assert inp.all_items("xid") == full.facts.xids


@pytest.mark.parametrize(
    "path",
    sorted((ROOT / "tests" / "scenarios").glob("*.json"))
    + sorted((ROOT / "gpu_triage" / "data" / "demos").glob("*.json")),
    ids=lambda p: p.stem,
)
def test_scenarios_equal_one_by_one(
    builtin_book: Any, monkeypatch: pytest.MonkeyPatch, path: Path
) -> None:
    snap = load_snapshot(path)
    collapsed = evaluate(snap, builtin_book, engine="reference")
    with monkeypatch.context() as m:
        one_by_one(m)
        plain = evaluate(snap, builtin_book, engine="reference")
    assert comparable(collapsed) == comparable(plain)


# --------------------------------------------------------------------------- generated rules

RULES = {
    # folded per GPU: one finding, every repeat an occurrence, other subjects in order
    "grouped": (
        "when: 'count(xid, code == xid.code and pci_bus_id == xid.pci_bus_id) >= 2'\n"
        "group_by: [xid.pci_bus_id]\n"
    ),
    # not folded: a finding per event, each with its own line
    "each": "when: 'xid.code == 79 and count(xid, pci_bus_id == xid.pci_bus_id) >= 2'\n",
    # incidents of every event counted, not those of the representatives
    "incidents": (
        "when: 'distinct(xid, incident, available(pci_bus_id) and pci_bus_id == gpu.pci_bus_id"
        " and available(incident)) >= 2'\n"
    ),
    # a rule reading the line: lines are compared then, nothing collapses on them
    "line": "when: 'xid.code == 48 and xid.line > 110'\n",
}


def _book(extra: dict[str, str]) -> Any:
    raw = RawRulebook()
    for name, body in extra.items():
        text = (
            f"id: gen-{name}\ntitle: generated {name}\nversion: 1\nseverity: warning\n"
            "stage: FD1\nsymptom: 'on {xid.pci_bus_id}'\ncause: c\nfix: f\n"
            f"{body}references: [guide/FD1]\n"
        )
        if "gpu." in body and "xid." not in body:
            text = text.replace("{xid.pci_bus_id}", "{gpu.pci_bus_id}")
        load_text(text, f"{name}.yaml", "generated", raw)
    book, diags = compile_rulebook(raw)
    errors = [d for d in raw.diagnostics + diags if d.level == "error"]
    assert not errors, errors
    return book


def _events(draw: Any) -> list[XidEvent]:
    return storm(draw(st.integers(0, 60)), draw(st.integers(1, 8)), seed=draw(st.integers(0, 9)))


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data(), agg=aggregate(), names=st.sets(st.sampled_from(sorted(RULES)), min_size=1))
def test_generated_rules_equal_one_by_one(data: Any, agg: str, names: set[str]) -> None:
    rules = {n: RULES[n] for n in names}
    cond = agg if agg.startswith("exists(") else f"{agg} >= 1"
    rules["agg"] = f"when: '{cond} and xid.code != 1'\n"
    book = _book(rules)
    xids = _events(data.draw)
    gpus = [GpuFacts(index=i, pci_bus_id=b) for i, b in enumerate(BUSES[:2])]
    inp = EvalInput(Facts(gpus=gpus, xids=xids))
    collapsed = evaluate(inp, book, engine="reference")
    orig = evaluate_module.enrich_collapsed
    evaluate_module.enrich_collapsed = enrich  # type: ignore[assignment]
    try:
        plain = evaluate(inp, book, engine="reference")
    finally:
        evaluate_module.enrich_collapsed = orig
    assert comparable(collapsed) == comparable(plain), (agg, sorted(names))


# --------------------------------------------------------------------------- what collapses


def test_fields_a_rule_reads_are_compared() -> None:
    book = _book({"line": RULES["line"]})
    assert "line" not in varying_fields(book, "xid")
    assert {"time", "time_text", "raw", "age_s"} <= varying_fields(book, "xid")
    # incidents are only counted distinct here: they may differ within a group
    assert "incident" in varying_fields(_book({"incidents": RULES["incidents"]}), "xid")
    # a rule comparing an incident's value: compared
    other = "when: 'count(xid, incident == \"x#1\") >= 1'\n"
    assert "incident" not in varying_fields(_book({"other": other}), "xid")


def test_groups_keep_apart_what_differs() -> None:
    a = XidEvent(code=79, pci_bus_id=BUSES[0], line=1, raw="a")
    b = XidEvent(code=79, pci_bus_id=BUSES[0], line=2, raw="b")
    c = XidEvent(code=79, pci_bus_id=BUSES[1], line=3)
    d = XidEvent(code=79, pci_bus_id=BUSES[0], line=4, pid=7)
    # a reason recorded in place (mark_unavailable): compared too
    e = XidEvent(code=79, pci_bus_id=BUSES[0], line=5)
    e.mark_unavailable("pid", UnavailableReason.NOT_SUPPORTED, "masked")
    f = XidEvent(code=79, pci_bus_id=BUSES[0], line=6)
    f.unavailable["pid"] = Unavailable(reason=UnavailableReason.NOT_SUPPORTED, detail="masked")
    varying = frozenset({"line", "raw", "time", "time_text", "age_s", "monotonic_s"})
    assert group([a, b, c, d, e, f], varying) == [[0, 1], [2], [3], [4, 5]]
    # other kinds in one list: nothing collapses
    assert group([a, SxidEvent(code=1)], varying) is None  # type: ignore[list-item]


def test_incidents_on_the_events_are_compared(builtin_book: Any) -> None:
    xids = [
        XidEvent(code=13, pci_bus_id=BUSES[0], line=i, incident=f"pasted#{i % 2}")
        for i in range(1, 7)
    ]
    inp = enrich_collapsed(EvalInput(Facts(xids=xids)), builtin_book)
    assert "incident" not in inp.repeats["xid"].varying
    assert [len(m) for m in inp.repeats["xid"].members] == [3, 3]


def test_other_subjects_in_input_order(builtin_book: Any) -> None:
    """A folded finding lists the other lines in the order the log has them."""
    xids = storm(300, 6, pids=1)
    snap = storm_snapshot(load_snapshot(BASE), xids)
    doc = evaluate(snap, builtin_book, engine="reference")
    folded = [
        f for f in doc.findings if f.occurrences > 1 and f.also_seen_on and "XID" in f.subject
    ]
    assert folded
    for f in folded:
        lines = [int(m) for s in f.also_seen_on for m in re.findall(r"\(line (\d+)\)", s)]
        assert len(lines) == len(f.also_seen_on)
        assert lines == sorted(lines)


@settings(max_examples=200, deadline=None)
@given(
    owner=st.lists(st.integers(0, 6), min_size=1, max_size=60),
    pick=st.lists(st.booleans(), min_size=7, max_size=7),
)
def test_events_of_representatives_walked_in_input_order(
    owner: list[int], pick: list[bool]
) -> None:
    groups: dict[int, list[int]] = {}
    for i, g in enumerate(owner):
        groups.setdefault(g, []).append(i)
    members = list(groups.values())  # in order of their first event, as group() makes them
    rep = Repeats(events=list(owner), members=members)
    chosen = [r for r in range(len(members)) if pick[r]] or [0]
    assert list(rep.ordered(chosen)) == sorted((i, r) for r in chosen for i in members[r])
