"""The TUI's findings filter/sort and GPU overview rows, without Textual."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpu_triage.engine.compiler import load_rulebook
from gpu_triage.engine.evaluate import evaluate
from gpu_triage.model.demos import demo_snapshot_path
from gpu_triage.model.facts import UnavailableReason, XidEvent
from gpu_triage.model.snapshot import load_snapshot
from gpu_triage.ops import findings_view as fv
from gpu_triage.ops.overview import NA, gpu_rows


@pytest.fixture(scope="module")
def demo() -> tuple:
    book = load_rulebook()
    snap = load_snapshot(demo_snapshot_path())
    return snap, evaluate(snap, book, engine="reference")


def _all(doc):  # type: ignore[no-untyped-def]
    return [*doc.findings, *doc.needs_confirmation, *doc.cannot_evaluate]


def test_filter_words_all_match_and_numbers_are_whole(demo) -> None:  # type: ignore[no-untyped-def]
    _, doc = demo
    found = fv.apply(_all(doc), fv.View(query="GPU 5"))
    assert found and all("5" in (f.subject + " ".join(f.also_seen_on) + f.title) for f in found)
    # "gpu 1" must not match GPU 12 / bus 0000:18 / "x16": whole numbers only
    f = doc.findings[0]
    assert fv.matches(f, "xid 79") and not fv.matches(f, "xid 7")
    assert fv.matches(f, "CRITICAL bus") and not fv.matches(f, "critical thermal")
    assert fv.apply(_all(doc), fv.View(query="")) == _all(doc)


def test_severity_floor_and_sorts_are_stable(demo) -> None:  # type: ignore[no-untyped-def]
    _, doc = demo
    items = _all(doc)
    crit = fv.apply(items, fv.View(floor="critical"))
    assert crit and {f.severity.value for f in crit} == {"critical"}
    warn = fv.apply(items, fv.View(floor="warning"))
    assert {f.severity.value for f in warn} <= {"critical", "warning"} and len(warn) > len(crit)
    by_stage = fv.apply(items, fv.View(sort="stage"))
    assert [f.stage.rank for f in by_stage] == sorted(f.stage.rank for f in items)
    by_rule = fv.apply(items, fv.View(sort="rule"))
    assert [f.rule_id for f in by_rule] == sorted(f.rule_id for f in items)
    assert fv.apply(items, fv.View(sort="rank")) == items  # the engine's order kept
    assert fv.next_key(fv.SORTS, "rule") == "rank" and fv.next_key(fv.FLOORS, "all") == "warning"
    assert fv.View(query=" pcie ", floor="critical", sort="stage").describe() == (
        "filter “pcie”, critical and above, sorted by stage"
    )


def test_natural_subject_sort_puts_gpu_10_after_gpu_2() -> None:
    assert sorted(["GPU 10", "GPU 2", "GPU 1"], key=fv._natural) == ["GPU 1", "GPU 2", "GPU 10"]


def test_gpu_rows_from_the_demo(demo) -> None:  # type: ignore[no-untyped-def]
    snap, doc = demo
    rows = gpu_rows(snap.facts, doc)
    assert [r.index for r in rows] == list(range(8))
    g3 = rows[3]
    assert g3.xids == "79" and g3.lost  # the bus-loss event names its bus id
    assert g3.worst is not None and g3.worst.severity.value == "critical"
    g5 = rows[5]
    assert "x8/16" in g5.link  # below its maximum: both shown
    assert rows[0].link.startswith("gen5 x16") and "/16" not in rows[0].link
    assert rows[7].power == NA and any("power_draw_w" in u for u in rows[7].unknown)


def test_gpu_rows_never_show_zero_for_unread_and_list_gpus_nvml_lost(demo) -> None:  # type: ignore[no-untyped-def]
    snap, _ = demo
    snap = snap.model_copy(deep=True)
    g = snap.facts.gpus[1]
    g.utilization_gpu_pct = None
    g.mark_unavailable("utilization_gpu_pct", UnavailableReason.NOT_SUPPORTED, "test")
    snap.facts.xids.append(XidEvent(code=48, pci_bus_id="0000:99:00.0", source="dmesg"))
    snap.facts.xids.append(XidEvent(code=48, pci_bus_id="0000:99:00.0", source="dmesg"))
    rows = gpu_rows(snap.facts, None)
    assert rows[1].util == NA and any("not_supported" in u or "test" in u for u in rows[1].unknown)
    extra = rows[-1]
    assert extra.index is None and extra.bus_id == "0000:99:00.0" and extra.xids == "48 (2)"
    assert extra.name == "not listed by NVML" and extra.worst is None


def test_gpu_rows_cost_is_linear(tmp_path: Path) -> None:
    """A storm of Xids on 8 GPUs: one pass, no per-GPU scan of every event."""
    from gpu_triage.model.facts import Facts, GpuFacts

    facts = Facts(gpus=[GpuFacts(index=i, pci_bus_id=f"0000:{i:02x}:00.0") for i in range(8)])
    facts.xids = [
        XidEvent(code=13, pci_bus_id=f"0000:{i % 8:02x}:00.0", source="k") for i in range(40_000)
    ]
    rows = gpu_rows(facts, None)
    assert rows[0].xids == "13 (5000)"
