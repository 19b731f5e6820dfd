"""NvmlCollector against FakeNvml profiles (no GPU needed), and against the real pynvml."""

from __future__ import annotations

import importlib.util
import sys
import time
from pathlib import Path
from types import ModuleType

import pynvml
import pytest

from gpu_triage.collectors.base import CollectContext, CollectorUnavailable
from gpu_triage.collectors.nvml import NvmlCollector, cuda_version_text, normalize_bus_id
from gpu_triage.model.facts import Facts, GpuFacts, RecoveryAction, UnavailableReason


def _load_fake() -> ModuleType:
    # tests/ is not a package; load the shared fake by path.
    path = Path(__file__).resolve().parents[1] / "fakes" / "fake_nvml.py"
    spec = importlib.util.spec_from_file_location("gpu_triage_tests_fake_nvml", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


fk = _load_fake()

NS = UnavailableReason.NOT_SUPPORTED


def collect(fake: object, tmp_path: Path | None = None, window_s: float = 0.05) -> Facts:
    facts = Facts()
    ctx = CollectContext(root=tmp_path or Path("/nonexistent-root"), window_s=window_s)
    NvmlCollector(fake).collect(ctx, facts)
    return facts


def reason(gpu: GpuFacts | object, name: str) -> UnavailableReason | None:
    why = gpu.unavailable.get(name)  # type: ignore[attr-defined]
    return why.reason if why else None


# --------------------------------------------------------------------------- helpers


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("00000000:3B:00.0", "0000:3b:00.0"),
        ("0000:3b:00", "0000:3b:00.0"),
        ("PCI:0000:18:00", "0000:18:00.0"),
        (b"00000000:DB:00.0", "0000:db:00.0"),
        ("3b:00.1", "0000:3b:00.1"),
        ("GPU-xxx", None),
    ],
)
def test_normalize_bus_id(text: str, want: str | None) -> None:
    assert normalize_bus_id(text) == want


def test_cuda_version_text() -> None:
    assert cuda_version_text(12040) == "12.4"
    assert cuda_version_text(12070) == "12.7"
    assert cuda_version_text(11040) == "11.4"


# --------------------------------------------------------------------------- profiles


def test_h100_recorded_values(tmp_path: Path) -> None:
    fake = fk.FakeNvml(fk.h100_node(8))
    facts = collect(fake, tmp_path)
    assert [g.index for g in facts.gpus] == list(range(8))
    g = facts.gpus[0]
    # Values of the recorded nvidia-smi -q of this GPU.
    assert g.name == "NVIDIA H100 80GB HBM3"
    assert g.serial == "1654423001593"
    assert g.uuid == "GPU-b42dd28e-ffdd-8720-1df0-98bd8cdc05b1"
    assert g.pci_bus_id == "0000:18:00.0"
    assert (g.driver_version, g.cuda_version, g.vbios_version) == (
        "565.57.01",
        "12.7",
        "96.00.74.00.01",
    )
    assert (g.memory_used_mib, g.memory_total_mib) == (1.0, 81559.0)
    assert (g.power_draw_w, g.power_limit_w) == (100.89, 700.0)
    assert (g.temperature_gpu_c, g.temperature_memory_c) == (30.0, 36.0)
    assert (g.temperature_slowdown_c, g.temperature_shutdown_c) == (89.0, 95.0)
    assert g.performance_state == 0
    assert g.throttle_gpu_idle is True and g.throttle_hw_slowdown is False
    assert (g.clocks_sm_mhz, g.clocks_sm_max_mhz) == (345.0, 1980.0)
    assert g.ecc_enabled is True
    assert (g.ecc_volatile_corrected, g.ecc_aggregate_uncorrected) == (0, 0)
    assert (g.remapped_rows_correctable, g.remapped_rows_uncorrectable) == (0, 0)
    assert g.remapped_rows_pending is False and g.remapped_rows_failure is False
    assert (g.pcie_link_gen, g.pcie_link_gen_max, g.pcie_link_width, g.pcie_link_width_max) == (
        5,
        5,
        16,
        16,
    )
    assert g.pcie_replay_count == 7
    assert (g.nvlink_links_total, g.nvlink_links_active) == (18, 18)
    assert g.persistence_mode is True and g.mig_mode is False
    assert g.compute_mode == "default"
    assert g.recovery_action is RecoveryAction.NONE
    assert (g.utilization_gpu_pct, g.utilization_memory_pct) == (0.0, 0.0)
    assert g.process_count == 0 and g.lost is False
    # N/A in the recording: retired pages (Hopper remaps rows) and the fan (SXM).
    for name in ("retired_pages_sbe", "retired_pages_dbe", "retired_pages_pending"):
        assert g.retired_pages_sbe is None and reason(g, name) is NS
    assert reason(g, "fan_speed_pct") is NS
    # SRAM counters and the fabric as recorded ("SRAM Threshold Exceeded: No"; Fabric
    # Completed / Success, no health summary printed)
    assert (g.sram_corrected, g.sram_uncorrected, g.sram_threshold_exceeded) == (0, 0, False)
    assert (g.fabric_state, g.fabric_status) == ("completed", "success")
    assert reason(g, "fabric_health") is NS
    assert set(g.unavailable) == {
        "retired_pages_sbe",
        "retired_pages_dbe",
        "retired_pages_pending",
        "fan_speed_pct",
        "fabric_health",
        # "GPU Target Temperature: N/A" in the recording: no acoustic target on SXM
        "temperature_target_c",
        "temperature_target_min_c",
        "temperature_target_max_c",
    }
    assert (g.temperature_max_operating_c, g.temperature_memory_max_c) == (87.0, 95.0)
    # Other GPUs: bus ids and power of the recorded 8-GPU table.
    assert [x.pci_bus_id for x in facts.gpus][1:3] == ["0000:2a:00.0", "0000:3a:00.0"]
    assert facts.gpus[7].power_draw_w == 75.0
    links = [lk for lk in facts.nvlinks if lk.gpu_index == 0]
    assert len(links) == 18 and len(facts.nvlinks) == 8 * 18
    assert links[0].gpu_pci_bus_id == "0000:18:00.0"
    assert links[17].link == 17 and links[17].active is True and links[17].speed_gbps == 26.562
    assert (links[0].replay_errors, links[0].recovery_errors, links[0].crc_errors) == (0, 0, 0)
    assert fake.init_count == fake.shutdown_count == 1


