"""Every registered parser on recorded output, and snapshots built from saved outputs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from gpu_triage.collectors.from_text import snapshot_from_texts
from gpu_triage.collectors.merge import update_facts
from gpu_triage.collectors.parsers.registry import PARSERS, get_parser
from gpu_triage.engine.evaluate import evaluate
from gpu_triage.model.facts import Facts, GpuFacts
from gpu_triage.model.snapshot import load_snapshot

DATA = Path(__file__).resolve().parents[1] / "data"
REAL = DATA / "real-outputs"
HAND = DATA / "hand-written"

# parser -> a recorded output and a check of what it must yield
SAMPLES = {
    "nvidia-smi": (
        REAL / "nvidia-smi/table-8x-h100-sxm-565-new-format-thamada-nvsim.txt",
        lambda f: len(f.gpus) == 8 and f.host.driver_version.startswith("565"),
    ),
    "nvidia-smi-q": (
        REAL / "nvidia-smi-q/v100-sxm2-32gb-hw-power-brake-active-dell-c4130-l4rz.txt",
        lambda f: f.gpus[0].throttle_hw_power_brake_slowdown is True,
    ),
    "nvidia-smi-query-gpu": (
        HAND / "query-gpu/query-gpu-h100-units-throttle-both-spellings.csv",
        lambda f: len(f.gpus) >= 1,
    ),
    "nvidia-smi-compute-apps": (None, lambda f: len(f.processes) == 2),
    "nvidia-smi-nvlink": (
        REAL / "nvlink/nvlink-s-b200-all-inactive-gpud1085.txt",
        lambda f: f.nvlinks and not any(n.active for n in f.nvlinks),
    ),
    "nvidia-smi-topo": (next((REAL / "topo").glob("*h100*")), lambda f: len(f.topology) > 0),
    "lspci": (
        REAL / "lspci/rtx4090-riser-lnksta-2.5gt-downgraded-width-ok-janhq183.txt",
        lambda f: f.pcie_links[0].speed_gts == 2.5,
    ),
    "kernel-log": (
        REAL / "xid/xid-79-rtx5090-gsp-ogkm1151.log",
        lambda f: any(x.code == 79 for x in f.xids) and f.bus_losses,
    ),
    "mpstat": (
        REAL / "mpstat/mpstat-P-ALL-4cpu-idle-el9uek-pcp1922.txt",
        lambda f: f.host.cpu_idle_pct is not None,
    ),
    "iostat": (
        REAL / "iostat/iostat-x-repeated-blocks-sdb-saturated-stressng148.txt",
        lambda f: any(d.name == "sdb" for d in f.disks),
    ),
    "meminfo": (
        REAL / "proc/meminfo-openwrt-no-memavailable-sysinfo164.txt",
        lambda f: (
            f.host.mem_total_mib
            and f.host.mem_available_mib is None
            and "mem_available_mib" in f.host.unavailable
        ),
    ),
    "ibstat": (
        REAL / "ib/ibstat-cx6-state-down-phys-linkup-sriov-pod-netop249.txt",
        lambda f: f.ib_ports and f.ib_ports[0].state == "down",
    ),
    "iperf3": (HAND / "iperf3/iperf3-P4-sum.txt", lambda f: f.host.net_throughput_gbps > 0),
    "fio": (HAND / "fio/fio3-seqread-libaio.txt", lambda f: f.host.storage_read_mib_s > 0),
    "mountstats": (
        HAND / "proc/mountstats-nfs4-slow-reads-getattr-storm-k5.15.txt",
        lambda f: [m.fstype for m in f.mounts] == ["nfs4", "nfs"] and f.mounts[0].read_ops > 0,
    ),
    "kubectl-describe-pod": (
        HAND / "k8s/describe-pod-pending-insufficient-gpu.txt",
        lambda f: f.scheduler.k8s_pod_gpu_requested >= 1,
    ),
    "kubectl-describe-node": (
        REAL / "k8s/describe-node-no-nvidia-gpu-in-capacity-dp285.txt",
        lambda f: f.scheduler.k8s_node_gpu_capacity == 0,
    ),
    "kubectl-events": (
        REAL / "k8s/events-failedscheduling-insufficient-gpu-unschedulable-dp119.txt",
        lambda f: f.scheduler.k8s_pods_pending_gpu == 1,
    ),
    "ibv-devinfo": (
        HAND / "ib/ibv_devinfo-v-ndr-active-and-polling.txt",
        lambda f: [p.rate_gbps for p in f.ib_ports] == [400.0, 10.0],
    ),
    "proc-stat": (
        HAND / "proc/proc-stat-two-readings-4cpu.txt",
        lambda f: f.host.cpu_user_pct == 40.0 and f.host.busiest_core == 0,
    ),
    "proc-pressure": (
        HAND / "proc/pressure-grep-n-star.txt",
        lambda f: f.host.psi_io_full_avg10 == 31.0 and f.host.psi_memory_full_avg10 == 2.25,
    ),
    **{
        f"proc-pressure-{res}": (
            REAL / "proc/pressure-memory-high-some-full-procfs40.txt",
            lambda f, res=res: getattr(f.host, f"psi_{res}_some_avg10") == 70.24,
        )
        for res in ("cpu", "io", "memory")
    },
    "dcgmi-diag": (
        REAL / "dcgm/dcgmi-diag-r3-deployment-all-pass-fragment-dcgm55.txt",
        lambda f: len(f.diags) == 9 and {d.result for d in f.diags} == {"pass"},
    ),
    "nvidia-smi-q-xml": (
        HAND / "nvidia-smi-q-xml/q-x-550-h100-two-gpus-remap-pending-gpu1.xml",
        lambda f: [g.remapped_rows_pending for g in f.gpus] == [False, True],
    ),
    "nvidia-smi-topo-p2p": (
        HAND / "topo/topo-p2p-2gpu-tabs-ns.txt",
        lambda f: {t.p2p_status for t in f.topology} == {"NS"},
    ),
    **{
        f"nvidia-smi-topo-p2p-{cap}": (
            HAND / "topo/topo-p2p-4gpu-two-pcie-switches-cns.txt",
            lambda f, field=field: {getattr(t, field) for t in f.topology} == {"OK", "CNS"},
        )
        for cap, field in {
            "r": "p2p_read",
            "w": "p2p_write",
            "n": "p2p_nvlink",
            "a": "p2p_atomics",
            "p": "p2p_prop",
        }.items()
    },
    "error-text": (
        DATA / "incidents/011-container-timeout-persistence-mode-off/docker-run.txt",
        lambda f: [e.cause for e in f.errors] == ["container_driver_timeout"],
    ),
    "systemctl-fabricmanager": (
        HAND / "fabric-manager/systemctl-status-failed.txt",
        lambda f: f.fabric.fm_active_state == "failed",
    ),
    "nv-fabricmanager-version": (
        HAND / "fabric-manager/nv-fabricmanager-version.txt",
        lambda f: f.fabric.fm_version == "535.104.05",
    ),
    "fabricmanager-log": (
        HAND / "fabric-manager/fabricmanager-nvswitch-errors.log",
        lambda f: [s.code for s in f.sxids] == [20034, 12028],
    ),
    "docker-info": (
        HAND / "container/docker-info-24-runc-default-nvidia-registered.txt",
        lambda f: f.scheduler.docker_default_runtime == "runc",
    ),
    "nvidia-ctk-cdi-list": (
        HAND / "container/nvidia-ctk-cdi-list-found-0.txt",
        lambda f: f.scheduler.cdi_nvidia_devices == 0,
    ),
    "nvidia-ctk-version": (
        HAND / "container/nvidia-ctk-version-1.14.3.txt",
        lambda f: f.scheduler.container_toolkit_version == "1.14.3",
    ),
    "ethtool-i": (
        HAND / "ethtool/ethtool-i-connectx7-psid.txt",
        lambda f: [n.firmware_version for n in f.nics] == ["28.36.1010"],
    ),
    "docker-run-nvidia-smi": (
        HAND / "container/docker-run-gpus-could-not-select-device-driver.txt",
        lambda f: f.scheduler.container_sees_gpus is False and not f.gpus,
    ),
}

COMPUTE_APPS = (
    "pid, process_name, used_gpu_memory [MiB]\n"
    "2871, python, 70000 MiB\n4012, /usr/bin/trainer, 1024 MiB\n"
)


def test_every_registered_parser_has_a_sample() -> None:
    assert set(SAMPLES) == set(PARSERS)


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_parser_turns_recorded_output_into_facts(name: str) -> None:
    path, check = SAMPLES[name]
    text = COMPUTE_APPS if path is None else path.read_text(errors="replace")
    facts = get_parser(name)(text, str(path))
    assert isinstance(facts, Facts)
    assert check(facts), facts.model_dump(exclude_none=True)


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_parser_survives_garbage(name: str) -> None:
    from gpu_triage.collectors.parsers import ParseError

    for junk in ["", "\x00\xff" * 100, "x" * 200_000, "| | |\n" * 50]:
        try:
            assert isinstance(get_parser(name)(junk, "junk"), Facts)
        except ParseError as exc:
            assert "junk" in str(exc)


def test_update_facts_matches_gpus_by_bus_id() -> None:
    base = Facts(gpus=[GpuFacts(index=0, pci_bus_id="0000:18:00.0", utilization_gpu_pct=10)])
    update = Facts(
        gpus=[
            GpuFacts(pci_bus_id="0000:18:00.0", throttle_hw_slowdown=True),
            GpuFacts(pci_bus_id="0000:2a:00.0", utilization_gpu_pct=50),
        ]
    )
    assert update_facts(base, update) == ["gpu"]
    assert base.gpus[0].index == 0 and base.gpus[0].throttle_hw_slowdown is True
    assert base.gpus[0].utilization_gpu_pct == 10 and len(base.gpus) == 2


def test_snapshot_from_saved_outputs_evaluates(builtin_book) -> None:
    snap = snapshot_from_texts(
        [
            ("nvidia-smi-q", SAMPLES["nvidia-smi-q"][0]),
            ("kernel-log", SAMPLES["kernel-log"][0]),
        ]
    )
    assert [c.state.value for c in snap.collectors] == ["ok", "ok"]
    doc = evaluate(snap, builtin_book)
    fired = {f.rule_id for f in doc.findings}
    assert {"gpu-power-brake", "xid-79-fallen-off-bus"} <= fired


def test_cli_from_text(tmp_path: Path) -> None:
    out = tmp_path / "s.json"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "gpu_triage",
            "collect",
            "--from-text",
            "kernel-log",
            str(SAMPLES["kernel-log"][0]),
            "--out",
            str(out),
        ],
        check=True,
    )
    snap = load_snapshot(out)
    assert snap.facts.xids and snap.raw[0].text.startswith(
        SAMPLES["kernel-log"][0].read_text()[:20]
    )
    bad = subprocess.run(
        [sys.executable, "-m", "gpu_triage", "collect", "--from-text", "no-such-parser", str(out)],
        capture_output=True,
        text=True,
    )
    assert bad.returncode == 64 and "unknown parser 'no-such-parser'" in bad.stderr
