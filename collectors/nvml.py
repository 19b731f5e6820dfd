"""The one NVML wrapper: GPUs, their compute processes and NVLinks, read through nvidia-ml-py.

Every NVML call goes through :meth:`_Query.call`, which turns an NVML error into a
per-field unavailability (``not_supported``, ``no_permission``, ``gpu_lost``, ``error``)
instead of an exception: a GPU that answers half the questions, or falls off the bus
half way, is evidence, not a crash. Only a library that cannot start at all makes the
whole collector unavailable.

All GPUs are queried in parallel (NVML is thread-safe for ordinary calls), and their
utilisation is sampled over the same window, so collection takes about one window
whatever the GPU count.
"""

from __future__ import annotations

import contextlib
import ctypes
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from gpu_triage.collectors.base import CollectContext, CollectorUnavailable
from gpu_triage.collectors.pci import normalize_pci
from gpu_triage.model.facts import (
    THROTTLE_REASONS,
    DriverFacts,
    ErrorTextEvent,
    FactModel,
    Facts,
    GpuFacts,
    GpuProcess,
    HostFacts,
    NvlinkFacts,
    NvmlInit,
    RecoveryAction,
    Unavailable,
    UnavailableReason,
)

# NVML return codes (nvml.h); stable ABI values, read from the binding when it has them.
_CODES: dict[str, int] = {
    "NOT_SUPPORTED": 3,
    "NO_PERMISSION": 4,
    "INVALID_ARGUMENT": 2,
    "DRIVER_NOT_LOADED": 9,
    "LIBRARY_NOT_FOUND": 12,
    "FUNCTION_NOT_FOUND": 13,
    "GPU_IS_LOST": 15,
    "LIB_RM_VERSION_MISMATCH": 18,
    "UNINITIALIZED": 1,
    "UNKNOWN": 999,
}

# NVML init error -> the state rules read as driver.nvml_init, and the error-text cause
# the same failure has when a responder pastes nvidia-smi's message.
_INIT_STATES: dict[str, NvmlInit] = {
    "LIB_RM_VERSION_MISMATCH": NvmlInit.VERSION_MISMATCH,
    "DRIVER_NOT_LOADED": NvmlInit.DRIVER_NOT_LOADED,
    "NO_PERMISSION": NvmlInit.NO_PERMISSION,
    "LIBRARY_NOT_FOUND": NvmlInit.LIBRARY_NOT_FOUND,
    "UNKNOWN": NvmlInit.UNKNOWN_ERROR,
    "GPU_IS_LOST": NvmlInit.GPU_LOST,
}
_INIT_CAUSES: dict[NvmlInit, str] = {
    NvmlInit.VERSION_MISMATCH: "driver_library_mismatch",
    NvmlInit.DRIVER_NOT_LOADED: "driver_not_loaded",
    NvmlInit.NO_PERMISSION: "nvml_no_permission",
    NvmlInit.LIBRARY_NOT_FOUND: "nvml_library_missing",
    NvmlInit.UNKNOWN_ERROR: "nvml_unknown_error",
    NvmlInit.GPU_LOST: "gpu_unreachable",
}


def record_init_failure(facts: Facts, state: NvmlInit, message: str) -> None:
    """NVML did not start: the state as a driver fact, and the same error event a pasted
    nvidia-smi error would give, so one rule covers the live node and the paste."""
    facts.driver = DriverFacts(nvml_init=state, nvml_error=message, source="nvml")
    cause = _INIT_CAUSES.get(state)
    if cause is not None:
        facts.errors = [_init_event(f"nvml-init-{state.value}", cause, f"nvmlInit: {message}")]


def _init_event(signature: str, cause: str, message: str) -> ErrorTextEvent:
    return ErrorTextEvent(
        signature=signature,
        cause=cause,
        component="driver",
        verified=True,
        message=message,
        raw=message,
        count=1,
        source="nvml",
    )


def _library_version(text: str) -> str:
    """NVML's own version is the driver's with a leading API number: ``12.550.54.15``."""
    parts = text.split(".")
    return ".".join(parts[1:]) if len(parts) >= 3 and len(parts[0]) <= 2 else text


_INIT_UNAVAILABLE: dict[str, str] = {
    "LIBRARY_NOT_FOUND": "NVML library not found (no NVIDIA driver installed)",
    "DRIVER_NOT_LOADED": "NVIDIA driver not loaded (NVML: Driver Not Loaded); "
    "the kernel module is absent or failed to load",
    "NO_PERMISSION": "no permission to use NVML (check access to /dev/nvidia*)",
    "LIB_RM_VERSION_MISMATCH": "NVML and kernel driver versions differ "
    "(driver upgraded without reloading the kernel module): reboot or reload nvidia modules",
}

# Field ids (nvml.h NVML_FI_*), used when the binding lacks the constant name.
_FI_MEMORY_TEMP = 82
_FI_NVLINK_LINK_COUNT = 91
_FI_NVLINK_GET_SPEED = 164
_FI_GPU_RECOVERY_ACTION = 230
# nvmlGpuFabricState_t and NVML_GPU_FABRIC_HEALTH_SUMMARY_*
_FABRIC_STATES = {0: "not_supported", 1: "not_started", 2: "in_progress", 3: "completed"}
_FABRIC_HEALTH = {0: "not_supported", 1: "healthy", 2: "unhealthy", 3: "limited_capacity"}