def test_nvlink_down_and_errors(tmp_path: Path) -> None:
    gpu = fk.h100_sxm()
    gpu.nvlinks[3] = fk.FakeLink(active=False, replay=12, recovery=3, crc_flit=41)
    facts = collect(fk.FakeNvml([gpu]), tmp_path)
    assert (facts.gpus[0].nvlink_links_total, facts.gpus[0].nvlink_links_active) == (18, 17)
    link = facts.nvlinks[3]
    assert link.active is False
    assert (link.replay_errors, link.recovery_errors, link.crc_errors) == (12, 3, 41)


def test_ecc_counts_and_remapped_rows(tmp_path: Path) -> None:
    gpu = fk.h100_sxm()
    gpu.ecc_counts = {(0, 0): 5, (1, 0): 1, (0, 1): 120, (1, 1): 2}
    gpu.remapped_rows = (3, 1, 1, 0)
    g = collect(fk.FakeNvml([gpu]), tmp_path).gpus[0]
    assert (g.ecc_volatile_corrected, g.ecc_volatile_uncorrected) == (5, 1)
    assert (g.ecc_aggregate_corrected, g.ecc_aggregate_uncorrected) == (120, 2)
    assert (g.remapped_rows_correctable, g.remapped_rows_uncorrectable) == (3, 1)
    assert g.remapped_rows_pending is True and g.remapped_rows_failure is False


def test_ecc_disabled_counts_not_zero(tmp_path: Path) -> None:
    gpu = fk.h100_sxm()
    gpu.ecc_mode = (0, 0)
    g = collect(fk.FakeNvml([gpu]), tmp_path).gpus[0]
    assert g.ecc_enabled is False
    assert g.ecc_volatile_uncorrected is None
    assert reason(g, "ecc_volatile_uncorrected") is NS


def test_recovery_action_values(tmp_path: Path) -> None:
    gpu = fk.h100_sxm()
    gpu.recovery_action = pynvml.NVML_GPU_RECOVERY_ACTION_DRAIN_AND_RESET
    g = collect(fk.FakeNvml([gpu]), tmp_path).gpus[0]
    assert g.recovery_action is RecoveryAction.DRAIN_AND_RESET


