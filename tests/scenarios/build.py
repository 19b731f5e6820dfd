# ruff: noqa: C408 - keyword dicts read like the snapshots they build
"""Builds the scenario snapshots in this folder (run: python tests/scenarios/build.py).

One realistic, internally consistent 8-GPU node per scenario: the common mistakes
guide/CM1..CM7 (with job metrics, site inventory or answers where a person must say
what the node cannot), the stories guide/MS1..MS3, a storm of Xids, a throttling node,
a downgraded PCIe link, and an idle and a busy healthy node. The JSON files are
committed so the tests do not depend on this script; the script keeps them
reproducible (tests/scenarios/test_scenarios.py checks that they are up to date), and
writes three of them to gpu_triage/data/demos/ as bundled demo incidents."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

from gpu_triage.collectors.parsers.topo import parse_topo_matrix
from gpu_triage.model.facts import (
    AerEvent,
    BusLossEvent,
    DiskFacts,
    FabricFacts,
    Facts,
    GpuFacts,
    GpuProcess,
    HostFacts,
    IbPortFacts,
    JobMetrics,
    NicFacts,
    OomKillEvent,
    PcieLinkFacts,
    SchedulerFacts,
    SiteInventory,
    UnavailableReason,
    XidEvent,
)
from gpu_triage.model.snapshot import (
    CollectorState,
    CollectorStatus,
    RawOutput,
    Snapshot,
    dump_snapshot,
)

HERE = Path(__file__).parent
DEMOS = HERE.parents[1] / "gpu_triage" / "data" / "demos"
# Scenarios also shipped as demo incidents (gpu-triage run --snapshot ...).
DEMO_NAMES = ("cm1-input-bound-storage", "xid-storm-contained-ecc", "ms2-loader-memory-pressure")

WHEN = datetime(2026, 11, 30, 3, 0, tzinfo=UTC)
OK = CollectorState.OK

DRIVER = "550.127.05"
CUDA = "12.4"
VBIOS = "96.00.89.00.01"
# PCI addresses and CPU affinity of the eight GPUs of an HGX H100 board (DGX H100 layout).
GPU_BUS = ["1b", "43", "52", "61", "9d", "c3", "d1", "df"]
NIC_BUS = ["18", "40", "4f", "5e", "9a", "c0", "ce", "dc"]
AFFINITY = ["0-55,112-167", "56-111,168-223"]

# --------------------------------------------------------------------------- GPUs


def bus(i: int) -> str:
    return f"0000:{GPU_BUS[i]}:00.0"


def h100(i: int, **kw: object) -> GpuFacts:
    """GPU ``i`` of a node running a compute-bound training job."""
    base: dict[str, object] = dict(
        index=i,
        name="NVIDIA H100 80GB HBM3",
        uuid=f"GPU-{0x5A3C0000 + i:08x}-7d1e-4c2b-9a6f-0c4e8b2d{i:04x}",
        serial=f"165242303{4410 + i:04d}",
        pci_bus_id=bus(i),
        numa_node=0 if i < 4 else 1,
        cpu_affinity=AFFINITY[0 if i < 4 else 1],
        driver_version=DRIVER,
        cuda_version=CUDA,
        vbios_version=VBIOS,
        utilization_gpu_pct=97.0,
        utilization_memory_pct=58.0,
        memory_used_mib=71234.0,
        memory_total_mib=81559.0,
        power_draw_w=655.0 - 3 * i,
        power_limit_w=700.0,
        temperature_gpu_c=63.0 + (i % 3),
        temperature_memory_c=71.0 + (i % 3),
        temperature_slowdown_c=87.0,
        temperature_shutdown_c=92.0,
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
    for name in (
        "throttle_gpu_idle",
        "throttle_applications_clocks_setting",
        "throttle_sw_power_cap",
        "throttle_hw_slowdown",
        "throttle_sync_boost",
        "throttle_sw_thermal_slowdown",
        "throttle_hw_thermal_slowdown",
        "throttle_hw_power_brake_slowdown",
        "throttle_display_clock_setting",
    ):
        if name not in kw:
            setattr(g, name, False)
    # HGX boards are passively cooled: NVML has no fan to read.
    g.mark_unavailable(
        "fan_speed_pct", UnavailableReason.NOT_SUPPORTED, "nvmlDeviceGetFanSpeed: Not Supported"
    )
    return g


def idle_h100(i: int, **kw: object) -> GpuFacts:
    """GPU ``i`` with nothing on it: idle clocks, low power, PCIe link down-trained to gen 1."""
    base: dict[str, object] = dict(
        utilization_gpu_pct=0.0,
        utilization_memory_pct=0.0,
        memory_used_mib=0.0,
        power_draw_w=69.0 + i % 4,
        temperature_gpu_c=29.0 + i % 3,
        temperature_memory_c=35.0 + i % 3,
        clocks_sm_mhz=345.0,
        pcie_link_gen=1,
        process_count=0,
        throttle_gpu_idle=True,
    )
    base.update(kw)
    return h100(i, **base)


def gpus(make: Callable[..., GpuFacts] = h100, **per_gpu: dict[str, object]) -> list[GpuFacts]:
    """Eight GPUs; ``per_gpu`` maps "gN" to overrides for GPU N."""
    return [make(i, **per_gpu.get(f"g{i}", {})) for i in range(8)]


def procs(gs: list[GpuFacts], name: str = "python3", first_pid: int = 48211) -> list[GpuProcess]:
    """One compute process per GPU that holds work, using the memory the GPU reports."""
    out = []
    for g in gs:
        if not g.process_count:
            continue
        out.append(
            GpuProcess(
                gpu_pci_bus_id=g.pci_bus_id,
                gpu_index=g.index,
                pid=first_pid + (g.index or 0),
                name=name,
                used_memory_mib=(g.memory_used_mib or 0.0) - 520.0,
                type="compute",
                source="nvml",
            )
        )
    return out


# --------------------------------------------------------------------------- host


def host(name: str, **kw: object) -> HostFacts:
    """A dual-socket (2 x 56 cores, SMT) host with 2 TiB RAM feeding a busy job."""
    base: dict[str, object] = dict(
        hostname=name,
        kernel="5.15.0-1063-nvidia",
        cpu_count=224,
        cpu_user_pct=11.0,
        cpu_system_pct=2.5,
        cpu_iowait_pct=0.4,
        cpu_steal_pct=0.0,
        cpu_idle_pct=86.1,
        busiest_core=12,
        busiest_core_busy_pct=52.0,
        cores_saturated=0,
        load_1m=27.4,
        load_5m=26.9,
        load_15m=26.1,
        mem_total_mib=2063688.0,
        mem_available_mib=1712000.0,
        swap_total_mib=0.0,
        swap_used_mib=0.0,
        swap_in_pages_s=0.0,
        swap_out_pages_s=0.0,
        reclaim_scan_pages_s=0.0,
        direct_reclaim_pages_s=0.0,
        hugepages_total=8192,
        hugepages_free=8192,
        hugepage_size_kib=2048,
        psi_cpu_some_avg10=0.8,
        psi_io_some_avg10=0.3,
        psi_io_full_avg10=0.1,
        psi_memory_some_avg10=0.0,
        psi_memory_full_avg10=0.0,
        numa_nodes=2,
        driver_version=DRIVER,
        cuda_version=CUDA,
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


def idle_host(name: str, **kw: object) -> HostFacts:
    base: dict[str, object] = dict(
        cpu_user_pct=0.3,
        cpu_system_pct=0.4,
        cpu_iowait_pct=0.0,
        cpu_idle_pct=99.3,
        busiest_core=0,
        busiest_core_busy_pct=6.0,
        load_1m=0.6,
        load_5m=0.5,
        load_15m=0.5,
        mem_available_mib=2001000.0,
        psi_cpu_some_avg10=0.0,
        psi_io_some_avg10=0.0,
        psi_io_full_avg10=0.0,
    )
    base.update(kw)
    return host(name, **base)


def disks(**per_disk: dict[str, object]) -> list[DiskFacts]:
    """The OS disk and the four NVMe drives of the /raid dataset cache."""
    out = []
    for name in ("nvme0n1", "nvme2n1", "nvme3n1", "nvme4n1", "nvme5n1"):
        data = name != "nvme0n1"
        base: dict[str, object] = dict(
            name=name,
            read_mib_s=310.0 if data else 0.1,
            write_mib_s=2.0 if data else 1.4,
            read_iops=2480.0 if data else 1.0,
            write_iops=16.0 if data else 22.0,
            read_await_ms=0.21 if data else 0.1,
            write_await_ms=0.05,
            util_pct=7.5 if data else 0.6,
            rotational=False,
            source="/proc/diskstats",
        )
        base.update(per_disk.get(name, {}))
        disk = DiskFacts.model_validate(base)
        # What the host collector derives from /proc/diskstats (sectors read per read).
        if disk.read_iops and disk.read_mib_s is not None:
            disk.read_request_kib = round(disk.read_mib_s * 1024 / disk.read_iops, 2)
        else:
            disk.mark_unavailable(
                "read_request_kib", UnavailableReason.NOT_SUPPORTED, "no reads in the window"
            )
        out.append(disk)
    return out


def idle_disks() -> list[DiskFacts]:
    zero = dict(read_mib_s=0.0, read_iops=0.0, write_mib_s=0.1, write_iops=2.0, util_pct=0.1)
    return disks(**dict.fromkeys(("nvme0n1", "nvme2n1", "nvme3n1", "nvme4n1", "nvme5n1"), zero))


def nics() -> list[NicFacts]:
    """Two 100 GbE storage ports, and IPoIB on the eight 400G compute HCAs."""
    out = [
        NicFacts(
            name=f"enp170s0f{p}np{p}",
            pci_bus_id=f"0000:aa:00.{p}",
            numa_node=1,
            driver="mlx5_core",
            speed_mbps=100000.0,
            mtu=9000,
            operstate="up",
            rx_errors=0,
            tx_errors=0,
            rx_dropped=12,
            tx_dropped=0,
            source="/sys/class/net",
        )
        for p in (0, 1)
    ]
    out += [
        NicFacts(
            name=f"ibp{int(NIC_BUS[i], 16)}s0",
            pci_bus_id=f"0000:{NIC_BUS[i]}:00.0",
            numa_node=0 if i < 4 else 1,
            driver="mlx5_core",
            speed_mbps=400000.0,
            mtu=4092,
            operstate="up",
            rx_errors=0,
            tx_errors=0,
            rx_dropped=0,
            tx_dropped=0,
            source="/sys/class/net",
        )
        for i in range(8)
    ]
    return out


def ib_ports(
    n: int = 8, numa: Callable[[int], int] = lambda i: 0 if i < 4 else 1
) -> list[IbPortFacts]:
    return [
        IbPortFacts(
            ca_name=f"mlx5_{i}",
            port=1,
            state="active",
            phys_state="linkup",
            rate_gbps=400.0,
            link_layer="infiniband",
            pci_bus_id=f"0000:{NIC_BUS[i]}:00.0",
            numa_node=numa(i),
            symbol_errors=0,
            link_downed=0,
            rcv_errors=0,
            xmit_discards=0,
            source="/sys/class/infiniband",
        )
        for i in range(n)
    ]


def pcie_links(gs: list[GpuFacts]) -> list[PcieLinkFacts]:
    """sysfs link state of the GPUs (as trained now) and of the compute HCAs."""
    speed = {1: 2.5, 2: 5.0, 3: 8.0, 4: 16.0, 5: 32.0}
    out = [
        PcieLinkFacts(
            pci_bus_id=g.pci_bus_id,
            device_class="gpu",
            speed_gts=speed[g.pcie_link_gen] if g.pcie_link_gen else None,
            speed_gts_max=32.0,
            width=g.pcie_link_width,
            width_max=16,
            numa_node=g.numa_node,
            source="/sys/bus/pci/devices",
        )
        for g in gs
        if g.pci_bus_id
    ]
    out += [
        PcieLinkFacts(
            pci_bus_id=f"0000:{NIC_BUS[i]}:00.0",
            device_class="nic",
            speed_gts=32.0,
            speed_gts_max=32.0,
            width=16,
            width_max=16,
            numa_node=0 if i < 4 else 1,
            source="/sys/bus/pci/devices",
        )
        for i in range(8)
    ]
    return out


# --------------------------------------------------------------------------- topology


def topo_text(conn: Callable[[int, int], str], nic_count: int = 8) -> str:
    """``nvidia-smi topo -m`` as printed: GPUs and NICs, affinity columns, NIC legend."""
    devs = [f"GPU{i}" for i in range(8)] + [f"NIC{j}" for j in range(nic_count)]
    width = 8
    lines = ["\t" + "\t".join(devs) + "\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID"]
    for i in range(8):
        cells = ["X" if i == j else "NV18" for j in range(8)]
        cells += [conn(i, j) for j in range(nic_count)]
        aff = AFFINITY[0 if i < 4 else 1]
        lines.append(f"GPU{i}\t" + "\t".join(cells) + f"\t{aff}\t{0 if i < 4 else 1}\t\tN/A")
    for j in range(nic_count):
        cells = [conn(i, j) for i in range(8)]
        cells += [
            "X" if j == k else ("NODE" if (j < 4) == (k < 4) else "SYS") for k in range(nic_count)
        ]
        lines.append(f"NIC{j}\t" + "\t".join(cells))
    legend = [
        "",
        "Legend:",
        "",
        "  X    = Self",
        "  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA "
        "nodes (e.g., QPI/UPI)",
        "  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host "
        "Bridges within a NUMA node",
        "  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)",
        "  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe "
        "Host Bridge)",
        "  PIX  = Connection traversing at most a single PCIe bridge",
        "  NV#  = Connection traversing a bonded set of # NVLinks",
        "",
        "NIC Legend:",
        "",
    ]
    legend += [f"  NIC{j}: mlx5_{j}" for j in range(nic_count)]
    return "\n".join(line.expandtabs(width) for line in lines + legend) + "\n"


def dgx_conn(i: int, j: int) -> str:
    """Each GPU shares a PCIe switch with its own HCA (DGX H100)."""
    if i == j:
        return "PIX"
    return "NODE" if (i < 4) == (j < 4) else "SYS"


TOPO_SOURCE = "nvidia-smi topo -m"


def topology(text: str) -> list:
    return parse_topo_matrix(text, TOPO_SOURCE).pairs


# --------------------------------------------------------------------------- people, scheduler


def k8s(requested: int, pods: int, **kw: object) -> SchedulerFacts:
    base: dict[str, object] = dict(
        k8s_node_gpu_capacity=8,
        k8s_node_gpu_allocatable=8,
        k8s_gpu_requested=requested,
        k8s_pods_with_gpu=pods,
        k8s_pods_pending_gpu=0,
        container_runtime_nvidia=True,
        container_sees_gpus=True,
        source="kubectl",
    )
    base.update(kw)
    return SchedulerFacts.model_validate(base)


def site(**kw: object) -> SiteInventory:
    base: dict[str, object] = dict(
        rack="R14",
        row="B",
        role="training",
        expected_gpu_count=8,
        expected_pcie_gen=5,
        expected_pcie_width=16,
        expected_nvlink_active=18,
        pinned_driver_version=DRIVER,
        pinned_vbios_version=VBIOS,
        rdma_configured=True,
        source="inventory.csv",
    )
    base.update(kw)
    return SiteInventory.model_validate(base)


# --------------------------------------------------------------------------- kernel log


def stamp(age_s: float) -> tuple[datetime, str]:
    """When an event ``age_s`` before the snapshot was logged, and journalctl's stamp."""
    t = WHEN - timedelta(seconds=age_s)
    return t, t.strftime("%Y-%m-%dT%H:%M:%S,%f")[:-3] + "+00:00"


