"""Temperature thresholds: every spelling nvidia-smi prints (absolute rows, R565+ T.Limit
margins, XML), NVML's thresholds with old bindings guarded, and the rule for a limit set
far below the slowdown temperature."""

from __future__ import annotations

import functools
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from gpu_triage.collectors.base import CollectContext
from gpu_triage.collectors.from_text import intake_paste
from gpu_triage.collectors.nvml import NvmlCollector
from gpu_triage.collectors.parsers.registry import get_parser
from gpu_triage.engine.compiler import Rulebook, load_rulebook
from gpu_triage.engine.evaluate import evaluate
from gpu_triage.model.facts import Facts, UnavailableReason
from gpu_triage.model.snapshot import Snapshot

DATA = Path(__file__).resolve().parents[1] / "data"
H100_Q = (
    DATA
    / "real-outputs/nvidia-smi-q"
    / "h100-sxm-565-full-q-gpu0-clocks-event-reasons-replays7-thamada-nvsim.txt"
)
LOWERED = DATA / "hand-written/nvidia-smi-q/q-d-temperature-rtx3090-535-target-lowered-62c.txt"
RULE = "gpu-thermal-limit-set-low"


def _load_fake() -> ModuleType:
    path = Path(__file__).resolve().parents[1] / "fakes" / "fake_nvml.py"
    spec = importlib.util.spec_from_file_location("gpu_triage_tests_fake_nvml", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


fk = _load_fake()


@functools.cache
def book() -> Rulebook:
    return load_rulebook()


def fired(facts: Facts) -> list[str]:
    return [f.rule_id for f in evaluate(Snapshot(facts=facts), book(), engine="reference").findings]


def test_r565_margins_become_thresholds() -> None:
    # GPU T.Limit Temp 57 at 30 C: the T.Limit is 87 C; slowdown -2 -> 89, shutdown -8 -> 95.
    g = get_parser("nvidia-smi-q")(H100_Q.read_text(), str(H100_Q)).gpus[0]
    assert (g.temperature_max_operating_c, g.temperature_slowdown_c) == (87.0, 89.0)
    assert g.temperature_shutdown_c == 95.0
    assert g.temperature_target_c is None
    assert g.unavailable["temperature_target_c"].reason is UnavailableReason.NOT_SUPPORTED
    assert g.thermal_limit_below_slowdown_c == 2.0


def test_margins_without_the_current_temperature_give_no_threshold() -> None:
    text = (
        "GPU 00000000:18:00.0\n    Temperature\n        GPU Current Temp : N/A\n"
        "        GPU T.Limit Temp : 57 C\n        GPU Slowdown T.Limit Temp : -2 C\n"
    )
    g = get_parser("nvidia-smi-q")(text, "t.txt").gpus[0]
    assert g.temperature_slowdown_c is None


def test_a_lowered_target_in_a_pasted_session_is_the_top_finding() -> None:
    intake = intake_paste(LOWERED.read_text(), "paste.txt")
    g = intake.facts.gpus[0]
    assert (g.temperature_target_c, g.temperature_max_operating_c) == (62.0, 93.0)
    assert (g.temperature_slowdown_c, g.temperature_shutdown_c) == (95.0, 98.0)
    assert g.thermal_limit_below_slowdown_c == 33.0
    assert g.throttle_sw_thermal_slowdown is True
    assert fired(intake.facts)[0] == RULE


def test_lost_indentation_and_a_fragment_still_read() -> None:
    # A chat paste that lost its indentation, only the temperature block.
    text = "\n".join(line.strip() for line in LOWERED.read_text().splitlines()[14:] if line.strip())
    g = get_parser("nvidia-smi-q")(text, "frag.txt").gpus[0]
    assert g.temperature_target_c == 62.0 and g.temperature_slowdown_c == 95.0


def test_xml_thresholds() -> None:
    xml = (
        '<?xml version="1.0" ?>\n<nvidia_smi_log><driver_version>535.161.07</driver_version>'
        '<gpu id="00000000:01:00.0"><temperature><gpu_temp>62 C</gpu_temp>'
        "<gpu_temp_max_threshold>98 C</gpu_temp_max_threshold>"
        "<gpu_temp_slow_threshold>95 C</gpu_temp_slow_threshold>"
        "<gpu_temp_max_gpu_threshold>93 C</gpu_temp_max_gpu_threshold>"
        "<gpu_target_temperature>62 C</gpu_target_temperature>"
        "<memory_temp>N/A</memory_temp>"
        "<gpu_temp_max_mem_threshold>N/A</gpu_temp_max_mem_threshold>"
        "</temperature></gpu></nvidia_smi_log>\n"
    )
    g = get_parser("nvidia-smi-q-xml")(xml, "q.xml").gpus[0]
    assert (g.temperature_target_c, g.temperature_max_operating_c) == (62.0, 93.0)
    assert g.temperature_memory_max_c is None
    assert g.thermal_limit_below_slowdown_c == 33.0


def collect(fake: object) -> Facts:
    facts = Facts()
    NvmlCollector(fake).collect(
        CollectContext(root=Path("/nonexistent-root"), window_s=0.05), facts
    )
    return facts


def test_nvml_reads_every_threshold() -> None:
    g = collect(fk.FakeNvml([fk.rtx4090()])).gpus[0]
    assert (g.temperature_target_c, g.temperature_target_min_c, g.temperature_target_max_c) == (
        83.0,
        65.0,
        88.0,
    )
    assert g.temperature_max_operating_c == 85.0
    assert g.unavailable["temperature_memory_max_c"].reason is UnavailableReason.NOT_SUPPORTED
    h100 = collect(fk.FakeNvml([fk.h100_sxm()])).gpus[0]
    assert (h100.temperature_max_operating_c, h100.temperature_memory_max_c) == (
        87.0,
        95.0,
    )
    assert h100.unavailable["temperature_target_c"].reason is UnavailableReason.NOT_SUPPORTED


def test_nvml_binding_without_the_new_constants() -> None:
    fake = fk.FakeNvml(
        [fk.rtx4090()],
        hidden={"NVML_TEMPERATURE_THRESHOLD_ACOUSTIC_CURR", "NVML_TEMPERATURE_THRESHOLD_GPU_MAX"},
    )
    g = collect(fake).gpus[0]
    assert g.temperature_target_c is None and g.temperature_max_operating_c is None
    assert "not in this nvidia-ml-py" in g.unavailable["temperature_target_c"].detail
    assert g.temperature_slowdown_c == 87.0  # the rest is still read


@pytest.mark.parametrize(("target", "fires"), [(60, True), (72, True), (83, False)])
def test_nvml_target_set_low_fires_the_rule(target: int, fires: bool) -> None:
    gpu = fk.rtx4090()
    gpu.target_c = target
    facts = collect(fk.FakeNvml([gpu]))
    assert (RULE in fired(facts)) is fires
