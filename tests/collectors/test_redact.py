"""redact_snapshot: nothing identifying survives, the snapshot stays evaluable."""

from __future__ import annotations

from pathlib import Path

from gpu_triage.collectors.redact import redact_snapshot
from gpu_triage.model.facts import (
    Facts,
    GpuFacts,
    GpuProcess,
    HostFacts,
    OomKillEvent,
    RecoveryAction,
    SchedulerFacts,
    TopoFacts,
    XidEvent,
)
from gpu_triage.model.snapshot import RawOutput, Snapshot, dump_snapshot, parse_snapshot

DATA = Path(__file__).resolve().parents[1] / "data" / "real-outputs"
SHARED = Path("/work/shared/real-outputs")
H100_Q = "nvidia-smi-q/h100-sxm-565-full-q-gpu0-clocks-event-reasons-replays7-thamada-nvsim.txt"

HOST = "gpu-node-17.cluster.example.com"
UUID0 = "GPU-b42dd28e-ffdd-8720-1df0-98bd8cdc05b1"
UUID1 = "GPU-0d1e2f3a-4b5c-6d7e-8f9a-0b1c2d3e4f5a"
MIG_UUID = "MIG-11111111-2222-3333-4444-555555555555"
SERIAL0 = "1654423001593"
SERIAL1 = "0323618041234"
SECRETS = [
    HOST,
    "gpu-node-17",
    UUID0,
    UUID1,
    MIG_UUID,
    SERIAL0,
    SERIAL1,
    "alice",
    "bob",
    "carol",
    "train_llama",
    "pt_main_thread",
    "myjob.py",
    "--secret-token",
]


def _h100_q() -> str:
    for base in (DATA, SHARED):
        if (base / H100_Q).exists():
            return (base / H100_Q).read_text()
    return f"Serial Number : {SERIAL0}\nGPU UUID : {UUID0}\nBus Id : 00000000:18:00.0\n"


def make_snapshot() -> Snapshot:
    xid_raw = (
        f"Nov 14 07:00:14 {HOST} kernel: NVRM: Xid (PCI:0000:18:00): 13, pid=2187, "
        "name=pt_main_thread, Graphics SM Warp Exception on (GPC 0, TPC 1, SM 0)"
    )
    oom_raw = (
        "Out of memory: Killed process 4242 (train_llama) total-vm:1000kB, anon-rss:900kB, "
        "UID:1001 pgtables:1kB oom_score_adj:0"
    )
    facts = Facts(
        host=HostFacts(hostname=HOST, kernel="6.8.0-45-generic", cpu_count=96),
        gpus=[
            GpuFacts(
                index=0,
                uuid=UUID0,
                serial=SERIAL0,
                pci_bus_id="0000:18:00.0",
                name="NVIDIA H100 80GB HBM3",
                driver_version="565.57.01",
                vbios_version="96.00.74.00.01",
                pcie_replay_count=7,
                recovery_action=RecoveryAction.NONE,
            ),
            GpuFacts(index=1, uuid=UUID1, serial=SERIAL1, pci_bus_id="0000:2a:00.0"),
        ],
        processes=[
            GpuProcess(gpu_index=0, gpu_pci_bus_id="0000:18:00.0", pid=2187, name="pt_main_thread"),
            GpuProcess(gpu_index=1, pid=4242, name="train_llama", used_memory_mib=1024.0),
        ],
        xids=[
            XidEvent(
                code=13,
                pid=2187,
                process_name="pt_main_thread",
                pci_bus_id="0000:18:00.0",
                gpu_index=0,
                raw=xid_raw,
            )
        ],
        ooms=[
            OomKillEvent(
                pid=4242,
                process_name="train_llama",
                raw=oom_raw,
                cgroup="/user.slice/user-1001.slice/session-3.scope",
            )
        ],
        topology=[TopoFacts(a="GPU0", b="GPU1", connection="NODE")],
        scheduler=SchedulerFacts(k8s_pod_node=HOST, k8s_pod_gpu_requested=1),
    )
    raw = [
        RawOutput(collector="nvml", source="nvidia-smi -q", text=_h100_q()),
        RawOutput(
            collector="kernel_log",
            source="journalctl -k",
            text="\n".join(
                [
                    xid_raw,
                    f"{HOST.split('.')[0]} kernel: {oom_raw}",
                    "audit: user=bob cmd=/home/alice/venv/bin/python myjob.py",
                    f"nvidia-smi -L: GPU 1: Tesla V100 (UUID: {UUID1}) {MIG_UUID}",
                ]
            ),
        ),
        RawOutput(
            collector="host",
            source="/proc/2187/cmdline",
            text="python /home/carol/myjob.py --secret-token abc",
        ),
        RawOutput(collector="host", source="/home/carol/.bashrc", text="export X=1"),
    ]
    return Snapshot(hostname=HOST, facts=facts, raw=raw, window_s=1.0, description="node check")


