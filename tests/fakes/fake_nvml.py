"""FakeNvml: a stand-in for the ``pynvml`` module (nvidia-ml-py), for tests without a GPU.

It implements the calls :class:`gpu_triage.collectors.nvml.NvmlCollector` makes and
raises the *real* pynvml error classes (``pynvml.NVMLError(code)`` builds the matching
``NVMLError_*`` subclass), so the collector's error mapping is tested against the real
hierarchy. Constants, error classes and structures come from the real binding too
(``__getattr__`` forwards every ``NVML*``/``c_nvml*`` name).

Profiles, one per GPU class:

* :func:`h100_sxm` / :func:`h100_node`: datacenter H100 SXM 80GB. Fed with recorded real
  outputs: GPU 0 is ``/work/shared/real-outputs/nvidia-smi-q/
  h100-sxm-565-full-q-gpu0-clocks-event-reasons-replays7-thamada-nvsim.txt`` (name,
  serial, UUID, bus id, VBIOS, driver 565.57.01 / CUDA 12.7, persistence on, MIG off, ECC
  on with zero counts, retired pages N/A, remapped rows 0/0/No/No, PCIe 5 x16, 7 replays,
  fan N/A, P0, clock event reason Idle, 1 / 81559 MiB, 0 % utilisation, 30 C / memory 36 C,
  100.89 W of 700 W, SM 345 of 1980 MHz, recovery action None); the thresholds come from
  its T.Limit rows (T.Limit 30 + 57 = 87 C; slowdown 87 + 2 = 89 C, shutdown 87 + 8 =
  95 C). GPUs 1-7 take bus id, power and temperature from the recorded 8-GPU table
  ``nvidia-smi/table-8x-h100-sxm-565-new-format-thamada-nvsim.txt``; their serials and
  UUIDs are made up (the recording has only GPU 0's). 18 NVLink 4 links at 26.562 GB/s
  (what ``nvidia-smi nvlink -s`` prints for H100 SXM).
* :func:`a100_mig`: A100-SXM4-80GB with MIG enabled: utilisation and remapped rows
  NotSupported (nvml.h), process memory not available without MIG handles.
* :func:`rtx4090`: GeForce RTX 4090, "limited support": serial, ECC, retired pages,
  remapped rows, NVLink, MIG and the recovery-action field NotSupported.
* :func:`v100_old_driver`: a 470 driver lacking the new APIs: ClocksEventReasons,
  TemperatureV, PerformanceState and ComputeRunningProcesses_v3 raise FunctionNotFound,
  the recovery-action field is unknown to it. Its clock event mask (HW Slowdown + HW
  Power Brake) and SM clock (382 MHz) are those of the recorded
  ``nvidia-smi-q/v100-sxm2-32gb-hw-power-brake-active-dell-c4130-l4rz.txt``.

Failure knobs: ``FakeNvml(init_error=code)``, ``handle_errors={index: code}``,
``lose_gpu(index, at="nvmlDeviceGetRemappedRows")`` (the GPU falls off the bus when that
call is made and answers GpuIsLost from then on), ``hidden={"name", ...}`` (the binding
lacks a function or constant), ``profile.errors[function] = code``.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field, replace
from types import SimpleNamespace
from typing import Any

import pynvml

NOT_SUPPORTED = pynvml.NVML_ERROR_NOT_SUPPORTED
FUNCTION_NOT_FOUND = pynvml.NVML_ERROR_FUNCTION_NOT_FOUND
NO_PERMISSION = pynvml.NVML_ERROR_NO_PERMISSION
GPU_IS_LOST = pynvml.NVML_ERROR_GPU_IS_LOST
INVALID_ARGUMENT = pynvml.NVML_ERROR_INVALID_ARGUMENT

FI_MEMORY_TEMP = pynvml.NVML_FI_DEV_MEMORY_TEMP
FI_NVLINK_LINK_COUNT = pynvml.NVML_FI_DEV_NVLINK_LINK_COUNT
FI_NVLINK_GET_SPEED = pynvml.NVML_FI_DEV_NVLINK_GET_SPEED
FI_GPU_RECOVERY_ACTION = pynvml.NVML_FI_DEV_GET_GPU_RECOVERY_ACTION


@dataclass
class FakeLink:
    active: bool = True
    speed_mbps: int = 26562
    replay: int = 0
    recovery: int = 0
    crc_flit: int = 0
    remote_bus: str | None = None  # the far end's PCI address (an NVSwitch); None: NotSupported
    remote_type: int = 2  # NVML_NVLINK_DEVICE_TYPE_SWITCH


@dataclass
class GpuProfile:
    """What one fake GPU answers; ``None`` means the call raises NotSupported."""

    name: str
    uuid: str | None
    serial: str | None
    bus_id: str  # as NVML prints it: 00000000:18:00.0
    vbios: str | None = "96.00.74.00.01"
    numa_node: int | None = 0
    memory_total_mib: int = 81559
    memory_used_mib: int = 1
    utilization: list[tuple[int, int]] | None = field(default_factory=lambda: [(0, 0)])
    power_mw: int | None = 100890
    power_limit_mw: int | None = 700000
    default_power_limit_mw: int | None = 700000  # recorded H100 -q: Default Power Limit 700 W
    temperature_c: int | None = 30
    memory_temperature_c: int | None = 36
    slowdown_c: int | None = 89
    shutdown_c: int | None = 95
    # GPU Max Operating Temp (the recorded H100: its T.Limit, 87 C) and the acoustic
    # target: "GPU Target Temperature: N/A" on the datacenter part (NotSupported).
    max_operating_c: int | None = 87
    memory_max_c: int | None = 95  # NVML_TEMPERATURE_THRESHOLD_MEM_MAX (HBM3)
    target_c: int | None = None
    target_range_c: tuple[int, int] | None = None
    pstate: int | None = 0
    clocks_event_mask: int | None = 0x1
    sm_clock_mhz: int | None = 345
    sm_max_clock_mhz: int | None = 1980
    # Applications clocks, graphics (recorded H100 -q: 1980 MHz set and default)
    app_clock_mhz: int | None = 1980
    default_app_clock_mhz: int | None = 1980
    fan_pct: int | None = None
    ecc_mode: tuple[int, int] | None = (1, 1)
    # (error type, counter type) -> count; missing keys are 0
    ecc_counts: dict[tuple[int, int], int] = field(default_factory=dict)
    retired_pages: dict[int, int] | None = None  # cause -> pages; None: NotSupported
    retired_pending: int | None = None
    remapped_rows: tuple[int, int, int, int] | None = (0, 0, 0, 0)
    # SRAM aggregate correctable, uncorrectable parity, uncorrectable SEC-DED, threshold
    # exceeded (the recorded H100 nvidia-smi -q: all 0, "SRAM Threshold Exceeded: No")
    sram: tuple[int, int, int, int] | None = (0, 0, 0, 0)
    # fabric state, status (nvmlReturn), health summary (the recorded H100: Completed,
    # Success, no health summary)
    fabric: tuple[int, int, int] | None = (3, 0, 0)
    pcie: tuple[int, int, int, int] | None = (5, 5, 16, 16)  # gen, gen max, width, width max
    pcie_replays: int | None = 7
    nvlinks: list[FakeLink] | None = field(default_factory=lambda: [FakeLink() for _ in range(18)])
    persistence: int | None = 1
    mig_mode: tuple[int, int] | None = (0, 0)
    compute_mode: int | None = 0
    recovery_action: int | None = 0  # None: the field answers NotSupported
    processes: list[tuple[int, int | None]] | None = field(default_factory=list)  # pid, bytes
    errors: dict[str, int] = field(default_factory=dict)  # function name -> NVML error code
    field_errors: dict[int, int] = field(default_factory=dict)  # field id -> nvmlReturn


# Real values of GPUs 0-7 from the recorded 8x H100 table: bus id, power W, temperature C.
_H100_TABLE = [
    ("00000000:18:00.0", 100.89, 30),
    ("00000000:2A:00.0", 82, 30),
    ("00000000:3A:00.0", 85, 31),
    ("00000000:5D:00.0", 85, 30),
    ("00000000:9A:00.0", 84, 28),
    ("00000000:AB:00.0", 85, 30),
    ("00000000:BA:00.0", 86, 29),
    ("00000000:DB:00.0", 75, 29),
]


def h100_sxm(index: int = 0) -> GpuProfile:
    """H100 SXM 80GB; index 0 is exactly the recorded nvidia-smi -q GPU."""
    bus, watts, temp = _H100_TABLE[index]
    return GpuProfile(
        name="NVIDIA H100 80GB HBM3",
        uuid="GPU-b42dd28e-ffdd-8720-1df0-98bd8cdc05b1"
        if index == 0
        else f"GPU-b42dd28e-ffdd-8720-1df0-98bd8cdc05{index:02x}",
        serial="1654423001593" if index == 0 else f"16544230015{index:02d}",
        bus_id=bus,
        numa_node=0 if index < 4 else 1,
        power_mw=int(watts * 1000),
        temperature_c=temp,
    )


def h100_node(count: int = 8) -> list[GpuProfile]:
    return [h100_sxm(i) for i in range(count)]


def a100_mig() -> GpuProfile:
    return GpuProfile(
        name="NVIDIA A100-SXM4-80GB",
        uuid="GPU-4f1c2d3e-5a6b-7c8d-9e0f-a1b2c3d4e5f6",
        serial="1323221033412",
        bus_id="00000000:07:00.0",
        vbios="92.00.45.00.06",
        utilization=None,  # "not currently supported" on MIG-enabled GPUs
        power_mw=88000,
        power_limit_mw=400000,
        default_power_limit_mw=400000,
        temperature_c=33,
        memory_temperature_c=41,
        slowdown_c=92,
        shutdown_c=95,
        sm_clock_mhz=1410,
        sm_max_clock_mhz=1410,
        app_clock_mhz=1410,
        default_app_clock_mhz=1410,
        memory_total_mib=81920,
        memory_used_mib=13,
        remapped_rows=None,  # NotSupported with MIG instances
        pcie=(4, 4, 16, 16),
        pcie_replays=0,
        nvlinks=[FakeLink(speed_mbps=25000) for _ in range(12)],
        mig_mode=(1, 1),
        processes=[(4242, None)],  # memory needs MIG device handles
    )


def rtx4090() -> GpuProfile:
    return GpuProfile(
        name="NVIDIA GeForce RTX 4090",
        uuid="GPU-6a7b8c9d-0e1f-2a3b-4c5d-6e7f8a9b0c1d",
        serial=None,
        bus_id="00000000:01:00.0",
        vbios="95.02.18.80.5F",
        memory_total_mib=24564,
        memory_used_mib=22010,
        utilization=[(97, 58)],
        power_mw=431000,
        power_limit_mw=450000,
        default_power_limit_mw=450000,
        temperature_c=71,
        memory_temperature_c=None,
        memory_max_c=None,
        slowdown_c=87,
        shutdown_c=90,
        # GeForce: an acoustic target (default 83 C, settable 65-88 C by nvidia-smi -gtt)
        max_operating_c=85,
        target_c=83,
        target_range_c=(65, 88),
        pstate=2,
        clocks_event_mask=0x4,  # SW power cap
        sm_clock_mhz=2520,
        sm_max_clock_mhz=3105,
        app_clock_mhz=None,  # GeForce: applications clocks not supported
        default_app_clock_mhz=None,
        fan_pct=62,
        ecc_mode=None,
        retired_pages=None,
        remapped_rows=None,
        sram=None,
        fabric=(0, 0, 0),
        pcie=(4, 4, 16, 16),
        pcie_replays=0,
        nvlinks=None,
        persistence=0,
        mig_mode=None,
        recovery_action=None,
        processes=[(31337, 21474836480)],
    )


def v100_old_driver() -> GpuProfile:
    return GpuProfile(
        name="Tesla V100-SXM2-32GB",
        uuid="GPU-0d1e2f3a-4b5c-6d7e-8f9a-0b1c2d3e4f5a",
        serial="0323618041234",
        bus_id="00000000:1A:00.0",
        vbios="88.00.80.00.01",
        memory_total_mib=32510,
        memory_used_mib=1024,
        utilization=[(100, 35)],
        power_mw=105000,
        power_limit_mw=300000,
        default_power_limit_mw=300000,
        temperature_c=45,
        memory_temperature_c=43,
        slowdown_c=87,
        shutdown_c=90,
        max_operating_c=83,
        clocks_event_mask=0x88,  # HW slowdown + HW power brake (recorded)
        sm_clock_mhz=382,
        sm_max_clock_mhz=1530,
        memory_max_c=85,
        app_clock_mhz=1312,
        default_app_clock_mhz=1312,
        retired_pages={0: 0, 1: 0},
        retired_pending=0,
        remapped_rows=None,  # Volta: page retirement, no row remapping
        sram=None,
        fabric=None,
        pcie=(3, 3, 16, 16),
        pcie_replays=0,
        nvlinks=[FakeLink(speed_mbps=25781) for _ in range(6)],
        mig_mode=None,
        processes=[(2187, 1073741824)],
        errors={
            "nvmlDeviceGetCurrentClocksEventReasons": FUNCTION_NOT_FOUND,
            "nvmlDeviceGetTemperatureV": FUNCTION_NOT_FOUND,
            "nvmlDeviceGetPerformanceState": FUNCTION_NOT_FOUND,
            "nvmlDeviceGetComputeRunningProcesses_v3": FUNCTION_NOT_FOUND,
        },
        field_errors={FI_GPU_RECOVERY_ACTION: INVALID_ARGUMENT},
    )


@dataclass(frozen=True)
class FakeHandle:
    index: int


class FakeNvml:
    """A module-like object with the pynvml calls the collector makes."""

    def __init__(
        self,
        gpus: list[GpuProfile],
        *,
        driver: str = "565.57.01",
        cuda: int = 12070,
        init_error: int | None = None,
        handle_errors: dict[int, int] | None = None,
        hidden: set[str] | None = None,
        bytes_strings: bool = False,
    ) -> None:
        self._hidden: set[str] = set(hidden or ())
        self.gpus = [replace(g) for g in gpus]
        self.driver = driver
        self.cuda = cuda
        self.init_error = init_error
        self.handle_errors = dict(handle_errors or {})
        self.bytes_strings = bytes_strings  # old bindings returned bytes
        self.lost: set[int] = set()
        self.lose_at: dict[int, str] = {}
        self.calls: list[str] = []
        self.gpu_calls: dict[int, list[str]] = {}  # per GPU, in call order
        self.init_count = 0
        self.shutdown_count = 0
        self._lock = threading.Lock()

    # -- the module surface ----------------------------------------------------

    def __getattribute__(self, name: str) -> Any:
        if not name.startswith("_") and name in object.__getattribute__(self, "_hidden"):
            raise AttributeError(name)
        return object.__getattribute__(self, name)

    def __getattr__(self, name: str) -> Any:
        # Constants, error classes and structures of the real binding.
        versions = ("nvmlPciInfo", "nvmlEccSramErrorStatus_v", "nvmlGpuFabricInfo_v")
        if name.startswith(("NVML", "c_nvml", *versions)) and name not in self._hidden:
            return getattr(pynvml, name)
        raise AttributeError(name)

    def lose_gpu(self, index: int, at: str | None = None) -> None:
        """GPU ``index`` falls off the bus: now, or when the call named ``at`` is made."""
        if at is None:
            self.lost.add(index)
        else:
            self.lose_at[index] = at

    def _record(self, name: str) -> None:
        with self._lock:
            self.calls.append(name)

    def _dev(self, handle: FakeHandle, name: str) -> GpuProfile:
        self._record(name)
        index = handle.index
        with self._lock:
            self.gpu_calls.setdefault(index, []).append(name)
        if self.init_count <= self.shutdown_count:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_UNINITIALIZED)
        if self.lose_at.get(index) == name:
            self.lost.add(index)
        if index in self.lost:
            raise pynvml.NVMLError(GPU_IS_LOST)
        gpu = self.gpus[index]
        if name in gpu.errors:
            raise pynvml.NVMLError(gpu.errors[name])
        return gpu

    def _s(self, text: str) -> str | bytes:
        return text.encode() if self.bytes_strings else text

    @staticmethod
    def _need(value: Any) -> Any:
        if value is None:
            raise pynvml.NVMLError(NOT_SUPPORTED)
        return value

    def nvmlInit(self) -> None:
        self._record("nvmlInit")
        if self.init_error is not None:
            raise pynvml.NVMLError(self.init_error)
        self.init_count += 1

    def nvmlShutdown(self) -> None:
        self._record("nvmlShutdown")
        if self.init_count <= self.shutdown_count:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_UNINITIALIZED)
        self.shutdown_count += 1

    def nvmlSystemGetDriverVersion(self) -> str | bytes:
        self._record("nvmlSystemGetDriverVersion")
        return self._s(self.driver)

    def nvmlSystemGetCudaDriverVersion(self) -> int:
        self._record("nvmlSystemGetCudaDriverVersion")
        return self.cuda

    def nvmlDeviceGetCount(self) -> int:
        self._record("nvmlDeviceGetCount")
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> FakeHandle:
        self._record("nvmlDeviceGetHandleByIndex")
        if index in self.handle_errors:
            raise pynvml.NVMLError(self.handle_errors[index])
        if index in self.lost:
            raise pynvml.NVMLError(GPU_IS_LOST)
        if not 0 <= index < len(self.gpus):
            raise pynvml.NVMLError(INVALID_ARGUMENT)
        return FakeHandle(index)

    # identity
    def nvmlDeviceGetName(self, h: FakeHandle) -> str | bytes:
        return self._s(self._dev(h, "nvmlDeviceGetName").name)

    def nvmlDeviceGetUUID(self, h: FakeHandle) -> str | bytes:
        return self._s(self._need(self._dev(h, "nvmlDeviceGetUUID").uuid))

    def nvmlDeviceGetSerial(self, h: FakeHandle) -> str | bytes:
        return self._s(self._need(self._dev(h, "nvmlDeviceGetSerial").serial))

    def nvmlDeviceGetVbiosVersion(self, h: FakeHandle) -> str | bytes:
        return self._s(self._need(self._dev(h, "nvmlDeviceGetVbiosVersion").vbios))

    def nvmlDeviceGetPciInfo(self, h: FakeHandle) -> Any:
        gpu = self._dev(h, "nvmlDeviceGetPciInfo")
        info = pynvml.nvmlPciInfo_t()
        info.busId = gpu.bus_id.encode()
        info.busIdLegacy = gpu.bus_id.encode()
        return info

    def nvmlDeviceGetNumaNodeId(self, h: FakeHandle) -> int:
        return self._need(self._dev(h, "nvmlDeviceGetNumaNodeId").numa_node)

    # utilisation, memory, power, temperature, clocks
    def nvmlDeviceGetUtilizationRates(self, h: FakeHandle) -> Any:
        gpu = self._dev(h, "nvmlDeviceGetUtilizationRates")
        samples = self._need(gpu.utilization)
        n = sum(1 for c in self.calls if c == "nvmlDeviceGetUtilizationRates")
        g, m = samples[n % len(samples)]
        return pynvml.c_nvmlUtilization_t(gpu=g, memory=m)

    def nvmlDeviceGetMemoryInfo(self, h: FakeHandle) -> Any:
        gpu = self._dev(h, "nvmlDeviceGetMemoryInfo")
        total, used = gpu.memory_total_mib * 2**20, gpu.memory_used_mib * 2**20
        return pynvml.c_nvmlMemory_t(total=total, free=total - used, used=used)

    def nvmlDeviceGetPowerUsage(self, h: FakeHandle) -> int:
        return self._need(self._dev(h, "nvmlDeviceGetPowerUsage").power_mw)

    def nvmlDeviceGetEnforcedPowerLimit(self, h: FakeHandle) -> int:
        return self._need(self._dev(h, "nvmlDeviceGetEnforcedPowerLimit").power_limit_mw)

    def nvmlDeviceGetTemperatureV(self, h: FakeHandle, sensor: int) -> int:
        return self._need(self._dev(h, "nvmlDeviceGetTemperatureV").temperature_c)

    def nvmlDeviceGetTemperature(self, h: FakeHandle, sensor: int) -> int:
        return self._need(self._dev(h, "nvmlDeviceGetTemperature").temperature_c)

    def nvmlDeviceGetTemperatureThreshold(self, h: FakeHandle, threshold: int) -> int:
        gpu = self._dev(h, "nvmlDeviceGetTemperatureThreshold")
        if threshold == pynvml.NVML_TEMPERATURE_THRESHOLD_SLOWDOWN:
            return self._need(gpu.slowdown_c)
        if threshold == pynvml.NVML_TEMPERATURE_THRESHOLD_SHUTDOWN:
            return self._need(gpu.shutdown_c)
        if threshold == pynvml.NVML_TEMPERATURE_THRESHOLD_GPU_MAX:
            return self._need(gpu.max_operating_c)
        if threshold == pynvml.NVML_TEMPERATURE_THRESHOLD_MEM_MAX:
            return self._need(gpu.memory_max_c)
        if threshold == pynvml.NVML_TEMPERATURE_THRESHOLD_ACOUSTIC_CURR:
            return self._need(gpu.target_c)
        if threshold == pynvml.NVML_TEMPERATURE_THRESHOLD_ACOUSTIC_MIN:
            return self._need(gpu.target_range_c and gpu.target_range_c[0])
        if threshold == pynvml.NVML_TEMPERATURE_THRESHOLD_ACOUSTIC_MAX:
            return self._need(gpu.target_range_c and gpu.target_range_c[1])
        raise pynvml.NVMLError(INVALID_ARGUMENT)

    def nvmlDeviceGetPerformanceState(self, h: FakeHandle) -> int:
        return self._need(self._dev(h, "nvmlDeviceGetPerformanceState").pstate)

    def nvmlDeviceGetPowerState(self, h: FakeHandle) -> int:
        return self._need(self._dev(h, "nvmlDeviceGetPowerState").pstate)

    def nvmlDeviceGetCurrentClocksEventReasons(self, h: FakeHandle) -> int:
        gpu = self._dev(h, "nvmlDeviceGetCurrentClocksEventReasons")
        return self._need(gpu.clocks_event_mask)

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, h: FakeHandle) -> int:
        gpu = self._dev(h, "nvmlDeviceGetCurrentClocksThrottleReasons")
        return self._need(gpu.clocks_event_mask)

    def nvmlDeviceGetClockInfo(self, h: FakeHandle, clock: int) -> int:
        return self._need(self._dev(h, "nvmlDeviceGetClockInfo").sm_clock_mhz)

    def nvmlDeviceGetMaxClockInfo(self, h: FakeHandle, clock: int) -> int:
        return self._need(self._dev(h, "nvmlDeviceGetMaxClockInfo").sm_max_clock_mhz)

    def nvmlDeviceGetApplicationsClock(self, h: FakeHandle, clock: int) -> int:
        return self._need(self._dev(h, "nvmlDeviceGetApplicationsClock").app_clock_mhz)

    def nvmlDeviceGetDefaultApplicationsClock(self, h: FakeHandle, clock: int) -> int:
        gpu = self._dev(h, "nvmlDeviceGetDefaultApplicationsClock")
        return self._need(gpu.default_app_clock_mhz)

    def nvmlDeviceGetPowerManagementDefaultLimit(self, h: FakeHandle) -> int:
        gpu = self._dev(h, "nvmlDeviceGetPowerManagementDefaultLimit")
        return self._need(gpu.default_power_limit_mw)

    def nvmlDeviceGetFanSpeed(self, h: FakeHandle) -> int:
        return self._need(self._dev(h, "nvmlDeviceGetFanSpeed").fan_pct)

    # memory errors
    def nvmlDeviceGetEccMode(self, h: FakeHandle) -> list[int]:
        return list(self._need(self._dev(h, "nvmlDeviceGetEccMode").ecc_mode))

    def nvmlDeviceGetTotalEccErrors(self, h: FakeHandle, etype: int, counter: int) -> int:
        gpu = self._dev(h, "nvmlDeviceGetTotalEccErrors")
        self._need(gpu.ecc_mode)
        return gpu.ecc_counts.get((etype, counter), 0)

    def nvmlDeviceGetRetiredPages_v2(self, h: FakeHandle, cause: int) -> list[dict[str, int]]:
        pages = self._need(self._dev(h, "nvmlDeviceGetRetiredPages_v2").retired_pages)
        return [{"address": 0x1000 * i, "timestamp": 1700000000 + i} for i in range(pages[cause])]

    def nvmlDeviceGetRetiredPagesPendingStatus(self, h: FakeHandle) -> int:
        gpu = self._dev(h, "nvmlDeviceGetRetiredPagesPendingStatus")
        return self._need(gpu.retired_pending)

    def nvmlDeviceGetRemappedRows(self, h: FakeHandle) -> tuple[int, int, int, int]:
        return self._need(self._dev(h, "nvmlDeviceGetRemappedRows").remapped_rows)

    def nvmlDeviceGetSramEccErrorStatus(self, h: FakeHandle, status: Any) -> int:
        cor, parity, secded, threshold = self._need(
            self._dev(h, "nvmlDeviceGetSramEccErrorStatus").sram
        )
        out = status._obj  # ctypes.byref(...) of the caller's struct
        out.aggregateCor, out.aggregateUncParity, out.aggregateUncSecDed = cor, parity, secded
        out.bThresholdExceeded = threshold
        return 0

    def nvmlDeviceGetGpuFabricInfoV(self, h: FakeHandle, info: Any) -> int:
        state, status, health = self._need(self._dev(h, "nvmlDeviceGetGpuFabricInfoV").fabric)
        out = info._obj
        out.state, out.status, out.healthSummary = state, status, health
        return 0

    # PCIe and modes
    def _pcie(self, h: FakeHandle, name: str, i: int) -> int:
        return self._need(self._dev(h, name).pcie)[i]

    def nvmlDeviceGetCurrPcieLinkGeneration(self, h: FakeHandle) -> int:
        return self._pcie(h, "nvmlDeviceGetCurrPcieLinkGeneration", 0)

    def nvmlDeviceGetMaxPcieLinkGeneration(self, h: FakeHandle) -> int:
        return self._pcie(h, "nvmlDeviceGetMaxPcieLinkGeneration", 1)

    def nvmlDeviceGetCurrPcieLinkWidth(self, h: FakeHandle) -> int:
        return self._pcie(h, "nvmlDeviceGetCurrPcieLinkWidth", 2)

    def nvmlDeviceGetMaxPcieLinkWidth(self, h: FakeHandle) -> int:
        return self._pcie(h, "nvmlDeviceGetMaxPcieLinkWidth", 3)

    def nvmlDeviceGetPcieReplayCounter(self, h: FakeHandle) -> int:
        return self._need(self._dev(h, "nvmlDeviceGetPcieReplayCounter").pcie_replays)

    def nvmlDeviceGetPersistenceMode(self, h: FakeHandle) -> int:
        return self._need(self._dev(h, "nvmlDeviceGetPersistenceMode").persistence)

    def nvmlDeviceGetMigMode(self, h: FakeHandle) -> list[int]:
        return list(self._need(self._dev(h, "nvmlDeviceGetMigMode").mig_mode))

    def nvmlDeviceGetComputeMode(self, h: FakeHandle) -> int:
        return self._need(self._dev(h, "nvmlDeviceGetComputeMode").compute_mode)

    # processes
    def _procs(self, h: FakeHandle, name: str) -> list[SimpleNamespace]:
        procs = self._need(self._dev(h, name).processes)
        return [
            SimpleNamespace(
                pid=pid, usedGpuMemory=used, gpuInstanceId=0xFFFFFFFF, computeInstanceId=0xFFFFFFFF
            )
            for pid, used in procs
        ]

    def nvmlDeviceGetComputeRunningProcesses_v3(self, h: FakeHandle) -> list[SimpleNamespace]:
        return self._procs(h, "nvmlDeviceGetComputeRunningProcesses_v3")

    def nvmlDeviceGetComputeRunningProcesses_v2(self, h: FakeHandle) -> list[SimpleNamespace]:
        return self._procs(h, "nvmlDeviceGetComputeRunningProcesses_v2")

    def nvmlDeviceGetComputeRunningProcesses(self, h: FakeHandle) -> list[SimpleNamespace]:
        return self._procs(h, "nvmlDeviceGetComputeRunningProcesses")

    # NVLink
    def _link(self, h: FakeHandle, name: str, link: int) -> FakeLink:
        links = self._need(self._dev(h, name).nvlinks)
        if not 0 <= link < len(links):
            raise pynvml.NVMLError(INVALID_ARGUMENT)
        return links[link]

    def nvmlDeviceGetNvLinkState(self, h: FakeHandle, link: int) -> int:
        return int(self._link(h, "nvmlDeviceGetNvLinkState", link).active)

    def nvmlDeviceGetNvLinkRemotePciInfo(self, h: FakeHandle, link: int) -> Any:
        lk = self._link(h, "nvmlDeviceGetNvLinkRemotePciInfo", link)
        if lk.remote_bus is None:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        info = pynvml.nvmlPciInfo_t()
        info.busId = lk.remote_bus.encode()
        return info

    def nvmlDeviceGetNvLinkRemoteDeviceType(self, h: FakeHandle, link: int) -> int:
        lk = self._link(h, "nvmlDeviceGetNvLinkRemoteDeviceType", link)
        if lk.remote_bus is None:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return lk.remote_type

    def nvmlDeviceGetNvLinkErrorCounter(self, h: FakeHandle, link: int, counter: int) -> int:
        lk = self._link(h, "nvmlDeviceGetNvLinkErrorCounter", link)
        return {
            pynvml.NVML_NVLINK_ERROR_DL_REPLAY: lk.replay,
            pynvml.NVML_NVLINK_ERROR_DL_RECOVERY: lk.recovery,
            pynvml.NVML_NVLINK_ERROR_DL_CRC_FLIT: lk.crc_flit,
        }[counter]

    # field values
    def nvmlDeviceGetFieldValues(self, h: FakeHandle, field_ids: list[Any]) -> Any:
        gpu = self._dev(h, "nvmlDeviceGetFieldValues")
        values = (pynvml.c_nvmlFieldValue_t * len(field_ids))()
        for i, fid in enumerate(field_ids):
            fid, scope = fid if isinstance(fid, tuple) else (fid, 0)
            v = values[i]
            v.fieldId, v.scopeId = fid, scope
            v.valueType = pynvml.NVML_VALUE_TYPE_UNSIGNED_INT
            result = self._field(gpu, fid, scope)
            if isinstance(result, _FieldError):
                v.nvmlReturn = result.code
            else:
                v.nvmlReturn = pynvml.NVML_SUCCESS
                v.value.uiVal = result
        return values

    def _field(self, gpu: GpuProfile, fid: int, scope: int) -> int | _FieldError:
        if fid in gpu.field_errors:
            return _FieldError(gpu.field_errors[fid])
        value: int | None
        if fid == FI_MEMORY_TEMP:
            value = gpu.memory_temperature_c
        elif fid == FI_NVLINK_LINK_COUNT:
            value = None if gpu.nvlinks is None else len(gpu.nvlinks)
        elif fid == FI_NVLINK_GET_SPEED:
            if gpu.nvlinks is None:
                value = None
            elif scope >= len(gpu.nvlinks):
                return _FieldError(INVALID_ARGUMENT)
            else:
                value = gpu.nvlinks[scope].speed_mbps
        elif fid == FI_GPU_RECOVERY_ACTION:
            value = gpu.recovery_action
        else:
            return _FieldError(INVALID_ARGUMENT)
        return _FieldError(NOT_SUPPORTED) if value is None else value


@dataclass(frozen=True)
class _FieldError:
    code: int