_RECOVERY_ACTIONS: dict[int, RecoveryAction] = {
    0: RecoveryAction.NONE,
    1: RecoveryAction.GPU_RESET,
    2: RecoveryAction.NODE_REBOOT,
    3: RecoveryAction.DRAIN_P2P,
    4: RecoveryAction.DRAIN_AND_RESET,
    5: RecoveryAction.RECOVER_IMEX_DOMAIN,
    6: RecoveryAction.BUS_RESET,
    7: RecoveryAction.SYSTEM_REBOOT,
}

_COMPUTE_MODES: dict[int, str] = {
    0: "default",
    1: "exclusive_thread",
    2: "prohibited",
    3: "exclusive_process",
}

_THROTTLE_FIELDS = [f"throttle_{name}" for name in THROTTLE_REASONS]
# Fields a handle failure or a lost GPU leaves unknown (everything but identity bookkeeping).
_GPU_VALUE_FIELDS = [
    n for n in GpuFacts.model_fields if n not in {"unavailable", "source", "index", "lost"}
]


def normalize_bus_id(text: str | bytes) -> str | None:
    """``00000000:3B:00.0`` (NVML), ``0000:3b:00`` (Xid) -> ``0000:3b:00.0``; None if not one."""
    return normalize_pci(text, anywhere=False)


def cuda_version_text(value: int) -> str:
    """NVML's CUDA driver version integer (12040) as ``12.4``."""
    return f"{value // 1000}.{(value % 1000) // 10}"


def _text(value: Any) -> str:
    # Older bindings return bytes for strings.
    return value.decode("utf-8", errors="replace") if isinstance(value, bytes) else str(value)


_MISSING: Any = object()


class _GpuLost(Exception):
    """Raised inside a GPU's worker once NVML says the GPU is lost: stop querying it."""


@dataclass
class _Query:
    """Calls NVML for one GPU and records, per field, why a value is missing."""

    nv: Any
    gpu: GpuFacts
    handle: Any = None
    codes: dict[str, int] = field(default_factory=dict)

    def code(self, name: str) -> int:
        return self.codes[name]

    def reason_for(self, code: int | None) -> UnavailableReason:
        if code in (self.code("NOT_SUPPORTED"), self.code("FUNCTION_NOT_FOUND")):
            return UnavailableReason.NOT_SUPPORTED
        if code == self.code("NO_PERMISSION"):
            return UnavailableReason.NO_PERMISSION
        if code == self.code("GPU_IS_LOST"):
            return UnavailableReason.GPU_LOST
        return UnavailableReason.ERROR

    def mark(
        self, target: FactModel, fields: Sequence[str], reason: UnavailableReason, detail: str
    ) -> None:
        for name in fields:
            target.mark_unavailable(name, reason, detail)
        if reason is UnavailableReason.GPU_LOST:
            self.gpu.lost = True
            raise _GpuLost(detail)

    def call(
        self,
        target: FactModel,
        fields: Sequence[str],
        names: Sequence[str],
        *args: Any,
        mark: bool = True,
    ) -> Any:
        """Call the first of ``names`` that binding and driver both have.

        Returns the value, or ``_MISSING`` after marking ``fields`` of ``target``
        unavailable. A newer name missing from an older binding (AttributeError) or
        driver (FunctionNotFound) falls through to the next, deprecated, name.
        """
        detail = ""
        for name in names:
            fn = getattr(self.nv, name, None)
            if fn is None:
                detail = f"{name}: not in this nvidia-ml-py"
                continue
            try:
                return fn(*args)
            except self.nv.NVMLError as exc:
                code = getattr(exc, "value", None)
                detail = f"{name}: {exc}"
                if code == self.code("FUNCTION_NOT_FOUND"):
                    continue
                reason = self.reason_for(code)
                if mark or reason is UnavailableReason.GPU_LOST:
                    self.mark(target, fields, reason, detail)
                return _MISSING
        if mark:
            self.mark(target, fields, UnavailableReason.NOT_SUPPORTED, detail)
        return _MISSING

    def fields(self, wanted: Sequence[tuple[FactModel, str, int | tuple[int, int]]]) -> list[Any]:
        """Read NVML field values in one batch; each entry is (target, field name, field id)."""
        if not wanted:
            return []
        ids = [fid for _, _, fid in wanted]
        fn = getattr(self.nv, "nvmlDeviceGetFieldValues", None)
        if fn is None:
            for target, name, _ in wanted:
                target.mark_unavailable(
                    name,
                    UnavailableReason.NOT_SUPPORTED,
                    "nvmlDeviceGetFieldValues: not in this nvidia-ml-py",
                )
            return [_MISSING] * len(wanted)
        try:
            values = fn(self.handle, ids)
        except self.nv.NVMLError as exc:
            # The batch call itself failed: every field shares its reason.
            reason = self.reason_for(getattr(exc, "value", None))
            for target, name, _ in wanted:
                target.mark_unavailable(name, reason, f"nvmlDeviceGetFieldValues: {exc}")
            if reason is UnavailableReason.GPU_LOST:
                self.gpu.lost = True
                raise _GpuLost(f"nvmlDeviceGetFieldValues: {exc}") from None
            return [_MISSING] * len(wanted)
        out: list[Any] = []
        lost_detail = ""
        for (target, name, fid), value in zip(wanted, values, strict=False):
            ret = int(getattr(value, "nvmlReturn", 0))
            if ret != 0:
                reason = (
                    UnavailableReason.NOT_SUPPORTED
                    if ret == self.code("INVALID_ARGUMENT")
                    else self.reason_for(ret)
                )
                target.mark_unavailable(name, reason, f"field {fid}: {_error_text(self.nv, ret)}")
                if reason is UnavailableReason.GPU_LOST:
                    lost_detail = f"field {fid}: GPU is lost"
                out.append(_MISSING)
                continue
            out.append(_field_value(value))
        if lost_detail:
            self.gpu.lost = True
            raise _GpuLost(lost_detail)
        return out


