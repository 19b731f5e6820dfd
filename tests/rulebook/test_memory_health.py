"""Memory health with NVIDIA's and the peers' thresholds: row remaps, retired pages, SRAM
counters, ECC mode, and corrected errors growing between runs; from every source that
produces the facts (NVML through the fake, nvidia-smi -q text, the history ledger)."""

from __future__ import annotations

import importlib.util
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import ModuleType

import pytest

from gpu_triage.collectors.base import CollectContext
from gpu_triage.collectors.nvml import NvmlCollector
from gpu_triage.collectors.parsers.adapters import nvidia_smi_q
from gpu_triage.engine.compiler import Rulebook
from gpu_triage.engine.evaluate import evaluate
from gpu_triage.engine.inputs import EvalInput
from gpu_triage.model.facts import Facts, GpuFacts, UnavailableReason
from gpu_triage.model.snapshot import Snapshot
from gpu_triage.ops.counters import CounterLedger

DATA = Path(__file__).resolve().parents[1] / "data"
MEMORY_RULES = {
    "gpu-remapped-rows-uncorrectable-limit",
    "gpu-retired-pages-limit",
    "gpu-sram-uncorrectable",
    "gpu-sram-correctable-high",
    "gpu-sram-threshold-exceeded",
    "gpu-ecc-disabled",
    "gpu-correctable-ecc-growing",
    "gpu-memory-repair-pending",
    "gpu-row-remap-failure",
    "gpu-ecc-uncorrectable",
}


def _fake() -> ModuleType:
    path = Path(__file__).resolve().parents[1] / "fakes" / "fake_nvml.py"
    spec = importlib.util.spec_from_file_location("gpu_triage_tests_fake_nvml", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


fk = _fake()


def memory_findings(book: Rulebook, facts: Facts, engine: str = "reference") -> set[str]:
    doc = evaluate(EvalInput(facts), book, engine=engine)
    return {f.rule_id for f in doc.findings} & MEMORY_RULES


def nvml_facts(profile: object) -> Facts:
    facts = Facts()
    NvmlCollector(fk.FakeNvml([profile])).collect(
        CollectContext(root=Path("/nonexistent-root"), window_s=0.01), facts
    )
    return facts


def test_recorded_h100_is_healthy_memory(builtin_book: Rulebook) -> None:
    path = DATA / "real-outputs" / "nvidia-smi-q"
    text = next(path.glob("h100-sxm-565-full-q-*.txt")).read_text()
    assert memory_findings(builtin_book, nvidia_smi_q(text)) == set()
    assert memory_findings(builtin_book, nvml_facts(fk.h100_sxm(0))) == set()


@pytest.mark.parametrize("engine", ["reference", "durable"])
def test_q_output_with_sram_and_remap_trouble(builtin_book: Rulebook, engine: str) -> None:
    text = (
        DATA
        / "hand-written"
        / "nvidia-smi-q"
        / "q-d-ecc-row-remapper-570-h100-sram-threshold-remap-pending.txt"
    ).read_text()
    facts = nvidia_smi_q(text)
    g = facts.gpus[0]
    assert (g.sram_corrected, g.sram_uncorrected, g.sram_threshold_exceeded) == (15022, 3, True)
    assert g.ecc_aggregate_corrected == 15022 + 4410
    assert memory_findings(builtin_book, facts, engine) == {
        "gpu-remapped-rows-uncorrectable-limit",
        "gpu-sram-uncorrectable",
        "gpu-sram-correctable-high",
        "gpu-sram-threshold-exceeded",
        "gpu-memory-repair-pending",
        "gpu-ecc-uncorrectable",
    }


def test_nvml_sram_counters_and_threshold(builtin_book: Rulebook) -> None:
    bad = fk.h100_sxm(0)
    bad.sram = (12, 1, 0, 1)
    facts = nvml_facts(bad)
    g = facts.gpus[0]
    assert (g.sram_corrected, g.sram_uncorrected, g.sram_threshold_exceeded) == (12, 1, True)
    assert memory_findings(builtin_book, facts) == {
        "gpu-sram-uncorrectable",
        "gpu-sram-threshold-exceeded",
    }


def test_nvml_without_sram_support_says_so() -> None:
    g = nvml_facts(fk.rtx4090()).gpus[0]
    assert g.sram_uncorrected is None
    assert g.unavailable["sram_uncorrected"].reason is UnavailableReason.NOT_SUPPORTED


def test_ecc_switched_off(builtin_book: Rulebook) -> None:
    off = fk.h100_sxm(0)
    off.ecc_mode = (0, 0)
    assert "gpu-ecc-disabled" in memory_findings(builtin_book, nvml_facts(off))


def test_page_retirement_thresholds_on_volta(builtin_book: Rulebook) -> None:
    v100 = fk.v100_old_driver()
    v100.retired_pages = {0: 50, 1: 16}
    assert "gpu-retired-pages-limit" in memory_findings(builtin_book, nvml_facts(v100))
    v100.retired_pages = {0: 5, 1: 1}
    assert "gpu-retired-pages-limit" not in memory_findings(builtin_book, nvml_facts(v100))


def _snap(corrected: int, at: datetime) -> Snapshot:
    g = GpuFacts(
        index=0, uuid="GPU-1", pci_bus_id="0000:18:00.0", ecc_aggregate_corrected=corrected
    )
    return Snapshot(facts=Facts(gpus=[g]), taken_at=at)


def test_corrected_errors_growing_between_runs(builtin_book: Rulebook) -> None:
    t0 = datetime(2026, 12, 1, 8, tzinfo=UTC)
    ledger = CounterLedger()
    first = _snap(1000, t0)
    ledger.prepare(first, t0)
    g = first.facts.gpus[0]
    assert g.ecc_corrected_delta is None
    assert g.unavailable["ecc_corrected_delta"].reason is UnavailableReason.NOT_COLLECTED
    assert "gpu-correctable-ecc-growing" not in memory_findings(builtin_book, first.facts)
    ledger.record(first, t0)
    second = _snap(1600, t0 + timedelta(hours=1))
    ledger.prepare(second, t0)
    assert second.facts.gpus[0].ecc_corrected_delta == 600
    assert second.facts.gpus[0].counters_interval_s == 3600
    assert "gpu-correctable-ecc-growing" in memory_findings(builtin_book, second.facts)
    ledger.record(second, t0)
    # a lifetime count that stopped growing is history, not a fault
    third = _snap(1600, t0 + timedelta(hours=2))
    ledger.prepare(third, t0)
    assert third.facts.gpus[0].ecc_corrected_delta == 0
    assert "gpu-correctable-ecc-growing" not in memory_findings(builtin_book, third.facts)


def test_a_counter_that_went_down_was_reset() -> None:
    t0 = datetime(2026, 12, 1, 8, tzinfo=UTC)
    ledger = CounterLedger()
    ledger.record(_snap(5000, t0), t0)
    after = _snap(40, t0 + timedelta(minutes=10))
    ledger.prepare(after, t0)
    assert after.facts.gpus[0].ecc_corrected_delta == 40


def test_history_state_round_trips_the_counters(tmp_path: Path) -> None:
    from gpu_triage.ops.history import History

    t0 = datetime(2026, 12, 1, 8, tzinfo=UTC)
    h = History.load(tmp_path / "state.json")
    h.counters.record(_snap(7, t0), t0)
    h.save()
    again = History.load(tmp_path / "state.json")
    later = _snap(9, t0 + timedelta(minutes=5))
    again.counters.prepare(later, t0)
    assert later.facts.gpus[0].ecc_corrected_delta == 2