def xid(
    code: int,
    gpu: int,
    age_s: float,
    line: int,
    text: str,
    pid: int | None = None,
    name: str | None = None,
) -> XidEvent:
    t, iso = stamp(age_s)
    who = f"pid={pid}, name={name}, " if pid is not None else "pid='<unknown>', name=<unknown>, "
    head = f"{iso} {HOSTNAME_IN_LOG} kernel: NVRM: Xid (PCI:0000:{GPU_BUS[gpu]}:00)"
    raw = f"{head}: {code}, {who}{text}"
    return XidEvent(
        code=code,
        pid=pid,
        process_name=name,
        message=text,
        pci_bus_id=bus(gpu),
        time=t,
        time_text=iso,
        age_s=age_s,
        raw=raw,
        line=line,
        source="journalctl -k",
    )


HOSTNAME_IN_LOG = "{host}"


def with_host(events: list, hostname: str) -> list:
    for e in events:
        e.raw = e.raw.replace(HOSTNAME_IN_LOG, hostname)
    return events


# --------------------------------------------------------------------------- snapshots


def status(
    name: str, kinds: list[str], state: CollectorState = OK, dur: float = 0.2
) -> CollectorStatus:
    return CollectorStatus(name=name, state=state, duration_s=dur, kinds=kinds)


