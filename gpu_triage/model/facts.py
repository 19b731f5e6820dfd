"""The typed facts that rules reason over.

Every field carries a unit and a one-line meaning (``Field(description=...,
json_schema_extra={"unit": ...})``); :func:`gpu_triage.model.catalog.fact_catalog` turns
them into the fact catalogue that lint, explain and docs use.

A value that could not be collected is ``None`` and, where the collector knows
why, its reason sits in the fact's ``unavailable`` map (field name ->
:class:`Unavailable`). ``None`` never means "healthy".
"""

# No ``from __future__ import annotations`` here: pydantic would then evaluate every
# field's annotation from its string (some 500 fields, at each start-up); written as
# objects, they cost nothing to read. Python 3.11 evaluates ``X | None`` at class creation.
import re
from datetime import datetime
from enum import StrEnum
from typing import Any

from pydantic import ConfigDict, Field, computed_field, field_validator, model_validator
from pydantic.fields import FieldInfo

from gpu_triage.model.gpu_models import gpu_model
from gpu_triage.model.nvlink_speeds import nominal_link_gbps
from gpu_triage.model.schema_cache import CachedModel


class UnavailableReason(StrEnum):
    NOT_SUPPORTED = "not_supported"
    NO_PERMISSION = "no_permission"
    GPU_LOST = "gpu_lost"
    COLLECTOR_FAILED = "collector_failed"
    TIMED_OUT = "timed_out"
    NOT_COLLECTED = "not_collected"
    NOT_ANSWERED = "not_answered"
    ERROR = "error"