def test_recovery_action_missing_from_binding(tmp_path: Path) -> None:
    fake = fk.FakeNvml([fk.h100_sxm()], hidden={"NVML_FI_DEV_GET_GPU_RECOVERY_ACTION"})
    g = collect(fake, tmp_path).gpus[0]
    assert g.recovery_action is None and reason(g, "recovery_action") is NS
    assert g.temperature_memory_c == 36.0  # the rest of the batch still read


def test_a100_mig(tmp_path: Path) -> None:
    facts = collect(fk.FakeNvml([fk.a100_mig()]), tmp_path)
    g = facts.gpus[0]
    assert g.mig_mode is True
    assert g.utilization_gpu_pct is None and g.utilization_memory_pct is None
    assert reason(g, "utilization_gpu_pct") is NS and reason(g, "utilization_memory_pct") is NS
    for name in ("remapped_rows_correctable", "remapped_rows_pending", "remapped_rows_failure"):
        assert reason(g, name) is NS
    assert g.ecc_enabled is True and g.nvlink_links_total == 12
    assert g.power_draw_w == 88.0  # other readings unaffected
    (proc,) = facts.processes
    assert proc.pid == 4242 and proc.used_memory_mib is None
    assert reason(proc, "used_memory_mib") is NS


def test_consumer_card(tmp_path: Path) -> None:
    proc_dir = tmp_path / "proc" / "31337"
    proc_dir.mkdir(parents=True)
    (proc_dir / "comm").write_text("python3\n")
    facts = collect(fk.FakeNvml([fk.rtx4090()]), tmp_path)
    g = facts.gpus[0]
    for name in (
        "serial",
        "ecc_enabled",
        "ecc_volatile_corrected",
        "retired_pages_sbe",
        "retired_pages_pending",
        "remapped_rows_correctable",
        "nvlink_links_total",
        "nvlink_links_active",
        "mig_mode",
        "recovery_action",
        "temperature_memory_c",
    ):
        assert getattr(g, name) is None, name
        assert reason(g, name) is NS, name
    assert facts.nvlinks == []
    assert g.fan_speed_pct == 62.0 and g.throttle_sw_power_cap is True
    assert (g.utilization_gpu_pct, g.utilization_memory_pct) == (97.0, 58.0)
    assert g.persistence_mode is False and g.performance_state == 2
    (proc,) = facts.processes
    assert (proc.pid, proc.name, proc.used_memory_mib) == (31337, "python3", 20480.0)
    assert (proc.gpu_index, proc.gpu_pci_bus_id, proc.type) == (0, "0000:01:00.0", "compute")
    assert g.process_count == 1


def test_process_name_unreadable(tmp_path: Path) -> None:
    facts = collect(fk.FakeNvml([fk.rtx4090()]), tmp_path)
    (proc,) = facts.processes
    assert proc.name is None and reason(proc, "name") is UnavailableReason.NOT_COLLECTED


def test_old_driver_fallbacks(tmp_path: Path) -> None:
    fake = fk.FakeNvml([fk.v100_old_driver()], driver="470.82.01", cuda=11040)
    facts = collect(fake, tmp_path)
    g = facts.gpus[0]
    # New APIs raise FunctionNotFound; the deprecated ones answer.
    assert "nvmlDeviceGetCurrentClocksThrottleReasons" in fake.calls
    assert "nvmlDeviceGetTemperature" in fake.calls
    assert "nvmlDeviceGetPowerState" in fake.calls
    assert "nvmlDeviceGetComputeRunningProcesses_v2" in fake.calls
    assert g.throttle_hw_slowdown is True and g.throttle_hw_power_brake_slowdown is True
    assert g.throttle_gpu_idle is False and g.clocks_sm_mhz == 382.0
    assert g.temperature_gpu_c == 45.0 and g.performance_state == 0
    assert (g.driver_version, g.cuda_version) == ("470.82.01", "11.4")
    assert (g.retired_pages_sbe, g.retired_pages_dbe, g.retired_pages_pending) == (0, 0, False)
    assert reason(g, "remapped_rows_correctable") is NS
    assert reason(g, "recovery_action") is NS  # field unknown to the old driver
    assert facts.processes[0].pid == 2187
    for name in ("throttle_hw_slowdown", "temperature_gpu_c", "performance_state"):
        assert name not in g.unavailable


