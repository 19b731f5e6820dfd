# ruff: noqa: C408 - keyword dicts read like the snapshots they build
"""Builds the hand-made snapshots in this folder (run: python tests/data/snapshots/build.py).

Each one is a small, readable incident; the JSON files are committed so tests do not
depend on this script, and the script keeps them reproducible."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from gpu_triage.model.facts import (
    BusLossEvent,
    DiagResult,
    FabricFacts,
    Facts,
    GpuFacts,
    HostFacts,
    UnavailableReason,
    XidEvent,
)
from gpu_triage.model.snapshot import CollectorState, CollectorStatus, Snapshot, dump_snapshot

HERE = Path(__file__).parent
WHEN = datetime(2026, 11, 30, 3, 0, tzinfo=UTC)
OK = CollectorState.OK


def status(
    name: str, state: CollectorState = OK, kinds: list[str] | None = None, error: str = ""
) -> CollectorStatus:
    return CollectorStatus(name=name, state=state, duration_s=0.1, error=error, kinds=kinds or [])


def h100(i: int, **kw: object) -> GpuFacts:
    base: dict[str, object] = dict(
        index=i,
        name="NVIDIA H100 80GB HBM3",
        uuid=f"GPU-0000000{i}-aaaa-bbbb-cccc-00000000000{i}",
        serial=f"165232000{i:04d}",
        pci_bus_id=f"0000:{0x18 + 0x10 * i:02x}:00.0",
        numa_node=0 if i < 4 else 1,
        driver_version="565.57.01",
        cuda_version="12.7",
        vbios_version="96.00.99.00.01",
        utilization_gpu_pct=97.0,
        utilization_memory_pct=60.0,
        memory_used_mib=70000.0,
        memory_total_mib=81559.0,
        power_draw_w=640.0,
        power_limit_w=700.0,
        temperature_gpu_c=62.0,
        temperature_memory_c=70.0,
        temperature_slowdown_c=90.0,
        temperature_shutdown_c=95.0,
        performance_state=0,
        clocks_sm_mhz=1980.0,
        clocks_sm_max_mhz=1980.0,
        ecc_enabled=True,
        ecc_volatile_corrected=0,
        ecc_volatile_uncorrected=0,
        ecc_aggregate_corrected=0,
        ecc_aggregate_uncorrected=0,
        remapped_rows_correctable=0,
        remapped_rows_uncorrectable=0,
        remapped_rows_pending=False,
        remapped_rows_failure=False,
        sram_corrected=0,
        sram_uncorrected=0,
        sram_threshold_exceeded=False,
        fabric_state="completed",
        fabric_status="success",
        pcie_link_gen=5,
        pcie_link_gen_max=5,
        pcie_link_width=16,
        pcie_link_width_max=16,
        pcie_replay_count=0,
        nvlink_links_total=18,
        nvlink_links_active=18,
        persistence_mode=True,
        mig_mode=False,
        compute_mode="default",
        recovery_action="none",
        process_count=1,
        lost=False,
        query_errors=0,
        source="nvml",
    )
    base.update(kw)
    g = GpuFacts.model_validate(base)
    if "throttle_mask" not in kw:
        g.set_throttle_mask(0)
    return g


def host(**kw: object) -> HostFacts:
    base: dict[str, object] = dict(
        hostname="gpu-node-017",
        kernel="6.8.0-45-generic",
        cpu_count=192,
        cpu_user_pct=12.0,
        cpu_system_pct=3.0,
        cpu_iowait_pct=0.5,
        cpu_steal_pct=0.0,
        cpu_idle_pct=84.5,
        busiest_core=17,
        busiest_core_busy_pct=48.0,
        cores_saturated=0,
        load_1m=20.0,
        load_5m=19.0,
        load_15m=18.0,
        mem_total_mib=2063000.0,
        mem_available_mib=1500000.0,
        swap_total_mib=0.0,
        swap_used_mib=0.0,
        swap_in_pages_s=0.0,
        swap_out_pages_s=0.0,
        reclaim_scan_pages_s=0.0,
        direct_reclaim_pages_s=0.0,
        hugepages_total=0,
        hugepages_free=0,
        hugepage_size_kib=2048,
        psi_cpu_some_avg10=0.5,
        psi_io_some_avg10=0.2,
        psi_io_full_avg10=0.1,
        psi_memory_some_avg10=0.0,
        psi_memory_full_avg10=0.0,
        numa_nodes=2,
        driver_version="565.57.01",
        cuda_version="12.7",
        gpu_count_visible=8,
        gpu_count_pci=8,
        peermem_loaded=True,
        peermem_module="nvidia_peermem",
        iommu_mode="passthrough",
        iommu_cmdline="intel_iommu=on iommu=pt",
        source="/proc",
    )
    base.update(kw)
    return HostFacts.model_validate(base)


def fabric(**kw: object) -> FabricFacts:
    """An HGX H100 baseboard's fabric: 4 NVSwitches, the Fabric Manager running at the
    driver's version."""
    base: dict[str, object] = dict(
        nvswitch_count=4,
        fm_installed=True,
        fm_active_state="active",
        fm_sub_state="running",
        fm_result="success",
        fm_version="565.57.01",
        fm_log_errors=0,
        source="sysfs, systemctl, nv-fabricmanager, fabricmanager.log",
    )
    base.update(kw)
    return FabricFacts.model_validate(base)