def _versioned_struct(
    q: _Query, fields: list[str], struct: str, version: str, function: str, what: str
) -> Any:
    """Fill one of NVML's versioned structs (``struct.version`` set first) for the GPU,
    or mark ``fields`` and return None: an nvidia-ml-py too old to know the struct is
    "not supported", a failed call is marked by the query as any other."""
    struct_t = getattr(q.nv, struct, None)
    if struct_t is None:
        q.mark(q.gpu, fields, UnavailableReason.NOT_SUPPORTED, f"{what}: not in this nvidia-ml-py")
        return None
    value = struct_t()
    value.version = getattr(q.nv, version, 0)
    got = q.call(q.gpu, fields, [function], q.handle, ctypes.byref(value))
    return None if got is _MISSING else value


def _error_text(nv: Any, code: int) -> str:
    try:
        return str(nv.NVMLError(code))
    except Exception:  # noqa: BLE001 - only for a message; the code still says what failed
        return f"NVML error {code}"


def _field_value(value: Any) -> float | int:
    union = value.value
    vtype = int(getattr(value, "valueType", 1))
    attr = {
        0: "dVal",
        1: "uiVal",
        2: "ulVal",
        3: "ullVal",
        4: "sllVal",
        5: "siVal",
        6: "usVal",
    }.get(vtype, "uiVal")
    return getattr(union, attr)


