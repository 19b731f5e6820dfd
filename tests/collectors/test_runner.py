"""collect_snapshot: concurrency, deadlines, statuses, merging and tying events to GPUs."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from gpu_triage.collectors.base import CollectContext, CollectorUnavailable
from gpu_triage.collectors.runner import collect_snapshot, default_collectors, tie_to_gpus
from gpu_triage.io.commands import run_command
from gpu_triage.model.facts import (
    AerEvent,
    Facts,
    GpuFacts,
    GpuProcess,
    HostFacts,
    SchedulerFacts,
    UnavailableReason,
    XidEvent,
)
from gpu_triage.model.snapshot import CollectorState, dump_snapshot, parse_snapshot


class OkCollector:
    name = "ok"
    kinds = ("gpu", "xid", "host")

    def collect(self, ctx: CollectContext, facts: Facts) -> None:
        facts.gpus.append(GpuFacts(index=0, pci_bus_id="0000:18:00.0", source="nvml"))
        facts.gpus.append(GpuFacts(index=1, pci_bus_id="0000:2a:00.0", source="nvml"))
        facts.xids.append(XidEvent(code=79, pci_bus_id="0000:2a:00", raw="NVRM: Xid 79"))
        host = HostFacts(hostname="node-a", cpu_count=64)
        host.mark_unavailable("load_1m", UnavailableReason.ERROR, "unreadable")
        facts.host = host
        ctx.keep_raw(self.name, "/proc/loadavg", "0.1 0.2 0.3 1/100 42")


class HangingCollector:
    name = "hanging"
    kinds = ("nic",)

    def __init__(self) -> None:
        self.release = threading.Event()

    def collect(self, ctx: CollectContext, facts: Facts) -> None:
        self.release.wait(30)  # far past any budget


class RaisingCollector:
    name = "raising"
    kinds = ("disk",)

    def collect(self, ctx: CollectContext, facts: Facts) -> None:
        raise ValueError("cannot parse line 3")


class UnavailableCollector:
    name = "kubernetes"
    kinds = ("scheduler",)

    def collect(self, ctx: CollectContext, facts: Facts) -> None:
        raise CollectorUnavailable("kubectl not found")


def test_statuses_and_bounded_wall_time() -> None:
    hanging = HangingCollector()
    events: list[tuple[str, CollectorState | None]] = []
    ctx = CollectContext(window_s=0.2)
    start = time.monotonic()
    snap = collect_snapshot(
        [OkCollector(), hanging, RaisingCollector(), UnavailableCollector()],
        ctx,
        timeout_s=0.5,
        progress=lambda name, state: events.append((name, state)),
        description="test run",
    )
    elapsed = time.monotonic() - start
    hanging.release.set()
    assert elapsed < 0.2 + 0.5 + 0.5  # window + budget + small overhead, not 30 s
    by_name = {c.name: c for c in snap.collectors}
    assert [c.name for c in snap.collectors] == ["ok", "hanging", "raising", "kubernetes"]
    assert by_name["ok"].state is CollectorState.OK
    assert by_name["ok"].kinds == ["gpu", "xid", "host"]
    assert by_name["hanging"].state is CollectorState.TIMED_OUT
    assert by_name["hanging"].duration_s >= 0.7 - 0.05
    assert by_name["raising"].state is CollectorState.FAILED
    assert by_name["raising"].error == "ValueError: cannot parse line 3"
    assert by_name["kubernetes"].state is CollectorState.UNAVAILABLE
    assert by_name["kubernetes"].error == "kubectl not found"
    assert snap.window_s == 0.2 and snap.description == "test run"
    assert snap.hostname == "node-a"  # from the host facts
    assert [r.source for r in snap.raw] == ["/proc/loadavg"]
    # progress: a start and an end for every collector
    starts = [n for n, s in events if s is None]
    ends = {n: s for n, s in events if s is not None}
    assert sorted(starts) == sorted(by_name)
    assert ends == {n: c.state for n, c in by_name.items()}
    # the snapshot round-trips through its file format
    assert parse_snapshot(dump_snapshot(snap)).collector("hanging") is not None


def test_event_tied_to_gpu() -> None:
    snap = collect_snapshot([OkCollector()], CollectContext(window_s=0.0), timeout_s=2)
    (xid,) = snap.facts.xids
    assert xid.gpu_index == 1  # "0000:2a:00" (Xid form) matches "0000:2a:00.0"


def test_tie_to_gpus_all_keyed_kinds() -> None:
    facts = Facts(
        gpus=[
            GpuFacts(index=0, pci_bus_id="0000:18:00.0"),
            GpuFacts(index=3, pci_bus_id="0000:5d:00.0"),
        ],
        processes=[GpuProcess(pid=1, gpu_pci_bus_id="0000:5D:00.0")],
        aers=[
            AerEvent(pci_bus_id="0000:5d:00.0", raw="aer"),
            AerEvent(pci_bus_id="0000:00:03.0", raw="root port"),
        ],
        xids=[XidEvent(code=48, pci_bus_id="00000000:18:00.0", gpu_index=None)],
    )
    tie_to_gpus(facts)
    assert facts.processes[0].gpu_index == 3
    assert [a.gpu_index for a in facts.aers] == [3, None]
    assert facts.xids[0].gpu_index == 0


class HostPart:
    def __init__(self, name: str, host: HostFacts, sched: SchedulerFacts | None = None) -> None:
        self.name = name
        self.kinds: tuple[str, ...] = ("host", "scheduler")
        self._host, self._sched = host, sched

    def collect(self, ctx: CollectContext, facts: Facts) -> None:
        facts.host = self._host
        facts.scheduler = self._sched
        facts.disks = []  # undeclared kinds are never merged
        facts.nics = []


class UndeclaredCollector:
    name = "undeclared"
    kinds = ("gpu",)

    def collect(self, ctx: CollectContext, facts: Facts) -> None:
        facts.gpus.append(GpuFacts(index=0))
        facts.xids.append(XidEvent(code=13))  # not declared: dropped


def test_merge_field_by_field_first_wins() -> None:
    h1 = HostFacts(hostname="node-a", cpu_count=8)
    h1.mark_unavailable("load_1m", UnavailableReason.NO_PERMISSION, "denied")
    h1.mark_unavailable("mem_total_mib", UnavailableReason.ERROR, "x")
    h2 = HostFacts(hostname="other", load_1m=3.5, kernel="6.8.0")
    h2.mark_unavailable("mem_total_mib", UnavailableReason.TIMED_OUT, "y")
    s1 = SchedulerFacts(k8s_node_gpu_capacity=8)
    s2 = SchedulerFacts(k8s_node_gpu_capacity=4, slurm_gres_gpus=8)
    snap = collect_snapshot(
        [HostPart("a", h1, s1), HostPart("b", h2, s2), UndeclaredCollector()],
        CollectContext(window_s=0.0),
        timeout_s=2,
    )
    host = snap.facts.host
    assert host is not None
    assert (host.hostname, host.cpu_count, host.load_1m, host.kernel) == ("node-a", 8, 3.5, "6.8.0")
    assert "load_1m" not in host.unavailable  # the value arrived from the second part
    assert host.unavailable["mem_total_mib"].reason is UnavailableReason.ERROR
    sched = snap.facts.scheduler
    assert sched is not None
    assert (sched.k8s_node_gpu_capacity, sched.slurm_gres_gpus) == (8, 8)
    assert len(snap.facts.gpus) == 1 and snap.facts.xids == []
    assert snap.collector("undeclared").kinds == ["gpu"]  # type: ignore[union-attr]


def test_lists_extend_in_collector_order() -> None:
    class G:
        kinds = ("gpu",)

        def __init__(self, name: str, index: int, delay: float) -> None:
            self.name, self.index, self.delay = name, index, delay

        def collect(self, ctx: CollectContext, facts: Facts) -> None:
            time.sleep(self.delay)
            facts.gpus.append(GpuFacts(index=self.index))

    snap = collect_snapshot(
        [G("slow", 0, 0.2), G("fast", 1, 0.0)], CollectContext(window_s=0), timeout_s=2
    )
    assert [g.index for g in snap.facts.gpus] == [0, 1]


def test_collectors_run_concurrently() -> None:
    class Sleeper:
        kinds = ()

        def __init__(self, name: str) -> None:
            self.name = name

        def collect(self, ctx: CollectContext, facts: Facts) -> None:
            time.sleep(ctx.window_s)

    start = time.monotonic()
    snap = collect_snapshot(
        [Sleeper(f"s{i}") for i in range(6)], CollectContext(window_s=0.3), timeout_s=2
    )
    assert time.monotonic() - start < 0.3 * 2
    assert all(c.state is CollectorState.OK for c in snap.collectors)


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"  # a zombie is dead, only unreaped


def test_hanging_command_killed_with_its_process_group() -> None:
    start = time.monotonic()
    res = run_command(["sh", "-c", "sleep 30 & echo $!; wait"], 0.5)
    assert time.monotonic() - start < 5
    assert res.timed_out and not res.ok
    child = int(res.stdout.split()[0])
    deadline = time.monotonic() + 2
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child)  # the backgrounded grandchild died with the group


def test_collector_running_a_hanging_command() -> None:
    class SleepCollector:
        name = "sleeper"
        kinds = ()

        def collect(self, ctx: CollectContext, facts: Facts) -> None:
            res = ctx.run(self.name, ["sleep", "30"], timeout_s=0.3)
            if res.timed_out:
                raise RuntimeError("sleep 30 timed out")

    start = time.monotonic()
    snap = collect_snapshot([SleepCollector()], CollectContext(window_s=0), timeout_s=5)
    assert time.monotonic() - start < 3
    status = snap.collector("sleeper")
    assert status is not None and status.state is CollectorState.FAILED
    assert "timed out" in status.error
    assert [r.source for r in snap.raw] == ["sleep 30"]


def test_default_collectors_list() -> None:
    cols = default_collectors()
    assert [c.name for c in cols] == [
        "nvml",
        "kernel_log",
        "host",
        "fabric_manager",
        "kubernetes",
        "container_runtime",
        "slurm",
    ]


def test_default_run_without_gpu_is_bounded(tmp_path: Path) -> None:
    # Every real collector, against an empty root: none may raise out or overrun.
    ctx = CollectContext(root=tmp_path, window_s=0.1, command_timeout_s=2)
    start = time.monotonic()
    snap = collect_snapshot(None, ctx, timeout_s=3)
    assert time.monotonic() - start < 0.1 + 3 + 1
    nvml = snap.collector("nvml")
    assert nvml is not None and nvml.state is CollectorState.UNAVAILABLE