ALL_OK = [
    status("nvml", kinds=["gpu", "process", "nvlink"]),
    status("kernel_log", kinds=["xid", "sxid", "aer", "bus_loss", "oom", "nvlink_error"]),
    status("host", kinds=["host", "disk", "nic", "ib", "pcie"]),
    status("fabric_manager", kinds=["fabric"]),
]


def snap(desc: str, facts: Facts, collectors: list[CollectorStatus] | None = None) -> Snapshot:
    if facts.fabric is None and any(c.name == "fabric_manager" for c in collectors or ALL_OK):
        facts.fabric = fabric()  # an HGX node: its fabric was read, and is healthy
    return Snapshot(
        taken_at=WHEN,
        hostname="gpu-node-017",
        window_s=1.0,
        description=desc,
        facts=facts,
        collectors=collectors if collectors is not None else ALL_OK,
    )


def build() -> dict[str, Snapshot]:
    out: dict[str, Snapshot] = {}
    busy = [h100(i) for i in range(8)]
    out["healthy-busy"] = snap(
        "8 busy H100s, compute-bound, nothing wrong", Facts(host=host(), gpus=busy)
    )
    starved = [h100(i, utilization_gpu_pct=18.0 + i, power_draw_w=160.0) for i in range(8)]
    out["input-bound"] = snap(
        "GPUs 18-25% busy while the host waits on storage (guide/CM1)",
        Facts(
            host=host(cpu_iowait_pct=38.0, cpu_idle_pct=40.0, busiest_core_busy_pct=62.0),
            gpus=starved,
        ),
    )
    xid_gpus = [h100(i) for i in range(8)]
    xid_gpus[3] = h100(3, utilization_gpu_pct=0.0, power_draw_w=0.0, lost=True)
    line = "NVRM: Xid (PCI:0000:48:00): 79, pid=2871, name=python, GPU has fallen off the bus."
    out["xid79"] = snap(
        "GPU 3 fell off the bus (Xid 79)",
        Facts(
            host=host(),
            gpus=xid_gpus,
            xids=[
                XidEvent(
                    code=79,
                    pci_bus_id="0000:48:00.0",
                    pid=2871,
                    process_name="python",
                    message="GPU has fallen off the bus.",
                    raw=f"[ 8812.220331] {line}",
                    time_text="8812.220331",
                    monotonic_s=8812.220331,
                    line=1412,
                    source="journalctl -k",
                )
            ],
            bus_losses=[
                BusLossEvent(
                    pci_bus_id="0000:48:00.0",
                    message="GPU has fallen off the bus.",
                    raw=f"[ 8812.220331] {line}",
                    line=1412,
                    source="journalctl -k",
                )
            ],
        ),
    )
    nohost = host()
    out["no-gpu-collector"] = snap(
        "a node where NVML could not be loaded: GPU rules cannot be evaluated",
        Facts(host=nohost),
        [
            status(
                "nvml",
                CollectorState.UNAVAILABLE,
                error="NVML library not found (no NVIDIA driver installed)",
            ),
            status("kernel_log", kinds=["xid"]),
            status("host", kinds=["host"]),
        ],
    )
    demo_gpus = [h100(i) for i in range(8)]
    demo_gpus[2] = h100(2, temperature_gpu_c=91.0, clocks_sm_mhz=1410.0, utilization_gpu_pct=99.0)
    demo_gpus[2].throttle_hw_thermal_slowdown = True
    demo_gpus[5] = h100(5, pcie_link_width=8, utilization_gpu_pct=71.0)
    demo_gpus[6] = h100(6, process_count=3, utilization_gpu_pct=64.0)
    demo_gpus[7] = h100(7, power_draw_w=None, utilization_gpu_pct=97.0)
    demo_gpus[7].mark_unavailable(
        "power_draw_w", UnavailableReason.NOT_SUPPORTED, "nvmlDeviceGetPowerUsage: Not Supported"
    )
    out["demo-incident"] = snap(
        "Demo incident: one GPU throttling for heat, one on an x8 link, one shared by three "
        "processes, and an Xid 79 on GPU 3",
        Facts(
            host=host(cpu_iowait_pct=3.0),
            gpus=demo_gpus,
            xids=out["xid79"].facts.xids,
            bus_losses=out["xid79"].facts.bus_losses,
        ),
    )
    out.update(readiness())
    return out