def test_binding_without_new_functions(tmp_path: Path) -> None:
    # An old nvidia-ml-py lacks the functions entirely (AttributeError), bytes strings.
    hidden = {
        "nvmlDeviceGetTemperatureV",
        "nvmlDeviceGetCurrentClocksEventReasons",
        "nvmlDeviceGetPerformanceState",
        "nvmlDeviceGetComputeRunningProcesses_v3",
        "nvmlDeviceGetComputeRunningProcesses_v2",
    }
    fake = fk.FakeNvml([fk.h100_sxm()], hidden=hidden, bytes_strings=True)
    g = collect(fake, tmp_path).gpus[0]
    assert g.temperature_gpu_c == 30.0 and g.throttle_gpu_idle is True
    assert g.performance_state == 0 and g.process_count == 0
    assert g.name == "NVIDIA H100 80GB HBM3" and g.driver_version == "565.57.01"


def test_function_missing_everywhere_is_not_supported(tmp_path: Path) -> None:
    gpu = fk.h100_sxm()
    gpu.errors["nvmlDeviceGetTemperatureV"] = fk.FUNCTION_NOT_FOUND
    fake = fk.FakeNvml([gpu], hidden={"nvmlDeviceGetTemperature"})
    g = collect(fake, tmp_path).gpus[0]
    assert g.temperature_gpu_c is None and reason(g, "temperature_gpu_c") is NS


@pytest.mark.parametrize(
    ("code", "want"),
    [
        (pynvml.NVML_ERROR_NO_PERMISSION, UnavailableReason.NO_PERMISSION),
        (pynvml.NVML_ERROR_NOT_SUPPORTED, UnavailableReason.NOT_SUPPORTED),
        (pynvml.NVML_ERROR_UNKNOWN, UnavailableReason.ERROR),
        (pynvml.NVML_ERROR_TIMEOUT, UnavailableReason.ERROR),
    ],
)
def test_error_mapping(tmp_path: Path, code: int, want: UnavailableReason) -> None:
    gpu = fk.h100_sxm()
    gpu.errors["nvmlDeviceGetPcieReplayCounter"] = code
    g = collect(fk.FakeNvml([gpu]), tmp_path).gpus[0]
    assert g.pcie_replay_count is None and reason(g, "pcie_replay_count") is want
    assert "nvmlDeviceGetPcieReplayCounter" in g.unavailable["pcie_replay_count"].detail
    assert g.pcie_link_gen == 5 and g.lost is False


# --------------------------------------------------------------------------- lost GPUs


def test_gpu_lost_mid_collection(tmp_path: Path) -> None:
    fake = fk.FakeNvml(fk.h100_node(2))
    fake.lose_gpu(1, at="nvmlDeviceGetRemappedRows")
    facts = collect(fake, tmp_path)
    ok, lost = facts.gpus
    assert ok.lost is False and ok.remapped_rows_correctable == 0
    assert lost.lost is True
    # What was read before the loss is kept ...
    assert lost.pci_bus_id == "0000:2a:00.0" and lost.power_draw_w == 82.0
    assert lost.ecc_enabled is True
    # ... the failing call and everything after it is gpu_lost.
    assert reason(lost, "remapped_rows_correctable") is UnavailableReason.GPU_LOST
    assert reason(lost, "pcie_link_gen") is UnavailableReason.GPU_LOST
    assert reason(lost, "nvlink_links_total") is UnavailableReason.GPU_LOST
    assert [lk.gpu_index for lk in facts.nvlinks] == [0] * 18
    # Querying stopped right there.
    assert fake.gpu_calls[1][-1] == "nvmlDeviceGetRemappedRows"
    assert "nvmlDeviceGetCurrPcieLinkGeneration" in fake.gpu_calls[0]
    assert fake.shutdown_count == 1


def test_gpu_lost_while_sampling(tmp_path: Path) -> None:
    fake = fk.FakeNvml([fk.h100_sxm()])
    fake.lose_gpu(0, at="nvmlDeviceGetUtilizationRates")
    g = collect(fake, tmp_path).gpus[0]
    assert g.lost is True and g.uuid is not None
    assert reason(g, "utilization_gpu_pct") is UnavailableReason.GPU_LOST
    assert reason(g, "power_draw_w") is UnavailableReason.GPU_LOST


