"""NVLink fabric registration, link speed and error growth, InfiniBand expectations and
flaps, from parsed output and the history ledger."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from gpu_triage.collectors.parsers.registry import get_parser
from gpu_triage.engine.compiler import Rulebook
from gpu_triage.engine.evaluate import evaluate
from gpu_triage.engine.inputs import EvalInput
from gpu_triage.model.facts import Facts, IbPortFacts, NvlinkFacts
from gpu_triage.model.snapshot import Snapshot
from gpu_triage.ops.counters import CounterLedger

DATA = Path(__file__).resolve().parents[1] / "data"


def fired(book: Rulebook, facts: Facts) -> set[str]:
    return {f.rule_id for f in evaluate(EvalInput(facts), book, engine="reference").findings}


def test_fabric_in_progress_from_the_xml_report(builtin_book: Rulebook) -> None:
    text = DATA / "hand-written/nvidia-smi-q-xml/q-x-550-h100-two-gpus-remap-pending-gpu1.xml"
    facts = get_parser("nvidia-smi-q-xml")(text.read_text(), "q.xml")
    got = fired(builtin_book, facts)
    assert "gpu-fabric-not-ready" in got and "gpu-fabric-registration-failed" not in got


def test_recorded_h100_fabric_is_ready(builtin_book: Rulebook) -> None:
    path = next((DATA / "real-outputs/nvidia-smi-q").glob("h100-sxm-565-full-q-*.txt"))
    facts = get_parser("nvidia-smi-q")(path.read_text(), path.name)
    assert not {"gpu-fabric-not-ready", "gpu-fabric-registration-failed"} & fired(
        builtin_book, facts
    )


def test_ib_flaps_and_nvlink_replays_between_runs(builtin_book: Rulebook) -> None:
    t0 = datetime(2026, 12, 1, 8, tzinfo=UTC)

    def snap(downed: int, replays: int, at: datetime) -> Snapshot:
        return Snapshot(
            taken_at=at,
            facts=Facts(
                ib_ports=[IbPortFacts(ca_name="mlx5_0", port=1, link_downed=downed)],
                nvlinks=[
                    NvlinkFacts(
                        gpu_pci_bus_id="0000:18:00.0", gpu_index=0, link=4, replay_errors=replays
                    )
                ],
            ),
        )

    ledger = CounterLedger()
    first = snap(5, 100, t0)
    ledger.prepare(first, t0)
    assert not {"ib-port-flapping", "nvlink-errors-growing"} & fired(builtin_book, first.facts)
    ledger.record(first, t0)
    second = snap(6, 100, t0 + timedelta(minutes=5))
    ledger.prepare(second, t0)
    got = fired(builtin_book, second.facts)
    assert "ib-port-flapping" in got and "nvlink-errors-growing" not in got
    ledger.record(second, t0)
    third = snap(6, 140, t0 + timedelta(minutes=10))
    ledger.prepare(third, t0)
    got = fired(builtin_book, third.facts)
    assert "nvlink-errors-growing" in got and "ib-port-flapping" not in got


def test_real_ibstat_disabled_port(builtin_book: Rulebook) -> None:
    path = next((DATA / "real-outputs/ib").glob("ibstat-mlx4-2port-*.txt"))
    facts = get_parser("ibstat")(path.read_text(), path.name)
    assert "ib-port-disabled-or-polling" in fired(builtin_book, facts)
