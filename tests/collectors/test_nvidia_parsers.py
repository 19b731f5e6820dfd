"""nvidia-smi parsers: the real samples against the answer key, then hand-written formats."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpu_triage.collectors.parsers import ParseError
from gpu_triage.collectors.parsers.nvidia_smi.full import parse_nvidia_smi_q
from gpu_triage.collectors.parsers.nvidia_smi.query_csv import (
    parse_compute_apps_csv,
    parse_query_gpu_csv,
)
from gpu_triage.collectors.parsers.nvidia_smi.table import parse_nvidia_smi_table
from gpu_triage.collectors.parsers.nvidia_smi.values import normalize_pci_bus_id
from gpu_triage.model.facts import GpuFacts, RecoveryAction, UnavailableReason

DATA = Path(__file__).resolve().parents[1] / "data" / "real-outputs"
HAND = Path(__file__).resolve().parents[1] / "data" / "hand-written"
KEY: dict[str, Any] = yaml.safe_load((DATA / "expected.yaml").read_text())


def _samples(kind: str) -> list[tuple[str, dict[str, Any]]]:
    return [(name, entry) for name, entry in KEY["samples"].items() if entry["kind"] == kind]


def _read(name: str) -> str:
    return (DATA / name).read_text()


# The answer key prints labels exactly as nvidia-smi does; this maps them to fields
# independently of the parser's own table.
THROTTLE_FIELD = {
    "Idle": "throttle_gpu_idle",
    "Applications Clocks Setting": "throttle_applications_clocks_setting",
    "SW Power Cap": "throttle_sw_power_cap",
    "HW Slowdown": "throttle_hw_slowdown",
    "HW Thermal Slowdown": "throttle_hw_thermal_slowdown",
    "HW Power Brake Slowdown": "throttle_hw_power_brake_slowdown",
    "Sync Boost": "throttle_sync_boost",
    "SW Thermal Slowdown": "throttle_sw_thermal_slowdown",
    "Display Clock Setting": "throttle_display_clock_setting",
}


def _on(text: str) -> bool:
    return {"On": True, "Off": False, "Enabled": True, "Disabled": False}[text]


def _missing(gpu: GpuFacts, name: str, reason: UnavailableReason) -> None:
    assert getattr(gpu, name) is None, name
    assert gpu.unavailable[name].reason is reason, name


# --------------------------------------------------------------------------- table: the key


def test_key_has_samples_for_every_nvidia_kind() -> None:
    for kind in ("nvidia_smi_table", "nvidia_smi_q"):
        assert _samples(kind), kind


@pytest.mark.parametrize(("name", "entry"), _samples("nvidia_smi_table"), ids=lambda x: str(x)[:60])
def test_table_sample_matches_key(name: str, entry: dict[str, Any]) -> None:
    table = parse_nvidia_smi_table(_read(name), source=name)
    assert table.driver_version == entry["driver_version"]
    assert table.cuda_version == entry["cuda_version"]
    assert table.timestamp == entry.get("timestamp")
    assert len(table.gpus) == len(entry["gpus"])
    assert len(table.processes) == len(entry.get("processes", []))
    for gpu, exp in zip(table.gpus, entry["gpus"], strict=True):
        _check_table_gpu(gpu, exp)
        assert gpu.source == name
        assert gpu.driver_version == entry["driver_version"]
        assert gpu.query_errors == 0


def _check_table_gpu(gpu: GpuFacts, exp: dict[str, Any]) -> None:
    checked = set()

    def seen(*keys: str) -> None:
        checked.update(keys)

    assert gpu.index == exp["index"]
    assert gpu.name == exp["name"]
    if exp.get("name_truncated"):
        assert gpu.name.endswith("...")
    seen("index", "name", "name_truncated")
    assert gpu.persistence_mode is _on(exp["persistence_mode"])
    assert gpu.pci_bus_id == normalize_pci_bus_id(exp["bus_id"])
    assert gpu.pci_bus_id == exp["bus_id"][-12:].lower()
    assert gpu.ecc_volatile_uncorrected == int(exp["volatile_uncorr_ecc"])
    seen("persistence_mode", "bus_id", "volatile_uncorr_ecc", "display_active")  # Disp.A: no field
    if exp["fan"] == "N/A":
        _missing(gpu, "fan_speed_pct", UnavailableReason.NOT_SUPPORTED)
    else:
        assert gpu.fan_speed_pct == float(exp["fan"].rstrip("%"))
    assert gpu.temperature_gpu_c == exp["temp_c"]
    assert gpu.performance_state == int(exp["perf"].lstrip("P"))
    assert gpu.power_draw_w == exp["power_usage_w"]
    assert gpu.power_limit_w == exp["power_cap_w"]
    assert gpu.memory_used_mib == exp["memory_used_mib"]
    assert gpu.memory_total_mib == exp["memory_total_mib"]
    assert gpu.utilization_gpu_pct == exp["gpu_util_pct"]
    assert gpu.compute_mode == exp["compute_mode"].lower()
    seen("fan", "temp_c", "perf", "power_usage_w", "power_cap_w", "memory_used_mib")
    seen("memory_total_mib", "gpu_util_pct", "compute_mode", "mig_mode")
    if exp["mig_mode"] == "N/A":
        _missing(gpu, "mig_mode", UnavailableReason.NOT_SUPPORTED)
    else:
        assert gpu.mig_mode is _on(exp["mig_mode"])
    assert set(exp) <= checked, f"key values not checked: {set(exp) - checked}"


def test_table_565_process_table_empty_and_blank_line_skipped() -> None:
    name = "nvidia-smi/table-8x-h100-sxm-565-new-format-thamada-nvsim.txt"
    table = parse_nvidia_smi_table(_read(name))
    assert table.processes == []
    # 'No running processes found' is a real zero, unlike a fragment without the table
    assert [g.process_count for g in table.gpus] == [0] * 8
    fragment = parse_nvidia_smi_table(
        _read("nvidia-smi/table-v100s-450-truncated-name-fragment-dp243.txt")
    )
    assert fragment.gpus[0].process_count is None


# --------------------------------------------------------------------------- -q: the key


def _q_gpu(entry: dict[str, Any]) -> list[dict[str, Any]]:
    # samples without a GPU line hold their sections at the top of the entry
    if "gpus" in entry:
        return entry["gpus"]
    return [{k: v for k, v in entry.items() if k in ("clocks_throttle_reasons", "clocks_mhz")}]


@pytest.mark.parametrize(("name", "entry"), _samples("nvidia_smi_q"), ids=lambda x: str(x)[:60])
def test_q_sample_matches_key(name: str, entry: dict[str, Any]) -> None:
    q = parse_nvidia_smi_q(_read(name), source=name)
    for key in ("driver_version", "cuda_version", "timestamp", "attached_gpus"):
        if key in entry:
            assert getattr(q, key) == entry[key], key
    expected = _q_gpu(entry)
    assert len(q.gpus) == len(expected)
    for gpu, exp in zip(q.gpus, expected, strict=True):
        _check_q_gpu(gpu, exp)


# Key values with no GpuFacts field (kept in the key for other consumers).
_Q_NOT_MODELLED = {
    "product_architecture",
    "module_id",
    "reset_status",
    "section_title",
    "fabric",
}


def _check_q_gpu(gpu: GpuFacts, exp: dict[str, Any]) -> None:
    for key, value in exp.items():
        if key in _Q_NOT_MODELLED:
            continue
        if key == "bus_id":
            assert gpu.pci_bus_id == normalize_pci_bus_id(value)
        elif key == "product_name":
            assert gpu.name == value
        elif key == "product_brand":
            # 'Unknown Error' means NVML failed on this GPU: counted, not taken as a brand
            assert gpu.query_errors == (1 if value == "Unknown Error" else 0)
        elif key == "serial":
            assert gpu.serial == value
        elif key == "uuid":
            assert gpu.uuid == value
        elif key == "vbios":
            assert gpu.vbios_version == value
        elif key == "persistence_mode":
            assert gpu.persistence_mode is _on(value)
        elif key == "mig_mode":
            assert gpu.mig_mode is _on(value["current"])
        elif key == "gpu_recovery_action":
            assert gpu.recovery_action is RecoveryAction.NONE and value == "None"
        elif key == "pcie":
            assert gpu.pcie_link_gen_max == value["gen_max"]
            assert gpu.pcie_link_gen == value["gen_current"]
            assert gpu.pcie_link_width_max == int(value["width_max"].rstrip("x"))
            assert gpu.pcie_link_width == int(value["width_current"].rstrip("x"))
            assert gpu.pcie_replay_count == value["replays_since_reset"]
        elif key == "fan_speed":
            assert value == "N/A"
            _missing(gpu, "fan_speed_pct", UnavailableReason.NOT_SUPPORTED)
        elif key == "performance_state":
            assert gpu.performance_state == int(value.lstrip("P"))
        elif key in ("clocks_event_reasons", "clocks_throttle_reasons"):
            for label in value["active"]:
                assert getattr(gpu, THROTTLE_FIELD[label]) is True, label
            for label in value["not_active"]:
                assert getattr(gpu, THROTTLE_FIELD[label]) is False, label
            unlisted = set(THROTTLE_FIELD) - set(value["active"]) - set(value["not_active"])
            for label in unlisted:  # the 6-reason paste has no Sync Boost line
                assert getattr(gpu, THROTTLE_FIELD[label]) is None, label
        elif key == "fb_memory_mib":
            assert gpu.memory_total_mib == value["total"]
            assert gpu.memory_used_mib == value["used"]
        elif key == "ecc_mode":
            assert gpu.ecc_enabled is _on(value["current"])
        elif key == "ecc_errors":
            for scope in ("volatile", "aggregate"):
                counts = value[scope]
                corrected = counts["sram_correctable"] + counts["dram_correctable"]
                uncorrected = sum(v for k, v in counts.items() if "uncorrectable" in k)
                assert getattr(gpu, f"ecc_{scope}_corrected") == corrected
                assert getattr(gpu, f"ecc_{scope}_uncorrected") == uncorrected
        elif key == "retired_pages":
            assert set(value.values()) == {"N/A"}
            for name in ("retired_pages_sbe", "retired_pages_dbe", "retired_pages_pending"):
                _missing(gpu, name, UnavailableReason.NOT_SUPPORTED)
        elif key == "remapped_rows":
            assert gpu.remapped_rows_correctable == value["correctable_error"]
            assert gpu.remapped_rows_uncorrectable == value["uncorrectable_error"]
            assert gpu.remapped_rows_pending is (value["pending"] == "Yes")
            assert gpu.remapped_rows_failure is (value["remapping_failure_occurred"] == "Yes")
        elif key == "temperature_c":
            assert gpu.temperature_gpu_c == value["gpu_current"]
            assert gpu.temperature_memory_c == value.get("memory_current")
            # T.Limit rows are margins, never temperatures: the thresholds are where each
            # sits relative to the T.Limit (current + GPU T.Limit margin)
            if "gpu_tlimit" in value:
                tlimit = value["gpu_current"] + value["gpu_tlimit"]
                assert gpu.temperature_slowdown_c == tlimit - value["gpu_slowdown_tlimit"]
                assert gpu.temperature_shutdown_c == tlimit - value["gpu_shutdown_tlimit"]
                assert gpu.temperature_max_operating_c == tlimit - value["gpu_max_operating_tlimit"]
                assert gpu.temperature_slowdown_c not in (-2, -8, 0)
            else:
                assert gpu.temperature_slowdown_c is None
                assert gpu.temperature_shutdown_c is None
        elif key == "power_w":
            assert gpu.power_draw_w == value["draw"]  # not the memory rail's draw
            assert gpu.power_limit_w == value["current_limit"]
        elif key == "clocks_mhz":
            sm = value.get("sm", value.get("SM"))
            assert gpu.clocks_sm_mhz == sm
        elif key == "max_clocks_mhz":
            assert gpu.clocks_sm_max_mhz == value["sm"]
        else:
            pytest.fail(f"key value {key!r} not checked")


# --------------------------------------------------------------------------- hand-written: -q

Q_418_K80 = (HAND / "nvidia-smi-q/q-418-k80-single-double-bit-ecc-retired-pending.txt").read_text()


def _check_k80(gpu: GpuFacts) -> None:
    assert gpu.pci_bus_id == "0000:84:00.0"
    assert gpu.name == "Tesla K80"
    assert gpu.serial == "0324116033817"
    assert gpu.uuid == "GPU-5e8b2c8a-7e5a-3d3c-a1d6-5b6ac0b4a8a1"
    assert gpu.vbios_version == "80.21.1F.00.01"
    assert gpu.persistence_mode is False
    assert (gpu.pcie_link_gen, gpu.pcie_link_gen_max) == (1, 3)  # idle Gen1: reported as is
    assert (gpu.pcie_link_width, gpu.pcie_link_width_max) == (8, 16)
    assert gpu.pcie_replay_count == 3
    assert gpu.performance_state == 8
    assert gpu.throttle_gpu_idle is True
    assert gpu.throttle_hw_slowdown is False
    _missing(gpu, "throttle_hw_thermal_slowdown", UnavailableReason.NOT_SUPPORTED)
    assert gpu.memory_total_mib == 11441 and gpu.memory_used_mib == 1024
    assert gpu.compute_mode == "exclusive_process"
    assert (gpu.utilization_gpu_pct, gpu.utilization_memory_pct) == (7, 3)
    assert gpu.ecc_enabled is True  # Current, not Pending
    assert (gpu.ecc_volatile_corrected, gpu.ecc_volatile_uncorrected) == (3, 1)
    assert (gpu.ecc_aggregate_corrected, gpu.ecc_aggregate_uncorrected) == (125, 2)
    assert (gpu.retired_pages_sbe, gpu.retired_pages_dbe) == (4, 2)
    assert gpu.retired_pages_pending is True
    assert gpu.temperature_gpu_c == 31
    assert (gpu.temperature_slowdown_c, gpu.temperature_shutdown_c) == (88, 93)
    _missing(gpu, "temperature_memory_c", UnavailableReason.NOT_SUPPORTED)
    assert gpu.power_draw_w == 26.47
    assert gpu.power_limit_w == 140.0  # enforced beats 'Power Limit', whatever the order
    assert (gpu.clocks_sm_mhz, gpu.clocks_sm_max_mhz) == (324, 875)
    assert gpu.process_count == 1
    assert gpu.query_errors == 0


def test_q_old_single_double_bit_ecc_layout() -> None:
    q = parse_nvidia_smi_q(Q_418_K80, source="k80")
    assert (q.driver_version, q.cuda_version, q.attached_gpus) == ("418.40.04", "10.1", 1)
    assert len(q.gpus) == 1
    _check_k80(q.gpus[0])
    assert len(q.processes) == 1
    proc = q.processes[0]
    assert (proc.pid, proc.name, proc.used_memory_mib, proc.type) == (
        4242,
        "/usr/bin/python3",
        1019,
        "compute",
    )
    assert proc.gpu_pci_bus_id == "0000:84:00.0"


def test_q_flattened_paste_reads_the_same() -> None:
    """Indentation lost entirely: known section names carry the structure."""
    flat = "\n".join(line.strip() for line in Q_418_K80.splitlines())
    q = parse_nvidia_smi_q(flat)
    assert len(q.gpus) == 1
    _check_k80(q.gpus[0])


def test_q_tab_indented_and_dedented() -> None:
    tabbed = Q_418_K80.replace("    ", "\t")
    _check_k80(parse_nvidia_smi_q(tabbed).gpus[0])
    dedented = "\n".join(
        line[4:] if line.startswith("    ") else line for line in Q_418_K80.splitlines()
    )
    _check_k80(parse_nvidia_smi_q(dedented).gpus[0])


Q_550_TWO_GPUS = (
    HAND / "nvidia-smi-q/q-550-a100-mig-counters-two-gpus-unknown-error.txt"
).read_text()


def test_q_modern_two_gpus_mig_counters_and_errors() -> None:
    q = parse_nvidia_smi_q(Q_550_TWO_GPUS)
    assert [g.pci_bus_id for g in q.gpus] == ["0000:07:00.0", "0000:0f:00.0"]
    a, b = q.gpus
    assert a.mig_mode is True
    # the MIG device's FB/ECC blocks must not overwrite the GPU's
    assert (a.memory_total_mib, a.memory_used_mib) == (81920, 74)
    assert (a.ecc_volatile_corrected, a.ecc_volatile_uncorrected) == (3, 0)
    assert (a.ecc_aggregate_corrected, a.ecc_aggregate_uncorrected) == (30, 1)
    assert a.recovery_action is RecoveryAction.GPU_RESET
    assert (a.pcie_link_gen, a.pcie_link_gen_max, a.pcie_link_width) == (4, 4, 16)
    # SW Power Cap active is normal under load: reported, not judged
    assert a.throttle_sw_power_cap is True
    assert a.throttle_sync_boost is False  # the Counters section is not the reasons
    assert a.remapped_rows_uncorrectable == 1 and a.remapped_rows_pending is True
    assert a.remapped_rows_failure is False
    assert a.temperature_gpu_c == 41 and a.temperature_memory_c == 48
    # T.Limit margins: 41 C + 45 = T.Limit 86; slowdown -2 -> 88, shutdown -7 -> 93
    assert (a.temperature_slowdown_c, a.temperature_shutdown_c) == (88.0, 93.0)
    assert a.power_draw_w == 88.12  # average preferred, memory rail ignored
    assert a.power_limit_w == 400
    assert a.clocks_sm_mhz == 1410 and a.clocks_sm_max_mhz == 1410
    assert a.process_count == 1 and a.query_errors == 0
    _missing(a, "retired_pages_sbe", UnavailableReason.NOT_SUPPORTED)

    assert b.mig_mode is False
    _missing(b, "performance_state", UnavailableReason.ERROR)
    _missing(b, "throttle_sw_power_cap", UnavailableReason.ERROR)
    _missing(b, "memory_used_mib", UnavailableReason.ERROR)
    assert b.memory_total_mib == 81920
    _missing(b, "remapped_rows_failure", UnavailableReason.NOT_SUPPORTED)
    _missing(b, "temperature_gpu_c", UnavailableReason.ERROR)
    _missing(b, "power_draw_w", UnavailableReason.NO_PERMISSION)
    assert b.process_count == 0
    assert b.query_errors == 4
    assert [p.pid for p in q.processes] == [38517]


def test_q_fragment_starting_inside_pci() -> None:
    frag = (
        "        GPU Link Info\n"
        "            PCIe Generation\n"
        "                Max                       : 4\n"
        "                Current                   : 1\n"
        "            Link Width\n"
        "                Max                       : 16x\n"
        "                Current                   : 8x\n"
        "        Replays Since Reset               : 12\n"
        "    Clocks Throttle Reasons               : N/A\n"
    )
    for text in (frag, "\n".join(line.strip() for line in frag.splitlines())):
        (gpu,) = parse_nvidia_smi_q(text).gpus
        assert (gpu.pcie_link_gen, gpu.pcie_link_gen_max) == (1, 4)
        assert (gpu.pcie_link_width, gpu.pcie_link_width_max) == (8, 16)
        assert gpu.pcie_replay_count == 12
        _missing(gpu, "throttle_hw_slowdown", UnavailableReason.NOT_SUPPORTED)


@pytest.mark.parametrize(
    ("printed", "action"),
    [
        ("None", RecoveryAction.NONE),
        ("Reset", RecoveryAction.GPU_RESET),
        ("Reboot", RecoveryAction.NODE_REBOOT),
        ("Drain P2P", RecoveryAction.DRAIN_P2P),
        ("Drain and Reset", RecoveryAction.DRAIN_AND_RESET),
    ],
)
def test_q_recovery_action(printed: str, action: RecoveryAction) -> None:
    text = f"GPU 00000000:18:00.0\n    GPU Recovery Action                   : {printed}\n"
    assert parse_nvidia_smi_q(text).gpus[0].recovery_action is action


def test_q_gpu_lost_line() -> None:
    text = (
        "Unable to determine the device handle for GPU 0000:3B:00.0: GPU is lost.  "
        "Reboot the system to recover this GPU\n" + Q_418_K80
    )
    q = parse_nvidia_smi_q(text)
    lost = [g for g in q.gpus if g.lost]
    assert [g.pci_bus_id for g in lost] == ["0000:3b:00.0"]
    assert lost[0].unavailable["name"].reason is UnavailableReason.GPU_LOST


# --------------------------------------------------------------------------- hand-written: table

TABLE_418 = (HAND / "nvidia-smi/table-418-processes-no-gi-err-gpu.txt").read_text()


def test_table_418_processes_and_err() -> None:
    t = parse_nvidia_smi_table(TABLE_418)
    assert (t.driver_version, t.cuda_version) == ("418.67", "10.1")
    assert t.timestamp == "Tue Jun 11 10:26:51 2019"
    g0, g1, g2 = t.gpus
    assert (g0.name, g0.persistence_mode, g0.compute_mode) == (
        "Tesla V100-SXM2...",
        True,
        "exclusive_process",
    )
    assert (g0.power_draw_w, g0.power_limit_w, g0.utilization_gpu_pct) == (250, 300, 98)
    assert g0.mig_mode is None and "mig_mode" not in g0.unavailable  # no MIG row before 450
    assert (g1.fan_speed_pct, g1.performance_state, g1.persistence_mode) == (23, 8, False)
    _missing(g1, "ecc_volatile_uncorrected", UnavailableReason.NOT_SUPPORTED)
    for name in ("fan_speed_pct", "temperature_gpu_c", "performance_state", "power_draw_w"):
        _missing(g2, name, UnavailableReason.ERROR)
    _missing(g2, "memory_used_mib", UnavailableReason.ERROR)
    _missing(g2, "ecc_volatile_uncorrected", UnavailableReason.ERROR)
    assert g2.memory_total_mib == 16130
    assert g2.query_errors and g2.query_errors >= 7
    assert g0.query_errors == 0
    procs = [(p.gpu_index, p.pid, p.type, p.name, p.used_memory_mib) for p in t.processes]
    assert procs == [
        (0, 10412, "compute", "python", 15197),
        (1, 1625, "graphics", "/usr/lib/xorg/Xorg", 18),
        (1, 2101, "compute+graphics", "...bin/some app with spaces", 120),
    ]
    assert t.processes[0].gpu_pci_bus_id == "0000:18:00.0"
    assert [g.process_count for g in t.gpus] == [1, 1, 0]


TABLE_535_MIG = (HAND / "nvidia-smi/table-535-a100-mig-enabled-gi-ci-processes.txt").read_text()


def test_table_535_mig_section_and_gi_ci_processes() -> None:
    t = parse_nvidia_smi_table(TABLE_535_MIG)
    assert len(t.gpus) == 2  # MIG device rows are not GPUs
    g0, g1 = t.gpus
    assert g0.mig_mode is True and g1.mig_mode is False
    assert g0.ecc_enabled is True and g0.ecc_volatile_uncorrected is None
    assert g1.ecc_volatile_uncorrected == 2
    _missing(g0, "utilization_gpu_pct", UnavailableReason.NOT_SUPPORTED)
    assert [(p.gpu_index, p.pid, p.name) for p in t.processes] == [
        (0, 38517, "python3"),
        (0, 38600, "/opt/conda/bin/python"),
    ]
    assert t.processes[0].used_memory_mib == 12
    assert t.processes[1].unavailable["used_memory_mib"].reason is UnavailableReason.NOT_SUPPORTED
    assert [g.process_count for g in t.gpus] == [2, 0]


def test_table_gpu_lost_and_no_devices() -> None:
    text = (
        "Unable to determine the device handle for GPU 0000:86:00.0: GPU is lost.  "
        "Reboot the system to recover this GPU\n" + TABLE_535_MIG
    )
    t = parse_nvidia_smi_table(text)
    assert [g.pci_bus_id for g in t.gpus if g.lost] == ["0000:86:00.0"]
    assert parse_nvidia_smi_table("No devices were found\n").gpus == []
    failed = (
        "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
        "Make sure that the latest NVIDIA driver is installed and running.\n"
    )
    assert parse_nvidia_smi_table(failed).gpus == []


def test_table_windows_wddm() -> None:
    text = (HAND / "nvidia-smi/table-560-windows-wddm-geforce.txt").read_text()
    t = parse_nvidia_smi_table(text)
    (g,) = t.gpus
    assert (g.name, g.persistence_mode, g.fan_speed_pct, g.ecc_enabled) == (
        "NVIDIA GeForce RTX 4090",
        None,
        0,
        False,
    )
    (p,) = t.processes
    assert (p.pid, p.name, p.type, p.used_memory_mib) == (
        1234,
        "C:\\Windows\\explorer.exe",
        "compute+graphics",
        None,
    )


def test_table_2012_layout() -> None:
    text = """\