NODE = [
    status("nvml", ["gpu", "process", "nvlink"], dur=1.4),
    status("kernel_log", ["xid", "sxid", "aer", "bus_loss", "oom", "nvlink_error"], dur=0.3),
    status("host", ["host", "disk", "nic", "ib", "pcie"], dur=1.1),
    status("history", ["xid_history"], dur=0.01),
    status("text:topo:topo-m.txt", ["topo"], dur=0.01),
    status("fabric_manager", ["fabric"], dur=0.2),
]
# An HGX baseboard's fabric as the fabric collector reads it: 4 NVSwitches, the Fabric
# Manager running at the driver's version, nothing wrong in its log.
HEALTHY_FABRIC = dict(
    nvswitch_count=4,
    fm_installed=True,
    fm_active_state="active",
    fm_sub_state="running",
    fm_result="success",
    fm_version=DRIVER,
    fm_log_errors=0,
    fm_switches_mismatch=False,
    fm_nothing_to_do=False,
    source="sysfs, systemctl, nv-fabricmanager, fabricmanager.log",
)
K8S = [
    status("kubernetes", ["scheduler"], dur=0.6),
    status("container_runtime", ["scheduler"], dur=2.3),
]


def snap(
    hostname: str,
    desc: str,
    facts: Facts,
    *,
    topo: str | None = None,
    scheduler: bool = True,
) -> Snapshot:
    collectors = list(NODE) + (list(K8S) if scheduler else [])
    if facts.site is not None:
        collectors.append(status("inventory", ["site"], dur=0.0))
    if facts.job is not None:
        collectors.append(status("job_metrics", ["job"], dur=0.0))
    raw = []
    if topo is not None:
        raw.append(RawOutput(collector="text:topo:topo-m.txt", source=TOPO_SOURCE, text=topo))
    for kind in ("xids", "aers", "bus_losses", "ooms"):
        with_host(getattr(facts, kind), hostname)
    if facts.fabric is None:  # the Fabric Manager matches the node's own driver
        driver = facts.host.driver_version if facts.host else None
        facts.fabric = FabricFacts.model_validate(
            {**HEALTHY_FABRIC, "fm_version": driver or DRIVER}
        )
    return Snapshot(
        taken_at=WHEN,
        hostname=hostname,
        window_s=5.0,
        description=desc,
        facts=facts,
        collectors=collectors,
        raw=raw,
    )