class NvmlCollector:
    """GPUs, compute processes and NVLinks from NVML (nvidia-ml-py, module ``pynvml``)."""

    name = "nvml"
    kinds: tuple[str, ...] = ("gpu", "process", "nvlink", "host", "driver", "error")

    def __init__(self, nvml_module: ModuleType | Any | None = None) -> None:
        # Injectable so tests pass a FakeNvml; the real module is imported lazily in collect.
        self._nv = nvml_module

    # ------------------------------------------------------------------ entry point

    def collect(self, ctx: CollectContext, facts: Facts) -> None:
        nv = self._nv
        if nv is None:
            try:
                import pynvml  # lazy: only this collector needs the binding

                nv = pynvml
            except ImportError as exc:
                raise CollectorUnavailable(f"nvidia-ml-py is not installed ({exc})") from None
        codes = {k: int(getattr(nv, f"NVML_ERROR_{k}", v)) for k, v in _CODES.items()}
        try:
            nv.nvmlInit()
        except nv.NVMLError as exc:
            # How NVML failed to start is evidence the rules read (the driver/library
            # mismatch, a module not loaded), not only a reason to stop collecting.
            code = getattr(exc, "value", None)
            state = next(
                (s for key, s in _INIT_STATES.items() if code == codes.get(key)), NvmlInit.ERROR
            )
            record_init_failure(facts, state, str(exc))
            for key, message in _INIT_UNAVAILABLE.items():
                if code == codes[key]:
                    raise CollectorUnavailable(message) from None
            raise
        try:
            self._collect(nv, codes, ctx, facts)
        finally:
            # Shutting down cannot change what was collected; never let it mask an error.
            with contextlib.suppress(nv.NVMLError):
                nv.nvmlShutdown()

    # ------------------------------------------------------------------ whole node

    def _collect(self, nv: Any, codes: dict[str, int], ctx: CollectContext, facts: Facts) -> None:
        system = GpuFacts()
        sq = _Query(nv, system, codes=codes)
        driver = sq.call(system, ["driver_version"], ["nvmlSystemGetDriverVersion"])
        cuda = sq.call(
            system,
            ["cuda_version"],
            ["nvmlSystemGetCudaDriverVersion_v2", "nvmlSystemGetCudaDriverVersion"],
        )
        system_values: dict[str, Any] = {
            "driver_version": None if driver is _MISSING else _text(driver),
            "cuda_version": None if cuda is _MISSING else cuda_version_text(int(cuda)),
        }
        count = int(nv.nvmlDeviceGetCount())
        library = sq.call(system, ["library_version"], ["nvmlSystemGetNVMLVersion"], mark=False)
        facts.driver = DriverFacts(
            nvml_init=NvmlInit.OK if count else NvmlInit.NO_DEVICES,
            library_version=None if library is _MISSING else _library_version(_text(library)),
            source="nvml",
        )
        if not count:
            # nvidia-smi says "No devices were found" for this state.
            facts.errors = [_init_event("nvml-no-devices", "no_devices", "No devices were found")]
        # What the driver sees, for the node: compared with the GPUs on the PCI bus
        # (host collector) and the site inventory by the readiness rules.
        facts.host = HostFacts(
            gpu_count_visible=count,
            source="nvml",
            **{k: v for k, v in system_values.items() if v is not None},
        )
        window_end = time.monotonic() + max(ctx.window_s, 0.0)
        results: list[_GpuResult] = []
        if count:
            with ThreadPoolExecutor(max_workers=count, thread_name_prefix="nvml-gpu") as pool:
                futures = [
                    pool.submit(
                        self._gpu,
                        nv,
                        codes,
                        ctx,
                        index,
                        window_end,
                        system_values,
                        system.unavailable,
                    )
                    for index in range(count)
                ]
                results = [f.result() for f in futures]
        for res in results:
            # Calls that failed with an unexplained error (not "not supported"): a GPU
            # that answers some queries with errors is a finding of its own.
            if not res.gpu.lost:
                res.gpu.query_errors = sum(
                    1 for u in res.gpu.unavailable.values() if u.reason is UnavailableReason.ERROR
                )
            facts.gpus.append(res.gpu)
            facts.processes.extend(res.processes)
            facts.errors.extend(res.errors)
            facts.nvlinks.extend(res.nvlinks)

    # ------------------------------------------------------------------ one GPU

    def _gpu(
        self,
        nv: Any,
        codes: dict[str, int],
        ctx: CollectContext,
        index: int,
        window_end: float,
        system_values: dict[str, Any],
        system_unavailable: dict[str, Any],
    ) -> _GpuResult:
        gpu = GpuFacts(index=index, source="nvml")
        res = _GpuResult(gpu)
        for name, value in system_values.items():
            if value is not None:
                setattr(gpu, name, value)
            elif name in system_unavailable:
                gpu.unavailable[name] = system_unavailable[name]
        try:
            handle = nv.nvmlDeviceGetHandleByIndex(index)
        except nv.NVMLError as exc:
            # INSUFFICIENT_POWER, NO_PERMISSION, IRQ_ISSUE, GPU_IS_LOST: the GPU exists but
            # cannot be opened, itself a triage fact.
            q = _Query(nv, gpu, codes=codes)
            reason = q.reason_for(getattr(exc, "value", None))
            if reason is UnavailableReason.GPU_LOST:
                gpu.lost = True
            detail = f"nvmlDeviceGetHandleByIndex({index}): {exc}"
            for name in _GPU_VALUE_FIELDS:
                if name not in gpu.unavailable and getattr(gpu, name) is None:
                    gpu.mark_unavailable(name, reason, detail)
            return res
        q = _Query(nv, gpu, handle, codes)
        try:
            self._identity(q)
            self._sample_utilisation(q, window_end)
            self._state(q)
            self._memory_errors(q)
            self._sram(q)
            self._fabric(q)
            self._pcie_and_modes(q)
            self._processes(q, ctx, res)
            self._nvlinks(q, res)
        except _GpuLost as lost:
            # Keep what was gathered; everything not read yet is unknown for the same reason.
            detail = f"GPU lost before this was read ({lost})"
            for name in _GPU_VALUE_FIELDS:
                if name not in gpu.unavailable and getattr(gpu, name) is None:
                    gpu.unavailable[name] = _unavailable(UnavailableReason.GPU_LOST, detail)
        if gpu.lost is None:
            gpu.lost = False
        return res

    def _identity(self, q: _Query) -> None:
        g, h = q.gpu, q.handle
        for fname, call in (
            ("name", "nvmlDeviceGetName"),
            ("uuid", "nvmlDeviceGetUUID"),
            ("serial", "nvmlDeviceGetSerial"),
            ("vbios_version", "nvmlDeviceGetVbiosVersion"),
        ):
            v = q.call(g, [fname], [call], h)
            if v is not _MISSING:
                setattr(g, fname, _text(v).strip())
        pci = q.call(g, ["pci_bus_id"], ["nvmlDeviceGetPciInfo"], h)
        if pci is not _MISSING:
            raw = _text(getattr(pci, "busId", b"") or getattr(pci, "busIdLegacy", b""))
            g.pci_bus_id = normalize_bus_id(raw)
            if g.pci_bus_id is None:
                g.mark_unavailable(
                    "pci_bus_id", UnavailableReason.ERROR, f"unparsable PCI bus id {raw!r}"
                )
        numa = q.call(g, ["numa_node"], ["nvmlDeviceGetNumaNodeId"], h)
        if numa is not _MISSING:
            g.numa_node = int(numa)

    def _sample_utilisation(self, q: _Query, window_end: float) -> None:
        """Average utilisation over the window; every GPU samples the same window."""
        fields = ["utilization_gpu_pct", "utilization_memory_pct"]
        interval = min(max((window_end - time.monotonic()) / 10, 0.02), 0.5)
        gpu_samples: list[float] = []
        mem_samples: list[float] = []
        while True:
            rates = q.call(
                q.gpu, fields, ["nvmlDeviceGetUtilizationRates"], q.handle, mark=not gpu_samples
            )
            if rates is _MISSING:
                break  # NotSupported (MIG) or a failure: keep the samples taken so far
            gpu_samples.append(float(rates.gpu))
            mem_samples.append(float(rates.memory))
            if time.monotonic() + interval > window_end:
                break
            time.sleep(interval)
        remaining = window_end - time.monotonic()
        if remaining > 0 and not gpu_samples:
            # Nothing to sample on this GPU: still end with the window so instantaneous
            # readings (power, clocks) are taken at the same time on every GPU.
            time.sleep(remaining)
        if gpu_samples:
            q.gpu.utilization_gpu_pct = round(sum(gpu_samples) / len(gpu_samples), 2)
            q.gpu.utilization_memory_pct = round(sum(mem_samples) / len(mem_samples), 2)

    def _state(self, q: _Query) -> None:
        g, h, nv = q.gpu, q.handle, q.nv
        mem = q.call(g, ["memory_used_mib", "memory_total_mib"], ["nvmlDeviceGetMemoryInfo"], h)
        if mem is not _MISSING:
            g.memory_used_mib = round(mem.used / 2**20, 2)
            g.memory_total_mib = round(mem.total / 2**20, 2)
        _set(q, "power_draw_w", ["nvmlDeviceGetPowerUsage"], (h,), lambda v: v / 1000.0)
        _set(q, "power_limit_w", ["nvmlDeviceGetEnforcedPowerLimit"], (h,), lambda v: v / 1000.0)
        _set(
            q,
            "power_limit_default_w",
            ["nvmlDeviceGetPowerManagementDefaultLimit"],
            (h,),
            lambda v: v / 1000.0,
        )
        sensor = getattr(nv, "NVML_TEMPERATURE_GPU", 0)
        # TemperatureV is the new API; old drivers/bindings only have the deprecated call.
        temp = q.call(
            g,
            ["temperature_gpu_c"],
            ["nvmlDeviceGetTemperatureV", "nvmlDeviceGetTemperature"],
            h,
            sensor,
        )
        if temp is not _MISSING:
            g.temperature_gpu_c = float(temp)
        _set(
            q,
            "temperature_slowdown_c",
            ["nvmlDeviceGetTemperatureThreshold"],
            (h, getattr(nv, "NVML_TEMPERATURE_THRESHOLD_SLOWDOWN", 1)),
            float,
        )
        _set(
            q,
            "temperature_shutdown_c",
            ["nvmlDeviceGetTemperatureThreshold"],
            (h, getattr(nv, "NVML_TEMPERATURE_THRESHOLD_SHUTDOWN", 0)),
            float,
        )
        for fname, const in _THRESHOLDS:
            # Newer thresholds (GPU_MAX, MEM_MAX, the acoustic target) are missing from
            # old bindings: the constant is looked up, never assumed.
            code = getattr(nv, const, None)
            if code is None:
                g.mark_unavailable(
                    fname, UnavailableReason.NOT_SUPPORTED, f"{const}: not in this nvidia-ml-py"
                )
                continue
            _set(q, fname, ["nvmlDeviceGetTemperatureThreshold"], (h, code), float)
        _set(
            q,
            "temperature_memory_max_c",
            ["nvmlDeviceGetTemperatureThreshold"],
            (h, getattr(nv, "NVML_TEMPERATURE_THRESHOLD_MEM_MAX", 2)),
            float,
        )
        _set(
            q,
            "performance_state",
            ["nvmlDeviceGetPerformanceState", "nvmlDeviceGetPowerState"],
            (h,),
            int,
        )
        mask = q.call(
            g,
            _THROTTLE_FIELDS,
            ["nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons"],
            h,
        )
        if mask is not _MISSING:
            g.set_throttle_mask(int(mask))
        clock_sm = getattr(nv, "NVML_CLOCK_SM", 1)
        _set(q, "clocks_sm_mhz", ["nvmlDeviceGetClockInfo"], (h, clock_sm), float)
        _set(q, "clocks_sm_max_mhz", ["nvmlDeviceGetMaxClockInfo"], (h, clock_sm), float)
        graphics = getattr(nv, "NVML_CLOCK_GRAPHICS", 0)
        _set(
            q,
            "clocks_applications_graphics_mhz",
            ["nvmlDeviceGetApplicationsClock"],
            (h, graphics),
            float,
        )
        _set(
            q,
            "clocks_default_applications_graphics_mhz",
            ["nvmlDeviceGetDefaultApplicationsClock"],
            (h, graphics),
            float,
        )
        _set(q, "fan_speed_pct", ["nvmlDeviceGetFanSpeed"], (h,), float)
        mem_temp_fid = getattr(nv, "NVML_FI_DEV_MEMORY_TEMP", _FI_MEMORY_TEMP)
        wanted: list[tuple[FactModel, str, int | tuple[int, int]]] = [
            (g, "temperature_memory_c", mem_temp_fid)
        ]
        recovery_fid = getattr(nv, "NVML_FI_DEV_GET_GPU_RECOVERY_ACTION", None)
        if recovery_fid is None:
            g.mark_unavailable(
                "recovery_action",
                UnavailableReason.NOT_SUPPORTED,
                "NVML_FI_DEV_GET_GPU_RECOVERY_ACTION: not in this nvidia-ml-py",
            )
        else:
            wanted.append((g, "recovery_action", int(recovery_fid)))
        values = q.fields(wanted)
        if values[0] is not _MISSING:
            g.temperature_memory_c = float(values[0])
        if len(values) > 1 and values[1] is not _MISSING:
            action = _RECOVERY_ACTIONS.get(int(values[1]))
            if action is None:
                g.mark_unavailable(
                    "recovery_action",
                    UnavailableReason.ERROR,
                    f"unknown NVML recovery action {int(values[1])}",
                )
            else:
                g.recovery_action = action

    def _memory_errors(self, q: _Query) -> None:
        g, h, nv = q.gpu, q.handle, q.nv
        ecc_fields = [
            "ecc_volatile_corrected",
            "ecc_volatile_uncorrected",
            "ecc_aggregate_corrected",
            "ecc_aggregate_uncorrected",
        ]
        mode = q.call(g, ["ecc_enabled"], ["nvmlDeviceGetEccMode"], h)
        if mode is not _MISSING:
            g.ecc_enabled = bool(mode[0])
        if g.ecc_enabled is False:
            # NVML counts only with ECC on; off means "not counted", not "zero errors".
            for name in ecc_fields:
                g.mark_unavailable(name, UnavailableReason.NOT_SUPPORTED, "ECC is disabled")
        elif g.ecc_enabled is None:
            why = g.unavailable["ecc_enabled"]
            for name in ecc_fields:
                g.unavailable[name] = why
        else:
            corrected = getattr(nv, "NVML_MEMORY_ERROR_TYPE_CORRECTED", 0)
            uncorrected = getattr(nv, "NVML_MEMORY_ERROR_TYPE_UNCORRECTED", 1)
            volatile = getattr(nv, "NVML_VOLATILE_ECC", 0)
            aggregate = getattr(nv, "NVML_AGGREGATE_ECC", 1)
            for name, etype, counter in (
                ("ecc_volatile_corrected", corrected, volatile),
                ("ecc_volatile_uncorrected", uncorrected, volatile),
                ("ecc_aggregate_corrected", corrected, aggregate),
                ("ecc_aggregate_uncorrected", uncorrected, aggregate),
            ):
                _set(q, name, ["nvmlDeviceGetTotalEccErrors"], (h, etype, counter), int)
        sbe = getattr(nv, "NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS", 0)
        dbe = getattr(nv, "NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR", 1)
        _set(
            q,
            "retired_pages_sbe",
            ["nvmlDeviceGetRetiredPages_v2", "nvmlDeviceGetRetiredPages"],
            (h, sbe),
            len,
        )
        _set(
            q,
            "retired_pages_dbe",
            ["nvmlDeviceGetRetiredPages_v2", "nvmlDeviceGetRetiredPages"],
            (h, dbe),
            len,
        )
        _set(q, "retired_pages_pending", ["nvmlDeviceGetRetiredPagesPendingStatus"], (h,), bool)
        rows_fields = [
            "remapped_rows_correctable",
            "remapped_rows_uncorrectable",
            "remapped_rows_pending",
            "remapped_rows_failure",
        ]
        rows = q.call(g, rows_fields, ["nvmlDeviceGetRemappedRows"], h)
        if rows is not _MISSING:
            corr, unc, pending, failure = rows
            g.remapped_rows_correctable = int(corr)
            g.remapped_rows_uncorrectable = int(unc)
            g.remapped_rows_pending = bool(pending)
            g.remapped_rows_failure = bool(failure)

    def _sram(self, q: _Query) -> None:
        """SRAM ECC counters and NVIDIA's SRAM threshold flag (R550+, Ampere and later)."""
        g = q.gpu
        fields = ["sram_corrected", "sram_uncorrected", "sram_threshold_exceeded"]
        status = _versioned_struct(
            q,
            fields,
            "c_nvmlEccSramErrorStatus_v1_t",
            "nvmlEccSramErrorStatus_v1",
            "nvmlDeviceGetSramEccErrorStatus",
            "SRAM status",
        )
        if status is None:
            return
        g.sram_corrected = int(status.aggregateCor)
        g.sram_uncorrected = int(status.aggregateUncParity) + int(status.aggregateUncSecDed)
        g.sram_threshold_exceeded = bool(status.bThresholdExceeded)

    def _fabric(self, q: _Query) -> None:
        """NVLink fabric registration (NVSwitch / multi-node NVLink systems) and its health."""
        g, nv = q.gpu, q.nv
        fields = ["fabric_state", "fabric_status", "fabric_health"]
        info = _versioned_struct(
            q,
            fields,
            "c_nvmlGpuFabricInfo_v3_t",
            "nvmlGpuFabricInfo_v3",
            "nvmlDeviceGetGpuFabricInfoV",
            "fabric info",
        )
        if info is None:
            return
        state = _FABRIC_STATES.get(int(info.state))
        if state is None or state == "not_supported":
            reason = UnavailableReason.NOT_SUPPORTED if state else UnavailableReason.ERROR
            q.mark(g, fields, reason, f"fabric state {int(info.state)}")
            return
        g.fabric_state = state
        if state == "completed":
            code = int(info.status)
            g.fabric_status = "success" if code == 0 else _error_text(nv, code)
        else:
            g.mark_unavailable("fabric_status", UnavailableReason.NOT_SUPPORTED, f"state {state}")
        health = _FABRIC_HEALTH.get(int(info.healthSummary))
        if health is None or health == "not_supported":
            g.mark_unavailable(
                "fabric_health", UnavailableReason.NOT_SUPPORTED, "no health summary"
            )
        else:
            g.fabric_health = health

    def _pcie_and_modes(self, q: _Query) -> None:
        g, h = q.gpu, q.handle
        _set(q, "pcie_link_gen", ["nvmlDeviceGetCurrPcieLinkGeneration"], (h,), int)
        _set(q, "pcie_link_gen_max", ["nvmlDeviceGetMaxPcieLinkGeneration"], (h,), int)
        _set(q, "pcie_link_width", ["nvmlDeviceGetCurrPcieLinkWidth"], (h,), int)
        _set(q, "pcie_link_width_max", ["nvmlDeviceGetMaxPcieLinkWidth"], (h,), int)
        _set(q, "pcie_replay_count", ["nvmlDeviceGetPcieReplayCounter"], (h,), int)
        _set(q, "persistence_mode", ["nvmlDeviceGetPersistenceMode"], (h,), bool)
        mig = q.call(g, ["mig_mode", "mig_mode_pending"], ["nvmlDeviceGetMigMode"], h)
        if mig is not _MISSING:
            g.mig_mode, g.mig_mode_pending = bool(mig[0]), bool(mig[1])
        mode = q.call(g, ["compute_mode"], ["nvmlDeviceGetComputeMode"], h)
        if mode is not _MISSING:
            g.compute_mode = _COMPUTE_MODES.get(int(mode), f"unknown_{int(mode)}")

    def _processes(self, q: _Query, ctx: CollectContext, res: _GpuResult) -> None:
        g = q.gpu
        procs = q.call(
            g,
            ["process_count"],
            [
                "nvmlDeviceGetComputeRunningProcesses_v3",
                "nvmlDeviceGetComputeRunningProcesses_v2",
                "nvmlDeviceGetComputeRunningProcesses",
            ],
            q.handle,
        )
        if procs is _MISSING:
            why = g.unavailable.get("process_count")
            if why is not None and why.reason is UnavailableReason.ERROR:
                res.errors.append(
                    ErrorTextEvent(
                        signature="nvml-process-query-failed",
                        cause="gpu_processes_unreadable",
                        component="driver",
                        verified=True,
                        message=f"GPU {g.index}: the running-process query failed: {why.detail}",
                        raw=why.detail,
                        pci_bus_id=g.pci_bus_id,
                        gpu_index=g.index,
                        count=1,
                        source="nvml",
                    )
                )
            return
        g.process_count = len(procs)
        for p in procs:
            proc = GpuProcess(
                gpu_pci_bus_id=g.pci_bus_id,
                gpu_index=g.index,
                pid=int(p.pid),
                type="compute",
                source="nvml",
            )
            used = getattr(p, "usedGpuMemory", None)
            if used is None:
                # NVML_VALUE_NOT_AVAILABLE: e.g. MIG without privileges.
                proc.mark_unavailable(
                    "used_memory_mib",
                    UnavailableReason.NOT_SUPPORTED,
                    "NVML reports the value not available",
                )
            else:
                proc.used_memory_mib = round(int(used) / 2**20, 2)
            comm = ctx.path("proc", str(proc.pid), "comm")
            try:
                proc.name = comm.read_text(encoding="utf-8", errors="replace").strip()
            except PermissionError as exc:
                proc.mark_unavailable("name", UnavailableReason.NO_PERMISSION, str(exc))
            except OSError as exc:
                # Another PID namespace (a container) or the process already exited.
                proc.mark_unavailable(
                    "name", UnavailableReason.NOT_COLLECTED, f"{comm}: {exc.strerror or exc}"
                )
            res.processes.append(proc)

    def _nvlinks(self, q: _Query, res: _GpuResult) -> None:
        g, h, nv = q.gpu, q.handle, q.nv
        count_fid = getattr(nv, "NVML_FI_DEV_NVLINK_LINK_COUNT", _FI_NVLINK_LINK_COUNT)
        (count,) = q.fields([(g, "nvlink_links_total", count_fid)])
        if count is _MISSING:
            # No link-count field (old driver, or no NVLink): probe the link states directly.
            max_links = int(getattr(nv, "NVML_NVLINK_MAX_LINKS", 18))
            probed = 0
            for link in range(max_links):
                probe = _Query(nv, GpuFacts(), h, q.codes)
                try:
                    state = probe.call(probe.gpu, ["x"], ["nvmlDeviceGetNvLinkState"], h, link)
                except _GpuLost:
                    q.mark(
                        g,
                        ["nvlink_links_total"],
                        UnavailableReason.GPU_LOST,
                        "nvmlDeviceGetNvLinkState: GPU is lost",
                    )
                    return
                if state is _MISSING:
                    break
                probed += 1
            if not probed:
                why = g.unavailable.get("nvlink_links_total")
                if why is not None:
                    g.unavailable["nvlink_links_active"] = why
                return
            del g.unavailable["nvlink_links_total"]
            count = probed
        g.nvlink_links_total = int(count)
        links = [
            NvlinkFacts(gpu_pci_bus_id=g.pci_bus_id, gpu_index=g.index, link=i, source="nvml")
            for i in range(int(count))
        ]
        res.nvlinks.extend(links)
        speed_fid = int(getattr(nv, "NVML_FI_DEV_NVLINK_GET_SPEED", _FI_NVLINK_GET_SPEED))
        speeds = q.fields([(lk, "speed_gbps", (speed_fid, lk.link or 0)) for lk in links])
        replay = getattr(nv, "NVML_NVLINK_ERROR_DL_REPLAY", 0)
        recovery = getattr(nv, "NVML_NVLINK_ERROR_DL_RECOVERY", 1)
        crc = getattr(nv, "NVML_NVLINK_ERROR_DL_CRC_FLIT", 2)
        for lk, speed in zip(links, speeds, strict=True):
            link = lk.link or 0
            if speed is not _MISSING:
                lk.speed_gbps = round(float(speed) / 1000.0, 3)  # MB/s -> GB/s
            state = q.call(lk, ["active"], ["nvmlDeviceGetNvLinkState"], h, link)
            if state is not _MISSING:
                lk.active = bool(state)
            if lk.active:
                self._remote(q, lk, link)
            for name, counter in (
                ("replay_errors", replay),
                ("recovery_errors", recovery),
                ("crc_errors", crc),
            ):
                v = q.call(lk, [name], ["nvmlDeviceGetNvLinkErrorCounter"], h, link, counter)
                if v is not _MISSING:
                    setattr(lk, name, int(v))
        unknown = [lk for lk in links if lk.active is None]
        if unknown:
            first = unknown[0].unavailable.get("active")
            g.mark_unavailable(
                "nvlink_links_active",
                first.reason if first else UnavailableReason.ERROR,
                f"state of link {unknown[0].link} unknown",
            )
        else:
            g.nvlink_links_active = sum(1 for lk in links if lk.active)

    def _remote(self, q: _Query, lk: NvlinkFacts, link: int) -> None:
        """The device at the other end of an active link (an NVSwitch on HGX): SXids name
        the switch, and this ties them to the GPU."""
        pci = q.call(
            lk,
            ["remote_pci_bus_id"],
            ["nvmlDeviceGetNvLinkRemotePciInfo_v2", "nvmlDeviceGetNvLinkRemotePciInfo"],
            q.handle,
            link,
        )
        if pci is not _MISSING:
            bus = getattr(pci, "busId", None) or getattr(pci, "busIdLegacy", None)
            lk.remote_pci_bus_id = normalize_bus_id(bus) if bus else None
        kind = q.call(
            lk, ["remote_device_type"], ["nvmlDeviceGetNvLinkRemoteDeviceType"], q.handle, link
        )
        if kind is not _MISSING:
            lk.remote_device_type = REMOTE_TYPES.get(int(kind), "unknown")