DIAG_TESTS = [
    ("Deployment", "Denylist"),
    ("Deployment", "NVML Library"),
    ("Deployment", "CUDA Main Library"),
    ("Deployment", "Persistence Mode"),
    ("Deployment", "Environment Variables"),
    ("Deployment", "Page Retirement/Row Remap"),
    ("Deployment", "Graphics Processes"),
    ("Deployment", "Inforom"),
    ("Integration", "PCIe"),
    ("Hardware", "GPU Memory"),
]


def diags(fail: tuple[str, int, str] | None = None) -> list[DiagResult]:
    """A dcgmi diag -r 2 run over 8 GPUs, all passing but ``fail`` (test, GPU, message)."""
    out = []
    for cat, test in DIAG_TESTS:
        gpus: list[int | None] = [None] if cat == "Deployment" else list(range(8))
        for g in gpus:
            bad = fail is not None and fail[0] == test and fail[1] == g
            out.append(
                DiagResult(
                    category=cat,
                    test=test,
                    result="fail" if bad else "pass",
                    gpu_index=g,
                    message=fail[2] if bad and fail else None,
                    error_id=52 if bad else None,
                    error_code="DCGM_FR_FAULTY_MEMORY" if bad else None,
                    error_severity="isolate" if bad else None,
                    error_category="hardware_memory" if bad else None,
                    dcgm_version="3.3.5",
                    source="dcgmi diag -r 2 -j",
                )
            )
    return out


DIAG_OK = [*ALL_OK, status("dcgm_diag", kinds=["diag"])]


def readiness() -> dict[str, Snapshot]:
    """Nodes for `gpu-triage readiness --snapshot`: one that passes and three that fail."""
    idle = {"utilization_gpu_pct": 0.0, "power_draw_w": 72.0, "memory_used_mib": 1.0}
    gpus = [h100(i, **idle) for i in range(8)]
    out = {
        "readiness-healthy": snap(
            "a new 8x H100 node before service: every check and diagnostic passes",
            Facts(host=host(), gpus=gpus, diags=diags(), fabric=fabric()),
            DIAG_OK,
        )
    }
    remap = [h100(i, **idle) for i in range(8)]
    remap[3] = h100(3, remapped_rows_pending=True, remapped_rows_uncorrectable=1, **idle)
    out["readiness-row-remap-pending"] = snap(
        "GPU 3 has a row remap pending (needs a reset before service)",
        Facts(host=host(), gpus=remap, diags=diags()),
        DIAG_OK,
    )
    link = [h100(i, **idle) for i in range(8)]
    link[5] = h100(5, pcie_link_width=8, **idle)
    out["readiness-link-downgraded"] = snap(
        "GPU 5 trained its PCIe link at x8 of x16",
        Facts(host=host(), gpus=link, diags=diags()),
        DIAG_OK,
    )
    out["readiness-diag-failed"] = snap(
        "dcgmi diag: the memory test fails on GPU 2",
        Facts(
            host=host(),
            gpus=[h100(i, **idle) for i in range(8)],
            diags=diags(("GPU Memory", 2, "GPU 2 failed memory test: 3 mismatched bytes")),
        ),
        DIAG_OK,
    )
    waiting = [h100(i, fabric_state="in_progress", fabric_status=None, **idle) for i in range(8)]
    out["readiness-fabric-manager-down"] = snap(
        "the Fabric Manager failed after a reboot: every GPU waits for the NVSwitch fabric",
        Facts(
            host=host(),
            gpus=waiting,
            diags=diags(),
            fabric=fabric(
                fm_active_state="failed",
                fm_sub_state="failed",
                fm_result="exit-code",
                fm_log_errors=1,
                fm_log_error="request to query NVSwitch device information from NVSwitch "
                "driver failed",
            ),
        ),
        DIAG_OK,
    )
    out["readiness-fabric-manager-version-mismatch"] = snap(
        "the driver was upgraded to 565.57.01, the Fabric Manager stayed at 560.35.03",
        Facts(
            host=host(),
            gpus=[h100(i, **idle) for i in range(8)],
            diags=diags(),
            fabric=fabric(fm_version="560.35.03"),
        ),
        DIAG_OK,
    )
    return out


if __name__ == "__main__":
    for name, s in build().items():
        target = HERE / f"{name}.json"
        if name == "demo-incident":
            target = HERE.parents[2] / "gpu_triage" / "data" / "demo-incident.json"
        target.write_text(dump_snapshot(s))
        print("wrote", target)
