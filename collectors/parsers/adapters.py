"""Each parser wrapped to one signature, ``(text, source) -> Facts``, for the registry.

Runbook steps name these (``parser: nvidia-smi-q``) so their output becomes facts, and
``gpu-triage collect --from-text`` builds snapshots from saved outputs with them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from gpu_triage.collectors.parsers import ParseError
from gpu_triage.model.facts import (
    ErrorTextEvent,
    Facts,
    GpuFacts,
    GpuProcess,
    HostFacts,
    SchedulerFacts,
)

if TYPE_CHECKING:
    from gpu_triage.collectors.parsers.topo import Topology

TextParserFn = Callable[[str, str], Facts]


def error_text(text: str, source: str = "error text") -> Facts:
    from gpu_triage.collectors.parsers.error_text import parse_error_text

    return parse_error_text(text, source)


def _with_error_text(parse: Callable[[str, str], Facts]) -> Callable[[str, str], Facts]:
    """nvidia-smi prints an error instead of its table when the driver is broken: that
    error is the most diagnostic line there is, so it becomes facts too (and a paste that
    holds only the error is read, not rejected)."""

    def parser(text: str, source: str = "nvidia-smi") -> Facts:
        from gpu_triage.collectors.parsers.error_text import scan_error_text

        events, driver = scan_error_text(text, source)
        has_driver = driver.nvml_init is not None or driver.library_version is not None
        try:
            facts = parse(text, source)
        except ParseError:
            if not events and not has_driver:
                raise
            facts = Facts()
        facts.errors = [*events, *unreadable_processes(facts.processes, source)]
        if has_driver:
            facts.driver = driver
        return facts

    parser.__doc__ = parse.__doc__
    return parser


def unreadable_processes(procs: list[GpuProcess], source: str) -> list[ErrorTextEvent]:
    """Processes the driver listed but could not describe ("[Unknown Error]" for a name
    or the memory), as one error event per GPU: the rules read them like any error."""
    by_gpu: dict[tuple[int | None, str | None], list[GpuProcess]] = {}
    for p in procs:
        if p.query_error:
            by_gpu.setdefault((p.gpu_index, p.gpu_pci_bus_id), []).append(p)
    out = []
    for (index, bus), bad in by_gpu.items():
        pids = ", ".join(str(p.pid) for p in bad[:8] if p.pid is not None)
        where = f"GPU {index}" if index is not None else (bus or "a GPU")
        out.append(
            ErrorTextEvent(
                signature="nvidia-smi-process-unknown-error",
                cause="gpu_processes_unreadable",
                component="driver",
                verified=True,
                message=f"{len(bad)} process(es) on {where} listed with [Unknown Error]"
                + (f" (pid {pids})" if pids else ""),
                raw="[Unknown Error]",
                pci_bus_id=bus,
                gpu_index=index,
                count=len(bad),
                source=source,
            )
        )
    return out


@_with_error_text
def nvidia_smi_table(text: str, source: str = "nvidia-smi") -> Facts:
    from gpu_triage.collectors.parsers.nvidia_smi.table import parse_nvidia_smi_table

    r = parse_nvidia_smi_table(text, source)
    for g in r.gpus:
        g.driver_version = g.driver_version or r.driver_version
        g.cuda_version = g.cuda_version or r.cuda_version
        if g.process_count is None and "Processes:" in text:  # the table lists them all
            g.process_count = sum(1 for p in r.processes if p.gpu_index == g.index)
    host = _driver_host(r.driver_version, r.cuda_version, len(r.gpus))
    return Facts(gpus=r.gpus, processes=r.processes, host=host)


def _driver_host(driver: str | None, cuda: str | None, count: int | None) -> HostFacts | None:
    if driver is None and cuda is None:
        return None
    return HostFacts(
        driver_version=driver, cuda_version=cuda, gpu_count_visible=count, source="nvidia-smi"
    )


@_with_error_text
def nvidia_smi_q(text: str, source: str = "nvidia-smi -q") -> Facts:
    from gpu_triage.collectors.parsers.nvidia_smi.full import parse_nvidia_smi_q

    r = parse_nvidia_smi_q(text, source)
    for g in r.gpus:
        g.driver_version = g.driver_version or r.driver_version
        g.cuda_version = g.cuda_version or r.cuda_version
    return Facts(
        gpus=r.gpus,
        processes=r.processes,
        host=_driver_host(r.driver_version, r.cuda_version, r.attached_gpus),
    )


def nvidia_smi_query_gpu(text: str, source: str = "nvidia-smi --query-gpu") -> Facts:
    from gpu_triage.collectors.parsers.nvidia_smi.query_csv import parse_query_gpu_csv

    return Facts(gpus=parse_query_gpu_csv(text, source))


def nvidia_smi_compute_apps(text: str, source: str = "nvidia-smi --query-compute-apps") -> Facts:
    from gpu_triage.collectors.parsers.nvidia_smi.query_csv import parse_compute_apps_csv

    procs = parse_compute_apps_csv(text, source)
    return Facts(processes=procs, errors=unreadable_processes(procs, source))


def nvidia_smi_nvlink(text: str, source: str = "nvidia-smi nvlink") -> Facts:
    from gpu_triage.collectors.parsers.nvlink import parse_nvlink_status

    return Facts(nvlinks=parse_nvlink_status(text, source))


def nvidia_smi_topo(text: str, source: str = "nvidia-smi topo -m") -> Facts:
    from gpu_triage.collectors.parsers.topo import parse_topo_matrix

    topo = parse_topo_matrix(text, source)
    return Facts(topology=topo.pairs, gpus=_topo_gpus(topo, source))


def _topo_gpus(topo: Topology, source: str) -> list[GpuFacts]:
    """The affinity columns as GPU facts (CPU list, NUMA node, GPU NUMA ID) by index."""
    gpus: dict[str, GpuFacts] = {}
    for table, field in (
        (topo.cpu_affinity, "cpu_affinity"),
        (topo.numa_node, "numa_node"),
        (topo.gpu_numa_id, "gpu_numa_id"),
    ):
        for name, value in table.items():
            if value is None or not name.startswith("GPU") or not name[3:].isdigit():
                continue
            gpu = gpus.setdefault(name, GpuFacts(index=int(name[3:]), source=source))
            setattr(gpu, field, value)
    return list(gpus.values())


def lspci(text: str, source: str = "lspci -vv") -> Facts:
    from gpu_triage.collectors.parsers.lspci import count_nvswitches, parse_lspci_vv
    from gpu_triage.collectors.pcie_paths import mark_by_bus_ranges
    from gpu_triage.model.facts import FabricFacts

    links = parse_lspci_vv(text, source)
    mark_by_bus_ranges(links)
    switches = count_nvswitches(text)
    # only a listing that shows NVSwitches says anything of them (lspci -s GPU -vv does not)
    fabric = FabricFacts(nvswitch_count=switches, source=source) if switches else None
    return Facts(pcie_links=links, fabric=fabric)


def kernel_log(text: str, source: str = "kernel log") -> Facts:
    from gpu_triage.collectors.parsers.error_text import scan_kernel_log_errors
    from gpu_triage.collectors.parsers.kernel_log import parse_kernel_log

    log = parse_kernel_log(text, source=source)
    # KernelLog names its event lists as Facts does
    facts = Facts(**{name: getattr(log, name) for name in log.event_lists()})
    facts.errors, facts.driver = scan_kernel_log_errors(text, source)
    return facts


def docker_info(text: str, source: str = "docker info") -> Facts:
    from gpu_triage.collectors.parsers.container_runtime import parse_docker_info

    return Facts(scheduler=parse_docker_info(text, source))


def docker_run_nvidia_smi(text: str, source: str = "docker run --gpus all nvidia-smi") -> Facts:
    from gpu_triage.collectors.parsers.container_runtime import container_gpu_test

    return container_gpu_test(text, source)


def nvidia_ctk_cdi_list(text: str, source: str = "nvidia-ctk cdi list") -> Facts:
    from gpu_triage.collectors.parsers.container_runtime import parse_cdi_list

    return Facts(scheduler=parse_cdi_list(text, source))


def nvidia_ctk_version(text: str, source: str = "nvidia-ctk --version") -> Facts:
    from gpu_triage.collectors.parsers.container_runtime import parse_toolkit_version

    return Facts(scheduler=parse_toolkit_version(text, source))


def ethtool_i(text: str, source: str = "ethtool -i") -> Facts:
    from gpu_triage.collectors.parsers.ethtool import parse_ethtool_i

    return Facts(nics=parse_ethtool_i(text, source))


def mpstat(text: str, source: str = "mpstat") -> Facts:
    from gpu_triage.collectors.parsers.mpstat import fill_host_from_mpstat, parse_mpstat

    return Facts(host=fill_host_from_mpstat(parse_mpstat(text, source)))


def iostat(text: str, source: str = "iostat") -> Facts:
    from gpu_triage.collectors.parsers.iostat import (
        disk_facts,
        fill_host_from_iostat,
        parse_iostat,
    )

    r = parse_iostat(text, source)
    host = fill_host_from_iostat(r) if r.avg_cpu else None
    return Facts(host=host, disks=[disk_facts(row, source) for row in r.last_rows])


def meminfo(text: str, source: str = "/proc/meminfo") -> Facts:
    from gpu_triage.collectors.parsers.meminfo import parse_meminfo

    return Facts(host=parse_meminfo(text, source))


def ibstat(text: str, source: str = "ibstat") -> Facts:
    from gpu_triage.collectors.parsers.ibstat import parse_ibstat

    return Facts(ib_ports=parse_ibstat(text, source))


def iperf3(text: str, source: str = "iperf3") -> Facts:
    from gpu_triage.collectors.parsers.iperf3 import parse_iperf3

    gbps = parse_iperf3(text)
    return Facts(host=HostFacts(net_throughput_gbps=gbps, source=source)) if gbps else Facts()


def fio(text: str, source: str = "fio") -> Facts:
    from gpu_triage.collectors.parsers.fio import fill_host_from_fio, parse_fio

    result = parse_fio(text)
    return Facts(host=fill_host_from_fio(result)) if result else Facts()


def mountstats(text: str, source: str = "mountstats") -> Facts:
    """NFS mounts of /proc/self/mountstats (averages since each mount)."""
    from gpu_triage.collectors.parsers.mountstats import mount_facts, parse_mountstats

    return Facts(mounts=[mount_facts(m, source=source) for m in parse_mountstats(text, source)])


def kubectl_describe_pod(text: str, source: str = "kubectl describe pod") -> Facts:
    from gpu_triage.collectors.parsers.kubectl import parse_describe_pod

    return Facts(scheduler=_nonempty(parse_describe_pod(text, source)))


def kubectl_describe_node(text: str, source: str = "kubectl describe node") -> Facts:
    from gpu_triage.collectors.parsers.kubectl import parse_describe_node

    return Facts(scheduler=_nonempty(parse_describe_node(text, source)))


def _nonempty(s: SchedulerFacts) -> SchedulerFacts | None:
    values = s.model_dump(exclude={"unavailable", "source"}, exclude_computed_fields=True)
    return s if any(v is not None for v in values.values()) else None


def kubectl_events(text: str, source: str = "kubectl get events") -> Facts:
    from gpu_triage.collectors.parsers.kubectl import parse_events, scheduler_facts_from_events

    events = parse_events(text)
    return Facts(scheduler=scheduler_facts_from_events(events, source) if events else None)


def ibv_devinfo(text: str, source: str = "ibv_devinfo") -> Facts:
    from gpu_triage.collectors.parsers.ibv_devinfo import parse_ibv_devinfo

    return Facts(ib_ports=parse_ibv_devinfo(text, source))


def _topo_p2p(capability: str | None) -> TextParserFn:
    def parse(text: str, source: str = "nvidia-smi topo -p2p") -> Facts:
        from gpu_triage.collectors.parsers.topo_p2p import parse_topo_p2p

        return Facts(topology=parse_topo_p2p(text, source, capability))

    return parse


nvidia_smi_topo_p2p = _topo_p2p(None)
nvidia_smi_topo_p2p_r = _topo_p2p("r")
nvidia_smi_topo_p2p_w = _topo_p2p("w")
nvidia_smi_topo_p2p_n = _topo_p2p("n")
nvidia_smi_topo_p2p_a = _topo_p2p("a")
nvidia_smi_topo_p2p_p = _topo_p2p("p")


def proc_stat(text: str, source: str = "/proc/stat") -> Facts:
    from gpu_triage.collectors.parsers.proc_stat import parse_proc_stat

    return Facts(host=parse_proc_stat(text, source))


def _pressure(resource: str | None) -> TextParserFn:
    def parse(text: str, source: str = "/proc/pressure") -> Facts:
        from gpu_triage.collectors.parsers.pressure import (
            fill_host_from_pressure,
            parse_pressure_text,
        )

        return Facts(
            host=fill_host_from_pressure(parse_pressure_text(text, source, resource), source)
        )

    return parse


proc_pressure = _pressure(None)
proc_pressure_cpu = _pressure("cpu")
proc_pressure_io = _pressure("io")
proc_pressure_memory = _pressure("memory")


def dcgmi_diag(text: str, source: str = "dcgmi diag") -> Facts:
    from gpu_triage.collectors.parsers.dcgm_diag import parse_dcgmi_diag

    run = parse_dcgmi_diag(text, source)
    if run.error and not run.results:
        raise ParseError(f"the diagnostic did not run: {run.error}", source=source)
    return Facts(diags=run.results)


def nvidia_smi_xml(text: str, source: str = "nvidia-smi -q -x") -> Facts:
    from gpu_triage.collectors.parsers.nvidia_smi.xml import parse_nvidia_smi_xml

    r = parse_nvidia_smi_xml(text, source)
    return Facts(gpus=r.gpus, host=_driver_host(r.driver_version, r.cuda_version, r.attached_gpus))


def systemctl_fabricmanager(text: str, source: str = "systemctl") -> Facts:
    from gpu_triage.collectors.parsers.fabric_manager import parse_systemctl_unit

    return Facts(fabric=parse_systemctl_unit(text, source))


def nv_fabricmanager_version(text: str, source: str = "nv-fabricmanager --version") -> Facts:
    from gpu_triage.collectors.parsers.fabric_manager import parse_fm_version
    from gpu_triage.model.facts import FabricFacts

    return Facts(
        fabric=FabricFacts(
            fm_installed=True, fm_version=parse_fm_version(text, source), source=source
        )
    )


def fabricmanager_log(text: str, source: str = "fabricmanager.log") -> Facts:
    from gpu_triage.collectors.parsers.fabric_manager import parse_fm_log

    fabric, sxids = parse_fm_log(text, source)
    return Facts(fabric=fabric, sxids=sxids)
