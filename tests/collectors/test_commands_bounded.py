"""The command runner and the collector supervisor under commands that misbehave: fakes
placed first on the collectors' search path (``CollectContext.search_path``)."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from gpu_triage.collectors.base import CollectContext
from gpu_triage.collectors.kernel_log import KernelLogCollector
from gpu_triage.collectors.runner import collect_snapshot
from gpu_triage.collectors.scheduler import KubernetesCollector
from gpu_triage.io import commands
from gpu_triage.io.commands import run_command
from gpu_triage.model.facts import Facts, HostFacts
from gpu_triage.model.snapshot import CollectorState

FAKES = {
    # prints without end, like `yes` standing in for kubectl
    "endless": "#!/bin/sh\nexec yes 'y'\n",
    # a grandchild leaves the group (setsid) and keeps stdout open; the command exits
    "escaper": '#!/bin/sh\nsetsid sh -c \'echo $$ > "$0"; exec sleep 300\' "$MARK" &\n'
    "echo started\nexit 0\n",
    # the same, but the command hangs too
    "escaper-hang": '#!/bin/sh\nsetsid sh -c \'echo $$ > "$0"; exec sleep 300\' "$MARK" &\n'
    "exec sleep 300\n",
    # ignores TERM, and so do the 30 children it forks
    "stubborn": "#!/bin/sh\ntrap '' TERM\ni=0\nwhile [ $i -lt 30 ]; do\n"
    "  (trap '' TERM; exec sleep 300) &\n  i=$((i+1))\ndone\nsleep 300\n",
}


@pytest.fixture
def fakes(tmp_path: Path) -> Path:
    d = tmp_path / "bin"
    d.mkdir()
    for name, text in FAKES.items():
        (d / name).write_text(text)
        (d / name).chmod(0o755)
    return d


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


def marked(token: str) -> list[int]:
    """Live processes whose environment holds ``token`` (what a fake leaves behind)."""
    out = []
    for e in os.listdir("/proc"):
        if e.isdigit():
            try:
                with open(f"/proc/{e}/environ", "rb") as fh:
                    if token.encode() in fh.read() and alive(int(e)):
                        out.append(int(e))
            except OSError:
                pass
    return out


def test_endless_output_is_capped_and_recorded_as_truncated(fakes: Path) -> None:
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.monotonic()
    res = run_command(["endless"], 30.0, search_path=str(fakes), max_stdout=1 << 20)
    assert res.truncated and len(res.stdout) == 1 << 20
    assert time.monotonic() - start < 10  # stopped at the cap, not at the timeout
    assert not alive(res.pgid or 0)
    grown_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert grown_mib < 64, grown_mib


def test_a_grandchild_that_escapes_and_holds_stdout_does_not_block(
    fakes: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mark = tmp_path / "escaped.pid"
    monkeypatch.setenv("MARK", str(mark))  # not passed: the environment is minimal
    monkeypatch.setattr(commands, "minimal_env", _env_with({"MARK": str(mark)}))
    start = time.monotonic()
    res = run_command(["escaper"], 30.0, search_path=str(fakes))
    took = time.monotonic() - start
    assert res.returncode == 0 and res.stdout.startswith("started") and not res.timed_out
    assert took < 5, took  # EXIT_GRACE_S after the command exited, then killed
    pid = int(mark.read_text())
    assert not alive(pid), "the setsid grandchild outlived the command"


def test_a_timeout_kills_descendants_that_left_the_group(
    fakes: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mark = tmp_path / "escaped.pid"
    monkeypatch.setattr(commands, "minimal_env", _env_with({"MARK": str(mark)}))
    start = time.monotonic()
    res = run_command(["escaper-hang"], 0.5, search_path=str(fakes))
    assert res.timed_out and time.monotonic() - start < 5
    assert not alive(int(mark.read_text()))
    assert res.left_running == 0


def test_a_command_and_30_children_that_ignore_term_all_die(fakes: Path) -> None:
    res = run_command(["stubborn"], 0.5, search_path=str(fakes))
    assert res.timed_out and res.left_running == 0
    time.sleep(0.1)
    ps = subprocess.run(["ps", "-eo", "pid,ppid,args"], capture_output=True, text=True).stdout
    assert str(fakes / "stubborn") not in ps
    assert not [line for line in ps.splitlines() if line.split()[1:2] == [str(res.pgid)]]


def test_no_zombies_pile_up(fakes: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Orphans re-parented to us (the subreaper) are reaped, not left as zombies."""
    monkeypatch.setattr(commands, "minimal_env", _env_with({"MARK": str(tmp_path / "p")}))

    def zombies() -> set[int]:  # (other tests' orphans may wait here too: count ours)
        out: set[int] = set()
        for t in os.listdir("/proc/self/task"):
            with open(f"/proc/self/task/{t}/children") as fh:
                out |= {int(p) for p in fh.read().split() if not alive(int(p))}
        return out

    before = zombies()
    for _ in range(5):
        run_command(["escaper"], 5.0, search_path=str(fakes))
    assert zombies() - before == set()


def test_cancel_ends_a_command_at_once(fakes: Path) -> None:
    cancel = threading.Event()
    threading.Timer(0.3, cancel.set).start()
    start = time.monotonic()
    res = run_command(["stubborn"], 60.0, search_path=str(fakes), cancel=cancel)
    assert res.cancelled and time.monotonic() - start < 5


