"""The table of error texts gpu-triage recognises: one entry per signature.

Each entry says what the text looks like, which cause it is evidence of (the rules read
``error.cause``), which part of the stack printed it, whether the exact wording was
checked against a source (``verified``; the others come from experience and are matched
loosely: any case, any spacing, a few words of slack), and which typed facts its fields
set. The numbers in ``ref`` are the sections of the signature catalogue the entry encodes
(``real-world-signatures.md``); an auditor adds a signature by adding an entry here.

Patterns never nest quantifiers and every gap is bounded, so one scan of a paste costs
its length times the number of entries, whatever the paste holds.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from gpu_triage.model.facts import DriverFacts, NvmlInit

# ---------------------------------------------------------------- pattern helpers


def phrase(text: str) -> str:
    """An exact wording: literal words, any run of spaces or line breaks between them
    (pastes wrap lines and collapse spaces)."""
    return r"\s+".join(re.escape(word) for word in text.split())


def loose(*parts: str) -> str:
    """A recalled wording: its key parts in order, up to a few words of anything between
    them, so a slightly different release or translation still matches."""
    return r"[\s\S]{0,40}?".join(phrase(p) for p in parts)


SetFacts = Callable[[re.Match[str], DriverFacts], None]


@dataclass(frozen=True)
class Signature:
    id: str
    ref: str  # section(s) of the signature catalogue
    cause: str | None  # None: the text only sets facts (a version line)
    component: str  # driver, container, kubernetes, cuda, nccl, fabric, slurm, framework, ...
    pattern: str
    verified: bool
    sets: SetFacts | None = None
    keys: tuple[str, ...] = ()  # lower-case words one of which the text must hold
    value_group: str | None = None  # named group kept as the event's value
    bus_group: str | None = None  # named group holding a PCI address


def _init(state: NvmlInit) -> SetFacts:
    def sets(m: re.Match[str], d: DriverFacts) -> None:
        d.nvml_init = state
        d.nvml_error = " ".join(m.group(0).split())[:200]

    return sets


def _api_mismatch(m: re.Match[str], d: DriverFacts) -> None:
    d.library_version = m.group("client")
    d.kernel_module_version = m.group("module")
    d.nvml_init = d.nvml_init or NvmlInit.VERSION_MISMATCH


def _module_version(m: re.Match[str], d: DriverFacts) -> None:
    d.kernel_module_version = m.group("version")
    d.kernel_module_loaded = True


def _library_version(m: re.Match[str], d: DriverFacts) -> None:
    d.library_version = m.group("version")


def _package_upgrade(m: re.Match[str], d: DriverFacts) -> None:
    d.package_upgraded_to = m.group("new")


def _nouveau(m: re.Match[str], d: DriverFacts) -> None:
    d.nouveau_loaded = True


_VER = r"(?P<version>\d{3,}\.\d{1,3}(?:\.\d{1,3})?)"
_BUS = r"(?P<bus>(?:[0-9a-fA-F]{4,8}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.[0-7])?)"

# ---------------------------------------------------------------- the table

SIGNATURES: tuple[Signature, ...] = (
    # 1. Driver, NVML, kernel module -------------------------------------------------
    Signature(
        "nvml-version-mismatch",
        "1.1 2.3",
        "driver_library_mismatch",
        "driver",
        phrase("Driver/library version mismatch"),
        True,
        _init(NvmlInit.VERSION_MISMATCH),
        keys=("library version mismatch",),
    ),
    Signature(
        "nvml-library-version",
        "1.1",
        None,
        "driver",
        phrase("NVML library version:") + r"\s*" + _VER,
        True,
        _library_version,
        value_group="version",
        keys=("nvml library version",),
    ),
    Signature(
        "nvrm-api-mismatch",
        "1.2",
        "driver_library_mismatch",
        "driver",
        phrase("API mismatch: the client has the version")
        # the message spans kernel lines: a timestamp and "NVRM:" may sit between its parts
        + r"\s+(?P<client>\d{3,}\.\d{1,3}(?:\.\d{1,3})?),\s+but[\s\S]{0,80}?"
        + phrase("this kernel module has the version")
        + r"\s+(?P<module>\d{3,}\.\d{1,3}(?:\.\d{1,3})?)",
        True,
        _api_mismatch,
        value_group="client",
        keys=("api mismatch",),
    ),
    Signature(
        "nvidia-smi-cannot-communicate",
        "1.3",
        "driver_not_loaded",
        "driver",
        phrase("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver"),
        True,
        _init(NvmlInit.DRIVER_NOT_LOADED),
        keys=("communicate with the nvidia driver",),
    ),
    Signature(
        "nvml-driver-not-loaded",
        "1.3 1.5",
        "driver_not_loaded",
        "driver",
        loose("NVML", "Driver Not Loaded"),
        False,
        _init(NvmlInit.DRIVER_NOT_LOADED),
        keys=("driver not loaded",),
    ),
    Signature(
        "torch-no-nvidia-driver",
        "1.13",
        "driver_not_loaded",
        "framework",
        phrase("Found no NVIDIA driver on your system"),
        True,
        keys=("found no nvidia driver",),
    ),
    Signature(
        "modprobe-nvidia-not-found",
        "1.3",
        "driver_not_loaded",
        "driver",
        loose("modprobe:", "Module nvidia not found"),
        False,
        keys=("module nvidia not found",),
    ),
    Signature(
        "module-key-rejected",
        "1.3",
        "driver_not_loaded",
        "driver",
        loose("nvidia", "Key was rejected by service"),
        False,
        keys=("key was rejected",),
    ),
    Signature(
        "nvidia-unknown-symbol",
        "1.3",
        "driver_not_loaded",
        "driver",
        r"\bnvidia\w*:\s+" + phrase("Unknown symbol"),
        False,
        keys=("unknown symbol",),
    ),
    Signature(
        "nvidia-smi-no-devices",
        "1.4",
        "no_devices",
        "driver",
        r"(?m)^[ \t]*" + phrase("No devices were found"),
        True,
        _init(NvmlInit.NO_DEVICES),
        keys=("no devices were found",),
    ),
    Signature(
        "nvrm-rminitadapter-failed",
        "1.4",
        "gpu_init_failed",
        "driver",
        loose("NVRM:", "RmInitAdapter failed"),
        False,
        keys=("rminitadapter",),
    ),
    Signature(
        "nvrm-gpu-not-supported",
        "1.7",
        "gpu_init_failed",
        "driver",
        phrase("installed in this system is not supported by the")
        + r"\s+"
        + _VER
        + r"\s+"
        + phrase("NVIDIA"),
        True,
        value_group="version",
        keys=("is not supported by the",),
    ),
    Signature(
        "nvrm-probe-failed",
        "1.7",
        "gpu_init_failed",
        "driver",
        phrase("The NVIDIA probe routine failed for"),
        True,
        keys=("probe routine failed",),
    ),
    Signature(
        "nvrm-no-adapters-initialized",
        "1.7",
        "gpu_init_failed",
        "driver",
        phrase("None of the NVIDIA graphics adapters were initialized"),
        True,
        keys=("adapters were initialized",),
    ),
    Signature(
        "msix-enable-failed",
        "1.6",
        "nouveau_bound",
        "driver",
        phrase("Failed to enable MSI-X"),
        True,
        keys=("msi-x",),
    ),
    Signature(
        "nouveau-in-lsmod",
        "1.6",
        "nouveau_bound",
        "driver",
        r"(?m)^nouveau[ \t]+\d+[ \t]+\d+",
        True,
        _nouveau,
        keys=("nouveau",),
    ),
    Signature(
        "nvrm-module-version",
        "1.8",
        None,
        "driver",
        phrase("NVIDIA UNIX") + r"\s+(?:[\w-]+\s+){0,2}?" + phrase("Kernel Module") + r"\s+" + _VER,
        True,
        _module_version,
        value_group="version",
        keys=("kernel module",),
    ),
    Signature(
        "nvml-device-handle-unknown-error",
        "1.9",
        "gpu_unreachable",
        "driver",
        phrase("Unable to determine the device handle for GPU")
        + r"[\s\S]{0,24}?"
        + _BUS
        + r"[\s\S]{0,8}?:\s+"
        + phrase("Unknown Error"),
        True,
        bus_group="bus",
        keys=("device handle",),
    ),
    Signature(
        "nvml-gpu-is-lost",
        "1.9",
        "gpu_unreachable",
        "driver",
        loose("GPU is lost", "Reboot the system"),
        False,
        keys=("gpu is lost",),
    ),
    Signature(
        "gpu-fallen-off-bus",
        "1.10",
        "gpu_unreachable",
        "driver",
        r"(?:GPU\s+(?:at\s+)?" + _BUS + r"[\s:]{1,3}|\b)" + phrase("has fallen off the bus"),
        True,
        bus_group="bus",
        keys=("fallen off",),
    ),
    Signature(
        "inforom-corrupted",
        "1.11",
        "inforom_corrupted",
        "driver",
        phrase("infoROM is corrupted at gpu") + r"\s+" + _BUS,
        True,
        bus_group="bus",
        keys=("inforom",),
    ),
    Signature(
        "nvml-insufficient-permissions",
        "1.12",
        "nvml_no_permission",
        "driver",
        phrase("Failed to initialize NVML: Insufficient Permissions"),
        True,
        _init(NvmlInit.NO_PERMISSION),
        keys=("insufficient permissions",),
    ),
    Signature(
        "nvml-unknown-error",
        "2.7",
        "nvml_unknown_error",
        "driver",
        phrase("Failed to initialize NVML: Unknown Error"),
        True,
        _init(NvmlInit.UNKNOWN_ERROR),
        keys=("unknown error",),
    ),
    Signature(
        "persistenced-failed",
        "1.14",
        "persistenced_failed",
        "driver",
        phrase("nvidia-persistenced failed to initialize"),
        True,
        keys=("nvidia-persistenced",),
    ),
    Signature(
        "apt-nvidia-upgrade",
        "1.1",
        None,
        "driver",
        r"(?m)^Upgrade:[^\n]{0,400}?\b(?:lib)?nvidia-[\w.+-]{1,60}:\w{1,10}\s+\("
        r"(?P<old>[\w.:~+-]{1,60}),\s+(?P<new>[\w.:~+-]{1,60})\)",
        True,
        _package_upgrade,
        value_group="new",
        keys=("upgrade:", "unattended-upgrade"),
    ),
    Signature(
        "nvml-library-not-found",
        "1.5 2.5 3.1",
        "nvml_library_missing",
        "driver",
        r"(?:"
        + phrase("NVML Shared Library Not Found")
        + r"|"
        + loose("load library failed:", "libnvidia-ml.so")
        + r")",
        False,
        _init(NvmlInit.LIBRARY_NOT_FOUND),
        keys=("libnvidia-ml", "shared library not found"),
    ),
    # 2. Container runtime ------------------------------------------------------------
    Signature(
        "docker-no-gpu-device-driver",
        "2.1",
        "container_toolkit_missing",
        "container",
        phrase('could not select device driver "" with capabilities: [[gpu]]'),
        True,
        keys=("could not select device driver",),
    ),
    Signature(
        "docker-unknown-runtime-nvidia",
        "2.2",
        "nvidia_runtime_missing",
        "container",
        loose("unknown or invalid runtime name:", "nvidia"),
        False,
        keys=("invalid runtime name",),
    ),
    Signature(
        "cri-no-runtime-nvidia",
        "2.9",
        "nvidia_runtime_missing",
        "kubernetes",
        phrase('no runtime for "nvidia" is configured'),
        True,
        keys=("no runtime for",),
    ),
    Signature(
        "container-cli-driver-timeout",
        "2.4",
        "container_driver_timeout",
        "container",
        r"nvidia-container-cli(?:\.real)?:\s+"
        + phrase("initialization error:")
        + r"\s+(?:driver\s+rpc\s+error|driver\s+error):\s+"
        + phrase("timed out"),
        True,
        keys=("timed out", "initialization error"),
    ),
    Signature(
        "container-cli-cuda-requirement",
        "2.6",
        "cuda_driver_too_old",
        "container",
        phrase("unsatisfied condition:") + r"\s+(?P<req>cuda\s*>=\s*[\d.]{1,10})",
        True,
        value_group="req",
        keys=("unsatisfied condition",),
    ),
    Signature(
        "cdi-unresolvable",
        "2.8",
        "cdi_spec_missing",
        "container",
        phrase("unresolvable CDI devices"),
        True,
        keys=("unresolvable cdi",),
    ),
    Signature(
        "groups-cannot-find-gid",
        "2.10",
        "benign_container_gid",
        "container",
        phrase("groups: cannot find name for group ID"),
        True,
        keys=("cannot find name for group",),
    ),
    Signature(
        "nvidia-docker-permission-denied",
        "2.11",
        "selinux_denied",
        "container",
        phrase("nvidia-docker: line") + r"\s+\d+:\s+\S+:\s+" + phrase("Permission denied"),
        True,
        keys=("nvidia-docker",),
    ),
    # 3. Kubernetes -------------------------------------------------------------------
    Signature(
        "device-plugin-default-runtime",
        "3.1",
        "device_plugin_without_nvml",
        "kubernetes",
        loose("did you set the docker default runtime to", "nvidia"),
        True,
        keys=("default runtime",),
    ),
    Signature(
        "device-plugin-nvml-init-failed",
        "3.1",
        "device_plugin_without_nvml",
        "kubernetes",
        loose("nvml init failed:", "ERROR_LIBRARY_NOT_FOUND"),
        False,
        keys=("nvml init failed",),
    ),
    Signature(
        "device-plugin-incompatible-strategy",
        "3.2",
        "device_plugin_without_nvml",
        "kubernetes",
        # v0.14+ says "Incompatible platform detected" for the same cause
        r"Incompatible\s+(?:strategy|platform)\s+detected",
        True,
        keys=("incompatible strategy", "incompatible platform"),
    ),
    Signature(
        "device-plugin-no-devices",
        "3.6",
        "device_plugin_no_devices",
        "kubernetes",
        phrase("No devices found. Waiting indefinitely."),
        True,
        keys=("waiting indefinitely",),
    ),
    Signature(
        "device-plugin-xid-unhealthy",
        "3.4",
        "gpu_marked_unhealthy",
        "kubernetes",
        phrase("XidCriticalError: Xid=")
        + r"(?P<xid>\d{1,4})"
        + r"[\s\S]{0,80}?"
        + phrase("marking device as unhealthy"),
        True,
        value_group="xid",
        keys=("xidcriticalerror",),
    ),
    Signature(
        "device-plugin-all-unhealthy",
        "3.4",
        "gpu_marked_unhealthy",
        "kubernetes",
        phrase("Marking all devices as unhealthy"),
        True,
        keys=("all devices as unhealthy",),
    ),
    Signature(
        "scheduler-insufficient-gpu",
        "3.5",
        "k8s_insufficient_gpu",
        "kubernetes",
        r"\d+\s+" + phrase("Insufficient nvidia.com/gpu"),
        True,
        keys=("insufficient nvidia.com/gpu",),
    ),
    Signature(
        "operator-init-stuck",
        "3.8",
        "gpu_operator_not_ready",
        "kubernetes",
        r"(?m)^[ \t]*nvidia-[\w-]{1,80}\s+0/\d\s+Init:\d/\d",
        True,
        keys=("init:",),
    ),
    Signature(
        "mig-no-devices",
        "3.9 13.2",
        "mig_not_configured",
        "kubernetes",
        r"(?:"
        + phrase("has no MIG devices configured")
        + r"|"
        + phrase("with migEnabled=true was not configured correctly")
        + r"|"
        + phrase("must be configured with the same migEnabled value")
        + r"|"
        + phrase("No GPU instances found")
        + r")",
        True,
        keys=("mig", "no gpu instances"),
    ),
    Signature(
        "dcgm-exporter-hostengine",
        "3.11",
        "dcgm_exporter_unreachable",
        "kubernetes",
        phrase("Attempting to connect to remote hostengine")
        + r"[\s\S]{0,400}?"
        + phrase("Encountered a failure"),
        True,
        keys=("remote hostengine",),
    ),
    # 4. CUDA runtime errors as frameworks print them ---------------------------------
    Signature(
        "cuda-illegal-address",
        "4.1",
        "cuda_illegal_address",
        "cuda",
        r"(?:"
        + phrase("an illegal memory access was encountered")
        + r"|CUDA_ERROR_ILLEGAL_ADDRESS)",
        True,
        keys=("illegal memory access", "illegal_address"),
    ),
    Signature(
        "cuda-launch-failure",
        "4.2",
        "cuda_launch_failure",
        "cuda",
        r"(?:" + phrase("unspecified launch failure") + r"|CUDA_ERROR_LAUNCH_FAILED)",
        True,
        keys=("launch failure", "launch_failed"),
    ),
    Signature(
        "cuda-ecc-uncorrectable",
        "4.3",
        "ecc_uncorrectable",
        "cuda",
        r"(?:"
        + phrase("uncorrectable ECC error encountered")
        + r"|CUDA_ERROR_ECC_UNCORRECTABLE|cudaErrorECCUncorrectable)",
        True,
        keys=("ecc", "uncorrectable ecc", "ecc_uncorrectable"),
    ),
    Signature(
        "cuda-device-assert",
        "4.4",
        "cuda_device_assert",
        "cuda",
        phrase("device-side assert triggered"),
        True,
        keys=("device-side assert",),
    ),
    Signature(
        "cuda-no-device",
        "4.5",
        "no_cuda_device",
        "cuda",
        r"(?:"
        + loose("no CUDA-capable device is detected")
        + r"|"
        + loose("No CUDA GPUs are available")
        + r"|CUDA_ERROR_NO_DEVICE)",
        False,
        keys=("cuda-capable device", "no cuda gpus", "cuda_error_no_device"),
    ),
    Signature(
        "cuda-driver-mismatch-803",
        "4.6",
        "cuda_compat_mismatch",
        "cuda",
        phrase("system has unsupported display driver / cuda driver combination"),
        True,
        keys=("unsupported display driver",),
    ),
    Signature(
        "cuda-forward-compat-unsupported",
        "4.10",
        "cuda_compat_mismatch",
        "cuda",
        loose("forward compatibility was attempted on non supported HW"),
        False,
        keys=("forward compatibility",),
    ),
    Signature(
        "cuda-insufficient-driver",
        "4.7",
        "cuda_driver_too_old",
        "cuda",
        loose("CUDA driver version is insufficient for CUDA runtime version"),
        False,
        keys=("driver version is insufficient",),
    ),
    Signature(
        "cuda-system-not-initialized",
        "4.8 3.7",
        "fabric_not_ready",
        "cuda",
        r"(?:"
        + phrase("system not yet initialized")
        + r"|CUDA_ERROR_SYSTEM_NOT_READY"
        + r"|cudaErrorSystemNotReady)",
        True,
        keys=("not yet initialized", "system_not_ready", "systemnotready"),
    ),
    Signature(
        "cuda-devices-busy",
        "4.9",
        "cuda_devices_busy",
        "cuda",
        loose("CUDA-capable device(s) is/are busy or unavailable"),
        False,
        keys=("busy or unavailable",),
    ),
    Signature(
        "cuda-out-of-memory",
        "4.11",
        "cuda_oom",
        "cuda",
        loose("CUDA out of memory.", "Tried to allocate"),
        False,
        keys=("out of memory",),
    ),
    # 5. Fabric Manager, NVSwitch, NVLink ---------------------------------------------
    Signature(
        "fabric-manager-failed",
        "5.1",
        "fabric_not_ready",
        "fabric",
        r"nvidia-fabricmanager(?:\.service)?[\s\S]{0,120}?" + phrase("Active: failed"),
        True,
        keys=("nvidia-fabricmanager",),
    ),
    Signature(
        "fabric-state-in-progress",
        "5.1 3.7",
        "fabric_not_ready",
        "fabric",
        r"(?m)^\s*Fabric\s*\n\s*State\s*:\s*(?:In Progress|Not Started)",
        True,
        keys=("fabric",),
    ),
    Signature(
        "fabric-nvswitch-count",
        "5.2",
        "fabric_not_ready",
        "fabric",
        phrase("detected number of NVSwitches don't match with any supported system topology"),
        True,
        keys=("number of nvswitches",),
    ),
    Signature(
        "fabric-nothing-to-do",
        "5.3",
        "fabric_manager_idle",
        "fabric",
        phrase("NV_WARN_NOTHING_TO_DO"),
        True,
        keys=("nv_warn_nothing_to_do",),
    ),
    Signature(
        "nvswitch-fatal-error",
        "5.4",
        "nvswitch_fatal",
        "fabric",
        phrase("detected NVSwitch fatal error") + r"\s+(?P<sxid>\d{1,6})",
        True,
        value_group="sxid",
        keys=("nvswitch fatal error",),
    ),
    Signature(
        "fabric-multicast-team",
        "5.5",
        "nvlink_multicast_failed",
        "fabric",
        phrase("failed to find the GPU handle") + r"[\s\S]{0,60}?" + phrase("multicast team"),
        True,
        keys=("multicast team",),
    ),
    Signature(
        "nvlink-rx-detect-failed",
        "5.6",
        "nvlink_training_failed",
        "fabric",
        r"(?:postRxDetLinkMask\s+failed|" + phrase("Failed to update Rx Detect Link mask") + r")",
        True,
        keys=("rxdetlinkmask", "rx detect link mask"),
    ),
    # 6. NCCL --------------------------------------------------------------------------
    Signature(
        "nccl-unhandled-system-error",
        "6.1",
        "nccl_system_error",
        "nccl",
        phrase("unhandled system error"),
        True,
        keys=("unhandled system error",),
    ),
    Signature(
        "nccl-remote-error",
        "6.2",
        "nccl_remote_error",
        "nccl",
        phrase("remote process exited or there was a network error"),
        True,
        keys=("remote process exited",),
    ),
    Signature(
        "nccl-ib-completion-error",
        "6.3",
        "nccl_ib_completion_error",
        "nccl",
        r"NET/IB\s?:\s+"
        + phrase("Got completion from peer")
        + r"[^\n]{0,120}?(?:status=(?P<status>\w{1,40})|error\s+(?P<err>\d{1,3}))",
        True,
        keys=("got completion from peer",),
    ),
    Signature(
        "nccl-ib-acs-hint",
        "6.3 6.9",
        "nccl_ib_completion_error",
        "nccl",
        phrase("this error occurs when ACS is enabled"),
        True,
        keys=("acs is enabled",),
    ),
    Signature(
        "nccl-qp-connect-failed",
        "6.4",
        "nccl_qp_connect_failed",
        "nccl",
        phrase("Call to ibv_modify_qp failed with") + r"\s+(?P<errno>\d{1,3})",
        True,
        value_group="errno",
        keys=("ibv_modify_qp",),
    ),
    Signature(
        "nccl-shm-full",
        "6.5",
        "nccl_shm_exhausted",
        "nccl",
        # "..., error: No space left on device (28)" on 2.19+; older releases end the line
        # at the size and say "Error while creating shared memory segment" next
        phrase("failed to extend /dev/shm/")
        + r"(?:[^\n]{0,120}?"
        + phrase("No space left on device")
        + r"|nccl-\S{1,32}\s+to\s+\d+\s+bytes)"
        + r"|"
        + phrase("Error while creating shared memory segment /dev/shm/nccl-"),
        True,
        keys=("/dev/shm/",),  # noqa: S108 - a text to find, not a path used
    ),
    Signature(
        "nccl-using-socket",
        "6.6",
        "nccl_network_socket",
        "nccl",
        r"(?:NCCL\s+INFO\s+"
        + phrase("Using network Socket")
        + r"|NET/IB\s?:\s+"
        + phrase("No device found.")
        + r")",
        True,
        keys=("using network socket", "no device found"),
    ),
    Signature(
        "nccl-p2p-via-shm",
        "6.6",
        "nccl_p2p_not_used",
        "nccl",
        r"Channel\s+\d{2}(?:/\d{1,2})?\s*:\s+\d{1,5}\[\d{1,3}\]\s+->\s+\d{1,5}\[\d{1,3}\]\s+via\s+SHM",
        True,
        keys=("via shm",),
    ),
    Signature(
        "nccl-gdr-disabled",
        "6.7",
        "gpudirect_rdma_disabled",
        "nccl",
        r"NET/IB\s?:\s+" + phrase("GPU Direct RDMA Disabled for HCA"),
        True,
        keys=("gpu direct rdma disabled",),
    ),
    Signature(
        "nccl-peer-closed",
        "6.8",
        "nccl_peer_closed",
        "nccl",
        r"socket\w{0,20}:\s+" + phrase("Connection closed by remote peer"),
        True,
        keys=("closed by remote peer",),
    ),
    Signature(
        "nccl-watchdog-timeout",
        "6.10",
        "nccl_collective_timeout",
        "nccl",
        phrase("Watchdog caught collective operation timeout"),
        True,
        keys=("watchdog caught",),
    ),
    Signature(
        "nccl-communicator-aborted",
        "6.10",
        "nccl_collective_timeout",
        "nccl",
        loose("NCCL communicator was aborted on rank"),
        False,
        keys=("communicator was aborted",),
    ),
    Signature(
        "peermem-invalid-context",
        "6.11",
        "peermem_invalid_context",
        "nccl",
        phrase("ERROR detected invalid context, skipping further processing"),
        True,
        keys=("invalid context",),
    ),
    Signature(
        "nccl-segfault",
        "6.12",
        "nccl_crash",
        "nccl",
        r"segfault\s+at\s+[0-9a-f]{1,16}[^\n]{0,200}?\s+in\s+libnccl\.so",
        True,
        keys=("libnccl",),
    ),
    # 8. NIC power and transceiver (mlx5) --------------------------------------------
    Signature(
        "mlx5-slot-power",
        "8.3",
        "nic_slot_power",
        "nic",
        phrase("Detected insufficient power on the PCIe slot"),
        True,
        keys=("insufficient power",),
    ),
    Signature(
        "mlx5-module-high-temperature",
        "8.4",
        "transceiver_overheat",
        "nic",
        phrase("Port module event[error]:") + r"[^\n]{0,80}?" + phrase("High Temperature"),
        True,
        keys=("port module event",),
    ),
    Signature(
        "mlx5-access-reg",
        "10.4",
        "benign_mlx5_access_reg",
        "nic",
        r"mlx5_cmd_out_err[^\n]{0,40}?ACCESS_REG\(0x[0-9a-f]{1,4}\)[^\n]{0,80}?failed",
        True,
        keys=("access_reg",),
    ),
    # 12. Slurm ------------------------------------------------------------------------
    Signature(
        "slurm-gres-count-low",
        "12.1",
        "slurm_gres_count_low",
        "slurm",
        r"gres/gpu\s+count\s+(?:reported\s+lower\s+than\s+configured|too\s+low)\s+"
        r"\((?P<found>\d{1,4})\s+<\s+(?P<configured>\d{1,4})\)",
        True,
        value_group="found",
        keys=("gres/gpu count",),
    ),
    Signature(
        "slurm-file-less-gpu",
        "12.2",
        "slurm_gres_count_low",
        "slurm",
        phrase("Ignoring file-less GPU"),
        True,
        keys=("file-less gpu",),
    ),
    Signature(
        "slurm-invalid-gres",
        "12.3",
        "slurm_gres_invalid",
        "slurm",
        phrase("Invalid generic resource (gres) specification"),
        True,
        keys=("invalid generic resource",),
    ),
    # Frameworks -----------------------------------------------------------------------
    Signature(
        "dataloader-few-workers",
        "CP1 CP2",
        "dataloader_few_workers",
        "framework",
        r"(?:"
        + phrase("does not have many workers which may be a bottleneck")
        + r"|"
        + loose("Consider increasing the value of the", "num_workers")
        + r")",
        True,
        keys=("workers", "many workers which", "num_workers"),
    ),
)

_COMPILED: list[tuple[Signature, re.Pattern[str]]] | None = None


def compiled() -> list[tuple[Signature, re.Pattern[str]]]:
    """The table's patterns, compiled once. Every signature matches in any case: pastes
    come through people, and the verified wording's own case varies between releases."""
    global _COMPILED
    if _COMPILED is None:
        _COMPILED = [(s, re.compile(s.pattern, re.IGNORECASE)) for s in SIGNATURES]
    return _COMPILED


CAUSES: frozenset[str] = frozenset(s.cause for s in SIGNATURES if s.cause)