def node(
    hostname: str,
    gs: list[GpuFacts],
    h: HostFacts | None = None,
    *,
    processes: list[GpuProcess] | None = None,
    conn: Callable[[int, int], str] = dgx_conn,
    nic_count: int = 8,
    **extra: object,
) -> tuple[Facts, str]:
    """Facts of a whole node: host, GPUs, processes, disks, NICs, HCAs, PCIe and topology."""
    text = topo_text(conn, nic_count)
    base: dict[str, object] = dict(
        host=h or host(hostname),
        gpus=gs,
        processes=procs(gs) if processes is None else processes,
        disks=disks(),
        nics=nics(),
        ib_ports=ib_ports(),
        pcie_links=pcie_links(gs),
        topology=topology(text),
        scheduler=k8s(requested=8, pods=1),
        site=site(),
    )
    base.update(extra)
    return Facts.model_validate(base), text


# --------------------------------------------------------------------------- the scenarios


def cm1_storage() -> Snapshot:
    name = "gpu-node-101"
    gs = gpus(
        **{
            f"g{i}": dict(
                utilization_gpu_pct=16.0 + 2 * i,
                utilization_memory_pct=9.0,
                power_draw_w=148.0 + 4 * i,
                clocks_sm_mhz=1980.0,
                temperature_gpu_c=41.0 + (i % 3),
                memory_used_mib=38112.0,
            )
            for i in range(8)
        }
    )
    raid = dict(read_mib_s=182.0, read_iops=44800.0, read_await_ms=11.6, util_pct=99.6)
    facts, topo = node(
        name,
        gs,
        host(
            name,
            cpu_user_pct=19.0,
            cpu_system_pct=6.0,
            cpu_iowait_pct=38.0,
            cpu_idle_pct=37.0,
            busiest_core=61,
            busiest_core_busy_pct=64.0,
            load_1m=131.0,
            load_5m=127.5,
            load_15m=118.2,
            psi_io_some_avg10=71.0,
            psi_io_full_avg10=42.0,
            mem_available_mib=1480000.0,
        ),
        disks=disks(**dict.fromkeys(("nvme2n1", "nvme3n1", "nvme4n1", "nvme5n1"), raid)),
        job=JobMetrics(
            step_time_ms=2140.0,
            rank_step_times_ms=[2131.0, 2152.0, 2138.0, 2146.0, 2129.0, 2150.0, 2141.0, 2144.0],
            nodes_in_job=1,
            source="job-metrics.json",
        ),
        site=site(baseline_step_time_ms=620.0),
    )
    return snap(
        name,
        "guide/CM1, storage: an image-classification job reads a dataset of 14 million small "
        "JPEG files straight off the /raid NVMe array. The eight GPUs sit at 16-30% busy "
        "drawing about 150 W each, the step time is 3.5 times its 620 ms baseline, the host "
        "spends 38% of its CPU time waiting on I/O and every data drive is 99% busy with 4 KiB "
        "random reads (11 ms r_await). The GPUs are starved by storage, not slow.",
        facts,
        topo=topo,
    )


def cm1_cpu() -> Snapshot:
    name = "gpu-node-102"
    gs = gpus(
        **{
            f"g{i}": dict(
                utilization_gpu_pct=22.0 + i,
                utilization_memory_pct=12.0,
                power_draw_w=171.0 + 3 * i,
                temperature_gpu_c=43.0 + (i % 3),
                memory_used_mib=52310.0,
            )
            for i in range(8)
        }
    )
    facts, topo = node(
        name,
        gs,
        host(
            name,
            cpu_user_pct=4.6,
            cpu_system_pct=0.6,
            cpu_iowait_pct=0.2,
            cpu_idle_pct=94.6,
            busiest_core=3,
            busiest_core_busy_pct=99.7,
            cores_saturated=1,
            load_1m=9.1,
            load_5m=9.0,
            load_15m=8.8,
        ),
        job=JobMetrics(
            step_time_ms=1710.0,
            rank_step_times_ms=[1702.0, 1711.0, 1709.0, 1716.0, 1705.0, 1713.0, 1708.0, 1712.0],
            nodes_in_job=1,
            source="job-metrics.json",
        ),
        site=site(baseline_step_time_ms=480.0),
    )
    return snap(
        name,
        "guide/CM1, CPU preprocessing: a language-model fine-tune tokenises its JSONL corpus "
        "on the fly in one data-loader process (num_workers=0). Core 3 is 99.7% busy while "
        "the other 223 cores idle and storage is quiet; the GPUs run 22-29% busy. One thread "
        "feeding eight GPUs.",
        facts,
        topo=topo,
    )


def cm2_base(name: str) -> tuple[list[GpuFacts], HostFacts]:
    # NCCL kernels spin while they wait for the network: utilisation looks high, power
    # does not (about half the limit).
    gs = gpus(
        **{
            f"g{i}": dict(
                utilization_gpu_pct=93.0 + (i % 3),
                utilization_memory_pct=21.0,
                power_draw_w=338.0 + 5 * i,
                clocks_sm_mhz=1980.0,
                temperature_gpu_c=52.0 + (i % 3),
                memory_used_mib=74016.0,
            )
            for i in range(8)
        }
    )
    return gs, host(name, cpu_user_pct=6.5, cpu_idle_pct=91.0)


CM2_DESC = (
    "guide/CM2: a data-parallel job was scaled from 2 to 8 nodes (64 H100s) and got slower "
    "per GPU. On this node nothing is broken: every GPU reports 93-95% utilisation (NCCL "
    "kernels spin while waiting on the network) but draws only about half its power, the "
    "ranks are evenly slow, the HCAs are up and clean. All-reduce over an oversubscribed "
    "spine dominates the step."
)


def cm2_job_metrics() -> Snapshot:
    name = "gpu-node-201"
    gs, h = cm2_base(name)
    facts, topo = node(
        name,
        gs,
        h,
        job=JobMetrics(
            step_time_ms=1385.0,
            rank_step_times_ms=[1379.0, 1391.0, 1384.0, 1388.0, 1381.0, 1386.0, 1390.0, 1383.0],
            nodes_in_job=8,
            throughput_per_gpu=46.2,
            throughput_per_gpu_fewer_nodes=118.5,
            source="job-metrics.json",
        ),
    )
    return snap(
        name,
        CM2_DESC + " The job metrics show 46 samples/s per GPU on 8 nodes against 118 on 2.",
        facts,
        topo=topo,
    )


def cm2_answered() -> Snapshot:
    name = "gpu-node-202"
    gs, h = cm2_base(name)
    facts, topo = node(name, gs, h, answers={"scaling_worse_with_nodes": True})
    return snap(
        name,
        CM2_DESC + " No job metrics were supplied; the responder answered that "
        "the job gets slower per GPU when nodes are added.",
        facts,
        topo=topo,
    )


