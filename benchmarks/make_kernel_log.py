"""Generate a realistic kernel log: GPU node chatter with GPU/PCIe/OOM events between.

    python benchmarks/make_kernel_log.py OUT [--lines 1000000] [--every 100]
        [--format iso|dmesg] [--end ISO] [--span-hours 72] [--repeat-xid79 N]

Chatter is what a Kubernetes GPU node logs all day (veth/bridge churn, audit, filesystems,
NIC link changes, perf/hrtimer warnings, the nvidia driver's own info lines); about one line
in ``--every`` (100) starts an event the parser must find (Xid, SXid, AER block, OOM kill, NVLink).
Deterministic for a seed. ``--repeat-xid79 N`` writes N identical Xid 79 lines instead.
``iso`` is what the live collector reads (``journalctl -k -o short-iso``)."""

from __future__ import annotations

import argparse
import random
from datetime import UTC, datetime, timedelta
from pathlib import Path

CHATTER = [
    "IPv6: ADDRCONF(NETDEV_CHANGE): cali{h8}: link becomes ready",
    "cni0: port {n}(veth{h8}) entered forwarding state",
    "cni0: port {n}(veth{h8}) entered blocking state",
    "device veth{h8} entered promiscuous mode",
    "eth0: renamed from tmp{h8}",
    'audit: type=1400 audit({epoch}.{n}:{n}): apparmor="DENIED" operation="open" '
    'profile="cri-containerd.apparmor.d" name="/proc/{n}/status" pid={pid} comm="python3"',
    "EXT4-fs (nvme0n1p{n1}): mounted filesystem with ordered data mode. Quota mode: none.",
    "overlayfs: upperdir is in-use as upperdir/workdir of another mount, accessing files "
    "from both mounts will result in undefined behavior.",
    "mlx5_core 0000:{b2}:00.{f}: mlx5e_update_carrier:{n}:(pid {pid}): Link up",
    "perf: interrupt took too long ({n} > {n}), lowering kernel.perf_event_max_sample_rate to {n}",
    "hrtimer: interrupt took {n} ns",
    "kauditd_printk_skb: {n} callbacks suppressed",
    "TCP: request_sock_TCP: Possible SYN flooding on port {n}. Sending cookies.",
    "IPVS: rr: TCP 10.96.{n1}.{n1}:443 - no destination available",
    "xfs filesystem being remounted at /var/lib/kubelet/pods/{h8}/volumes supports "
    "timestamps until 2038 (0x7fffffff)",
    "nvidia-uvm: Loaded the UVM driver, major device number 510.",
    "NVRM: loading NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 22:23:56 UTC 2024",
    "nvidia-modeset: Loading NVIDIA Kernel Mode Setting Driver for UNIX platforms  550.54.15",
    "docker0: port {n1}(veth{h8}) entered disabled state",
    "ib0: mtu > 4092 will cause multicast packet drops.",
    "bond0: (slave ens{n1}f0): link status definitely up, 100000 Mbps full duplex",
    "systemd-journald[{pid}]: Data hash table of /var/log/journal/x/system.journal has a fill "
    "level at 75.0 ({n} of {n} items), suggesting rotation.",
]
EVENTS = [
    [
        "NVRM: Xid (PCI:0000:{gpu}:00): 13, pid={pid}, name=python3, Graphics SM Warp Exception "
        "on (GPC 1, TPC 2, SM 0): Out Of Range Address"
    ],
    [
        "NVRM: Xid (PCI:0000:{gpu}:00): 31, pid={pid}, name=python3, Ch 0000{h4}, intr 00000000. "
        "MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_0 faulted @ 0x7f_{h8}. Fault is of type "
        "FAULT_PDE ACCESS_TYPE_VIRT_READ"
    ],
    [
        "NVRM: Xid (PCI:0000:{gpu}:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off "
        "the bus.",
        "NVRM: GPU 0000:{gpu}:00.0: GPU has fallen off the bus.",
    ],
    [
        "NVRM: Xid (PCI:0000:{gpu}:00): 48, pid='<unknown>', name=<unknown>, An uncorrectable "
        "double bit error (DBE) has been detected on GPU in the framebuffer at partition 6, "
        "subpartition 0."
    ],
    [
        "nvidia-nvswitch{n1}: SXid (PCI:0000:{gpu}:00.0): 12028, Non-fatal, Link {n1} egress "
        "non-posted PRIV error (First)",
        "nvidia-nvswitch{n1}: SXid (PCI:0000:{gpu}:00.0): 12028, Severity 0 Engine instance "
        "{n1} Sub-engine instance 00",
        "nvidia-nvswitch{n1}: SXid (PCI:0000:{gpu}:00.0): 12028, Data {{0x00000000, 0x0000ffff, "
        "0x00000000}}",
    ],
    [
        "pcieport 0000:{b2}:01.0: AER: Corrected error received: 0000:{gpu}:00.0",
        "nvidia 0000:{gpu}:00.0: PCIe Bus Error: severity=Corrected, type=Physical Layer, "
        "(Receiver ID)",
        "nvidia 0000:{gpu}:00.0:   device [10de:2330] error status/mask=00000001/0000a000",
        "nvidia 0000:{gpu}:00.0:    [ 0] RxErr                  (First)",
    ],
    [
        "python3 invoked oom-killer: gfp_mask=0xcc0(GFP_KERNEL), order=0, oom_score_adj=999",
        "oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=cri-{h8}.scope,"
        "mems_allowed=0-1,oom_memcg=/kubepods.slice/pod{h8},task_memcg=/kubepods.slice/pod{h8}/"
        "cri-{h8}.scope,task=python3,pid={pid},uid=0",
        "Memory cgroup out of memory: Killed process {pid} (python3) total-vm:{n}kB, "
        "anon-rss:{n}kB, file-rss:0kB, shmem-rss:0kB, UID:0 pgtables:{n}kB oom_score_adj:999",
    ],
    ["NVRM: knvlinkCoreShutdownDeviceLinks: NVLink link {n1} is down unexpectedly"],
]
# the driver's own info lines are logged at load, not all day
WEIGHTS = [0.05 if ("NVIDIA" in c or "nvidia" in c) else 1.0 for c in CHATTER]
GPUS = ["18", "2a", "3a", "5d", "9a", "ab", "ba", "db"]


