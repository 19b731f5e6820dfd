"""Where GPU processes may run (guide/T5, FD4): /proc/PID/status and cgroup v2 files of a
fake root, in the kernel's real formats, with processes that vanish and hostile paths."""

from __future__ import annotations

from pathlib import Path

from gpu_triage.collectors.process_placement import (
    cgroup_dir,
    numa_cpus,
    parse_cpu_list,
    place_processes,
    status_lists,
)
from gpu_triage.model.facts import Facts, GpuFacts, GpuProcess, UnavailableReason

# /proc/PID/status of a python rank, trimmed (kernel 6.5 layout, tabs as printed).
STATUS = """\
Name:\tpython
Umask:\t0022
State:\tS (sleeping)
Tgid:\t{pid}
Pid:\t{pid}
PPid:\t1
Threads:\t57
Cpus_allowed:\t{mask}
Cpus_allowed_list:\t{cpus}
Mems_allowed:\t00000000,00000003
Mems_allowed_list:\t{mems}
voluntary_ctxt_switches:\t118
nonvoluntary_ctxt_switches:\t3
"""


def _node(root: Path, nodes: dict[int, str]) -> None:
    for n, cpus in nodes.items():
        d = root / "sys" / "devices" / "system" / "node" / f"node{n}"
        d.mkdir(parents=True)
        (d / "cpulist").write_text(cpus + "\n")
    (root / "sys" / "devices" / "system" / "node" / "possible").write_text("0-1\n")


def _proc(root: Path, pid: int, cpus: str, mems: str, cgroup: str | None = None) -> None:
    d = root / "proc" / str(pid)
    d.mkdir(parents=True)
    (d / "status").write_text(STATUS.format(pid=pid, mask="ff", cpus=cpus, mems=mems))
    if cgroup is not None:
        (d / "cgroup").write_text(cgroup)


def _cg(root: Path, path: str, cpu_max: str, stat: str) -> None:
    d = root / "sys" / "fs" / "cgroup" / path.strip("/")
    d.mkdir(parents=True)
    (d / "cpu.max").write_text(cpu_max)
    (d / "cpu.stat").write_text(stat)


def _facts(*procs: GpuProcess) -> Facts:
    return Facts(
        gpus=[
            GpuFacts(index=0, pci_bus_id="0000:1b:00.0", numa_node=0),
            GpuFacts(index=4, pci_bus_id="0000:9d:00.0", numa_node=1),
        ],
        processes=list(procs),
    )


def _p(pid: int, bus: str = "0000:1b:00.0") -> GpuProcess:
    return GpuProcess(gpu_pci_bus_id=bus, pid=pid, source="nvml")


def test_cpu_lists_in_kernel_format() -> None:
    assert parse_cpu_list("0-3,8,10-11\n") == frozenset({0, 1, 2, 3, 8, 10, 11})
    assert parse_cpu_list("") == frozenset()
    assert parse_cpu_list("3-1") is None and parse_cpu_list("a-b") is None
    assert parse_cpu_list("0-4294967295") is None  # absurd: refused, not expanded


def test_status_lists_read_only_the_two_fields() -> None:
    got = status_lists(STATUS.format(pid=1, mask="f", cpus="0-55,112-167", mems="0"))
    assert got == {"Cpus_allowed_list": "0-55,112-167", "Mems_allowed_list": "0"}


def test_a_rank_pinned_to_the_other_socket(tmp_path: Path) -> None:
    _node(tmp_path, {0: "0-55,112-167", 1: "56-111,168-223"})
    _proc(tmp_path, 4242, "56-111,168-223", "1")
    facts = _facts(_p(4242))
    place_processes(facts, tmp_path)
    p = facts.processes[0]
    assert p.cpus_allowed == "56-111,168-223" and p.mems_allowed == "1"
    assert p.cpus_pinned is True and p.gpu_numa_cpus_pct == 0.0
    assert p.mems_on_gpu_numa_node is False


def test_an_unpinned_rank_on_two_sockets(tmp_path: Path) -> None:
    _node(tmp_path, {0: "0-3", 1: "4-7"})
    _proc(tmp_path, 7, "0-7", "0-1")
    facts = _facts(_p(7, "0000:9d:00.0"))
    place_processes(facts, tmp_path)
    p = facts.processes[0]
    assert p.cpus_pinned is False and p.gpu_numa_cpus_pct == 50.0
    assert p.mems_on_gpu_numa_node is True


def test_a_process_that_exited_is_unavailable_not_an_error(tmp_path: Path) -> None:
    _node(tmp_path, {0: "0-3"})
    facts = _facts(_p(999))
    place_processes(facts, tmp_path)
    p = facts.processes[0]
    assert p.cpus_pinned is None
    assert p.unavailable["cpus_pinned"].reason is UnavailableReason.NOT_COLLECTED
    assert "exited" in p.unavailable["cpu_throttled_pct"].detail


def test_cgroup_quota_and_throttling(tmp_path: Path) -> None:
    _node(tmp_path, {0: "0-7"})
    path = "/kubepods.slice/kubepods-pod1.slice/cri-containerd-ab12.scope"
    _proc(tmp_path, 11, "0-7", "0", f"0::{path}\n")
    _cg(
        tmp_path,
        path,
        "400000 100000\n",
        "usage_usec 981234\nuser_usec 900000\nsystem_usec 81234\n"
        "nr_periods 52000\nnr_throttled 23400\nthrottled_usec 8123456\n",
    )
    facts = _facts(_p(11))
    place_processes(facts, tmp_path)
    p = facts.processes[0]
    assert p.cgroup == path and p.cpu_quota_cores == 4.0
    assert p.cpu_periods == 52000 and p.cpu_throttled_pct == 45.0


def test_no_quota_reads_max(tmp_path: Path) -> None:
    _node(tmp_path, {0: "0-7"})
    _proc(tmp_path, 12, "0-7", "0", "0::/system.slice/job.service\n")
    _cg(tmp_path, "/system.slice/job.service", "max 100000\n", "nr_periods 0\nnr_throttled 0\n")
    facts = _facts(_p(12))
    place_processes(facts, tmp_path)
    p = facts.processes[0]
    assert p.cpu_quota_cores is None and p.cpu_throttled_pct == 0.0
    assert p.unavailable["cpu_quota_cores"].reason is UnavailableReason.NOT_SUPPORTED


def test_a_cgroup_path_cannot_leave_the_cgroup_tree(tmp_path: Path) -> None:
    assert cgroup_dir(tmp_path, "0::/../../etc\n") is None
    assert cgroup_dir(tmp_path, "12:cpu,cpuacct:/x\n") is None  # v1 only: no v2 entry
    got = cgroup_dir(tmp_path, "1:name=systemd:/a\n0::/a/b\n")
    assert got == tmp_path / "sys" / "fs" / "cgroup" / "a" / "b"


def test_numa_nodes_ignore_other_entries(tmp_path: Path) -> None:
    _node(tmp_path, {0: "0-1", 1: "2-3"})
    (tmp_path / "sys" / "devices" / "system" / "node" / "nodeX").mkdir()
    assert numa_cpus(tmp_path) == {0: frozenset({0, 1}), 1: frozenset({2, 3})}
    assert numa_cpus(tmp_path / "nowhere") == {}
