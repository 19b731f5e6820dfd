"""FD1/CP5/T13 from real formats: power limit against its default, applications clocks,
HW slowdown alone, HBM temperature and memory-bound GPUs, read by the nvidia-smi parsers
(-q, -q -x, --query-gpu) and the NVML collector, and the decisions the rules take."""

from __future__ import annotations

import importlib.util
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import ModuleType

import pytest

from gpu_triage.collectors.base import CollectContext
from gpu_triage.collectors.from_text import TextInput, intake_texts
from gpu_triage.collectors.nvml import NvmlCollector
from gpu_triage.collectors.parsers.nvidia_smi.query_csv import parse_query_gpu_csv
from gpu_triage.engine.compiler import Rulebook
from gpu_triage.engine.evaluate import evaluate
from gpu_triage.engine.findings import Status
from gpu_triage.engine.inputs import EvalInput
from gpu_triage.model.facts import Facts, GpuFacts
from gpu_triage.model.snapshot import Snapshot
from gpu_triage.ops.counters import CounterLedger

DATA = Path(__file__).resolve().parents[1] / "data"
HAND_Q = DATA / "hand-written/nvidia-smi-q"
REAL_Q = DATA / "real-outputs/nvidia-smi-q"
A100_CAPPED = HAND_Q / "q-d-temperature-power-clock-a100-525-capped-app-clocks-lowered.txt"
K80 = HAND_Q / "q-418-k80-single-double-bit-ecc-retired-pending.txt"
H100 = REAL_Q / "h100-sxm-565-full-q-gpu0-clocks-event-reasons-replays7-thamada-nvsim.txt"
V100_BRAKE = REAL_Q / "v100-sxm2-32gb-hw-power-brake-active-dell-c4130-l4rz.txt"
MINE = {
    "gpu-power-capped-below-default",
    "gpu-power-limit-below-default",
    "gpu-hw-slowdown-unexplained",
    "gpu-hbm-temperature-high",
    "gpu-application-clocks-lowered",
    "gpu-memory-bound",
    "gpu-compute-bound",
    "gpu-thermal-throttling",
    "gpu-power-brake",
}