def fill(tpl: str, rnd: random.Random) -> str:
    return tpl.format(
        h8=f"{rnd.getrandbits(32):08x}",
        h4=f"{rnd.getrandbits(16):04x}",
        n=rnd.randrange(1, 99999),
        n1=rnd.randrange(1, 9),
        pid=rnd.randrange(300, 4_000_000),
        epoch=1_790_000_000 + rnd.randrange(10**6),
        b2=f"{rnd.randrange(256):02x}",
        f=rnd.randrange(2),
        gpu=rnd.choice(GPUS),
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path)
    ap.add_argument("--lines", type=int, default=1_000_000)
    ap.add_argument("--every", type=int, default=100, help="one event per this many lines")
    ap.add_argument("--format", choices=("iso", "dmesg"), default="iso")
    ap.add_argument("--end", help="ISO time of the last line (default: now)")
    ap.add_argument("--span-hours", type=float, default=72.0)
    ap.add_argument("--repeat-xid79", type=int, default=0)
    ap.add_argument("--seed", type=int, default=11)
    a = ap.parse_args()
    rnd = random.Random(a.seed)
    end = datetime.fromisoformat(a.end) if a.end else datetime.now(UTC)
    start = end - timedelta(hours=a.span_hours)
    step = (end - start).total_seconds() / max(a.lines, 1)
    boot = 1000.0

    def stamp(i: int) -> str:
        if a.format == "dmesg":
            return f"[{boot + i * step:12.6f}] "
        t = start + timedelta(seconds=i * step)
        return t.strftime("%Y-%m-%dT%H:%M:%S.%f") + "+00:00 gpu-node-07 kernel: "

    with a.out.open("w", encoding="utf-8") as fh:
        if a.repeat_xid79:
            line = (
                "NVRM: Xid (PCI:0000:41:00): 79, pid='<unknown>', name=<unknown>, "
                "GPU has fallen off the bus."
            )
            for i in range(a.repeat_xid79):
                fh.write(stamp(i * a.lines // max(a.repeat_xid79, 1)) + line + "\n")
            return
        i = 0
        buf: list[str] = []
        while i < a.lines:
            if rnd.randrange(a.every) == 0:
                for tpl in rnd.choice(EVENTS):
                    buf.append(stamp(i) + fill(tpl, rnd))
                    i += 1
            else:
                buf.append(stamp(i) + fill(rnd.choices(CHATTER, WEIGHTS)[0], rnd))
                i += 1
            if len(buf) >= 10_000:
                fh.write("\n".join(buf) + "\n")
                buf.clear()
        if buf:
            fh.write("\n".join(buf) + "\n")


if __name__ == "__main__":
    main()
