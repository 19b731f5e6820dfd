"""Each parser wrapped to one signature, ``(text, source) -> Facts``, for the registry.

Runbook steps name these (``parser: nvidia-smi-q``) so their output becomes facts, and
``gpu-triage collect --from-text`` builds snapshots from saved outputs with them.
"""

from __future__ import annotations

from gpu_triage.model.facts import Facts, HostFacts, SchedulerFacts


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

    return Facts(processes=parse_compute_apps_csv(text, source))


def nvidia_smi_nvlink(text: str, source: str = "nvidia-smi nvlink") -> Facts:
    from gpu_triage.collectors.parsers.nvlink import parse_nvlink_status

    return Facts(nvlinks=parse_nvlink_status(text, source))


def nvidia_smi_topo(text: str, source: str = "nvidia-smi topo -m") -> Facts:
    from gpu_triage.collectors.parsers.topo import parse_topo_matrix

    return Facts(topology=parse_topo_matrix(text, source).pairs)


def lspci(text: str, source: str = "lspci -vv") -> Facts:
    from gpu_triage.collectors.parsers.lspci import parse_lspci_vv

    return Facts(pcie_links=parse_lspci_vv(text, source))


def kernel_log(text: str, source: str = "kernel log") -> Facts:
    from gpu_triage.collectors.parsers.kernel_log import parse_kernel_log

    log = parse_kernel_log(text, source=source)
    # KernelLog names its event lists as Facts does
    return Facts(**{name: getattr(log, name) for name in log.event_lists()})


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


def kubectl_describe_pod(text: str, source: str = "kubectl describe pod") -> Facts:
    from gpu_triage.collectors.parsers.kubectl import parse_describe_pod

    return Facts(scheduler=_nonempty(parse_describe_pod(text, source)))


def kubectl_describe_node(text: str, source: str = "kubectl describe node") -> Facts:
    from gpu_triage.collectors.parsers.kubectl import parse_describe_node

    return Facts(scheduler=_nonempty(parse_describe_node(text, source)))


def _nonempty(s: SchedulerFacts) -> SchedulerFacts | None:
    values = s.model_dump(exclude={"unavailable", "source"}, exclude_computed_fields=True)
    return s if any(v is not None for v in values.values()) else None