def _fake_nvml() -> ModuleType:
    path = Path(__file__).resolve().parents[1] / "fakes" / "fake_nvml.py"
    spec = importlib.util.spec_from_file_location("gpu_triage_tests_fake_nvml", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def parsed(path: Path) -> Facts:
    intake = intake_texts([TextInput(path.read_text(), str(path))])
    assert intake.anything_read, [p.describe() for p in intake.pieces]
    return intake.facts


def fired(book: Rulebook, facts: Facts, engine: str = "reference") -> set[str]:
    doc = evaluate(EvalInput(facts), book, engine=engine)
    return {f.rule_id for f in doc.findings if f.status is Status.FIRED and f.rule_id in MINE}


def test_q_reads_default_limit_memory_max_and_applications_clocks() -> None:
    g = parsed(A100_CAPPED).gpus[0]
    assert (g.power_limit_w, g.power_limit_default_w) == (250.0, 400.0)
    assert (g.temperature_memory_c, g.temperature_memory_max_c) == (78.0, 95.0)
    assert g.clocks_applications_graphics_mhz == 1095.0
    assert g.clocks_default_applications_graphics_mhz == 1410.0
    assert g.throttle_sw_power_cap is True and g.throttle_applications_clocks_setting is True


def test_recorded_h100_limits_and_clocks() -> None:
    g = parsed(H100).gpus[0]
    assert (g.power_limit_w, g.power_limit_default_w) == (700.0, 700.0)
    assert g.clocks_applications_graphics_mhz == g.clocks_default_applications_graphics_mhz == 1980
    # 'Memory Max Operating T.Limit Temp : 0 C' is a margin, not a temperature
    assert g.temperature_memory_max_c is None


def test_query_gpu_csv_reads_default_limit_and_applications_clocks() -> None:
    text = (
        "index, power.limit [W], power.default_limit [W], clocks.applications.graphics [MHz], "
        "clocks.default_applications.graphics [MHz]\n"
        "0, 500.00 W, 700.00 W, 1980 MHz, 1980 MHz\n"
        "1, 700.00 W, 700.00 W, 1410 MHz, 1980 MHz\n"
    )
    g0, g1 = parse_query_gpu_csv(text)
    assert (g0.power_limit_w, g0.power_limit_default_w) == (500.0, 700.0)
    assert (g1.clocks_applications_graphics_mhz, g1.clocks_default_applications_graphics_mhz) == (
        1410.0,
        1980.0,
    )
    nounits = "index, power.default_limit, clocks.applications.gr\n0, 400.00, 1095\n"
    (g,) = parse_query_gpu_csv(nounits)
    assert (g.power_limit_default_w, g.clocks_applications_graphics_mhz) == (400.0, 1095.0)


def test_xml_reads_default_limit_memory_max_and_applications_clocks() -> None:
    from gpu_triage.collectors.parsers.nvidia_smi.xml import parse_nvidia_smi_xml

    xml = """<?xml version="1.0" ?>
<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v12.dtd">
<nvidia_smi_log>
  <driver_version>535.161.08</driver_version>
  <attached_gpus>1</attached_gpus>
  <gpu id="00000000:07:00.0">
    <product_name>NVIDIA A100-SXM4-80GB</product_name>
    <temperature>
      <gpu_temp>64 C</gpu_temp>
      <gpu_temp_max_threshold>92 C</gpu_temp_max_threshold>
      <gpu_temp_slow_threshold>89 C</gpu_temp_slow_threshold>
      <gpu_temp_max_gpu_threshold>85 C</gpu_temp_max_gpu_threshold>
      <memory_temp>93 C</memory_temp>
      <gpu_temp_max_mem_threshold>95 C</gpu_temp_max_mem_threshold>
    </temperature>
    <gpu_power_readings>
      <power_draw>249.61 W</power_draw>
      <current_power_limit>250.00 W</current_power_limit>
      <requested_power_limit>250.00 W</requested_power_limit>
      <default_power_limit>400.00 W</default_power_limit>
      <min_power_limit>100.00 W</min_power_limit>
      <max_power_limit>400.00 W</max_power_limit>
    </gpu_power_readings>
    <applications_clocks>
      <graphics_clock>1095 MHz</graphics_clock>
      <mem_clock>1593 MHz</mem_clock>
    </applications_clocks>
    <default_applications_clocks>
      <graphics_clock>1410 MHz</graphics_clock>
      <mem_clock>1593 MHz</mem_clock>
    </default_applications_clocks>
  </gpu>
</nvidia_smi_log>
"""
    (g,) = parse_nvidia_smi_xml(xml).gpus
    assert (g.power_limit_w, g.power_limit_default_w) == (250.0, 400.0)
    assert (g.temperature_memory_c, g.temperature_memory_max_c) == (93.0, 95.0)
    assert (g.clocks_applications_graphics_mhz, g.clocks_default_applications_graphics_mhz) == (
        1095.0,
        1410.0,
    )


def test_nvml_reads_default_limit_memory_max_and_applications_clocks(tmp_path: Path) -> None:
    fk = _fake_nvml()
    gpu = fk.h100_sxm()
    gpu.power_limit_mw, gpu.app_clock_mhz = 500_000, 1410
    facts = Facts()
    NvmlCollector(fk.FakeNvml([gpu, fk.rtx4090()])).collect(
        CollectContext(root=tmp_path, window_s=0.01), facts
    )
    h100, geforce = facts.gpus
    assert (h100.power_limit_w, h100.power_limit_default_w) == (500.0, 700.0)
    assert h100.temperature_memory_max_c == 95.0
    assert h100.clocks_applications_graphics_mhz == 1410.0
    assert h100.clocks_default_applications_graphics_mhz == 1980.0
    # GeForce: no applications clocks, no HBM limit: unavailable with a reason, not zero
    assert geforce.clocks_applications_graphics_mhz is None
    assert geforce.unavailable["clocks_applications_graphics_mhz"].reason.value == "not_supported"
    assert geforce.temperature_memory_max_c is None


@pytest.mark.parametrize("engine", ["reference", "durable"])
def test_capped_a100_with_lowered_clocks(builtin_book: Rulebook, engine: str) -> None:
    # At its lowered 250 W cap with applications clocks at 1095 of 1410 MHz; HBM 78 C of 95.
    assert fired(builtin_book, parsed(A100_CAPPED), engine) == {
        "gpu-power-capped-below-default",
        "gpu-application-clocks-lowered",
    }


def test_k80_limit_below_default_is_a_readiness_finding(builtin_book: Rulebook) -> None:
    # The K80 enforces 140 W of a 149 W default and idles: lowered, not throttling now.
    assert fired(builtin_book, parsed(K80)) == {"gpu-power-limit-below-default"}


def test_recorded_h100_at_defaults_fires_none(builtin_book: Rulebook) -> None:
    assert fired(builtin_book, parsed(H100)) == set()


def test_recorded_v100_power_brake_is_not_an_unexplained_slowdown(builtin_book: Rulebook) -> None:
    # HW Slowdown + HW Power Brake Slowdown active (recorded): the brake explains it.
    got = fired(builtin_book, parsed(V100_BRAKE))
    assert "gpu-power-brake" in got and "gpu-hw-slowdown-unexplained" not in got


def test_hw_slowdown_alone_edited_into_the_recorded_v100(builtin_book: Rulebook) -> None:
    text = V100_BRAKE.read_text()
    assert "HW Power Brake Slowdown    : Active" in text or "Power Brake Slowdown" in text
    edited = "\n".join(
        line.replace(": Active", ": Not Active") if "Power Brake" in line else line
        for line in text.splitlines()
    )
    facts = intake_texts([TextInput(edited, "v100-edited")]).facts
    g = facts.gpus[0]
    assert g.throttle_hw_slowdown is True and g.throttle_hw_power_brake_slowdown is False
    got = fired(builtin_book, facts)
    assert "gpu-hw-slowdown-unexplained" in got and "gpu-power-brake" not in got


def test_hot_hbm_from_xml_values(builtin_book: Rulebook) -> None:
    facts = Facts.model_validate(
        {
            "gpus": [
                {
                    "index": 0,
                    "temperature_gpu_c": 70,
                    "temperature_memory_c": 93,
                    "temperature_memory_max_c": 95,
                }
            ]
        }
    )
    assert "gpu-hbm-temperature-high" in fired(builtin_book, facts)


def test_memory_bound_replaces_compute_bound(builtin_book: Rulebook) -> None:
    base = {
        "index": 0,
        "utilization_gpu_pct": 97,
        "power_draw_w": 610,
        "power_limit_w": 700,
        "power_limit_default_w": 700,
        "throttle_gpu_idle": False,
        "throttle_sw_power_cap": False,
        "throttle_hw_slowdown": False,
        "throttle_hw_thermal_slowdown": False,
        "throttle_sw_thermal_slowdown": False,
        "throttle_hw_power_brake_slowdown": False,
        "clocks_applications_graphics_mhz": 1980,
        "clocks_default_applications_graphics_mhz": 1980,
    }
    memory = Facts.model_validate({"gpus": [{**base, "utilization_memory_pct": 88}]})
    compute = Facts.model_validate({"gpus": [{**base, "utilization_memory_pct": 60}]})
    assert fired(builtin_book, memory) == {"gpu-memory-bound"}
    assert fired(builtin_book, compute) == {"gpu-compute-bound"}


# --------------------------------------------------------------------------- across runs


def _run(t: datetime, *, thermal: bool | None, uuid: str = "GPU-b42dd28e") -> Snapshot:
    gpu = GpuFacts(
        index=0,
        uuid=uuid,
        pci_bus_id="0000:18:00.0",
        temperature_gpu_c=88.0 if thermal else 60.0,
        throttle_hw_slowdown=thermal,
        throttle_hw_thermal_slowdown=thermal,
        throttle_sw_thermal_slowdown=False if thermal is not None else None,
        throttle_hw_power_brake_slowdown=False if thermal is not None else None,
    )
    return Snapshot(facts=Facts(gpus=[gpu]), taken_at=t)


def test_throttling_streak_across_unattended_runs(builtin_book: Rulebook) -> None:
    t0 = datetime(2026, 12, 1, 8, tzinfo=UTC)
    ledger = CounterLedger()
    streaks, sustained = [], []
    for n, thermal in enumerate([True, True, True, True, False, True]):
        snap = _run(t0 + timedelta(minutes=5 * n), thermal=thermal)
        ledger.prepare(snap, snap.taken_at)
        streaks.append(snap.facts.gpus[0].throttled_runs)
        sustained.append("gpu-throttling-sustained" in fired_all(builtin_book, snap.facts))
        ledger.record(snap, snap.taken_at)
    assert streaks == [1, 2, 3, 4, 0, 1]
    assert sustained == [False, False, True, True, False, False]
    # the streak survives the ledger's round trip through the state file
    again = CounterLedger.from_json(ledger.to_json())
    snap = _run(t0 + timedelta(hours=1), thermal=True)
    again.prepare(snap, snap.taken_at)
    assert snap.facts.gpus[0].throttled_runs == 2


def test_unreadable_throttle_reasons_are_no_streak() -> None:
    t0 = datetime(2026, 12, 1, 8, tzinfo=UTC)
    ledger = CounterLedger()
    snap = _run(t0, thermal=None)
    ledger.prepare(snap, t0)
    g = snap.facts.gpus[0]
    assert g.throttled_runs is None
    assert g.unavailable["throttled_runs"].detail == "throttle reasons not read"


def fired_all(book: Rulebook, facts: Facts) -> set[str]:
    doc = evaluate(EvalInput(facts), book)
    return {f.rule_id for f in doc.findings if f.status is Status.FIRED}