@pytest.mark.parametrize(
    ("code", "want"),
    [
        (pynvml.NVML_ERROR_GPU_IS_LOST, UnavailableReason.GPU_LOST),
        (pynvml.NVML_ERROR_INSUFFICIENT_POWER, UnavailableReason.ERROR),
        (pynvml.NVML_ERROR_NO_PERMISSION, UnavailableReason.NO_PERMISSION),
        (pynvml.NVML_ERROR_IRQ_ISSUE, UnavailableReason.ERROR),
    ],
)
def test_handle_failure(tmp_path: Path, code: int, want: UnavailableReason) -> None:
    fake = fk.FakeNvml(fk.h100_node(2), handle_errors={1: code})
    facts = collect(fake, tmp_path)
    assert facts.gpus[0].name == "NVIDIA H100 80GB HBM3"
    bad = facts.gpus[1]
    assert bad.index == 1 and bad.name is None
    assert bad.lost is (True if want is UnavailableReason.GPU_LOST else None)
    assert reason(bad, "pci_bus_id") is want and reason(bad, "temperature_gpu_c") is want
    assert "nvmlDeviceGetHandleByIndex(1)" in bad.unavailable["name"].detail
    assert str(pynvml.NVMLError(code)) in bad.unavailable["name"].detail


# --------------------------------------------------------------------------- init


@pytest.mark.parametrize(
    ("code", "words"),
    [
        (pynvml.NVML_ERROR_LIBRARY_NOT_FOUND, "no NVIDIA driver installed"),
        (pynvml.NVML_ERROR_DRIVER_NOT_LOADED, "driver not loaded"),
        (pynvml.NVML_ERROR_NO_PERMISSION, "no permission"),
        (pynvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH, "reload"),
    ],
)
def test_init_failures_unavailable(code: int, words: str) -> None:
    fake = fk.FakeNvml([fk.h100_sxm()], init_error=code)
    with pytest.raises(CollectorUnavailable, match=words):
        collect(fake)
    assert "nvmlDeviceGetCount" not in fake.calls


def test_init_unknown_error_fails() -> None:
    fake = fk.FakeNvml([fk.h100_sxm()], init_error=pynvml.NVML_ERROR_UNKNOWN)
    with pytest.raises(pynvml.NVMLError_Unknown):
        collect(fake)


def test_shutdown_even_when_a_call_crashes(tmp_path: Path) -> None:
    fake = fk.FakeNvml([fk.h100_sxm()])

    def boom() -> int:
        raise pynvml.NVMLError(pynvml.NVML_ERROR_UNKNOWN)

    fake.nvmlDeviceGetCount = boom
    with pytest.raises(pynvml.NVMLError):
        collect(fake, tmp_path)
    assert fake.shutdown_count == 1


def test_real_pynvml_without_driver() -> None:
    """This machine has no NVIDIA driver: the real binding makes the collector unavailable."""
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        pass
    else:  # a driver after all (a GPU runner): nothing to check here
        pynvml.nvmlShutdown()
        pytest.skip("an NVIDIA driver is installed")
    with pytest.raises(CollectorUnavailable, match=r"NVML library not found|driver"):
        NvmlCollector().collect(CollectContext(window_s=0.0), Facts())


# --------------------------------------------------------------------------- timing


def test_gpus_sampled_in_parallel(tmp_path: Path) -> None:
    window = 0.4
    fake = fk.FakeNvml(fk.h100_node(8))
    start = time.monotonic()
    facts = collect(fake, tmp_path, window_s=window)
    elapsed = time.monotonic() - start
    assert len(facts.gpus) == 8
    assert window * 0.8 <= elapsed < window * 2  # one window, not eight
    samples = fake.calls.count("nvmlDeviceGetUtilizationRates")
    assert samples >= 8 * 3  # several samples per GPU


def test_utilisation_averaged(tmp_path: Path) -> None:
    gpu = fk.h100_sxm()
    gpu.utilization = [(90, 40), (100, 60)]
    g = collect(fk.FakeNvml([gpu]), tmp_path, window_s=0.2).gpus[0]
    assert g.utilization_gpu_pct is not None and 90.0 <= g.utilization_gpu_pct <= 100.0
    assert g.utilization_memory_pct is not None and 40.0 <= g.utilization_memory_pct <= 60.0


def test_no_gpus(tmp_path: Path) -> None:
    facts = collect(fk.FakeNvml([]), tmp_path)
    assert facts.gpus == [] and facts.processes == []
