"""Format variations pastes bring (issue 14's list), each tested from the format's rules:
mpstat -N, ibv_devinfo, topo -p2p, /proc/stat, /proc/pressure concatenations, topo -m
affinity and header-less tails, compute-apps CSV without pid, kubectl describe pod
indentation, lspci ACS / IOMMU / bus range."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gpu_triage.collectors.from_text import FAILED, PARSED, intake_paste
from gpu_triage.collectors.parsers import ParseError
from gpu_triage.collectors.parsers.ibv_devinfo import parse_ibv_devinfo
from gpu_triage.collectors.parsers.kubectl import parse_describe_pod
from gpu_triage.collectors.parsers.lspci import parse_lspci_vv
from gpu_triage.collectors.parsers.mpstat import fill_host_from_mpstat, parse_mpstat
from gpu_triage.collectors.parsers.nvidia_smi.query_csv import parse_compute_apps_csv
from gpu_triage.collectors.parsers.pressure import parse_pressure_text
from gpu_triage.collectors.parsers.proc_stat import parse_proc_stat
from gpu_triage.collectors.parsers.registry import get_parser
from gpu_triage.collectors.parsers.topo import parse_topo_matrix
from gpu_triage.collectors.parsers.topo_p2p import parse_topo_p2p

DATA = Path(__file__).resolve().parents[1] / "data"
HAND = DATA / "hand-written"
REAL = DATA / "real-outputs"

_ROW = "{t}  {c:>4}  {u:6.2f}    0.00  {s:6.2f}" + "    0.00" * 6 + "  {i:6.2f}"
_HEAD = (
    "{t}  {c:>4}    %usr   %nice    %sys %iowait    %irq   %soft  %steal  %guest  %gnice   %idle"
)


def _table(label: str, stamp: str, rows: list[tuple[str, float, float]]) -> list[str]:
    out = [_HEAD.format(t=stamp, c=label)]
    for cpu, usr, sys_ in rows:
        out.append(_ROW.format(t=stamp, c=cpu, u=usr, s=sys_, i=100.0 - usr - sys_))
    return out


BANNER = "Linux 6.8.0-45-generic (dgx-07) \t11/20/2025 \t_x86_64_\t(8 CPU)"
NODES = [("all", 24.0, 3.0), ("0", 46.0, 6.0), ("1", 2.0, 0.0)]
CPUS = [("all", 24.0, 3.0), *[(str(i), 90.0 if i == 5 else 2.0, 1.0) for i in range(8)]]


@pytest.mark.parametrize("stamp", ["03:12:02 PM", "15:12:02", "Average:", "Durchschn.:"])
def test_mpstat_node_table_alone(stamp: str) -> None:
    text = "\n".join([BANNER, "", *_table("NODE", stamp, NODES)]) + "\n"
    r = parse_mpstat(text)
    host = fill_host_from_mpstat(r)
    assert host.cpu_user_pct == 24.0 and host.cpu_idle_pct == 73.0
    assert (host.busiest_numa_node, host.busiest_numa_node_busy_pct) == (0, 52.0)
    assert host.busiest_core is None  # nodes are not cores
    assert host.cpu_count == 8


def test_mpstat_cpu_and_node_tables_are_read_apart() -> None:
    """`mpstat -P ALL -N ALL 1 1`: per interval a CPU then a NODE table, then averages."""
    lines = [BANNER, ""]
    for stamp in ("03:12:01 PM", "Average:"):
        lines += [*_table("CPU", stamp, CPUS), "", *_table("NODE", stamp, NODES), ""]
    host = fill_host_from_mpstat(parse_mpstat("\n".join(lines)))
    assert (host.busiest_core, host.cores_saturated) == (5, 1)
    assert host.busiest_numa_node == 0
    intake = intake_paste("$ mpstat -P ALL -N ALL 1 1\n" + "\n".join(lines), "m.txt")
    assert [p.parser for p in intake.pieces] == ["mpstat"]


IBV_V = HAND / "ib/ibv_devinfo-v-ndr-active-and-polling.txt"


@pytest.mark.parametrize("spaces", [False, True])
def test_ibv_devinfo_ports_states_and_rate(spaces: bool) -> None:
    text = IBV_V.read_text()
    if spaces:  # pastes turn tabs into spaces, or flatten indentation
        text = re.sub(r"\t+", "  ", text)
    ports = {p.ca_name: p for p in parse_ibv_devinfo(text)}
    assert (ports["mlx5_0"].state, ports["mlx5_0"].phys_state) == ("active", "linkup")
    assert ports["mlx5_0"].rate_gbps == 400.0 and ports["mlx5_0"].link_layer == "infiniband"
    assert (ports["mlx5_1"].state, ports["mlx5_1"].phys_state) == ("down", "polling")
    plain = parse_ibv_devinfo((HAND / "ib/ibv_devinfo-plain-roce-one-port.txt").read_text())
    assert [(p.ca_name, p.port, p.state, p.link_layer, p.rate_gbps) for p in plain] == [
        ("mlx5_2", 1, "active", "ethernet", None)  # no -v: no width/speed, no rate
    ]
    with pytest.raises(ParseError):
        parse_ibv_devinfo("CA 'mlx5_0'\n\tPort 1:\n\t\tState: Active\n")


def test_topo_p2p_capability_from_command_or_kind() -> None:
    text = (HAND / "topo/topo-p2p-4gpu-two-pcie-switches-cns.txt").read_text()
    pairs = {(t.a, t.b): t for t in parse_topo_p2p(text, "x", "r")}
    assert pairs[("GPU0", "GPU1")].p2p_read == "OK" and pairs[("GPU0", "GPU2")].p2p_read == "CNS"
    assert len(pairs) == 12  # 4x4 without the diagonal
    from_source = parse_topo_p2p(text, "paste:3-9 (nvidia-smi topo -p2p n)")
    assert {t.p2p_nvlink for t in from_source} == {"OK", "CNS"}
    headerless = "\n".join(
        line for line in text.splitlines() if not re.fullmatch(r"\s*(GPU\d\s*)+", line)
    )
    assert {(t.a, t.b, t.p2p_status) for t in parse_topo_p2p(headerless)} == {
        (t.a, t.b, t.p2p_read) for t in pairs.values()
    }
    with pytest.raises(ParseError):
        parse_topo_p2p("GPU0 X NV12\nGPU1 NV12 X\n")  # that is topo -m


def test_proc_stat_one_and_two_readings() -> None:
    two = parse_proc_stat((HAND / "proc/proc-stat-two-readings-4cpu.txt").read_text())
    assert (two.cpu_user_pct, two.cpu_system_pct, two.cpu_iowait_pct, two.cpu_idle_pct) == (
        40.0,
        10.0,
        10.0,
        40.0,
    )
    assert two.cpu_count == 4 and two.busiest_core == 0 and two.cores_saturated == 1
    assert two.boot_time is not None and two.boot_time.year == 2023
    old = parse_proc_stat(
        (HAND / "proc/proc-stat-one-reading-old-kernel-7-columns.txt").read_text()
    )
    assert old.cpu_count == 2 and old.cpu_idle_pct == 99.88 and "since boot" in old.source
    with pytest.raises(ParseError):
        parse_proc_stat("MemTotal: 1 kB\n")


PSI_WANT = {"cpu": 4.1, "io": 33.3, "memory": 5.5}


@pytest.mark.parametrize(
    "name",
    [
        "pressure-grep-n-star.txt",
        "pressure-grep-H-star-old-kernel.txt",
        "pressure-head-star-banners.txt",
    ],
)
def test_pressure_labelled_pastes(name: str) -> None:
    psi = parse_pressure_text((HAND / "proc" / name).read_text())
    assert {r: v["some"]["avg10"] for r, v in psi.items()} == PSI_WANT
    assert psi["io"]["full"]["avg10"] == 31.0


def test_pressure_cat_star_in_file_order() -> None:
    three = parse_pressure_text(
        (HAND / "proc/pressure-cat-star-cpu-io-memory-unlabelled.txt").read_text()
    )
    assert three["memory"]["full"]["avg10"] == 57.59 and three["io"]["some"]["avg10"] == 12.5
    old = parse_pressure_text(
        (HAND / "proc/pressure-cat-star-old-kernel-no-cpu-full.txt").read_text()
    )
    assert set(old["cpu"]) == {"some"} and old["io"]["full"]["avg10"] == 7.5
    irq = parse_pressure_text((HAND / "proc/pressure-cat-star-with-irq-kernel-6.txt").read_text())
    assert set(irq) == {"cpu", "io", "irq", "memory"} and irq["memory"]["some"]["avg10"] == 3.0


def test_pressure_single_file_needs_to_say_whose() -> None:
    one = (REAL / "proc/pressure-memory-high-some-full-procfs40.txt").read_text()
    with pytest.raises(ParseError, match="proc-pressure-memory"):
        parse_pressure_text(one, "psi.txt")
    assert (
        parse_pressure_text(one, "paste:2-3 (cat /proc/pressure/io)")["io"]["full"]["avg10"]
        == 57.59
    )
    assert get_parser("proc-pressure-cpu")(one, "x").host.psi_cpu_some_avg10 == 70.24
    numbered = "\n".join(f"{i}:{line.strip()}" for i, line in enumerate(one.splitlines(), 1))
    intake = intake_paste(f"$ grep -n . /proc/pressure/memory\n{numbered}\n", "g.txt")
    assert intake.pieces[0].state == PARSED and intake.facts.host.psi_memory_some_avg10 == 70.24


TOPO = HAND / "topo/topo-m-4gpu-2nic-numa-gpu-numa-id-legend.txt"


def test_topo_affinity_columns_become_gpu_facts() -> None:
    f = get_parser("nvidia-smi-topo")(TOPO.read_text(), "t")
    gpus = {g.index: g for g in f.gpus}
    assert (gpus[0].cpu_affinity, gpus[0].numa_node) == ("0-31", 0)
    assert (gpus[3].cpu_affinity, gpus[3].numa_node) == ("32-63", 1)
    collapsed = get_parser("nvidia-smi-topo")(
        next((REAL / "topo").glob("*collapsed*")).read_text(), "t"
    )
    assert {g.index: g.cpu_affinity for g in collapsed.gpus}[4] == "56-111,168-223"


def test_topo_affinity_merges_into_the_table_gpus() -> None:
    table = (REAL / "nvidia-smi/table-8x-h100-sxm-565-new-format-thamada-nvsim.txt").read_text()
    topo = next((REAL / "topo").glob("*collapsed*")).read_text()
    f = intake_paste(f"$ nvidia-smi\n{table}\n$ nvidia-smi topo -m\n{topo}\n", "s").facts
    assert len(f.gpus) == 8
    gpu4 = next(g for g in f.gpus if g.index == 4)
    assert gpu4.pci_bus_id == "0000:9a:00.0" and gpu4.numa_node == 1


@pytest.mark.parametrize("cut", range(1, 7))
def test_topo_tail_without_header_keeps_columns(cut: int) -> None:
    full = TOPO.read_text()
    want = {(p.a, p.b): p.connection for p in parse_topo_matrix(full).pairs}
    tail = "\n".join(full.splitlines()[cut:])
    got = {(p.a, p.b): p.connection for p in parse_topo_matrix(tail).pairs}
    assert got and all(want[k] == v for k, v in got.items()), got


def test_compute_apps_without_pid_keeps_rows() -> None:
    rows = parse_compute_apps_csv(
        "process_name, used_gpu_memory [MiB], gpu_bus_id\n"
        "python, 70000 MiB, 00000000:18:00.0\n/usr/bin/trainer, [N/A], 00000000:2A:00.0\n"
    )
    assert [(p.name, p.used_memory_mib, p.gpu_pci_bus_id) for p in rows] == [
        ("python", 70000.0, "0000:18:00.0"),
        ("/usr/bin/trainer", None, "0000:2a:00.0"),
    ]
    assert parse_compute_apps_csv("used_memory [MiB]\n512 MiB\n")[0].used_memory_mib == 512.0


POD = HAND / "k8s/describe-pod-pending-insufficient-gpu.txt"


@pytest.mark.parametrize("variant", ["as-is", "double-indent", "quoted", "tabs", "quoted-deep"])
def test_describe_pod_gpu_request_at_any_indentation(variant: str) -> None:
    text = POD.read_text()
    deep = "\n".join(re.sub(r"^( +)", lambda m: m.group(1) * 2, s) for s in text.splitlines())
    text = {
        "as-is": text,
        "double-indent": deep,
        "quoted": "\n".join("    " + s for s in text.splitlines()),
        "tabs": "\n".join(
            re.sub(r"^(  )+", lambda m: "\t" * (len(m.group(0)) // 2), s) for s in text.splitlines()
        ),
        "quoted-deep": "\n".join("  " + s for s in deep.splitlines()),
    }[variant]
    f = parse_describe_pod(text)
    assert f.k8s_pod_gpu_requested == 2 and f.k8s_pod_scheduled is False
    assert (
        f.k8s_pod_unschedulable_reason
        and "Insufficient nvidia.com/gpu" in f.k8s_pod_unschedulable_reason
    )


ACS = HAND / "lspci/lspci-vvv-amd-root-ports-acs-redirect-iommu-two-gpus.txt"


def test_lspci_keeps_acs_iommu_and_bus_range_per_bridge() -> None:
    links = {link.pci_bus_id: link for link in parse_lspci_vv(ACS.read_text())}
    port = links["0000:00:01.1"]
    assert port.device_class == "bridge" and port.acs_capable is True
    assert (port.acs_req_redir, port.acs_cmplt_redir, port.acs_src_valid) == (True, True, True)
    assert (port.acs_trans_blk, port.acs_direct_trans) == (False, False)
    assert (port.secondary_bus, port.subordinate_bus, port.iommu_group) == (1, 1, 3)
    other = links["0000:00:03.1"]  # ACS present, all controls off; no link lines at all
    assert other.acs_capable and other.acs_req_redir is False and other.secondary_bus == 0x41
    gpu = links["0000:01:00.0"]
    assert gpu.device_class == "gpu" and gpu.iommu_group == 17 and gpu.acs_capable is None


def test_lspci_acs_grep_fragment() -> None:
    frag = (
        "ACSCap: SrcValid+ TransBlk+ ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans+\n"
        "ACSCtl: SrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-\n"
        "ACSCap: SrcValid+ TransBlk+ ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans+\n"
        "ACSCtl: SrcValid- TransBlk- ReqRedir- CmpltRedir- UpstreamFwd- EgressCtrl- DirectTrans-\n"
    )
    links = parse_lspci_vv(frag)
    assert [(x.acs_req_redir, x.acs_cmplt_redir) for x in links] == [(True, True), (False, False)]
    intake = intake_paste(f"# lspci -vvv | grep -E 'ACSCap|ACSCtl'\n{frag}", "acs.txt")
    assert [p.parser for p in intake.pieces] == ["lspci"] and intake.pieces[0].state == PARSED


def test_forced_kind_error_names_file_and_line() -> None:
    intake = intake_paste("\n\nnot a matrix at all\n", "x.txt", kind="nvidia-smi-topo-p2p")
    assert intake.pieces[0].state == FAILED and intake.pieces[0].message.startswith("x.txt")


@pytest.mark.parametrize("prompt", ["", "$ sudo lspci -vvv\n"])
def test_lspci_kernel_driver_lines_stay_in_the_lspci_block(prompt: str) -> None:
    """ "Kernel driver in use: pcieport" is lspci's own line, not a kernel-log line: the
    listing stays one block, so a bridge's bus range still finds the GPU below it."""
    from gpu_triage.collectors.from_text import TextInput, snapshot_from_texts

    listing = (
        "00:01.1 PCI bridge: Advanced Micro Devices, Inc. [AMD] Starship/Matisse GPP Bridge\n"
        "\tBus: primary=00, secondary=01, subordinate=01, sec-latency=0\n"
        "\tCapabilities: [2a0 v1] Access Control Services\n"
        "\t\tACSCtl:\tSrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl-\n"
        "\tKernel driver in use: pcieport\n"
        "\n"
        "01:00.0 VGA compatible controller: NVIDIA Corporation AD102GL [RTX 5880 Ada Generation]\n"
        "\t\tLnkSta:\tSpeed 16GT/s (ok), Width x16 (ok)\n"
        "\tKernel driver in use: nvidia\n"
        "\tKernel modules: nvidiafb, nouveau, nvidia_drm, nvidia\n"
    )
    snap = snapshot_from_texts([TextInput(prompt + listing, "session.txt")])
    assert [c.name.split(":")[1] for c in snap.collectors if c.name.startswith("text:")] == [
        "lspci"
    ]
    bridge = next(p for p in snap.facts.pcie_links if p.device_class == "bridge")
    assert bridge.gpus_below == 1 and bridge.acs_req_redir is True
