"""Is node exporter / dcgm-exporter / nv-hostengine running (guide/CB)? The host collector
on a fake /proc tree: processes by comm and cmdline, ports from /proc/net/tcp{,6}."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gpu_triage.collectors.base import CollectContext
from gpu_triage.collectors.host import HostCollector
from gpu_triage.collectors.observability import fill_observability
from gpu_triage.collectors.parsers.proc_net_tcp import listening_ports
from gpu_triage.model.facts import Facts, HostFacts, UnavailableReason

try:
    from tests.collectors.fakeroot import FakeRoot, build_fake_root
except ImportError:  # tests/ is not a package: pytest put this folder on sys.path
    from fakeroot import FakeRoot, build_fake_root  # type: ignore[no-redef]

HAND = Path(__file__).resolve().parents[1] / "data" / "hand-written" / "proc"
TCP = (HAND / "net-tcp-node-exporter-listening.txt").read_text()
TCP6 = (HAND / "net-tcp6-dcgm-exporter-listening.txt").read_text()


@pytest.fixture
def fake(tmp_path: Path) -> FakeRoot:
    return build_fake_root(tmp_path)


def observe(root: Path) -> HostFacts:
    host = HostFacts()
    fill_observability(CollectContext(root=root), host)
    return host


def test_listening_ports_ipv4_and_ipv6() -> None:
    assert listening_ports(TCP) == {9100, 53, 22}  # established 9100/22 lines are not LISTEN
    assert listening_ports(TCP6) == {9400, 22}  # TIME_WAIT on 9400 is not LISTEN
    pasted = "\n".join("    " + line for line in TCP.splitlines())
    assert listening_ports(pasted) == {9100, 53, 22}
    assert listening_ports("") == set() and listening_ports("garbage\n0: zz\n") == set()


def test_the_host_collector_reads_them(fake: FakeRoot) -> None:
    facts = Facts()
    HostCollector(sleep=fake.sleep).collect(CollectContext(root=fake.root, window_s=1.0), facts)
    host = facts.host
    assert host is not None
    # prometheus-node-exporter: comm cut at 15 characters, named by its cmdline
    assert host.node_exporter_running is True
    assert host.dcgm_exporter_running is True  # port 9400 listening (tcp6)
    assert host.nv_hostengine_running is False  # host PID namespace seen, no port 5555


def test_processes_by_comm(fake: FakeRoot) -> None:
    fake.remove("proc/812")
    fake.write("proc/net/tcp", "")
    fake.write("proc/net/tcp6", "")
    fake.write("proc/900/comm", "node_exporter\n")
    fake.write("proc/901/comm", "nv-hostengine\n")
    host = observe(fake.root)
    assert (host.node_exporter_running, host.dcgm_exporter_running) == (True, False)
    assert host.nv_hostengine_running is True


def test_nothing_running(fake: FakeRoot) -> None:
    fake.remove("proc/812")
    fake.write("proc/net/tcp", TCP.replace(":238C 00000000:0000 0A", ":1F90 00000000:0000 0A"))
    fake.write("proc/net/tcp6", "")
    host = observe(fake.root)
    assert host.node_exporter_running is False
    assert host.dcgm_exporter_running is False and host.nv_hostengine_running is False


def test_another_pid_namespace_proves_nothing(fake: FakeRoot) -> None:
    # A container: no kthreadd, only its own processes; the port is still a sign.
    fake.remove("proc/2")
    fake.remove("proc/812")
    host = observe(fake.root)
    assert host.dcgm_exporter_running is True  # 9400 listening
    assert host.node_exporter_running is True  # 9100 listening in this netns
    fake.write("proc/net/tcp", "")
    host = observe(fake.root)
    assert host.node_exporter_running is None
    why = host.why_unavailable("node_exporter_running")
    assert why is not None and why.reason == UnavailableReason.NOT_COLLECTED
    assert "PID namespace" in why.detail


def test_unreadable_net_tcp_proves_nothing(fake: FakeRoot) -> None:
    fake.remove("proc/812")
    fake.remove("proc/net/tcp")
    fake.remove("proc/net/tcp6")
    host = observe(fake.root)
    assert host.node_exporter_running is None and host.nv_hostengine_running is None


def test_planted_links_and_fifos_are_not_followed(fake: FakeRoot, tmp_path: Path) -> None:
    fake.remove("proc/812")
    secret = tmp_path / "secret"
    secret.write_text("node_exporter\n")
    fake.mkdir("proc/950")
    os.symlink(secret, fake.root / "proc/950/comm")
    fake.mkdir("proc/951")
    os.mkfifo(fake.root / "proc/951/comm")  # would block a plain read
    fake.write("proc/net/tcp", "")
    fake.write("proc/net/tcp6", "")
    host = observe(fake.root)
    assert host.node_exporter_running is False