# nvmlIntNvLinkDeviceType_t
REMOTE_TYPES = {0: "gpu", 1: "ibmnpu", 2: "switch"}


@dataclass
class _GpuResult:
    gpu: GpuFacts
    processes: list[GpuProcess] = field(default_factory=list)
    errors: list[ErrorTextEvent] = field(default_factory=list)
    nvlinks: list[NvlinkFacts] = field(default_factory=list)


def _unavailable(reason: UnavailableReason, detail: str) -> Unavailable:
    return Unavailable(reason=reason, detail=detail)


# GpuFacts field -> the nvmlTemperatureThresholds_t constant naming it (slowdown and
# shutdown are read above with their fallbacks; these came later).
_THRESHOLDS = (
    ("temperature_max_operating_c", "NVML_TEMPERATURE_THRESHOLD_GPU_MAX"),
    ("temperature_target_c", "NVML_TEMPERATURE_THRESHOLD_ACOUSTIC_CURR"),
    ("temperature_target_min_c", "NVML_TEMPERATURE_THRESHOLD_ACOUSTIC_MIN"),
    ("temperature_target_max_c", "NVML_TEMPERATURE_THRESHOLD_ACOUSTIC_MAX"),
)


def _set(
    q: _Query, fname: str, names: list[str], args: tuple[Any, ...], convert: Callable[[Any], Any]
) -> None:
    """One NVML call -> one GpuFacts field, converted; unavailability marked by the query."""
    value = q.call(q.gpu, [fname], names, *args)
    if value is not _MISSING:
        setattr(q.gpu, fname, convert(value))