def cm2_ask() -> Snapshot:
    name = "gpu-node-203"
    gs, h = cm2_base(name)
    facts, topo = node(name, gs, h)
    return snap(
        name,
        CM2_DESC + " No job metrics and no answers: the node looks healthy, so "
        "the triage must ask whether scaling got worse.",
        facts,
        topo=topo,
    )


def cm3_shared() -> Snapshot:
    name = "gpu-node-301"
    notebook = dict(
        process_count=2, memory_used_mib=78391.0, utilization_gpu_pct=88.0, power_draw_w=590.0
    )
    gs = gpus(g2=notebook, g5=notebook)
    ps = procs(gs)
    for i, pid in ((2, 71544), (5, 71602)):
        ps.append(
            GpuProcess(
                gpu_pci_bus_id=bus(i),
                gpu_index=i,
                pid=pid,
                name="python3 -m ipykernel",
                used_memory_mib=7157.0,
                type="compute",
                source="nvml",
            )
        )
        next(p for p in ps if p.gpu_index == i and p.pid != pid).used_memory_mib = 70714.0
    facts, topo = node(name, gs, processes=ps, scheduler=k8s(requested=8, pods=3))
    return snap(
        name,
        "guide/CM3: a training job dies with CUDA out-of-memory every few hours with an "
        "unchanged batch size. Two researchers' notebook kernels landed on GPUs 2 and 5 "
        "(a pod without a GPU request running with NVIDIA_VISIBLE_DEVICES=all), each holding "
        "7 GiB: those GPUs are 96% full and shared by two processes.",
        facts,
        topo=topo,
    )


def cm3_leak(answered: bool) -> Snapshot:
    name = "gpu-node-302" if answered else "gpu-node-303"
    gs = gpus(**{f"g{i}": dict(memory_used_mib=79112.0 + 60 * i) for i in range(8)})
    facts, topo = node(name, gs, answers={"random_gpu_oom": True} if answered else {})
    tail = (
        " The responder confirmed the random OOMs."
        if answered
        else " Nobody has said yet whether the job hits random OOMs, so the triage asks."
    )
    return snap(
        name,
        "guide/CM3: one process per GPU, but a custom CUDA extension leaks a little device "
        "memory each step; every GPU is 97-98% full hours into the run, and the job hits "
        "out-of-memory errors at random with a stable batch size." + tail,
        facts,
        topo=topo,
    )


def cm4_base(name: str, **kw: object) -> tuple[Facts, str]:
    # An inference node: eight vLLM replicas, one per GPU, persistence mode left off by
    # the image; a nightly-style backup timer runs every 10 minutes and thrashes the page
    # cache (kswapd reclaim, no direct reclaim to speak of).
    gs = gpus(
        **{
            f"g{i}": dict(
                utilization_gpu_pct=31.0 + 2 * i,
                utilization_memory_pct=18.0,
                power_draw_w=236.0 + 6 * i,
                memory_used_mib=73402.0,
                temperature_gpu_c=47.0 + (i % 3),
                persistence_mode=False,
            )
            for i in range(8)
        }
    )
    h = host(
        name,
        cpu_user_pct=14.0,
        cpu_system_pct=5.1,
        cpu_iowait_pct=3.2,
        cpu_idle_pct=77.7,
        reclaim_scan_pages_s=38500.0,
        direct_reclaim_pages_s=140.0,
        psi_memory_some_avg10=2.1,
        psi_io_some_avg10=6.4,
        mem_available_mib=161000.0,
    )
    backup = dict(read_mib_s=2150.0, read_iops=17200.0, read_await_ms=1.9, util_pct=71.0)
    return node(
        name,
        gs,
        h,
        processes=procs(gs, name="vllm"),
        disks=disks(nvme2n1=backup),
        scheduler=k8s(requested=8, pods=8),
        site=site(role="inference", rack="R02", row="A"),
        **kw,
    )


CM4_DESC = (
    "guide/CM4: an inference service keeps a flat P50 but its P99 spikes every ten minutes. "
    "The GPUs look mostly idle (31-45%), persistence mode is off on all of them, and a "
    "backup timer reads 2 GiB/s off the NVMe array every ten minutes, making kswapd reclaim "
    "the page cache under the serving processes."
)


def cm4_job_metrics() -> Snapshot:
    name = "gpu-node-401"
    facts, topo = cm4_base(
        name, job=JobMetrics(latency_p50_ms=38.0, latency_p99_ms=212.0, source="job-metrics.json")
    )
    return snap(name, CM4_DESC + " Job metrics: P50 38 ms, P99 212 ms.", facts, topo=topo)


def cm4_answered() -> Snapshot:
    name = "gpu-node-402"
    facts, topo = cm4_base(name, answers={"p99_spikes_periodic": True})
    return snap(
        name,
        CM4_DESC + " No latency metrics were supplied; the responder answered "
        "that P99 spikes every few minutes while P50 stays stable.",
        facts,
        topo=topo,
    )


def cm4_ask() -> Snapshot:
    name = "gpu-node-403"
    facts, topo = cm4_base(name)
    return snap(
        name,
        CM4_DESC + " No latency metrics and no answers: the triage names the "
        "persistence-mode fault and asks about the P99 spikes.",
        facts,
        topo=topo,
    )