def test_nothing_identifying_survives() -> None:
    snap = make_snapshot()
    red = redact_snapshot(snap)
    text = dump_snapshot(red)
    for secret in SECRETS:
        assert secret not in text, secret
        assert secret.lower() not in text.lower(), secret
    assert red.redacted is True
    assert snap.redacted is False and snap.hostname == HOST  # the original is untouched


def test_still_loads_and_evaluable() -> None:
    red = parse_snapshot(dump_snapshot(redact_snapshot(make_snapshot())))
    g0, g1 = red.facts.gpus
    # Joinable placeholders, the same wherever the identifier appeared.
    assert (g0.uuid, g1.uuid) == ("GPU-REDACTED-0", "GPU-REDACTED-1")
    assert (g0.serial, g1.serial) == ("SERIAL-REDACTED-0", "SERIAL-REDACTED-1")
    assert "GPU-REDACTED-0" in red.raw[0].text and "SERIAL-REDACTED-0" in red.raw[0].text
    assert "GPU-REDACTED-1" in red.raw[1].text
    proc_name = red.facts.processes[0].name
    assert proc_name and proc_name.startswith("proc-REDACTED-")
    assert red.facts.xids[0].process_name == proc_name  # still the same process
    assert red.facts.ooms[0].process_name == red.facts.processes[1].name
    # Kept: numbers, codes, pids, PCI ids, versions, enums, kernel.
    assert (g0.pci_bus_id, g0.driver_version, g0.vbios_version) == (
        "0000:18:00.0",
        "565.57.01",
        "96.00.74.00.01",
    )
    assert g0.pcie_replay_count == 7 and g0.recovery_action is RecoveryAction.NONE
    assert (red.facts.xids[0].code, red.facts.xids[0].pid) == (13, 2187)
    assert "Xid (PCI:0000:18:00): 13" in red.facts.xids[0].raw
    assert red.facts.topology[0].connection == "NODE"
    assert red.facts.host is not None and red.facts.host.kernel == "6.8.0-45-generic"
    assert red.facts.host.hostname == "REDACTED-HOST" and red.hostname == "REDACTED-HOST"
    assert red.facts.scheduler is not None and red.facts.scheduler.k8s_pod_gpu_requested == 1
    assert "Replays Since Reset               : 7" in red.raw[0].text or len(red.raw[0].text) < 200
    assert red.raw[2].text == "<command line redacted>"
    assert red.window_s == 1.0 and red.description == "node check"


def test_idempotent() -> None:
    once = redact_snapshot(make_snapshot())
    twice = redact_snapshot(once)
    assert dump_snapshot(once) == dump_snapshot(twice)


def test_hostname_token_boundaries() -> None:
    snap = Snapshot(
        hostname="gpu1",
        facts=Facts(host=HostFacts(hostname="gpu1")),
        raw=[RawOutput(collector="x", source="y", text="gpu1 gpu12 GPU1 mygpu1")],
    )
    red = redact_snapshot(snap)
    assert red.raw[0].text == "REDACTED-HOST gpu12 REDACTED-HOST mygpu1"
