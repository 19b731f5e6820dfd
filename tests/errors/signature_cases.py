"""One case per signature of the error-text table, written from the texts of the
signature catalogue (real-world-signatures.md, copied here: tests do not read shared/).

Each case: the signature id, the text as printed, the rule that must be the top finding
when this text is the only fault (None for texts that only set facts). Texts of
signatures the table marks unverified ([recalled] in the catalogue) are listed in
``UNVERIFIED``: their wording is matched loosely and was not checked against a source.
"""

from __future__ import annotations

CASES: list[tuple[str, str, str | None]] = [
    # 1. driver
    (
        "nvml-version-mismatch",
        "Failed to initialize NVML: Driver/library version mismatch",
        "driver-library-version-mismatch",
    ),
    (
        "nvml-library-version",
        "Failed to initialize NVML: Driver/library version mismatch\nNVML library version: 590.44",
        "driver-library-version-mismatch",
    ),
    (
        "nvrm-api-mismatch",
        "[ 1234.567890] NVRM: API mismatch: the client has the version 535.171.04, but\n"
        "[ 1234.567891] NVRM: this kernel module has the version 535.161.07.  Please\n"
        "[ 1234.567892] NVRM: make sure that this kernel module and all NVIDIA driver\n"
        "[ 1234.567893] NVRM: components have the same version.",
        "driver-library-version-mismatch",
    ),
    (
        "nvidia-smi-cannot-communicate",
        "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure "
        "that the latest NVIDIA driver is installed and running.",
        "nvidia-driver-not-loaded",
    ),
    (
        "nvml-driver-not-loaded",
        "Failed to initialize NVML: Driver Not Loaded",
        "nvidia-driver-not-loaded",
    ),
    (
        "torch-no-nvidia-driver",
        "RuntimeError: Found no NVIDIA driver on your system. Please check that you have an NVIDIA "
        "GPU and installed a driver from http://www.nvidia.com/Download/index.aspx",
        "nvidia-driver-not-loaded",
    ),
    (
        "modprobe-nvidia-not-found",
        "modprobe: FATAL: Module nvidia not found in directory /lib/modules/6.3.7-1-cachyos",
        "nvidia-driver-not-loaded",
    ),
    (
        "module-key-rejected",
        "modprobe: ERROR: could not insert 'nvidia': Key was rejected by service",
        "nvidia-driver-not-loaded",
    ),
    (
        "nvidia-unknown-symbol",
        "[   12.345678] nvidia: Unknown symbol drm_gem_prime_fd_to_handle (err -2)",
        "nvidia-driver-not-loaded",
    ),
    ("nvidia-smi-no-devices", "No devices were found", "nvml-no-devices-found"),
    (
        "nvrm-rminitadapter-failed",
        "NVRM: GPU 0000:3b:00.0: RmInitAdapter failed! (0x26:0x56:1474)",
        "gpu-driver-init-failed",
    ),
    (
        "nvrm-gpu-not-supported",
        "NVRM: The NVIDIA GPU 0000:01:00.0 (PCI ID: 10de:0de3)\nNVRM: installed in this system is "
        "not supported by the 367.27 NVIDIA Linux driver release.",
        "gpu-driver-init-failed",
    ),
    (
        "nvrm-probe-failed",
        "NVRM: The NVIDIA probe routine failed for 1 device(s).",
        "gpu-driver-init-failed",
    ),
    (
        "nvrm-no-adapters-initialized",
        "NVRM: None of the NVIDIA graphics adapters were initialized!",
        "gpu-driver-init-failed",
    ),
    ("msix-enable-failed", "nvidia 0000:3b:00.0: Failed to enable MSI-X", "nouveau-holds-gpu"),
    (
        "nouveau-in-lsmod",
        "nouveau              2441216  0\nmxm_wmi                16384  1 nouveau",
        "nouveau-holds-gpu",
    ),
    (
        "nvrm-module-version",
        "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 22:23:56 UTC 2024\n"
        "GCC version:  gcc version 12.3.0 (Ubuntu 12.3.0-1ubuntu1~22.04)",
        None,
    ),
    (
        "nvml-device-handle-unknown-error",
        "Unable to determine the device handle for GPU0000:CB:00.0: Unknown Error",
        "gpu-unreachable-reported",
    ),
    (
        "nvml-gpu-is-lost",
        "Unable to determine the device handle for GPU1: 0000:34:00.0: GPU is lost.  Reboot the "
        "system to recover this GPU",
        "gpu-unreachable-reported",
    ),
    (
        "gpu-fallen-off-bus",
        "NVRM: GPU at 0000:01:00.0 has fallen off the bus.",
        "gpu-unreachable-reported",
    ),
    (
        "inforom-corrupted",
        "WARNING: infoROM is corrupted at gpu 0000:0B:00.0",
        "gpu-inforom-corrupted",
    ),
    (
        "nvml-insufficient-permissions",
        "Failed to initialize NVML: Insufficient Permissions",
        "nvml-no-permission",
    ),
    ("nvml-unknown-error", "Failed to initialize NVML: Unknown Error", "nvml-unknown-error"),
    (
        "persistenced-failed",
        "nvidia-persistenced[881]: nvidia-persistenced failed to initialize. Check syslog for more "
        "details.",
        "persistenced-failed",
    ),
    (
        "apt-nvidia-upgrade",
        "Start-Date: 2021-04-24  06:50:54\nCommandline: /usr/bin/unattended-upgrade\nUpgrade: "
        "libnvidia-common-460:amd64 (460.56-0ubuntu0.20.04.1, 460.73.01-0ubuntu0.20.04.1)\n"
        "End-Date: 2021-04-24  06:50:54",
        None,
    ),
    (
        "nvml-library-not-found",
        "nvidia-container-cli: initialization error: load library "
        "failed: libnvidia-ml.so.1: cannot "
        "open shared object file: no such file or directory: unknown",
        "nvml-library-missing",
    ),
    # 2. container runtime
    (
        "docker-no-gpu-device-driver",
        'docker: Error response from daemon: could not select device driver "" with capabilities: '
        "[[gpu]].",
        "container-toolkit-missing",
    ),
    (
        "docker-unknown-runtime-nvidia",
        "docker: Error response from daemon: unknown or invalid runtime name: nvidia.",
        "nvidia-runtime-not-registered",
    ),
    (
        "cri-no-runtime-nvidia",
        "Failed to create pod sandbox: rpc error: code = Unknown desc = failed to get sandbox "
        'runtime: no runtime for "nvidia" is configured',
        "nvidia-runtime-not-registered",
    ),
    (
        "container-cli-driver-timeout",
        "failed to create containerd task: failed to create shim task: OCI runtime create failed: "
        "runc create failed: unable to start container process: error during container init: error "
        "running hook #0: error running hook: exit status 1, stdout: , stderr: "
        "nvidia-container-cli.real: initialization error: driver rpc error: timed out: unknown",
        "container-driver-init-timeout",
    ),
    (
        "container-cli-cuda-requirement",
        "nvidia-container-cli: requirement error: unsatisfied condition: cuda>=12.4, please update "
        "your driver to a newer version, or use an earlier cuda container: unknown",
        "container-cuda-newer-than-driver",
    ),
    (
        "cdi-unresolvable",
        "Error: error modifying OCI spec: failed to inject CDI devices: unresolvable CDI devices "
        "nvidia.com/gpu=all",
        "cdi-spec-missing",
    ),
    ("groups-cannot-find-gid", "groups: cannot find name for group ID 993", "benign-error-text"),
    (
        "nvidia-docker-permission-denied",
        "/bin/nvidia-docker: line 34: /bin/docker: Permission denied",
        "container-selinux-denied",
    ),
    # 3. Kubernetes
    (
        "device-plugin-default-runtime",
        "Failed to initialize NVML: ERROR_LIBRARY_NOT_FOUND.\nIf "
        "this is a GPU node, did you set the "
        "docker default runtime to `nvidia`?",
        "k8s-device-plugin-cannot-load-nvml",
    ),
    (
        "device-plugin-nvml-init-failed",
        "nvml init failed: ERROR_LIBRARY_NOT_FOUND",
        "k8s-device-plugin-cannot-load-nvml",
    ),
    (
        "device-plugin-incompatible-strategy",
        "Incompatible strategy detected auto\nIf this is a GPU node, did you configure the NVIDIA "
        "Container Toolkit?",
        "k8s-device-plugin-cannot-load-nvml",
    ),
    (
        "device-plugin-no-devices",
        "No devices found. Waiting indefinitely.",
        "k8s-device-plugin-no-devices",
    ),
    (
        "device-plugin-xid-unhealthy",
        "I0624 22:58:05.486697       1 health.go:185] XidCriticalError: Xid=79 on "
        "Device=GPU-adb24b25-1db1-436e-d958-ddee5da83d07; marking device as unhealthy.",
        "k8s-gpu-marked-unhealthy",
    ),
    (
        "device-plugin-all-unhealthy",
        "Error waiting for event: Unknown Error; Marking all devices as unhealthy",
        "k8s-gpu-marked-unhealthy",
    ),
    (
        "scheduler-insufficient-gpu",
        "0/2 nodes are available: 1 Insufficient nvidia.com/gpu, 1 node(s) were unschedulable.",
        "k8s-insufficient-gpu-reported",
    ),
    (
        "operator-init-stuck",
        "nvidia-device-plugin-daemonset-tl9k7   0/1   Init:0/1   0   2m\n"
        "nvidia-driver-daemonset-4rtiu          0/2   Running    3   5m",
        "gpu-operator-not-ready",
    ),
    ("mig-no-devices", "device 0 has no MIG devices configured", "mig-not-configured"),
    (
        "dcgm-exporter-hostengine",
        'time="2024-05-01T10:00:00Z" level=info msg="Attempting to connect to remote hostengine at '
        'nvidia-dcgm:5555"\ntime="2024-05-01T10:00:05Z" level=error msg="Encountered a failure." '
        "stacktrace=...",
        "gpu-operator-not-ready",
    ),
    # 4. CUDA runtime errors
    (
        "cuda-illegal-address",
        "RuntimeError: CUDA error: an illegal memory access was encountered",
        "job-illegal-memory-access",
    ),
    (
        "cuda-launch-failure",
        "RuntimeError: CUDA error: unspecified launch failure",
        "job-launch-failure",
    ),
    (
        "cuda-ecc-uncorrectable",
        "RuntimeError: CUDA error: uncorrectable ECC error encountered",
        "job-hit-uncorrectable-ecc",
    ),
    (
        "cuda-device-assert",
        "RuntimeError: CUDA error: device-side assert triggered",
        "job-device-assert",
    ),
    ("cuda-no-device", "RuntimeError: No CUDA GPUs are available", "job-no-cuda-device"),
    (
        "cuda-driver-mismatch-803",
        "Unexpected error from cudaGetDeviceCount(). Did you run "
        "some cuda functions before calling "
        "NumCudaDevices() that might have already set an error? Error 803: system has unsupported "
        "display driver / cuda driver combination",
        "job-cuda-compat-mismatch",
    ),
    (
        "cuda-forward-compat-unsupported",
        "CUDA error: forward compatibility was attempted on non supported HW",
        "job-cuda-compat-mismatch",
    ),
    (
        "cuda-insufficient-driver",
        "CUDA driver version is insufficient for CUDA runtime version",
        "container-cuda-newer-than-driver",
    ),
    ("cuda-system-not-initialized", "Error 802: system not yet initialized", "fabric-not-ready"),
    (
        "cuda-devices-busy",
        "CUDA error: CUDA-capable device(s) is/are busy or unavailable",
        "job-devices-busy",
    ),
    (
        "cuda-out-of-memory",
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total "
        "capacity of 79.15 GiB of which 1.02 GiB is free.",
        "job-cuda-out-of-memory",
    ),
    # 5. Fabric Manager / NVSwitch / NVLink
    (
        "fabric-manager-failed",
        "● nvidia-fabricmanager.service - NVIDIA fabric manager service\n"
        "     Loaded: loaded (/lib/systemd/system/nvidia-fabricmanager.service; enabled)\n"
        "     Active: failed (Result: exit-code) since Mon 2024-07-22 10:00:00 UTC",
        "fabric-not-ready",
    ),
    (
        "fabric-state-in-progress",
        "    Fabric\n        State                             : In Progress\n"
        "        Status                            : N/A",
        "fabric-not-ready",
    ),
    (
        "fabric-nvswitch-count",
        "[Sep 08 2025 23:21:50] [ERROR] detected number of "
        "NVSwitches don't match with any supported "
        "system topology, aborting fabric manager",
        "fabric-not-ready",
    ),
    ("fabric-nothing-to-do", "NV_WARN_NOTHING_TO_DO", "benign-error-text"),
    (
        "nvswitch-fatal-error",
        "[Jul 23 2024 07:53:55] [ERROR] [tid 841] detected NVSwitch fatal error 20034 on fid 0 on "
        "NVSwitch pci bus id 00000000:86:00.0 physical id 3 port 33",
        "nvswitch-fatal-error",
    ),
    (
        "fabric-multicast-team",
        "[Sep 17 2024 06:01:46] [ERROR] [tid 1230079] failed to find the GPU handle "
        "5410063385821516767 in the multicast team request setup 6130285411925746235.",
        "nvlink-fabric-errors-reported",
    ),
    (
        "nvlink-rx-detect-failed",
        "NVRM: knvlinkDiscoverPostRxDetLinks_GH100: Getting peer0's postRxDetLinkMask failed!",
        "nvlink-fabric-errors-reported",
    ),
    # 6. NCCL
    (
        "nccl-unhandled-system-error",
        "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/"
        "ProcessGroupNCCL.cpp:1691, unhandled system error (run with NCCL_DEBUG=INFO for details), "
        "NCCL version 2.19.3",
        "nccl-system-error",
    ),
    (
        "nccl-remote-error",
        "ncclRemoteError: remote process exited or there was a network error",
        "nccl-network-errors",
    ),
    (
        "nccl-ib-completion-error",
        "node1:1234:5678 [0] NCCL WARN NET/IB : Got completion from "
        "peer 10.1.1.2<45678> with error "
        "12, opcode 0, len 0, vendor err 129 (Recv)",
        "nccl-network-errors",
    ),
    (
        "nccl-ib-acs-hint",
        "HINT: In many cases this error occurs when ACS is enabled "
        "which would break GPU Direct RDMA "
        "protocol.",
        "nccl-network-errors",
    ),
    (
        "nccl-qp-connect-failed",
        "NCCL WARN Call to ibv_modify_qp failed with 110 Connection timed out, on dev mlx5_0:1",
        "nccl-network-errors",
    ),
    (
        "nccl-shm-full",
        "misc/shmutils.cc:72 NCCL WARN Error: failed to extend /dev/shm/nccl-AbCdEf to 9637892 "
        "bytes, error: No space left on device (28)",
        "nccl-shm-exhausted",
    ),
    (
        "nccl-using-socket",
        "node1:1234:1234 [0] NCCL INFO Using network Socket",
        "nccl-fell-back-to-sockets",
    ),
    (
        "nccl-p2p-via-shm",
        "node1:1234:1250 [0] NCCL INFO Channel 00 : 0[0] -> 1[1] via SHM/direct",
        "nccl-p2p-not-used",
    ),
    (
        "nccl-gdr-disabled",
        "node1:1234:1234 [0] NCCL INFO NET/IB : GPU Direct RDMA Disabled for HCA 0 'mlx5_0'",
        "nccl-gpudirect-rdma-off",
    ),
    (
        "nccl-peer-closed",
        "NCCL WARN socketProgress: Connection closed by remote peer 10.0.0.3<41234>",
        "nccl-network-errors",
    ),
    (
        "nccl-watchdog-timeout",
        "[Rank 2] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=12345, "
        "OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600014 milliseconds "
        "before timing out.",
        "nccl-collective-timeout",
    ),
    (
        "nccl-communicator-aborted",
        "NCCL communicator was aborted on rank 2.",
        "nccl-collective-timeout",
    ),
    (
        "peermem-invalid-context",
        "nvidia-peermem nv_get_p2p_free_callback:127 ERROR detected invalid context, skipping "
        "further processing",
        "benign-error-text",
    ),
    (
        "nccl-segfault",
        "python[12345]: segfault at 7f2a1c000000 ip 00007f2b3c4d5e6f "
        "sp 00007ffd1a2b3c4d error 4 in "
        "libnccl.so.2[7f2b3c000000+1a000000]",
        "nccl-crashed",
    ),
    # 8/10. NICs
    (
        "mlx5-slot-power",
        "mlx5_core 0000:5c:00.0: mlx5_pcie_event:299:(pid 268269): Detected insufficient power on "
        "the PCIe slot (27W).",
        "nic-hardware-warning",
    ),
    (
        "mlx5-module-high-temperature",
        "mlx5_core 0000:5c:00.0: mlx5_port_module_event:1131:(pid 0): Port module event[error]: "
        "module 0, Cable error, High Temperature",
        "nic-hardware-warning",
    ),
    (
        "mlx5-access-reg",
        "mlx5_core 0000:5c:00.0: mlx5_cmd_out_err:838:(pid 1441871): ACCESS_REG(0x805) op_mod(0x1) "
        "failed, status bad resource(0x5), syndrome (0x305684), err(-22)",
        "benign-error-text",
    ),
    # 12. Slurm
    (
        "slurm-gres-count-low",
        "Reason=gres/gpu count reported lower than configured (0 < 8) [slurm@2024-03-01T10:00:00]",
        "slurm-gres-gpu-count-low",
    ),
    (
        "slurm-file-less-gpu",
        "warning: Ignoring file-less GPU gpu:(null) from final GRES list",
        "slurm-gres-gpu-count-low",
    ),
    (
        "slurm-invalid-gres",
        "sbatch: error: Batch job submission failed: Invalid generic resource (gres) specification",
        "slurm-gres-gpu-count-low",
    ),
    # frameworks
    (
        "dataloader-few-workers",
        "UserWarning: The dataloader, val dataloader 0, does not have many workers which may be a "
        "bottleneck. Consider increasing the value of the `num_workers` argument` (try 32 which is "
        "the number of cpus on this machine) in the `DataLoader` init to improve performance.",
        "dataloader-too-few-workers",
    ),
]