def cm5_bus_loss() -> Snapshot:
    name = "gpu-node-501"
    lost_at = 95.0
    gs = gpus()
    # GPU 5 fell off the bus under load: NVML still enumerates it, but every query of the
    # GPU itself answers GPU_IS_LOST.
    g5 = GpuFacts(index=5, lost=True, driver_version=DRIVER, cuda_version=CUDA, source="nvml")
    detail = "nvmlDeviceGetHandleByIndex(5): GPU is lost"
    for field in GpuFacts.model_fields:
        if field not in {
            "unavailable",
            "source",
            "index",
            "lost",
            "driver_version",
            "cuda_version",
        }:
            g5.mark_unavailable(field, UnavailableReason.GPU_LOST, detail)
    gs[5] = g5
    # The other ranks hang in NCCL waiting for rank 5.
    for g in gs[:5] + gs[6:]:
        g.utilization_gpu_pct, g.power_draw_w = 100.0, 205.0
    ps = [p for p in procs(gs) if p.gpu_index != 5]
    aers = []
    for k, age in enumerate((3480.0, 2210.0, 1335.0, 602.0, 241.0, 118.0)):
        t, iso = stamp(age)
        aers.append(
            AerEvent(
                reporter="pcieport 0000:c0:01.1",
                severity="corrected",
                error_type="Physical Layer",
                errors=["RxErr"],
                device_is_gpu=True,
                pci_bus_id=bus(5),
                time=t,
                time_text=iso,
                age_s=age,
                raw="\n".join(
                    f"{iso} {HOSTNAME_IN_LOG} kernel: {text}"
                    for text in (
                        "pcieport 0000:c0:01.1: AER: Corrected error received: 0000:c3:00.0",
                        "nvidia 0000:c3:00.0: PCIe Bus Error: severity=Corrected, "
                        "type=Physical Layer, (Receiver ID)",
                        "nvidia 0000:c3:00.0:   device [10de:2330] error status/mask=00000001/"
                        "0000e000",
                        "nvidia 0000:c3:00.0:    [ 0] RxErr",
                    )
                ),
                line=18811 + 40 * k,
                source="journalctl -k",
            )
        )
    text = "GPU has fallen off the bus."
    x79 = xid(79, 5, lost_at, 19102, text, pid=48216, name="python3")
    t, iso = stamp(lost_at)
    loss = BusLossEvent(
        pci_bus_id=bus(5),
        message=text,
        time=t,
        time_text=iso,
        age_s=lost_at,
        raw=x79.raw,
        line=19102,
        source="journalctl -k",
    )
    facts, topo = node(name, gs, processes=ps, xids=[x79], bus_losses=[loss], aers=aers)
    return snap(
        name,
        "guide/CM5: a 700 W training run crashed; GPU 5 fell off the bus (Xid 79) 95 s before "
        "the snapshot, after an hour of growing corrected PCIe receiver errors on its link. "
        "NVML answers GPU_IS_LOST for it; the seven other ranks hang in NCCL waiting for it.",
        facts,
        topo=topo,
    )


CM6_DESC = (
    "guide/CM6: a new 8-GPU node (one of four delivered for rack R31) was racked in a row "
    "planned for CPU servers; it passes its checks but sits idle, because four 10.2 kW "
    "nodes would not fit the rack's 17.3 kW PDU budget."
)


def cm6(variant: str) -> Snapshot:
    name = {"inventory": "gpu-node-601", "answered": "gpu-node-602", "ask": "gpu-node-603"}[variant]
    gs = gpus(idle_h100)
    kw: dict[str, object] = {}
    sitekw: dict[str, object] = dict(rack="R31", row="F")
    desc = CM6_DESC
    if variant == "inventory":
        sitekw.update(rack_power_budget_w=17300.0, rack_power_planned_w=44800.0)
        desc += " The inventory records the rack's budget and its planned full-load power."
    elif variant == "answered":
        kw["answers"] = {"deploy_blocked_by_power": True}
        desc += (
            " The inventory has no power figures; the responder answered that hardware waits"
            " on rack power."
        )
    else:
        desc += " No power figures and no answer: only the question can reveal it."
    facts, topo = node(
        name,
        gs,
        idle_host(name),
        disks=idle_disks(),
        scheduler=k8s(requested=0, pods=0),
        site=site(**sitekw),
        **kw,
    )
    return snap(name, desc, facts, topo=topo)


CM7_DESC = (
    "guide/CM7: a training job was moved here from the reference system it was tuned on, "
    "on the promise that the accelerators are equivalent. The node is clean and "
    "compute-bound (every GPU 97% busy near its power limit), yet the step time is well "
    "above the baseline recorded on the reference stack: the software stack (kernels, "
    "fused ops, communication library) is the difference."
)


def cm7(variant: str) -> Snapshot:
    name = {"job": "gpu-node-701", "answered": "gpu-node-702", "ask": "gpu-node-703"}[variant]
    gs = gpus()
    kw: dict[str, object] = {}
    desc = CM7_DESC
    if variant == "job":
        kw["job"] = JobMetrics(
            step_time_ms=412.0,
            rank_step_times_ms=[409.0, 414.0, 411.0, 413.0, 410.0, 412.0, 415.0, 411.0],
            nodes_in_job=1,
            source="job-metrics.json",
        )
        kw["site"] = site(baseline_step_time_ms=300.0)
        desc += " Step time 412 ms against a 300 ms baseline."
    elif variant == "answered":
        kw["answers"] = {"compared_to_equivalent": "slower"}
        desc += " No step times were supplied; the responder answered that it runs slower."
    else:
        desc += " No step times and no answer: the triage asks how it compares."
    facts, topo = node(name, gs, **kw)
    return snap(name, desc, facts, topo=topo)


def ms1_conn(i: int, j: int) -> str:
    # Two HCAs, both under PCIe switches of socket 1 shared with GPUs 4-7.
    if i >= 4:
        return "PIX" if (i - 4) // 2 == j else "PXB"
    return "SYS"


def ms1() -> Snapshot:
    name = "gpu-infer-011"
    gs = gpus(
        **{
            f"g{i}": dict(
                utilization_gpu_pct=72.0 + i,
                utilization_memory_pct=35.0,
                power_draw_w=402.0 + 8 * i,
                memory_used_mib=73402.0,
            )
            for i in range(8)
        }
    )
    facts, topo = node(
        name,
        gs,
        processes=procs(gs, name="tritonserver"),
        conn=ms1_conn,
        nic_count=2,
        ib_ports=[
            IbPortFacts(
                ca_name=f"mlx5_{j}",
                port=1,
                state="active",
                phys_state="linkup",
                rate_gbps=200.0,
                link_layer="ethernet",
                pci_bus_id=f"0000:{b}:00.0",
                numa_node=1,
                symbol_errors=0,
                link_downed=0,
                rcv_errors=0,
                xmit_discards=0,
                source="/sys/class/infiniband",
            )
            for j, b in enumerate(("9a", "c0"))
        ],
        scheduler=k8s(requested=8, pods=8),
        site=site(role="inference", rack="R05", row="A"),
        job=JobMetrics(latency_p50_ms=24.0, latency_p99_ms=131.0, source="job-metrics.json"),
    )
    # Only the two RoCE NICs are on this node (no IPoIB compute HCAs).
    facts.nics = [n for n in facts.nics if n.name.startswith("enp")]
    facts.pcie_links = [p for p in facts.pcie_links if p.device_class == "gpu"]
    return snap(
        name,
        "guide/MS1: a multi-GPU inference node with eight replicas, one per GPU. Both RoCE "
        "NICs hang off the PCIe switches of socket 1 shared with GPUs 4-7; GPUs 0-3 reach "
        "the network only across the socket interconnect. GPU-Util looks fine (72-79%) while "
        "P99 drifts up to five times P50.",
        facts,
        topo=topo,
    )