+------------------------------------------------------+
| NVIDIA-SMI 4.295.41   Driver Version: 295.41         |
|-------------------------------+----------------------+----------------------+
| Nb.  Name                     | Bus Id        Disp.  | Volatile ECC SB / DB |
| Fan   Temp   Power Usage /Cap | Memory Usage         | GPU Util. Compute M. |
|===============================+======================+======================|
| 0.  Tesla C2050               | 0000:02:00.0  On     |         0          0 |
|  30%   62 C  P0    N/A /  N/A |  13%  345MB / 2687MB |    0%     Default    |
+-------------------------------+----------------------+----------------------+
"""
    t = parse_nvidia_smi_table(text)
    assert t.driver_version == "295.41" and t.cuda_version is None
    (g,) = t.gpus
    assert (g.index, g.name, g.pci_bus_id) == (0, "Tesla C2050", "0000:02:00.0")
    assert (g.fan_speed_pct, g.temperature_gpu_c, g.performance_state) == (30, 62, 0)
    assert (g.memory_used_mib, g.memory_total_mib) == (345, 2687)
    _missing(g, "power_draw_w", UnavailableReason.NOT_SUPPORTED)
    assert g.ecc_volatile_uncorrected == 0


# --------------------------------------------------------------------------- CSV queries

QUERY_GPU = (HAND / "query-gpu/query-gpu-h100-units-throttle-both-spellings.csv").read_text()


def test_query_gpu_csv_header_driven() -> None:
    gpus = parse_query_gpu_csv(QUERY_GPU, source="q")
    assert len(gpus) == 2
    a, b = gpus
    assert (a.index, a.name, a.pci_bus_id) == (0, "NVIDIA H100 80GB HBM3", "0000:18:00.0")
    assert (a.utilization_gpu_pct, a.memory_used_mib, a.memory_total_mib) == (0, 1, 81559)
    assert (a.power_draw_w, a.power_limit_w, a.temperature_gpu_c) == (100.89, 700, 30)
    assert a.performance_state == 0 and a.persistence_mode is True
    assert a.throttle_gpu_idle is True and a.throttle_sw_power_cap is False
    assert (a.pcie_link_gen, a.pcie_link_gen_max) == (1, 5)  # idle Gen1 reported as is
    _missing(a, "fan_speed_pct", UnavailableReason.NOT_SUPPORTED)
    assert b.throttle_sw_power_cap is True and b.throttle_gpu_idle is False
    assert (b.pcie_link_width, b.pcie_link_width_max) == (8, 16)
    assert b.ecc_volatile_uncorrected == 0


def test_query_gpu_csv_nounits_noheader_and_errors() -> None:
    nounits = (
        "index, pci.bus_id, temperature.gpu, power.draw [W], clocks_throttle_reasons.active,"
        " clocks_throttle_reasons.hw_power_brake_slowdown\n"
        "0, 00000000:3B:00.0, 45, 70.51, 0x0000000000000088, Active\n"
        "1, 00000000:5E:00.0, [Unknown Error], [GPU is lost], [Unknown Error], [Unknown Error]\n"
    )
    a, b = parse_query_gpu_csv(nounits)
    assert (a.temperature_gpu_c, a.power_draw_w) == (45, 70.51)
    assert a.throttle_hw_slowdown is True and a.throttle_hw_power_brake_slowdown is True
    assert a.throttle_gpu_idle is False
    _missing(b, "temperature_gpu_c", UnavailableReason.ERROR)
    _missing(b, "power_draw_w", UnavailableReason.GPU_LOST)
    assert b.lost is True and b.query_errors == 4
    noheader = "0, 45, P2\n1, 47, P8\n"
    gpus = parse_query_gpu_csv(noheader, columns=["index", "temperature.gpu", "pstate"])
    assert [(g.index, g.temperature_gpu_c, g.performance_state) for g in gpus] == [
        (0, 45, 2),
        (1, 47, 8),
    ]
    with pytest.raises(ParseError):
        parse_query_gpu_csv(noheader)
    single = "temperature.gpu\n30\n"
    assert [g.temperature_gpu_c for g in parse_query_gpu_csv(single)] == [30]


def test_compute_apps_csv() -> None:
    text = (
        "pid, process_name, used_gpu_memory [MiB], gpu_bus_id, gpu_uuid\n"
        "38517, python3, 12 MiB, 00000000:07:00.0, GPU-5e8b2c8a-7e5a-3d3c-a1d6-5b6ac0b4a8a1\n"
        "4242, /usr/bin/python, [N/A], 00000000:0F:00.0, GPU-6f8b2c8a-7e5a-3d3c-a1d6-5b6ac0b4a8a1\n"
    )
    a, b = parse_compute_apps_csv(text, source="apps")
    assert (a.pid, a.name, a.used_memory_mib, a.gpu_pci_bus_id) == (
        38517,
        "python3",
        12,
        "0000:07:00.0",
    )
    assert a.type == "compute" and a.source == "apps"
    assert b.used_memory_mib is None
    assert b.unavailable["used_memory_mib"].reason is UnavailableReason.NOT_SUPPORTED
    bare = "38517, python3, 12\n4242, my, app, 7\n"
    procs = parse_compute_apps_csv(bare, columns=["pid", "process_name", "used_gpu_memory"])
    assert [(p.pid, p.name, p.used_memory_mib) for p in procs] == [
        (38517, "python3", 12),
        (4242, "my, app", 7),  # commas inside a name glue back
    ]
    guessed = parse_compute_apps_csv("00000000:07:00.0, 38517, 12 MiB\n")
    assert [(p.gpu_pci_bus_id, p.pid, p.used_memory_mib) for p in guessed] == [
        ("0000:07:00.0", 38517, 12)
    ]
    assert parse_compute_apps_csv("pid, process_name, used_gpu_memory [MiB]\n") == []


# --------------------------------------------------------------------------- helpers, garbage


@pytest.mark.parametrize(
    ("raw", "want"),
    [
        ("00000000:18:00.0", "0000:18:00.0"),
        ("0000:3B:00.0", "0000:3b:00.0"),
        ("3b:00.0", "0000:3b:00.0"),
        ("00000001:41:00.1", "0001:41:00.1"),
        ("GPU-UID", None),
        ("", None),
    ],
)
def test_normalize_pci_bus_id(raw: str, want: str | None) -> None:
    assert normalize_pci_bus_id(raw) == want


GARBAGE = [
    "",
    "hello world\nthis is not nvidia-smi\n",
    "\x00\x01\x02\xff" * 1000,
    "A" * 2_000_000,
    "| " * 100_000,
    "GPU 0: " + ":" * 100_000,
    "|   0  x | y | z |\n" * 3,
]


@pytest.mark.parametrize("text", GARBAGE, ids=range(len(GARBAGE)))
def test_garbage_does_not_crash(text: str) -> None:
    for parse in (
        parse_nvidia_smi_table,
        parse_nvidia_smi_q,
        parse_compute_apps_csv,
        parse_query_gpu_csv,
    ):
        for data in (text, text.encode("utf-8", "surrogateescape")):
            with contextlib.suppress(ParseError):
                parse(data)


def test_not_the_format_raises() -> None:
    with pytest.raises(ParseError):
        parse_nvidia_smi_table("hello world\n")
    with pytest.raises(ParseError):
        parse_nvidia_smi_q("hello world\n")
    assert parse_nvidia_smi_q("No devices were found\n").gpus == []
    assert parse_nvidia_smi_table("").gpus == []
    assert parse_nvidia_smi_q("").gpus == []