# Signatures whose wording comes from experience ([recalled] in the catalogue), not from a
# checked source: matched loosely, and listed here as unverified.
UNVERIFIED = {
    "nvml-driver-not-loaded",
    "modprobe-nvidia-not-found",
    "module-key-rejected",
    "nvidia-unknown-symbol",
    "nvrm-rminitadapter-failed",
    "nvml-gpu-is-lost",
    "nvml-library-not-found",
    "docker-unknown-runtime-nvidia",
    "device-plugin-nvml-init-failed",
    "cuda-no-device",
    "cuda-forward-compat-unsupported",
    "cuda-insufficient-driver",
    "cuda-devices-busy",
    "cuda-out-of-memory",
    "nccl-communicator-aborted",
}

# A paste around each text: a prompt, an nvidia-smi table of a healthy GPU before it and
# unrelated kernel lines after it, as a responder copies a terminal.
PASTE = """\
root@gpu-node-17:~# nvidia-smi -L
GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-2b9d1ab5-7c3e-4c62-9a51-0c3e2f9a7f10)
root@gpu-node-17:~# journalctl -u my-training --no-pager | tail -n 20
Dec 01 10:11:12 gpu-node-17 python[4242]: INFO epoch 3 step 1200 loss 2.31
{text}
Dec 01 10:11:13 gpu-node-17 systemd[1]: my-training.service: Main process exited, status=1
root@gpu-node-17:~# uptime
 10:12:01 up 12 days,  3:04,  1 user,  load average: 0.52, 0.48, 0.40
"""