def ms2() -> Snapshot:
    name = "gpu-node-802"
    gs = gpus(
        **{
            f"g{i}": dict(
                utilization_gpu_pct=27.0 + 2 * i,
                utilization_memory_pct=14.0,
                power_draw_w=205.0 + 5 * i,
                memory_used_mib=66120.0,
                temperature_gpu_c=46.0 + (i % 3),
            )
            for i in range(8)
        }
    )
    h = host(
        name,
        cpu_user_pct=47.0,
        cpu_system_pct=24.5,
        cpu_iowait_pct=12.5,
        cpu_idle_pct=16.0,
        busiest_core=140,
        busiest_core_busy_pct=91.0,
        cores_saturated=0,
        load_1m=412.0,
        load_5m=388.0,
        load_15m=301.0,
        mem_available_mib=41200.0,
        swap_total_mib=65536.0,
        swap_used_mib=48310.0,
        swap_in_pages_s=3900.0,
        swap_out_pages_s=8600.0,
        reclaim_scan_pages_s=412000.0,
        direct_reclaim_pages_s=96000.0,
        psi_cpu_some_avg10=18.0,
        psi_io_some_avg10=22.0,
        psi_io_full_avg10=9.0,
        psi_memory_some_avg10=38.0,
        psi_memory_full_avg10=17.0,
        hugepages_total=8192,
        hugepages_free=8192,
    )
    t, iso = stamp(640.0)
    oom = OomKillEvent(
        pid=1184230,
        process_name="pt_data_worker",
        anon_rss_kib=61223108,
        constraint="CONSTRAINT_NONE",
        cgroup="/",
        task_cgroup="/kubepods.slice/kubepods-pod7f3c.slice/cri-containerd-9be1.scope",
        time=t,
        time_text=iso,
        age_s=640.0,
        raw=f"{iso} {HOSTNAME_IN_LOG} kernel: Out of memory: Killed process 1184230 "
        "(pt_data_worker) total-vm:98317420kB, anon-rss:61223108kB, file-rss:0kB, "
        "shmem-rss:0kB, UID:1000 pgtables:152312kB oom_score_adj:0",
        line=22410,
        source="journalctl -k",
    )
    facts, topo = node(
        name,
        gs,
        h,
        ooms=[oom],
        disks=disks(
            nvme0n1=dict(
                read_mib_s=61.0,
                write_mib_s=138.0,
                read_iops=15600.0,
                write_iops=35300.0,
                read_await_ms=3.1,
                write_await_ms=4.4,
                util_pct=74.0,
            )
        ),
        job=JobMetrics(
            step_time_ms=1180.0,
            rank_step_times_ms=[1164.0, 1190.0, 1172.0, 1185.0, 1168.0, 1193.0, 1177.0, 1181.0],
            nodes_in_job=1,
            source="job-metrics.json",
        ),
        site=site(baseline_step_time_ms=540.0),
    )
    return snap(
        name,
        "guide/MS2: to 'feed the GPUs faster' the team raised data-loader workers from 8 to "
        "48 per rank, cached decoded samples in RAM and switched the shards to zstd -19. The "
        "host now swaps (3900 pages/s in, 8600 out), direct reclaim stalls allocations, 38% "
        "of the time some task waits on memory, the kernel OOM-killed a loader worker, and "
        "CPU time is high while the step time more than doubled. No single core is "
        "saturated and storage is not the limit: host memory is.",
        facts,
        topo=topo,
    )


def ms3() -> Snapshot:
    name = "gpu-infer-042"
    new = "560.35.03"
    gs = gpus(
        **{
            f"g{i}": dict(
                utilization_gpu_pct=64.0 + i,
                utilization_memory_pct=30.0,
                power_draw_w=388.0 + 6 * i,
                memory_used_mib=73402.0,
                driver_version=new,
                cuda_version="12.6",
            )
            for i in range(8)
        }
    )
    facts, topo = node(
        name,
        gs,
        host(name, driver_version=new, cuda_version="12.6", cpu_user_pct=16.0, cpu_idle_pct=80.5),
        processes=procs(gs, name="tritonserver"),
        scheduler=k8s(requested=8, pods=8),
        site=site(role="inference", rack="R07", row="A"),
        job=JobMetrics(latency_p50_ms=21.0, latency_p99_ms=57.0, source="job-metrics.json"),
    )
    return snap(
        name,
        "guide/MS3: the canary of a driver rollout. This inference node was moved to driver "
        "560.35.03 while the golden image pins 550.127.05; replayed production traffic shows "
        "P99 at 57 ms against 38 ms on the pinned driver (P50 unchanged at 21 ms), a subtle "
        "regression no single-node health check sees. The drift is the lead.",
        facts,
        topo=topo,
    )


def xid_storm() -> Snapshot:
    name = "gpu-node-913"
    bad = 2
    ages = [
        3410.0,
        3105.0,
        2890.0,
        2544.0,
        2231.0,
        1960.0,
        1702.0,
        1398.0,
        1122.0,
        861.0,
        603.0,
        377.0,
        164.0,
        41.0,
    ]
    events = []
    for k, age in enumerate(ages):
        pid = 30211 + 1000 * k
        if k == 0:
            events.append(
                xid(
                    63,
                    bad,
                    age + 0.2,
                    14002,
                    "Row Remapper: New row (0x000000000c3a1f80) "
                    "was marked for remapping, reset gpu to activate.",
                    pid=pid,
                    name="python3",
                )
            )
        events.append(
            xid(
                94,
                bad,
                age,
                14003 + 9 * k,
                "Contained: SM (0x1). RST: No, D-RST: No",
                pid=pid,
                name="python3",
            )
        )
    gs = gpus(
        g2=dict(
            ecc_volatile_uncorrected=14,
            ecc_aggregate_uncorrected=15,
            ecc_volatile_corrected=3,
            ecc_aggregate_corrected=41,
            remapped_rows_uncorrectable=1,
            remapped_rows_pending=True,
            utilization_gpu_pct=0.0,
            power_draw_w=121.0,
            process_count=0,
            memory_used_mib=0.0,
        )
    )
    # The job restarts every few minutes and fails each time on GPU 2; the other ranks are
    # back in the restarted job's first steps.
    facts, topo = node(name, gs, xids=events)
    return snap(
        name,
        "Xid storm: GPU 2 logged 14 Xid 94 (contained uncorrectable ECC error) in an hour, "
        "one per job restart, after an Xid 63 marked an HBM row for remapping. The remap only "
        "takes effect at a GPU reset, which never came: the scheduler keeps restarting the "
        "job on the same GPU and every run hits the bad row again.",
        facts,
        topo=topo,
    )