class _Late:
    """A collector that overruns its deadline, then writes facts and returns normally."""

    name = "late"
    kinds = ("host",)

    def __init__(self) -> None:
        self.finished = threading.Event()

    def collect(self, ctx: CollectContext, facts: Facts) -> None:
        time.sleep(0.6)
        facts.host = HostFacts(hostname="late-and-wrong", cpu_count=1)
        self.finished.set()


def test_a_timed_out_collector_is_decided_once_and_its_late_result_discarded() -> None:
    late = _Late()
    snap = collect_snapshot([late], CollectContext(window_s=0.0), timeout_s=0.1)
    assert late.finished.wait(5)  # it did finish, later
    time.sleep(0.1)
    status = snap.collector("late")
    assert status is not None and status.state is CollectorState.TIMED_OUT
    assert "did not finish within" in status.error and status.kinds == []
    assert snap.facts.host is None  # nothing late was merged
    assert snap.collector("late").state is CollectorState.TIMED_OUT  # still, after it ended


def test_a_timed_out_collector_has_its_command_killed(fakes: Path) -> None:
    """The supervisor cancels what it abandons: the command it runs dies with it, so its
    thread ends instead of piling up across loop iterations."""
    threads = threading.active_count()
    ctx = CollectContext(window_s=0.0, search_path=str(fakes), command_timeout_s=60.0)

    class Stuck:
        name = "stuck"
        kinds = ("host",)

        def collect(self, ctx: CollectContext, facts: Facts) -> None:
            ctx.run(self.name, ["stubborn"])

    start = time.monotonic()
    snap = collect_snapshot([Stuck()], ctx, timeout_s=0.3)
    assert snap.collectors[0].state is CollectorState.TIMED_OUT
    deadline = time.monotonic() + 10
    while threading.active_count() > threads and time.monotonic() < deadline:
        time.sleep(0.05)
    assert threading.active_count() <= threads and time.monotonic() - start < 10


def test_kernel_log_sources_that_hang_are_a_failure_not_not_present(tmp_path: Path) -> None:
    """journalctl and dmesg exist but hang: "timed out", never "unavailable"."""
    d = tmp_path / "bin"
    d.mkdir()
    for tool in ("journalctl", "dmesg"):
        (d / tool).write_text("#!/bin/sh\nexec sleep 300\n")
        (d / tool).chmod(0o755)
    ctx = CollectContext(root=tmp_path, search_path=str(d), command_timeout_s=0.3, window_s=0)
    snap = collect_snapshot([KernelLogCollector()], ctx, timeout_s=5.0)
    status = snap.collectors[0]
    assert status.state is CollectorState.FAILED and "timed out" in status.error


def test_endless_kubectl_is_ok_and_truncated(fakes: Path, tmp_path: Path) -> None:
    (fakes / "kubectl").symlink_to(fakes / "endless")
    (tmp_path / "proc/sys/kernel").mkdir(parents=True)
    (tmp_path / "proc/sys/kernel/hostname").write_text("node-1\n")
    ctx = CollectContext(root=tmp_path, search_path=str(fakes), window_s=0)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    snap = collect_snapshot([KubernetesCollector()], ctx, timeout_s=60)
    status = snap.collectors[0]
    assert status.truncated is True and status.state is not CollectorState.TIMED_OUT
    grown_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert grown_mib < 512, grown_mib  # was 5.5 GiB and climbing


def test_live_run_with_hanging_fakes_is_unknown_and_leaves_nothing(tmp_path: Path) -> None:
    """The whole CLI, fakes first on its search path: a bounded run, exit 3 naming the
    kernel log, no fake process left."""
    d = tmp_path / "bin"
    d.mkdir()
    nap = f"300.{os.getpid()}{time.monotonic_ns() % 10_000}"  # this test's own sleeps
    for tool in ("journalctl", "dmesg", "kubectl", "scontrol"):
        (d / tool).write_text(f"#!/bin/sh\nsetsid sleep {nap} &\nexec sleep {nap}\n")
        (d / tool).chmod(0o755)
    out = tmp_path / "f.json"
    start = time.monotonic()
    r = subprocess.run(
        [
            *(sys.executable, "-m", "gpu_triage", "run", "--window", "0.1", "--out", str(out)),
            *("--command-path", str(d), "--command-timeout", "0.5", "--collector-timeout", "1"),
            *("--engine", "reference"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    # 3, or 2 where a critical finding explains it (no NVIDIA driver on this machine)
    assert r.returncode in (2, 3), r.stderr
    verdict = json.loads(out.read_text())["verdict"]
    assert "kernel_log" in verdict and "could not look" in verdict, verdict
    assert time.monotonic() - start < 60
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    assert f"sleep {nap}" not in ps


def _env_with(extra: dict[str, str]):  # type: ignore[no-untyped-def]
    original = commands.minimal_env

    def env(search_path: str | None = None) -> dict[str, str]:
        return {**original(search_path), **extra}

    return env


def test_a_collector_stuck_in_c_is_not_started_again_beside_itself() -> None:
    """A collector that cannot be cancelled (a hung NVML call) keeps its one thread; the
    next collections record it as timed out instead of piling up threads."""
    release = threading.Event()

    class Hung:
        name = "hung-for-test"
        kinds = ("host",)

        def collect(self, ctx: CollectContext, facts: Facts) -> None:
            release.wait(30)  # ignores ctx.cancel, like a C call

    threads = threading.active_count()
    try:
        for _ in range(3):
            snap = collect_snapshot([Hung()], CollectContext(window_s=0.0), timeout_s=0.05)
            assert snap.collectors[0].state is CollectorState.TIMED_OUT
        assert threading.active_count() <= threads + 1
        assert "still stuck" in snap.collectors[0].error
    finally:
        release.set()