class Unavailable(CachedModel):
    """Why a value is missing."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)
    reason: UnavailableReason
    detail: str = ""

    def __str__(self) -> str:
        return f"{self.reason.value}: {self.detail}" if self.detail else self.reason.value


def fact(unit: str, meaning: str, default: Any = None) -> Any:
    """A fact field: optional value, its unit and a one-line meaning.

    The same FieldInfo as ``Field(default=..., description=..., json_schema_extra=...)``
    (tests/model hold them equal), built directly: ``Field()`` first sorts out its forty
    optional arguments, four times the cost, and the ~480 fact fields are built at every
    start-up (6 ms of the TUI's first paint)."""
    return FieldInfo(default=default, description=meaning, json_schema_extra={"unit": unit})


_MLX_FIRMWARE = re.compile(r"^(\d{1,3})\.\d{1,4}\.\d{1,5}$")


def firmware_family(version: str | None) -> str | None:
    """The device family of an NVIDIA (Mellanox) NIC firmware version: its first number
    (20 ConnectX-6, 22 ConnectX-6 Dx, 26 ConnectX-6 Lx, 28 ConnectX-7, 32 BlueField-3 ...).
    None for any other vendor's version format."""
    m = _MLX_FIRMWARE.match(version or "")
    return m.group(1) if m else None


# Computed fields and the fields they are computed from: a computed value that is
# missing inherits the reason of the input that is missing.
DERIVED_FROM: dict[str, tuple[str, ...]] = {
    "mem_available_pct": ("mem_available_mib", "mem_total_mib"),
    "memory_used_pct": ("memory_used_mib", "memory_total_mib"),
    "power_draw_pct": ("power_draw_w", "power_limit_w"),
    "nvlink_nominal_gbps": ("name",),
    "rank_imbalance_pct": ("rank_step_times_ms",),
    "latency_tail_ratio": ("latency_p99_ms", "latency_p50_ms"),
    "versions_match": ("kernel_module_version", "library_version"),
    "firmware_family": ("firmware_version",),
    "pinned_nic_firmware_family": ("pinned_nic_firmware",),
    "validates": ("test",),
    "model": ("name",),
    "k8s_pod_gpu_wanted_model": ("k8s_pod_gpu_wanted",),
    "k8s_node_gpu_model": ("k8s_node_gpu_product",),
}


_COMPUTED: dict[type, frozenset[str]] = {}


class FactModel(CachedModel):
    """Base of every fact kind: forbids unknown keys, records unavailable values."""

    # defer_build: a model's validator is built when it is first used, not at import (a
    # cold start builds only those of what it reads and writes, and each of them once)
    model_config = ConfigDict(extra="forbid", validate_assignment=True, defer_build=True)
    unavailable: dict[str, Unavailable] = Field(
        default_factory=dict,
        description="field name -> why its value could not be collected",
    )
    source: str = Field(default="", description="where these values came from")

    @model_validator(mode="before")
    @classmethod
    def _drop_computed(cls, data: Any) -> Any:
        # Computed values (memory_used_pct ...) appear in a plain model_dump: reading such
        # a dump back must work, and they are recomputed anyway.
        computed = _COMPUTED.get(cls)
        if computed is None:  # looked up once per class: this runs for every model built
            computed = _COMPUTED[cls] = frozenset(cls.model_computed_fields)
        if computed and isinstance(data, dict) and not computed.isdisjoint(data):
            return {k: v for k, v in data.items() if k not in computed}
        return data

    def mark_unavailable(self, field: str, reason: UnavailableReason, detail: str = "") -> None:
        self.unavailable[field] = Unavailable(reason=reason, detail=detail)

    def why_unavailable(self, field: str) -> Unavailable | None:
        """The recorded reason a field (or an input of a computed field) is missing."""
        if field in self.unavailable:
            return self.unavailable[field]
        for source in DERIVED_FROM.get(field, ()):
            if source in self.unavailable:
                return self.unavailable[source]
        return None


# --------------------------------------------------------------------------- host


class HostFacts(FactModel):
    """The node as a whole: CPU, memory, pressure, load (one per snapshot)."""

    hostname: str | None = fact("", "node hostname")
    kernel: str | None = fact("", "kernel release (uname -r)")
    boot_time: datetime | None = fact("", "when the node booted (btime of /proc/stat)")
    cpu_count: int | None = fact("cores", "online logical CPUs")
    cpu_user_pct: float | None = fact("%", "CPU time in user mode, all cores, over the window")
    cpu_system_pct: float | None = fact("%", "CPU time in kernel mode, all cores")
    cpu_iowait_pct: float | None = fact("%", "CPU time idle waiting for I/O, all cores")
    cpu_steal_pct: float | None = fact("%", "CPU time stolen by the hypervisor, all cores")
    cpu_idle_pct: float | None = fact("%", "CPU time idle, all cores")
    busiest_core: int | None = fact("", "id of the busiest core over the window")
    busiest_core_busy_pct: float | None = fact(
        "%", "busy time (100 - idle - iowait) of the busiest core"
    )
    cores_saturated: int | None = fact("cores", "cores more than 90% busy over the window")
    busiest_numa_node: int | None = fact("", "NUMA node whose CPUs were busiest (mpstat -N)")
    busiest_numa_node_busy_pct: float | None = fact(
        "%", "busy time (100 - idle - iowait) of the busiest NUMA node's CPUs"
    )
    load_1m: float | None = fact("", "1-minute load average")
    load_5m: float | None = fact("", "5-minute load average")
    load_15m: float | None = fact("", "15-minute load average")
    mem_total_mib: float | None = fact("MiB", "physical memory")
    mem_available_mib: float | None = fact("MiB", "MemAvailable: memory usable without swapping")
    swap_total_mib: float | None = fact("MiB", "configured swap")
    swap_used_mib: float | None = fact("MiB", "swap in use")
    swap_in_pages_s: float | None = fact("pages/s", "pages swapped in per second over the window")
    swap_out_pages_s: float | None = fact("pages/s", "pages swapped out per second over the window")
    reclaim_scan_pages_s: float | None = fact(
        "pages/s", "pages scanned by kernel reclaim (kswapd + direct) per second"
    )
    direct_reclaim_pages_s: float | None = fact(
        "pages/s", "pages scanned by direct reclaim (allocation stalls) per second"
    )
    hugepages_total: int | None = fact("pages", "HugePages_Total")
    hugepages_free: int | None = fact("pages", "HugePages_Free")
    hugepage_size_kib: int | None = fact("KiB", "Hugepagesize")
    psi_cpu_some_avg10: float | None = fact(
        "%", "PSI cpu some avg10: time some task waited for CPU"
    )
    psi_io_some_avg10: float | None = fact("%", "PSI io some avg10")
    psi_io_full_avg10: float | None = fact("%", "PSI io full avg10: time all tasks stalled on I/O")
    psi_memory_some_avg10: float | None = fact("%", "PSI memory some avg10")
    psi_memory_full_avg10: float | None = fact("%", "PSI memory full avg10")
    numa_nodes: int | None = fact("nodes", "NUMA nodes online")
    driver_version: str | None = fact("", "NVIDIA driver version loaded on the node")
    cuda_version: str | None = fact("", "CUDA version the driver supports")
    gpu_count_visible: int | None = fact("GPUs", "GPUs the driver enumerates")
    gpu_count_pci: int | None = fact("GPUs", "NVIDIA GPUs present on the PCI bus (sysfs)")
    net_throughput_gbps: float | None = fact("Gb/s", "network throughput measured by iperf3")
    storage_read_mib_s: float | None = fact("MiB/s", "sequential read throughput measured by fio")
    storage_read_iops: float | None = fact("IO/s", "read IOPS measured by fio")
    peermem_loaded: bool | None = fact(
        "",
        "a GPUDirect RDMA peer-memory module is loaded (nvidia_peermem, or the legacy "
        "nv_peer_mem; /proc/modules, /sys/module)",
    )
    peermem_module: str | None = fact("", "which peer-memory module is loaded, when one is")
    iommu_mode: str | None = fact(
        "",
        "IOMMU mode the kernel booted with: off, passthrough (iommu=pt), translated (DMA "
        "remapping on) or absent (no IOMMU active), from /proc/cmdline and /sys/class/iommu",
    )
    iommu_cmdline: str | None = fact(
        "", "the iommu=, intel_iommu=, amd_iommu= words of the kernel command line, as given"
    )
    storage_read_jobs: int | None = fact(
        "jobs", "concurrent fio jobs (clients) the read figure was measured with"
    )
    bios_version: str | None = fact(
        "", "system BIOS (firmware) version, /sys/class/dmi/id/bios_version"
    )
    bios_date: str | None = fact("", "system BIOS release date, /sys/class/dmi/id/bios_date")
    node_exporter_running: bool | None = fact(
        "",
        "Prometheus node exporter runs on the node (a node_exporter process, or TCP port "
        "9100 listening)",
    )
    dcgm_exporter_running: bool | None = fact(
        "",
        "NVIDIA DCGM exporter runs on the node (a dcgm-exporter process, or TCP port 9400 "
        "listening)",
    )
    nv_hostengine_running: bool | None = fact(
        "", "DCGM's host engine (nv-hostengine) runs on the node"
    )

    @computed_field(  # type: ignore[prop-decorator]
        description="MemAvailable as a share of physical memory",
        json_schema_extra={"unit": "%"},
    )
    @property
    def mem_available_pct(self) -> float | None:
        if self.mem_available_mib is None or not self.mem_total_mib:
            return None
        return round(100.0 * self.mem_available_mib / self.mem_total_mib, 2)


class DiskFacts(FactModel):
    """One block device, sampled over the window (iostat -x equivalents)."""

    name: str = fact("", "device name, e.g. nvme0n1", default="")
    read_mib_s: float | None = fact("MiB/s", "read throughput")
    write_mib_s: float | None = fact("MiB/s", "write throughput")
    read_iops: float | None = fact("IO/s", "completed reads per second")
    write_iops: float | None = fact("IO/s", "completed writes per second")
    read_await_ms: float | None = fact("ms", "average time a read spent queued and serviced")
    read_request_kib: float | None = fact(
        "KiB", "average size of a completed read request (iostat rareq-sz); small: small files"
    )
    write_await_ms: float | None = fact("ms", "average time a write spent queued and serviced")
    util_pct: float | None = fact("%", "time the device had I/O in flight (%util)")
    rotational: bool | None = fact("", "spinning disk (true) or solid state (false)")


class MountFacts(FactModel):
    """One network-filesystem (NFS) mount, from /proc/self/mountstats: what each READ and
    each metadata operation cost, over the window (live) or since the mount (a paste)."""

    device: str = fact("", "what is mounted, e.g. storage01:/export/datasets", default="")
    mountpoint: str | None = fact("", "where it is mounted, e.g. /mnt/datasets")
    fstype: str | None = fact("", "nfs or nfs4")
    server: str | None = fact("", "the server part of the device (before the ':')")
    interval_s: float | None = fact(
        "s", "seconds the figures cover; unset: since the mount (see age_s)"
    )
    age_s: float | None = fact("s", "seconds since the filesystem was mounted")
    read_ops: int | None = fact("ops", "READ operations in the window (or since the mount)")
    read_ops_s: float | None = fact("ops/s", "READ operations per second")
    read_rtt_ms: float | None = fact(
        "ms", "average round trip of a READ: the network and the server"
    )
    read_exe_ms: float | None = fact(
        "ms", "average execute time of a READ (queue + round trip): what the reader waits"
    )
    read_kib_per_op: float | None = fact("KiB", "average data returned per READ")
    read_retransmissions: int | None = fact(
        "transmissions", "READ requests sent again (timeouts, lost replies): network trouble"
    )
    read_major_timeouts: int | None = fact(
        "timeouts", "READ requests that hit a major timeout (server not responding)"
    )
    metadata_ops: int | None = fact(
        "ops", "GETATTR, LOOKUP, ACCESS, OPEN, CLOSE and READDIR operations"
    )
    metadata_exe_ms: float | None = fact("ms", "average execute time of those metadata operations")


# --------------------------------------------------------------------------- GPU

THROTTLE_REASONS: dict[str, int] = {
    # NVML clock event reason bits (nvmlClocksEventReason*).
    "gpu_idle": 0x1,
    "applications_clocks_setting": 0x2,
    "sw_power_cap": 0x4,
    "hw_slowdown": 0x8,
    "sync_boost": 0x10,
    "sw_thermal_slowdown": 0x20,
    "hw_thermal_slowdown": 0x40,
    "hw_power_brake_slowdown": 0x80,
    "display_clock_setting": 0x100,
}


class RecoveryAction(StrEnum):
    """NVML GPU recovery action (nvmlDeviceGpuRecoveryAction_t / Xid 154 text)."""

    NONE = "none"
    GPU_RESET = "gpu_reset"
    NODE_REBOOT = "node_reboot"
    DRAIN_P2P = "drain_p2p"
    DRAIN_AND_RESET = "drain_and_reset"
    RECOVER_IMEX_DOMAIN = "recover_imex_domain"
    BUS_RESET = "bus_reset"
    SYSTEM_REBOOT = "system_reboot"


class GpuFacts(FactModel):
    """One GPU (NVML, or nvidia-smi output parsed into the same shape)."""

    index: int | None = fact("", "NVML device index")
    name: str | None = fact("", "product name, e.g. NVIDIA H100 80GB HBM3")
    cpu_affinity: str | None = fact("", "CPU cores local to the GPU, e.g. 0-47 (topo -m)")
    uuid: str | None = fact("", "GPU UUID")
    serial: str | None = fact("", "board serial number")
    pci_bus_id: str | None = fact("", "PCI address, normalised to dddd:bb:dd.f lower case")
    numa_node: int | None = fact("", "NUMA node of the GPU's PCI slot (-1 when none)")
    gpu_numa_id: int | None = fact(
        "", "NUMA node of the GPU's own memory (Grace / coherent systems; topo -m GPU NUMA ID)"
    )
    driver_version: str | None = fact("", "driver version")
    cuda_version: str | None = fact("", "CUDA version supported by the driver")
    vbios_version: str | None = fact("", "VBIOS version")
    utilization_gpu_pct: float | None = fact(
        "%", "time a kernel was running on the GPU, averaged over the window"
    )
    utilization_memory_pct: float | None = fact(
        "%", "time device memory was being read or written, averaged over the window"
    )
    memory_used_mib: float | None = fact("MiB", "device memory in use")
    memory_total_mib: float | None = fact("MiB", "device memory installed")
    power_draw_w: float | None = fact("W", "power draw")
    power_limit_w: float | None = fact("W", "enforced power limit")
    power_limit_default_w: float | None = fact(
        "W", "default power limit of the board: the enforced limit before anyone lowers it"
    )
    temperature_gpu_c: float | None = fact("°C", "GPU core temperature")
    temperature_memory_c: float | None = fact("°C", "HBM temperature")
    temperature_memory_max_c: float | None = fact(
        "°C", "highest HBM temperature the memory is specified for (Memory Max Operating Temp)"
    )
    temperature_slowdown_c: float | None = fact("°C", "temperature at which the GPU slows down")
    temperature_shutdown_c: float | None = fact("°C", "temperature at which the GPU shuts down")
    temperature_max_operating_c: float | None = fact(
        "°C",
        "GPU Max Operating Temp: the software limit the driver slows clocks to stay under "
        "(NVML GPU_MAX threshold)",
    )
    temperature_target_c: float | None = fact(
        "°C",
        "GPU Target Temperature: the acoustic target the driver holds the GPU at "
        "(nvidia-smi -gtt; NVML ACOUSTIC_CURR threshold)",
    )
    temperature_target_min_c: float | None = fact(
        "°C", "lowest GPU Target Temperature this GPU accepts (NVML ACOUSTIC_MIN)"
    )
    temperature_target_max_c: float | None = fact(
        "°C", "highest GPU Target Temperature this GPU accepts (NVML ACOUSTIC_MAX)"
    )
    performance_state: int | None = fact("P-state", "performance state, 0 = maximum")
    fan_speed_pct: float | None = fact("%", "fan speed (absent on passively cooled boards)")
    clocks_sm_mhz: float | None = fact("MHz", "current SM clock")
    clocks_sm_max_mhz: float | None = fact("MHz", "maximum SM clock")
    clocks_applications_graphics_mhz: float | None = fact(
        "MHz", "applications clock set for graphics (nvidia-smi -ac): the clock work runs at"
    )
    clocks_default_applications_graphics_mhz: float | None = fact(
        "MHz", "default applications clock for graphics: the board's out-of-box setting"
    )
    throttle_gpu_idle: bool | None = fact("", "clocks lowered because the GPU is idle (normal)")
    throttle_applications_clocks_setting: bool | None = fact(
        "", "clocks held by an applications-clocks setting"
    )
    throttle_sw_power_cap: bool | None = fact(
        "", "clocks lowered by the software power cap (power draw at the limit)"
    )
    throttle_hw_slowdown: bool | None = fact(
        "", "hardware slowdown: thermal or power-brake signal, clocks cut hard"
    )
    throttle_sync_boost: bool | None = fact("", "clocks held to sync-boost group")
    throttle_sw_thermal_slowdown: bool | None = fact(
        "", "software thermal slowdown: temperature above its software limit"
    )
    throttle_hw_thermal_slowdown: bool | None = fact(
        "", "hardware thermal slowdown: the GPU is too hot"
    )
    throttle_hw_power_brake_slowdown: bool | None = fact(
        "", "hardware power brake: an external power-brake signal (PSU/PDU) cut clocks"
    )
    throttle_display_clock_setting: bool | None = fact("", "clocks held by display clock setting")
    ecc_enabled: bool | None = fact("", "ECC mode currently enabled")
    ecc_volatile_corrected: int | None = fact("errors", "corrected ECC errors since the last reset")
    ecc_volatile_uncorrected: int | None = fact(
        "errors", "uncorrected (double-bit) ECC errors since the last reset"
    )
    ecc_aggregate_corrected: int | None = fact("errors", "corrected ECC errors, lifetime")
    ecc_aggregate_uncorrected: int | None = fact("errors", "uncorrected ECC errors, lifetime")
    retired_pages_sbe: int | None = fact("pages", "pages retired for repeated single-bit errors")
    retired_pages_dbe: int | None = fact("pages", "pages retired for double-bit errors")
    retired_pages_pending: bool | None = fact("", "a page retirement waits for the next reset")
    remapped_rows_correctable: int | None = fact("rows", "rows remapped for correctable errors")
    remapped_rows_uncorrectable: int | None = fact("rows", "rows remapped for uncorrectable errors")
    remapped_rows_pending: bool | None = fact("", "a row remap waits for the next GPU reset")
    remapped_rows_failure: bool | None = fact(
        "", "row remapping failed (no spare rows): an RMA criterion"
    )
    sram_corrected: int | None = fact("errors", "corrected SRAM ECC errors, lifetime")
    sram_uncorrected: int | None = fact(
        "errors", "uncorrected SRAM ECC errors (parity + SEC-DED), lifetime"
    )
    sram_threshold_exceeded: bool | None = fact(
        "", "the driver's SRAM error threshold flag is set (field diagnostics, RMA path)"
    )
    fabric_state: str | None = fact(
        "", "NVLink fabric registration: not_supported, not_started, in_progress, completed"
    )
    fabric_status: str | None = fact(
        "", "result of fabric registration once completed: success, or the error NVML names"
    )
    fabric_health: str | None = fact(
        "", "NVML fabric health summary: healthy, unhealthy, limited_capacity, not_supported"
    )
    # Between this run and the previous one of the unattended history (ops/history.py).
    ecc_corrected_delta: int | None = fact(
        "errors", "lifetime corrected ECC errors added since the previous run"
    )
    throttled_runs: int | None = fact(
        "runs",
        "consecutive unattended runs, this one included, in which the GPU reported thermal, "
        "HW-slowdown or power-brake throttling (0: not throttled now)",
    )
    counters_interval_s: float | None = fact(
        "s", "seconds between the previous run's counters and these (for the deltas)"
    )
    pcie_link_gen: int | None = fact("gen", "current PCIe link generation")
    pcie_link_gen_max: int | None = fact("gen", "maximum PCIe generation of GPU and slot")
    pcie_link_width: int | None = fact("lanes", "current PCIe link width")
    pcie_link_width_max: int | None = fact("lanes", "maximum PCIe link width of GPU and slot")
    pcie_replay_count: int | None = fact("replays", "PCIe replay counter (link retransmissions)")
    nvlink_links_total: int | None = fact("links", "NVLink links the GPU has")
    nvlink_links_active: int | None = fact("links", "NVLink links up")
    persistence_mode: bool | None = fact("", "persistence mode enabled")
    mig_mode: bool | None = fact("", "MIG mode currently enabled")
    mig_mode_pending: bool | None = fact(
        "", "MIG mode the GPU will have after its next reset (nvidia-smi -q MIG Mode Pending)"
    )
    compute_mode: str | None = fact("", "compute mode: default, exclusive_process, prohibited")
    recovery_action: RecoveryAction | None = fact(
        "", "what the driver says must happen to recover the GPU"
    )
    process_count: int | None = fact("processes", "compute processes on the GPU")
    lost: bool | None = fact("", "NVML reported the GPU lost (fallen off the bus) while collecting")
    query_errors: int | None = fact(
        "values", "values the driver answered with an error (Unknown Error, ERR!) in this output"
    )
    # Against this GPU's own history at the same load (ops/baseline.py, unattended runs).
    load_band: str | None = fact(
        "", "load band of this run for the history baseline: idle, light or busy (GPU util)"
    )
    baseline_runs: int | None = fact(
        "runs", "earlier runs of this GPU in the same load band that the baseline is made of"
    )
    temp_baseline_c: float | None = fact(
        "°C", "median GPU temperature of this GPU's earlier runs in the same load band"
    )
    temp_robust_z: float | None = fact(
        "MADs",
        "how far this run's temperature is from that median, in robust standard deviations "
        "(1.4826 x the median absolute deviation, with a floor)",
    )
    power_baseline_w: float | None = fact(
        "W", "median power draw of this GPU's earlier runs in the same load band"
    )
    power_robust_z: float | None = fact(
        "MADs", "how far this run's power draw is from that median, in robust standard deviations"
    )
    temp_z_previous_run: float | None = fact(
        "MADs", "temp_robust_z of this GPU's previous run (when it was under two hours ago)"
    )
    power_z_previous_run: float | None = fact(
        "MADs", "power_robust_z of this GPU's previous run (when it was under two hours ago)"
    )
    temp_peers_z: float | None = fact(
        "MADs",
        "median temp_robust_z of the node's other GPUs in the same load band this run "
        "(they all moved: the workload or the room changed, not this GPU)",
    )
    power_peers_z: float | None = fact(
        "MADs", "median power_robust_z of the node's other GPUs in the same load band this run"
    )

    @computed_field(  # type: ignore[prop-decorator]
        description="device memory in use as a share of installed memory",
        json_schema_extra={"unit": "%"},
    )
    @property
    def memory_used_pct(self) -> float | None:
        if self.memory_used_mib is None or not self.memory_total_mib:
            return None
        return round(100.0 * self.memory_used_mib / self.memory_total_mib, 2)

    @computed_field(  # type: ignore[prop-decorator]
        description="nominal NVLink rate per link and direction of this GPU model (guide/T3)",
        json_schema_extra={"unit": "GB/s"},
    )
    @property
    def nvlink_nominal_gbps(self) -> float | None:
        return nominal_link_gbps(self.name)

    @computed_field(  # type: ignore[prop-decorator]
        description="how far below the hardware slowdown temperature the GPU's own software "
        "limit sits: the lower of GPU Target Temperature and GPU Max Operating Temp, taken "
        "from the slowdown temperature",
        json_schema_extra={"unit": "°C"},
    )
    @property
    def thermal_limit_below_slowdown_c(self) -> float | None:
        limits = [t for t in (self.temperature_target_c, self.temperature_max_operating_c) if t]
        if self.temperature_slowdown_c is None or not limits:
            return None
        return round(self.temperature_slowdown_c - min(limits), 1)

    @computed_field(  # type: ignore[prop-decorator]
        description="power draw as a share of the enforced limit",
        json_schema_extra={"unit": "%"},
    )
    @property
    def power_draw_pct(self) -> float | None:
        if self.power_draw_w is None or not self.power_limit_w:
            return None
        return round(100.0 * self.power_draw_w / self.power_limit_w, 2)

    @computed_field(  # type: ignore[prop-decorator]
        description="GPU model token of the product name (h100, a100, l40s ...), the "
        "spelling node labels and pod selectors are compared in (guide/T11)",
        json_schema_extra={"unit": ""},
    )
    @property
    def model(self) -> str | None:
        return gpu_model(self.name)

    def set_throttle_mask(self, mask: int) -> None:
        """Decode an NVML clock-event-reason bitmask into the named booleans."""
        for name, bit in THROTTLE_REASONS.items():
            setattr(self, f"throttle_{name}", bool(mask & bit))


class GpuProcess(FactModel):
    """A process holding a GPU context."""

    gpu_pci_bus_id: str | None = fact("", "PCI address of the GPU")
    gpu_index: int | None = fact("", "NVML index of the GPU")
    pid: int | None = fact("", "process id")
    name: str | None = fact("", "process name")
    used_memory_mib: float | None = fact("MiB", "device memory used by the process")
    type: str | None = fact("", "compute or graphics")
    query_error: bool | None = fact(
        "",
        "the driver listed the process but answered its name or memory with an error "
        "([Unknown Error]); N/A (MIG, WDDM, another PID namespace) is not an error",
    )
    # Placement (guide/T5, FD4), from /proc/PID/status and the cgroup (process_placement).
    cpus_allowed: str | None = fact("", "CPUs the process may run on (Cpus_allowed_list)")
    mems_allowed: str | None = fact("", "NUMA nodes it may allocate on (Mems_allowed_list)")
    cpus_pinned: bool | None = fact(
        "", "its CPUs are a subset of the node's (taskset/numactl/cgroup)"
    )
    gpu_numa_cpus_pct: float | None = fact(
        "%", "share of its allowed CPUs on its GPU's NUMA node (0: all on another node)"
    )
    mems_on_gpu_numa_node: bool | None = fact(
        "", "its memory may be allocated on its GPU's NUMA node"
    )
    cgroup: str | None = fact("", "its cgroup v2 path (the 0:: line of /proc/PID/cgroup)")
    cpu_quota_cores: float | None = fact("cores", "CPU quota of its cgroup (cpu.max quota/period)")
    cpu_periods: int | None = fact("periods", "CPU quota periods its cgroup has run (cpu.stat)")
    cpu_throttled_pct: float | None = fact(
        "%", "share of those periods in which the quota throttled it (nr_throttled/nr_periods)"
    )


class NvlinkFacts(FactModel):
    """One NVLink of one GPU."""

    gpu_pci_bus_id: str | None = fact("", "PCI address of the GPU")
    gpu_index: int | None = fact("", "NVML index of the GPU")
    link: int | None = fact("", "link number")
    active: bool | None = fact("", "link is up")
    speed_gbps: float | None = fact("GB/s", "link bandwidth reported for the link")
    replay_errors: int | None = fact("errors", "data-link replay errors")
    recovery_errors: int | None = fact("errors", "data-link recovery events")
    crc_errors: int | None = fact("errors", "CRC flit errors")
    replay_errors_delta: int | None = fact("errors", "replay errors added since the previous run")
    recovery_errors_delta: int | None = fact(
        "errors", "recovery events added since the previous run"
    )
    crc_errors_delta: int | None = fact("errors", "CRC flit errors added since the previous run")
    counters_interval_s: float | None = fact("s", "seconds since the previous run's counters")
    remote_pci_bus_id: str | None = fact(
        "", "PCI address of the device at the other end of the link (an NVSwitch, a GPU)"
    )
    remote_link: int | None = fact("", "link (port) number at the other end")
    remote_device_type: str | None = fact("", "what the other end is: gpu, switch, ibmnpu")


# --------------------------------------------------------------------------- links, ports


class TopoFacts(FactModel):
    """How two devices connect (nvidia-smi topo -m): one entry per pair."""

    a: str | None = fact("", "first device as topo names it, e.g. GPU0")
    b: str | None = fact("", "second device, e.g. GPU3 or NIC0 / mlx5_0")
    a_pci_bus_id: str | None = fact("", "PCI address of the first device when known")
    b_pci_bus_id: str | None = fact("", "PCI address of the second device when known")
    connection: str | None = fact("", "X, SYS, NODE, PHB, PXB, PIX or NV<n> (NVLink with n links)")
    p2p_read: str | None = fact(
        "",
        "P2P read status (topo -p2p r): OK, NS not supported, CNS chipset not supported, "
        "GNS GPU not supported, TNS topology not supported, U unknown",
    )
    p2p_write: str | None = fact("", "P2P write status (topo -p2p w), codes as p2p_read")
    p2p_nvlink: str | None = fact("", "P2P over NVLink status (topo -p2p n), codes as p2p_read")
    p2p_atomics: str | None = fact("", "P2P atomics status (topo -p2p a), codes as p2p_read")
    p2p_prop: str | None = fact("", "P2P prop status (topo -p2p p), codes as p2p_read")
    p2p_status: str | None = fact(
        "", "topo -p2p status when the capability (r/w/n/a/p) was not given, codes as p2p_read"
    )

    @computed_field(  # type: ignore[prop-decorator]
        description="index of the first device when it is a GPU (GPU3 -> 3)",
        json_schema_extra={"unit": ""},
    )
    @property
    def a_gpu_index(self) -> int | None:
        a = self.a or ""
        return int(a[3:]) if a.startswith("GPU") and a[3:].isdigit() else None

    @computed_field(  # type: ignore[prop-decorator]
        description="the second device is a network adapter (NIC0, mlx5_0), not a GPU or CPU",
        json_schema_extra={"unit": ""},
    )
    @property
    def b_is_nic(self) -> bool | None:
        if not self.b:
            return None
        return not (self.b[:3] in ("GPU", "CPU") and self.b[3:].isdigit())


class PcieLinkFacts(FactModel):
    """A PCIe device's link as sysfs or lspci reports it."""

    pci_bus_id: str | None = fact("", "PCI address dddd:bb:dd.f")
    device_class: str | None = fact("", "gpu, nic, nvme, bridge or other")
    speed_gts: float | None = fact("GT/s", "current link speed")
    speed_gts_max: float | None = fact("GT/s", "link speed capability")
    width: int | None = fact("lanes", "current link width")
    width_max: int | None = fact("lanes", "link width capability")
    numa_node: int | None = fact("", "NUMA node of the slot (-1 when none)")
    secondary_bus: int | None = fact("", "bridges: first bus number behind the bridge")
    subordinate_bus: int | None = fact("", "bridges: last bus number behind the bridge")
    iommu_group: int | None = fact("", "IOMMU group of the device (lspci -vv 'IOMMU group')")
    acs_capable: bool | None = fact("", "the port has Access Control Services (an ACSCap line)")
    acs_src_valid: bool | None = fact("", "ACSCtl SrcValid+: source validation enabled")
    acs_trans_blk: bool | None = fact("", "ACSCtl TransBlk+: translation blocking enabled")
    acs_req_redir: bool | None = fact(
        "", "ACSCtl ReqRedir+: peer requests redirected upstream (through the IOMMU)"
    )
    acs_cmplt_redir: bool | None = fact(
        "", "ACSCtl CmpltRedir+: peer completions redirected upstream"
    )
    acs_upstream_fwd: bool | None = fact("", "ACSCtl UpstreamFwd+: upstream forwarding enabled")
    acs_egress_ctrl: bool | None = fact("", "ACSCtl EgressCtrl+: egress control enabled")
    acs_direct_trans: bool | None = fact("", "ACSCtl DirectTrans+: direct translated P2P enabled")
    gpus_below: int | None = fact(
        "GPUs",
        "bridges: NVIDIA GPUs below it (their peer and GPUDirect traffic can cross it; "
        "unset: what is below was not read)",
    )
    nics_below: int | None = fact("NICs", "bridges: network adapters (Ethernet, IB) below it")
    devices_below: str | None = fact(
        "", "bridges: the GPUs and NICs below it, as 'GPU 0000:18:00.0, NIC 0000:19:00.0'"
    )


class NicFacts(FactModel):
    """A network interface."""

    name: str | None = fact("", "interface name")
    pci_bus_id: str | None = fact("", "PCI address, when a PCI device")
    numa_node: int | None = fact("", "NUMA node of the NIC's slot")
    driver: str | None = fact("", "kernel driver")
    speed_mbps: float | None = fact("Mb/s", "negotiated link speed")
    mtu: int | None = fact("bytes", "MTU")
    operstate: str | None = fact("", "up, down, ...")
    rx_errors: int | None = fact("errors", "receive errors")
    tx_errors: int | None = fact("errors", "transmit errors")
    rx_dropped: int | None = fact("packets", "packets dropped on receive")
    tx_dropped: int | None = fact("packets", "packets dropped on transmit")
    firmware_version: str | None = fact(
        "",
        "NIC firmware version (ethtool -i firmware-version, without the PSID); an RDMA "
        "adapter's firmware is also ib.firmware_version (sysfs fw_ver)",
    )
    firmware_psid: str | None = fact(
        "", "board id (PSID) ethtool -i prints beside the firmware, e.g. MT_0000000838"
    )

    @computed_field(  # type: ignore[prop-decorator]
        description="device family of an NVIDIA/Mellanox firmware version (its first number)",
        json_schema_extra={"unit": ""},
    )
    @property
    def firmware_family(self) -> str | None:
        return firmware_family(self.firmware_version)


class IbPortFacts(FactModel):
    """An InfiniBand (or RoCE) HCA port."""

    ca_name: str | None = fact("", "HCA name, e.g. mlx5_0")
    port: int | None = fact("", "port number")
    state: str | None = fact("", "logical state: active, down, init, armed")
    phys_state: str | None = fact("", "physical state: linkup, polling, disabled, ...")
    rate_gbps: float | None = fact("Gb/s", "port rate")
    link_layer: str | None = fact("", "infiniband or ethernet")
    pci_bus_id: str | None = fact("", "PCI address of the HCA")
    numa_node: int | None = fact("", "NUMA node of the HCA")
    symbol_errors: int | None = fact("errors", "symbol error counter")
    link_downed: int | None = fact("events", "times the link went down")
    rcv_errors: int | None = fact("errors", "port receive errors")
    xmit_discards: int | None = fact("packets", "transmit discards")
    link_downed_delta: int | None = fact(
        "events", "times the link went down since the previous run (flaps)"
    )
    symbol_errors_delta: int | None = fact("errors", "symbol errors added since the previous run")
    rcv_errors_delta: int | None = fact("errors", "receive errors added since the previous run")
    counters_interval_s: float | None = fact("s", "seconds since the previous run's counters")
    firmware_version: str | None = fact(
        "", "firmware of the HCA (sysfs fw_ver, ibstat Firmware version, ibv_devinfo fw_ver)"
    )
    # RoCE ports (link_layer ethernet): the Ethernet interface, its congestion control and
    # its congestion counters over the collection window (collectors/roce.py).
    netdev: str | None = fact("", "RoCE: the port's Ethernet interface, e.g. ens1f0np0")
    ecn_np_prios: int | None = fact(
        "priorities",
        "RoCE: priorities with ECN notification point on (the receiver sends CNPs; "
        "/sys/class/net/IF/ecn/roce_np/enable/N)",
    )
    ecn_rp_prios: int | None = fact(
        "priorities",
        "RoCE: priorities with ECN reaction point on (DCQCN slows the sender on a CNP; "
        "/sys/class/net/IF/ecn/roce_rp/enable/N)",
    )
    pfc_prios: str | None = fact(
        "", "RoCE: priorities with PFC on, e.g. '3' ('none': PFC off on every priority)"
    )
    pfc_enabled_count: int | None = fact("priorities", "RoCE: priorities with PFC on")
    pause_rx_enabled: bool | None = fact("", "RoCE: 802.3x global pause honoured (ethtool -a RX)")
    pause_tx_enabled: bool | None = fact("", "RoCE: 802.3x global pause sent (ethtool -a TX)")
    roce_window_s: float | None = fact("s", "RoCE: seconds between the two counter readings")
    cnp_sent_per_s: float | None = fact(
        "CNP/s", "RoCE: congestion notifications sent (np_cnp_sent) over the window"
    )
    cnp_handled_per_s: float | None = fact(
        "CNP/s", "RoCE: congestion notifications acted on (rp_cnp_handled) over the window"
    )
    ecn_marked_per_s: float | None = fact(
        "packets/s", "RoCE: ECN-marked packets received (np_ecn_marked_roce_packets)"
    )
    out_of_sequence_per_s: float | None = fact(
        "packets/s",
        "RoCE: packets received out of sequence (out_of_sequence + packet_seq_err): loss",
    )
    rx_pause_per_s: float | None = fact(
        "frames/s", "RoCE: pause frames received (PFC + global, ethtool -S) over the window"
    )
    tx_pause_per_s: float | None = fact(
        "frames/s", "RoCE: pause frames sent (PFC + global, ethtool -S) over the window"
    )
    rx_paused_pct: float | None = fact(
        "%", "RoCE: share of the window the port was held paused by its peer (worst priority)"
    )
    tx_paused_pct: float | None = fact(
        "%", "RoCE: share of the window the port held its peer paused (worst priority)"
    )
    pause_storm_events: int | None = fact(
        "events",
        "RoCE: times the NIC's pause-storm guard stopped sending pause "
        "(tx_pause_storm_error_events), lifetime",
    )
    pause_storm_events_added: int | None = fact(
        "events", "RoCE: pause-storm guard events added over the window"
    )
    rdma_packets_per_s: float | None = fact(
        "packets/s",
        "RoCE: RDMA packets through the port over the window (rx + tx_vport_rdma_unicast_packets, "
        "ethtool -S): the port carries RoCE traffic when above 0",
    )

    @computed_field(  # type: ignore[prop-decorator]
        description="device family of the HCA firmware version (its first number)",
        json_schema_extra={"unit": ""},
    )
    @property
    def firmware_family(self) -> str | None:
        return firmware_family(self.firmware_version)


# --------------------------------------------------------------------------- events


class KernelEvent(FactModel):
    """Common fields of every kernel log event."""

    time: datetime | None = fact("", "when it was logged (absolute), when the log says")
    time_text: str | None = fact("", "the timestamp exactly as printed")
    monotonic_s: float | None = fact("s", "seconds since boot, from a plain dmesg stamp")
    age_s: float | None = fact("s", "how long before the snapshot it was logged")
    pci_bus_id: str | None = fact("", "PCI address of the device it names, normalised")
    gpu_index: int | None = fact("", "NVML index of the GPU it is tied to")
    raw: str = fact("", "the log line(s) as read", default="")
    line: int | None = fact("", "1-based line number in the log read")


class XidEvent(KernelEvent):
    """An NVRM Xid report."""

    code: int | None = fact("", "Xid number")
    pid: int | None = fact("", "process id named in the line")
    process_name: str | None = fact("", "process name named in the line")
    channel: str | None = fact("", "channel id, as printed")
    gpu_instance: int | None = fact("", "MIG GPU instance id when the line names one (GPU-I:N)")
    message: str | None = fact("", "text after the code and the pid/name/channel fields")
    # Filled from the rulebook's Xid catalogue (and site overlays) before evaluation.
    known: bool | None = fact("", "the code is in NVIDIA's Xid catalogue (live or retired)")
    retired: bool | None = fact("", "NVIDIA marks the code unused / retired")
    mnemonic: str | None = fact("", "NVIDIA's mnemonic for the code")
    meaning: str | None = fact("", "NVIDIA's one-line description of the code")
    cause_class: str | None = fact(
        "", "likely cause: hardware, driver, application, memory, bus, thermal, nvlink, ..."
    )
    applies_to: str | None = fact("", "GPU families NVIDIA lists the code for")
    nvidia_immediate: str | None = fact("", "NVIDIA's immediate action bucket, e.g. RESET_GPU")
    nvidia_investigatory: str | None = fact("", "NVIDIA's investigatory action bucket")
    catalog_severity: str | None = fact("", "the rulebook's severity for the code")
    site_action: str | None = fact("", "the site overlay's action for the code, when set")
    severity: str | None = fact("", "effective severity: the site's when set, else the catalogue's")
    nvidia_immediate_meaning: str | None = fact(
        "", "what NVIDIA's immediate bucket asks for, in the catalogue's words"
    )
    nvidia_investigatory_meaning: str | None = fact(
        "", "what NVIDIA's investigatory bucket asks for, in the catalogue's words"
    )
    # Filled by the engine before evaluation: how this event groups with others.
    incident: str | None = fact(
        "",
        "incident the event belongs to on its GPU: a new one per process, boot, or burst "
        "more than two minutes after the last",
    )
    # Decoded from the message (gpu_triage.model.xid_message) and the rulebook's decode
    # tables (rulebook/xid/nvlink-decode.yaml) before evaluation.
    nvlink_link: int | None = fact("", "NVLink link number the message names (Xid 74, 144-150)")
    nvlink_fatal_printed: bool | None = fact(
        "", "the NVLink message says fatal (true) or nonfatal (false)"
    )
    xid74_registers: str | None = fact("", "the seven Xid 74 registers as printed, Reg0 first")
    xid74_class: str | None = fact(
        "",
        "worst class of the Xid 74 register bits set: fabric_reset, hardware, field_diag, "
        "signal_integrity, ecc_threshold, ecc_parity, report_if_repeated, unexpected, unlisted, "
        "sympathetic, ignore",
    )
    xid74_decode: str | None = fact("", "each Xid 74 register bit set and what NVIDIA says of it")
    nvlink_unit: str | None = fact("", "NVLink5 sub component the Xid 144-150 line names")
    nvlink_intr_info: int | None = fact("", "NVLink5 intrInfo word of the line")
    nvlink_error_status: int | None = fact("", "NVLink5 errorStatus word of the line")
    nvlink_reason: int | None = fact("", "IntrInfo[25:20]: the reason code of a NETIR link event")
    nvlink_subcode: int | None = fact(
        "", "subcode: IntrInfo[9:5] before driver R575, IntrInfo[6:0] from R575"
    )
    decode_immediate: str | None = fact(
        "", "immediate bucket of the NVIDIA decode row the NVLink5 line matches"
    )
    decode_immediate_meaning: str | None = fact("", "what that immediate bucket asks for")
    decode_severity: str | None = fact(
        "", "severity of that decode row: fatal, link_fatal, non_fatal"
    )
    decode_investigatory: str | None = fact("", "investigatory bucket of that decode row")
    decode_investigatory_meaning: str | None = fact("", "what that investigatory bucket asks for")
    decode_promoted: str | None = fact(
        "", "the action the decode row is promoted to when the status repeats"
    )
    decode_summary: str | None = fact("", "the decode row in words: unit, status, buckets")
    recovery_action_to: str | None = fact(
        "", "recovery action an Xid 154 line changed to (none, gpu_reset, node_reboot, ...)"
    )


class SxidEvent(KernelEvent):
    """An NVSwitch SXid report."""

    code: int | None = fact("", "SXid number")
    link: int | None = fact("", "NVSwitch link (port) number when printed")
    fatal: bool | None = fact("", "the message says the error is fatal")
    message: str | None = fact("", "text after the code")
    # Filled from the rulebook's SXid catalogue before evaluation.
    known: bool | None = fact("", "the code is in the SXid catalogue")
    sxid_class: str | None = fact(
        "", "Fabric Manager class: non_fatal, potentially_fatal, always_fatal or host"
    )
    meaning: str | None = fact("", "what the SXid reports")
    # Filled before evaluation from the NVLink remote ends of each GPU link (nvlink kind).
    gpus: str | None = fact(
        "", "the GPUs behind the switch port (or the whole switch), as 'GPU 3 (0000:4e:00.0)'"
    )
    gpu_count: int | None = fact("GPUs", "how many GPUs the SXid is tied to")
    gpus_by: str | None = fact(
        "",
        "how the GPUs were found: port (a GPU link ends on the switch port the SXid names), "
        "switch (every GPU with a link to the switch) or unknown (no NVLink remote map)",
    )


class AerEvent(KernelEvent):
    """A PCIe Advanced Error Reporting message."""

    reporter: str | None = fact("", "reporting port, e.g. 'pcieport 0000:00:03.0'")
    severity: str | None = fact("", "corrected, uncorrected_nonfatal or uncorrected_fatal")
    error_type: str | None = fact("", "Physical Layer, Data Link Layer or Transaction Layer")
    errors: list[str] = fact("", "error bit names, e.g. RxErr, CmpltTO", default=[])
    device_is_gpu: bool | None = fact("", "the failing device is an NVIDIA GPU")


class BusLossEvent(KernelEvent):
    """'GPU has fallen off the bus' (with or without an Xid 79)."""

    message: str | None = fact("", "the text logged")


class OomKillEvent(KernelEvent):
    """The kernel OOM killer killed a process."""

    pid: int | None = fact("", "killed process id")
    process_name: str | None = fact("", "killed process name")
    anon_rss_kib: int | None = fact("KiB", "anonymous resident memory of the killed process")
    constraint: str | None = fact("", "CONSTRAINT_NONE, CONSTRAINT_MEMCG, ...")
    cgroup: str | None = fact("", "memory cgroup that hit its limit")
    task_cgroup: str | None = fact("", "memory cgroup of the killed task (task_memcg)")


class NvlinkErrorEvent(KernelEvent):
    """An NVLink error logged by the driver outside an Xid line."""

    link: int | None = fact("", "link number when printed")
    message: str | None = fact("", "the text logged")


class HostEvent(KernelEvent):
    """A host problem the kernel logs (node-problem-detector's kernel monitor): a hung task,
    a filesystem or block I/O error, an NFS server not responding, a machine check, a full
    disk."""

    problem: str | None = fact(
        "", "hung_task, fs_error, io_error, nfs_not_responding, machine_check or disk_full"
    )
    device: str | None = fact("", "device, filesystem or NFS server the line names")
    process_name: str | None = fact("", "task named in the line (hung tasks)")
    pid: int | None = fact("", "its pid")
    message: str | None = fact("", "the text logged")


class PcieLimitEvent(KernelEvent):
    """A PCIe device that trained below what it and its slot can do, as the kernel logs it
    at enumeration or driver load ("... available PCIe bandwidth, limited by ..."). One per
    device: a later report of the same device replaces the reading. ``pci_bus_id`` is the
    device; ``limited_at`` the link that limits it (may be a switch or root port above)."""

    driver: str | None = fact("", "driver named in the line ('pci' at enumeration, 'nvidia' ...)")
    available_gbps: float | None = fact("Gb/s", "bandwidth the device gets")
    speed_gts: float | None = fact("GT/s", "speed of the limiting link")
    width: int | None = fact("lanes", "width of the limiting link")
    limited_at: str | None = fact("", "PCI address of the limiting link, normalised")
    capable_gbps: float | None = fact("Gb/s", "bandwidth the device is capable of")
    capable_speed_gts: float | None = fact("GT/s", "speed the device is capable of")
    capable_width: int | None = fact("lanes", "width the device is capable of")
    device_is_gpu: bool | None = fact("", "the device is an NVIDIA GPU")


# --------------------------------------------------------------------------- diagnostics


# DCGM test names (text table, -j JSON, DCGM 2 to 4 spellings) -> what they validate.
DIAG_AREAS: dict[str, str] = {
    "diagnostic": "compute",
    "sm stress": "compute",
    "targeted stress": "compute",
    "memory bandwidth": "memory_bandwidth",
    "pcie": "interconnect",
    "pcie bandwidth": "interconnect",
    "nvbandwidth": "interconnect",
    "nvlink": "interconnect",
    "targeted power": "thermal_power",
    "pulse test": "thermal_power",
    "gpu memory": "memory",
    "memory": "memory",
    "memtest": "memory",
}


def diag_area(test: str | None) -> str | None:
    """What a DCGM diagnostic test validates; None for the deployment checks' names and
    anything else."""
    if not test:
        return None
    key = " ".join(test.strip().lower().replace("_", " ").replace("-", " ").split())
    return DIAG_AREAS.get(key)


class DiagResult(FactModel):
    """One test of a DCGM diagnostic run (dcgmi diag) on one GPU, or on all of them."""

    category: str | None = fact("", "section of the run: Deployment, Hardware, Integration, Stress")
    test: str | None = fact("", "test name as DCGM prints it, e.g. Memory, PCIe, Targeted Stress")
    result: str | None = fact("", "pass, fail, warn or skip (skip: the test did not run)")
    gpu_index: int | None = fact("", "GPU the result is for; unset: every GPU of the run")
    message: str | None = fact("", "DCGM's warning and info text for this result")
    error_id: int | None = fact("", "DCGM error code (dcgmError_t) of the first warning")
    error_code: str | None = fact("", "its DCGM_FR_* name")
    error_severity: str | None = fact(
        "", "DCGM's severity of that error: none, monitor, isolate, unknown, triage, config, reset"
    )
    error_category: str | None = fact(
        "", "DCGM's category of that error, e.g. hardware_memory, software_config"
    )
    run_level: int | None = fact("", "the diagnostic level run (dcgmi diag -r N) when known")
    dcgm_version: str | None = fact("", "DCGM version that ran it")

    @computed_field(  # type: ignore[prop-decorator]
        description=(
            "what the test validates: compute, memory_bandwidth, interconnect, thermal_power, "
            "memory or deployment (DCGM 2-4 test names, text or JSON)"
        ),
        json_schema_extra={"unit": ""},
    )
    @property
    def validates(self) -> str | None:
        return diag_area(self.test)


# --------------------------------------------------------------------------- history


class XidHistory(FactModel):
    """What earlier runs saw of one Xid code on one GPU (from a history store)."""

    code: int | None = fact("", "Xid number")
    pci_bus_id: str | None = fact("", "PCI address of the GPU, normalised")
    gpu_uuid: str | None = fact("", "GPU UUID, where the history recorded it")
    count_before_reset: int | None = fact(
        "events", "times the code was logged on this GPU before its last reset (or reboot)"
    )
    last_seen_before_reset: datetime | None = fact(
        "", "when the code was last logged before that reset"
    )
    last_reset_time: datetime | None = fact("", "when the GPU was last reset or the node rebooted")
    resets_seen: int | None = fact("resets", "GPU resets or reboots the history has recorded")


# --------------------------------------------------------------------------- driver stack


class NvmlInit(StrEnum):
    """How NVML's start (nvmlInit) went, live or as a pasted nvidia-smi error says."""

    OK = "ok"
    VERSION_MISMATCH = "version_mismatch"  # NVML_ERROR_LIB_RM_VERSION_MISMATCH
    DRIVER_NOT_LOADED = "driver_not_loaded"  # NVML_ERROR_DRIVER_NOT_LOADED
    NO_DEVICES = "no_devices"  # started, but enumerates no GPU
    NO_PERMISSION = "no_permission"  # NVML_ERROR_NO_PERMISSION
    LIBRARY_NOT_FOUND = "library_not_found"  # NVML_ERROR_LIBRARY_NOT_FOUND
    UNKNOWN_ERROR = "unknown_error"  # NVML_ERROR_UNKNOWN
    GPU_LOST = "gpu_lost"  # NVML_ERROR_GPU_IS_LOST
    ERROR = "error"  # any other NVML error


class DriverFacts(FactModel):
    """The NVIDIA driver stack: kernel module, user-space NVML library, how NVML started."""

    nvml_init: NvmlInit | None = fact("", "how NVML's start went (ok, version_mismatch, ...)")
    nvml_error: str | None = fact("", "NVML's error text when it did not start")
    kernel_module_loaded: bool | None = fact(
        "", "the nvidia kernel module is loaded (/proc/driver/nvidia/version exists)"
    )
    kernel_module_version: str | None = fact(
        "", "version of the loaded nvidia kernel module (/proc/driver/nvidia/version)"
    )
    library_version: str | None = fact(
        "", "version of the user-space driver library (NVML, libnvidia-ml.so.<version>)"
    )
    nouveau_loaded: bool | None = fact("", "the nouveau module is loaded (/sys/module/nouveau)")
    package_upgraded_to: str | None = fact(
        "", "driver package version a package-manager upgrade installed (apt/dnf log)"
    )

    @computed_field(  # type: ignore[prop-decorator]
        description="the kernel module and the user-space library have the same version",
        json_schema_extra={"unit": ""},
    )
    @property
    def versions_match(self) -> bool | None:
        if not self.kernel_module_version or not self.library_version:
            return None
        return self.kernel_module_version == self.library_version


class ErrorTextEvent(FactModel):
    """A known error text (signature) found in a paste, a job's output or a collector."""

    signature: str = fact("", "signature id in the error-text table", default="")
    cause: str | None = fact("", "the cause the signature is evidence of (rules read this)")
    component: str | None = fact(
        "", "what printed it: driver, container, kubernetes, cuda, nccl, fabric, slurm, ..."
    )
    verified: bool | None = fact(
        "", "the wording was checked against a source (false: recalled, matched loosely)"
    )
    message: str | None = fact("", "the matching text")
    raw: str = fact("", "the line(s) it was found on", default="")
    value: str | None = fact("", "a field the signature captures (a version, Xid, errno ...)")
    pci_bus_id: str | None = fact("", "PCI address the text names, normalised")
    gpu_index: int | None = fact("", "NVML index of the GPU it is tied to")
    line: int | None = fact("", "1-based line number of its first occurrence")
    count: int | None = fact("times", "times the same text occurs")


# --------------------------------------------------------------------------- NVSwitch fabric


class FabricFacts(FactModel):
    """The NVSwitch fabric of the node and its Fabric Manager (nvidia-fabricmanager)."""

    nvswitch_count: int | None = fact(
        "switches", "NVSwitch devices on the PCI bus (NVIDIA bridge functions, class 0680)"
    )
    fm_installed: bool | None = fact(
        "", "the nvidia-fabricmanager unit is known to systemd (or its binary answers)"
    )
    fm_active_state: str | None = fact(
        "", "systemd ActiveState of nvidia-fabricmanager: active, inactive, failed, activating"
    )
    fm_sub_state: str | None = fact("", "systemd SubState: running, dead, failed, exited ...")
    fm_result: str | None = fact("", "systemd Result of the last run: success, exit-code ...")
    fm_version: str | None = fact(
        "", "Fabric Manager version (nv-fabricmanager --version, or its log)"
    )
    fm_log_error: str | None = fact(
        "", "the last error line of the Fabric Manager log (/var/log/fabricmanager.log)"
    )
    fm_log_errors: int | None = fact("lines", "error lines in the part of the log read")
    fm_switches_mismatch: bool | None = fact(
        "",
        "the log says the NVSwitches found match no supported topology (FM aborted)",
    )
    fm_nothing_to_do: bool | None = fact(
        "", "the log says NV_WARN_NOTHING_TO_DO: the Fabric Manager found no NVSwitch"
    )


# --------------------------------------------------------------------------- scheduler


class SchedulerFacts(FactModel):
    """Kubernetes, container runtime and Slurm, where present."""

    k8s_node_gpu_capacity: int | None = fact("GPUs", "nvidia.com/gpu in the node's capacity")
    k8s_node_gpu_allocatable: int | None = fact("GPUs", "nvidia.com/gpu allocatable")
    k8s_gpu_requested: int | None = fact("GPUs", "GPUs requested by pods on this node")
    k8s_pods_with_gpu: int | None = fact("pods", "pods on this node requesting GPUs")
    k8s_pods_pending_gpu: int | None = fact("pods", "pods pending for want of a GPU")
    container_runtime_nvidia: bool | None = fact(
        "", "a container runtime is configured with NVIDIA GPU support"
    )
    container_sees_gpus: bool | None = fact("", "a test container saw the GPUs")
    slurm_gres_gpus: int | None = fact("GPUs", "GPUs Slurm GRES declares for this node")
    k8s_pod_gpu_requested: int | None = fact("GPUs", "GPUs the described pod requests")
    k8s_pod_scheduled: bool | None = fact("", "the described pod was scheduled onto a node")
    k8s_pod_node: str | None = fact("", "node the described pod landed on")
    k8s_pod_unschedulable_reason: str | None = fact(
        "", "why the described pod could not be scheduled (FailedScheduling message)"
    )
    k8s_container_runtime: str | None = fact(
        "",
        "container runtime the kubelet runs pods with (docker, containerd, cri-o), from the "
        "node's Container Runtime Version",
    )
    docker_default_runtime: str | None = fact(
        "", "Docker's default runtime (docker info; else daemon.json default-runtime, runc unset)"
    )
    docker_runtimes: list[str] = fact(
        "",
        "runtimes Docker has registered (docker info Runtimes, daemon.json runtimes)",
        default=[],
    )
    docker_cgroup_driver: str | None = fact("", "Docker's cgroup driver: systemd or cgroupfs")
    container_toolkit_mode: str | None = fact(
        "",
        "mode of the NVIDIA container runtime (auto, legacy, cdi, csv) in "
        "/etc/nvidia-container-runtime/config.toml",
    )
    containerd_cdi_enabled: bool | None = fact("", "containerd's enable_cdi is set")
    cdi_spec_files: int | None = fact("files", "CDI spec files in /etc/cdi and /var/run/cdi")
    cdi_nvidia_devices: int | None = fact(
        "devices", "nvidia.com/gpu devices the CDI specs define (spec files or nvidia-ctk cdi list)"
    )
    container_toolkit_version: str | None = fact(
        "",
        "NVIDIA Container Toolkit version (nvidia-ctk --version, else nvidia-container-cli "
        "--version cli-version)",
    )
    k8s_node_name: str | None = fact("", "name of the Kubernetes node the node facts describe")
    k8s_node_gpu_product: str | None = fact(
        "", "the node's nvidia.com/gpu.product label (GPU feature discovery), as printed"
    )
    k8s_node_instance_type: str | None = fact(
        "", "the node's node.kubernetes.io/instance-type label"
    )
    k8s_pod_node_selector: str | None = fact(
        "", "the described pod's Node-Selectors, key=value terms as printed"
    )
    k8s_pod_gpu_wanted: str | None = fact(
        "",
        "GPU type the described pod's node selector asks for: the value of a GPU-type label "
        "(nvidia.com/gpu.product, a cloud accelerator label, a site's gpu-type)",
    )
    k8s_pod_gpu_wanted_label: str | None = fact("", "the label key k8s_pod_gpu_wanted comes from")
    k8s_pod_instance_type_wanted: str | None = fact(
        "", "instance type the described pod's node selector asks for"
    )
    k8s_pod_gpu_admission_failed: bool | None = fact(
        "",
        "the kubelet rejected the described pod at admission for want of nvidia.com/gpu "
        "devices (UnexpectedAdmissionError: the node had fewer GPUs than it advertised)",
    )
    k8s_pods_wrong_gpu_type: int | None = fact(
        "pods",
        "GPU pods on this node whose node selector or required node affinity asks for a GPU "
        "model (or instance type) other than the one this node has",
    )
    k8s_pods_wrong_gpu_type_detail: str | None = fact(
        "", "the first such pod, what it asks for and what the node has"
    )
    k8s_pod_status_message: str | None = fact(
        "", "the described pod's status Message (why the kubelet failed or evicted it)"
    )

    @computed_field(  # type: ignore[prop-decorator]
        description="Docker has a runtime named nvidia registered",
        json_schema_extra={"unit": ""},
    )
    @property
    def docker_nvidia_runtime_registered(self) -> bool | None:
        if not self.docker_runtimes:
            return None
        return "nvidia" in self.docker_runtimes

    @computed_field(  # type: ignore[prop-decorator]
        description="GPU model token of the type the described pod asks for (h100, a100 ...)",
        json_schema_extra={"unit": ""},
    )
    @property
    def k8s_pod_gpu_wanted_model(self) -> str | None:
        return gpu_model(self.k8s_pod_gpu_wanted)

    @computed_field(  # type: ignore[prop-decorator]
        description="GPU model token of the node's nvidia.com/gpu.product label",
        json_schema_extra={"unit": ""},
    )
    @property
    def k8s_node_gpu_model(self) -> str | None:
        return gpu_model(self.k8s_node_gpu_product)


# --------------------------------------------------------------------------- supplied by people


class SiteInventory(FactModel):
    """What the site expects of this node (from an inventory file)."""

    rack: str | None = fact("", "rack name")
    row: str | None = fact("", "row or pod name")
    role: str | None = fact("", "training, inference or interactive")
    expected_gpu_count: int | None = fact("GPUs", "GPUs this node should have")
    expected_pcie_gen: int | None = fact("gen", "PCIe generation every GPU should link at")
    expected_pcie_width: int | None = fact("lanes", "PCIe width every GPU should link at")
    expected_nvlink_active: int | None = fact("links", "NVLink links each GPU should have up")
    expected_ib_ports: int | None = fact(
        "ports", "InfiniBand ports that should be active (e.g. 8 on an 8-GPU H100/H200/B200 node)"
    )
    expected_ib_rate_gbps: float | None = fact(
        "Gb/s", "rate every InfiniBand port should run at (e.g. 400 for NDR)"
    )
    expected_net_gbps: float | None = fact(
        "Gb/s", "throughput a host-to-host test (iperf3) should reach on the data network"
    )
    expected_mig_mode: bool | None = fact(
        "", "the golden image's MIG mode for this node's GPUs (true: partitioned)"
    )
    pinned_driver_version: str | None = fact("", "the driver version the golden image pins")
    pinned_vbios_version: str | None = fact("", "the VBIOS version the site pins")
    rdma_configured: bool | None = fact("", "RDMA (InfiniBand/RoCE) is used on this node")
    rack_power_budget_w: float | None = fact("W", "power the rack can deliver")
    rack_power_planned_w: float | None = fact("W", "power the rack's equipment needs at full load")
    baseline_step_time_ms: float | None = fact("ms", "known-good step time for the job")
    baseline_throughput_per_gpu: float | None = fact(
        "samples/s",
        "known-good throughput per GPU for the job (samples/s or tokens/s: the unit the job "
        "metrics' throughput_per_gpu is given in)",
    )
    baseline_latency_p99_ms: float | None = fact(
        "ms", "known-good inference latency P99 of the service on this node"
    )
    baseline_power_draw_w: float | None = fact(
        "W", "known-good power draw per GPU under the job's load (recorded at burn-in)"
    )
    baseline_temperature_c: float | None = fact(
        "°C", "known-good GPU core temperature under the job's load (recorded at burn-in)"
    )
    # The golden image's pins beyond driver and VBIOS (fleet/F1): each is compared with
    # what the node runs, exactly as the node reports it (surrounding blanks dropped; a
    # leading "v" dropped from software release numbers). Unset: not checked.
    pinned_kernel: str | None = fact("", "kernel release the golden image pins (uname -r)")
    pinned_cuda_version: str | None = fact(
        "",
        "CUDA version the pinned driver supports, major.minor as nvidia-smi prints it (quote "
        "it in YAML: 12.10 unquoted is the number 12.1)",
    )
    pinned_fabric_manager_version: str | None = fact(
        "", "Fabric Manager version the golden image pins (NVSwitch nodes)"
    )
    pinned_nic_firmware: str | None = fact(
        "",
        "firmware the node's NICs of one family should run, e.g. 28.39.1002 (ConnectX-7): "
        "NICs of another family (another first number) are not held to it",
    )
    pinned_bios_version: str | None = fact(
        "", "system BIOS version the site pins (/sys/class/dmi/id/bios_version)"
    )
    pinned_container_toolkit_version: str | None = fact(
        "", "NVIDIA Container Toolkit version the golden image pins"
    )
    burn_in: bool | None = fact(
        "",
        "the node is in validation (burn-in) before production: its diagnostics must cover "
        "compute, memory bandwidth, interconnect and thermal/power stress",
    )

    @field_validator(
        "pinned_driver_version",
        "pinned_fabric_manager_version",
        "pinned_container_toolkit_version",
        mode="before",
    )
    @classmethod
    def _software_version(cls, value: Any) -> Any:
        # release numbers: "v1.14.3" in a site file is 1.14.3
        value = _pin_text(value)
        if isinstance(value, str) and re.match(r"^[vV]\d", value):
            return value[1:]
        return value

    @field_validator(
        "pinned_vbios_version",
        "pinned_kernel",
        "pinned_nic_firmware",
        "pinned_bios_version",
        mode="before",
    )
    @classmethod
    def _version_text(cls, value: Any) -> Any:
        # firmware and kernel strings are compared as the node prints them ("V2.80" BIOS)
        return _pin_text(value)

    @field_validator("pinned_cuda_version", mode="before")
    @classmethod
    def _cuda_pin(cls, value: Any) -> Any:
        # The driver reports the CUDA version it supports as major.minor: a pin of
        # 12.4.1 is the same pin.
        value = _pin_text(value)
        if isinstance(value, str) and (m := re.match(r"^(\d+)\.(\d+)(?:\.\d+)*$", value)):
            return f"{m.group(1)}.{m.group(2)}"
        return value

    @computed_field(  # type: ignore[prop-decorator]
        description="device family of the pinned NIC firmware (its first number)",
        json_schema_extra={"unit": ""},
    )
    @property
    def pinned_nic_firmware_family(self) -> str | None:
        return firmware_family(self.pinned_nic_firmware)


def _pin_text(value: Any) -> Any:
    """A pinned version as written in a site file: surrounding blanks dropped, a YAML
    number (12.4) read back as its text, an empty pin no pin."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        value = str(value)
    if isinstance(value, str):
        return value.strip() or None
    return value


class Symptom(StrEnum):
    """What the responder sees (``run --symptom``, the TUI's first screen)."""

    HANG = "hang"
    SLOW = "slow"
    CRASH = "crash"
    MISSING_GPU = "missing-gpu"
    OOM = "oom"
    LATENCY = "latency"


class JobMetrics(FactModel):
    """Metrics of the running job, supplied from a job-metrics file."""

    symptom: Symptom | None = fact(
        "", "what the responder sees: hang, slow, crash, missing-gpu, oom or latency"
    )
    hung: bool | None = fact("", "the job stopped making progress (a hang or stall)")
    stalled_s: float | None = fact("s", "how long the job has made no progress")

    step_time_ms: float | None = fact("ms", "current mean training step time")
    rank_step_times_ms: list[float] = fact("ms", "per-rank mean step times", default=[])
    latency_p50_ms: float | None = fact("ms", "inference latency P50")
    latency_p99_ms: float | None = fact("ms", "inference latency P99")
    nodes_in_job: int | None = fact("nodes", "nodes the job runs on")
    throughput_per_gpu: float | None = fact("samples/s", "throughput per GPU now")
    throughput_per_gpu_fewer_nodes: float | None = fact(
        "samples/s", "throughput per GPU measured with fewer nodes"
    )
    command: list[str] = fact(
        "", "the job's command line as an argument list (runbook steps rerun it)", default=[]
    )

    @computed_field(  # type: ignore[prop-decorator]
        description="slowest rank's step time over the fastest rank's, minus one",
        json_schema_extra={"unit": "%"},
    )
    @property
    def rank_imbalance_pct(self) -> float | None:
        times = [t for t in self.rank_step_times_ms if t > 0]
        if len(times) < 2:
            return None
        return round(100.0 * (max(times) / min(times) - 1.0), 2)

    @computed_field(  # type: ignore[prop-decorator]
        description="P99 latency over P50 latency",
        json_schema_extra={"unit": "ratio"},
    )
    @property
    def latency_tail_ratio(self) -> float | None:
        if self.latency_p99_ms is None or not self.latency_p50_ms:
            return None
        return round(self.latency_p99_ms / self.latency_p50_ms, 3)


# --------------------------------------------------------------------------- the whole set


class Facts(CachedModel):
    """Everything known about one node at one time."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    host: HostFacts | None = None
    gpus: list[GpuFacts] = Field(default_factory=list)
    processes: list[GpuProcess] = Field(default_factory=list)
    nvlinks: list[NvlinkFacts] = Field(default_factory=list)
    pcie_links: list[PcieLinkFacts] = Field(default_factory=list)
    topology: list[TopoFacts] = Field(default_factory=list)
    disks: list[DiskFacts] = Field(default_factory=list)
    mounts: list[MountFacts] = Field(default_factory=list)
    nics: list[NicFacts] = Field(default_factory=list)
    ib_ports: list[IbPortFacts] = Field(default_factory=list)
    xids: list[XidEvent] = Field(default_factory=list)
    sxids: list[SxidEvent] = Field(default_factory=list)
    aers: list[AerEvent] = Field(default_factory=list)
    bus_losses: list[BusLossEvent] = Field(default_factory=list)
    ooms: list[OomKillEvent] = Field(default_factory=list)
    nvlink_errors: list[NvlinkErrorEvent] = Field(default_factory=list)
    pcie_limits: list[PcieLimitEvent] = Field(default_factory=list)
    xid_history: list[XidHistory] = Field(default_factory=list)
    diags: list[DiagResult] = Field(default_factory=list)
    host_events: list[HostEvent] = Field(default_factory=list)
    driver: DriverFacts | None = None
    fabric: FabricFacts | None = None
    errors: list[ErrorTextEvent] = Field(default_factory=list)
    scheduler: SchedulerFacts | None = None
    site: SiteInventory | None = None
    job: JobMetrics | None = None
    answers: dict[str, bool | float | str] = Field(
        default_factory=dict, description="question id -> a responder's answer"
    )