def throttling() -> Snapshot:
    name = "gpu-node-921"
    hot = dict(
        temperature_gpu_c=88.0,
        temperature_memory_c=95.0,
        clocks_sm_mhz=1365.0,
        throttle_hw_thermal_slowdown=True,
        throttle_sw_thermal_slowdown=True,
        power_draw_w=512.0,
        utilization_gpu_pct=99.0,
    )
    gs = gpus(
        g6=hot,
        g7=dict(hot, temperature_gpu_c=89.0, clocks_sm_mhz=1290.0),
        g5=dict(temperature_gpu_c=83.0, temperature_memory_c=90.0),
    )
    facts, topo = node(
        name,
        gs,
        job=JobMetrics(
            step_time_ms=905.0,
            rank_step_times_ms=[702.0, 705.0, 699.0, 704.0, 701.0, 741.0, 903.0, 905.0],
            nodes_in_job=1,
            source="job-metrics.json",
        ),
        site=site(rack="R22", row="D", baseline_step_time_ms=700.0),
    )
    return snap(
        name,
        "Throttling: the blanking panels above this node were removed during a cable job, so "
        "hot exhaust recirculates into the rear GPU slots. GPUs 6 and 7 hit their slowdown "
        "temperature and run at 1290-1365 MHz instead of 1980; GPU 5 is two degrees away. "
        "Synchronous training runs at the pace of the slowest rank.",
        facts,
        topo=topo,
    )


def pcie_downgraded() -> Snapshot:
    name = "gpu-node-931"
    gs = gpus(
        g3=dict(
            pcie_link_width=8, pcie_replay_count=37, utilization_gpu_pct=86.0, power_draw_w=588.0
        )
    )
    facts, topo = node(
        name,
        gs,
        job=JobMetrics(
            step_time_ms=655.0,
            rank_step_times_ms=[631.0, 634.0, 629.0, 655.0, 632.0, 630.0, 633.0, 631.0],
            nodes_in_job=1,
            source="job-metrics.json",
        ),
        site=site(rack="R22", row="D", baseline_step_time_ms=630.0),
    )
    return snap(
        name,
        "Downgraded PCIe link: after a riser was swapped, GPU 3 trained its link at x8 "
        "instead of x16 (gen 5 still). Host-to-device copies take twice as long; its rank is "
        "the slowest (655 ms against 630 ms), but compute-bound work hides most of it.",
        facts,
        topo=topo,
    )


def healthy_idle() -> Snapshot:
    name = "gpu-node-941"
    # An idle GPU lowers its clocks (Idle: Active), drops its PCIe link to gen 1 and may
    # report the software power cap as active too; all of that is normal power saving.
    gs = gpus(idle_h100, g0=dict(throttle_sw_power_cap=True), g4=dict(throttle_sw_power_cap=True))
    facts, topo = node(
        name,
        gs,
        idle_host(name),
        disks=idle_disks(),
        scheduler=k8s(requested=0, pods=0),
        site=site(rack="R22", row="D", rack_power_budget_w=41500.0, rack_power_planned_w=40800.0),
    )
    return snap(
        name,
        "Healthy and idle: a production training node between jobs. No processes, GPUs at "
        "idle clocks and about 70 W, PCIe links down-trained to gen 1 for power saving, every "
        "link, HCA and collector fine, the driver and VBIOS at the pinned versions.",
        facts,
        topo=topo,
    )


def healthy_busy() -> Snapshot:
    name = "gpu-node-942"
    gs = gpus()
    facts, topo = node(
        name,
        gs,
        job=JobMetrics(
            step_time_ms=618.0,
            rank_step_times_ms=[612.0, 618.0, 615.0, 620.0, 614.0, 617.0, 619.0, 613.0],
            nodes_in_job=4,
            throughput_per_gpu=103.5,
            throughput_per_gpu_fewer_nodes=106.0,
            source="job-metrics.json",
        ),
        site=site(
            rack="R22",
            row="D",
            baseline_step_time_ms=620.0,
            rack_power_budget_w=41500.0,
            rack_power_planned_w=40800.0,
        ),
        answers={
            "compared_to_equivalent": "about the same",
            "scaling_worse_with_nodes": False,
            "p99_spikes_periodic": False,
            "random_gpu_oom": False,
            "deploy_blocked_by_power": False,
        },
    )
    return snap(
        name,
        "Healthy and busy: a 4-node training job at its baseline step time. Every GPU 97% "
        "busy near its power limit, cool, full-width links, all NVLinks and HCAs up, ranks "
        "balanced, scaling efficiency 98%, nothing in the kernel log.",
        facts,
        topo=topo,
    )


SCENARIOS: dict[str, Callable[[], Snapshot]] = {
    "cm1-input-bound-storage": cm1_storage,
    "cm1-cpu-preprocessing": cm1_cpu,
    "cm2-scaling-job-metrics": cm2_job_metrics,
    "cm2-scaling-answered": cm2_answered,
    "cm2-scaling-ask": cm2_ask,
    "cm3-shared-gpu-oom": cm3_shared,
    "cm3-leak-oom-answered": lambda: cm3_leak(True),
    "cm3-leak-oom-ask": lambda: cm3_leak(False),
    "cm4-p99-job-metrics": cm4_job_metrics,
    "cm4-p99-answered": cm4_answered,
    "cm4-p99-ask": cm4_ask,
    "cm5-fallen-off-bus": cm5_bus_loss,
    "cm6-rack-power-inventory": lambda: cm6("inventory"),
    "cm6-rack-power-answered": lambda: cm6("answered"),
    "cm6-rack-power-ask": lambda: cm6("ask"),
    "cm7-slower-job-metrics": lambda: cm7("job"),
    "cm7-slower-answered": lambda: cm7("answered"),
    "cm7-slower-ask": lambda: cm7("ask"),
    "ms1-inference-nic-locality": ms1,
    "ms2-loader-memory-pressure": ms2,
    "ms3-driver-canary-regression": ms3,
    "xid-storm-contained-ecc": xid_storm,
    "throttling-thermal": throttling,
    "pcie-link-downgraded": pcie_downgraded,
    "healthy-idle": healthy_idle,
    "healthy-busy": healthy_busy,
}


def build() -> dict[str, str]:
    """Scenario name -> snapshot JSON text."""
    return {name: dump_snapshot(make()) for name, make in SCENARIOS.items()}


if __name__ == "__main__":
    DEMOS.mkdir(parents=True, exist_ok=True)
    for name, text in build().items():
        targets = [HERE / f"{name}.json"] + ([DEMOS / f"{name}.json"] if name in DEMO_NAMES else [])
        for target in targets:
            target.write_text(text, encoding="utf-8")
            print("wrote", target)
