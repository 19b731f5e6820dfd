"""Is the node's monitoring running? Prometheus node exporter, NVIDIA's dcgm-exporter
and DCGM's host engine (guide/CB: "node exporter + DCGM metrics").

Two signs, either enough: a process of that name in /proc (``comm``, or the program of
``cmdline`` when ``comm`` is cut at 15 characters, as for ``prometheus-node-exporter``),
or its port listening in /proc/net/tcp{,6} (9100 node exporter, 9400 dcgm-exporter, 5555
nv-hostengine). Absence is claimed only when this process sees the node's processes (the
host PID namespace, where ``kthreadd`` is PID 2) and no port answers; from a container
with its own PID namespace, or under ``hidepid``, absent processes prove nothing.

Every file is opened without following a symbolic link (O_NOFOLLOW), read only when it
is a regular file, non-blocking and to a small cap: a link or FIFO planted under a host
root is neither followed nor blocked on. At most MAX_PIDS processes are looked at.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from gpu_triage.collectors.base import CollectContext
from gpu_triage.collectors.parsers.proc_net_tcp import listening_ports
from gpu_triage.io.files import read_small
from gpu_triage.model.facts import HostFacts, UnavailableReason

MAX_PIDS = 65536
COMM_CAP = 64
CMDLINE_CAP = 4096

# fact -> (program names, port)
EXPORTERS: dict[str, tuple[frozenset[str], int]] = {
    "node_exporter_running": (
        frozenset({"node_exporter", "node-exporter", "prometheus-node-exporter"}),
        9100,
    ),
    "dcgm_exporter_running": (frozenset({"dcgm-exporter", "dcgm_exporter"}), 9400),
    "nv_hostengine_running": (frozenset({"nv-hostengine"}), 5555),
}
COMM_LEN = 15  # the kernel cuts comm at 15 characters


@dataclass
class Scan:
    programs: set[str] = field(default_factory=set)
    sees_host: bool = False  # the host PID namespace is visible
    ports: set[int] = field(default_factory=set)
    ports_read: bool = False


def _program(ctx: CollectContext, pid: str) -> str | None:
    comm = read_small(ctx.path("proc", pid, "comm"), COMM_CAP)
    if comm is None:
        return None
    name = comm.strip()
    if len(name) < COMM_LEN:
        return name
    cmd = read_small(ctx.path("proc", pid, "cmdline"), CMDLINE_CAP)
    argv0 = (cmd or "").split("\0", 1)[0]
    return os.path.basename(argv0) or name


def scan(ctx: CollectContext) -> Scan:
    out = Scan()
    try:
        with os.scandir(ctx.path("proc")) as it:
            pids = [e.name for e in it if e.name.isdigit()][:MAX_PIDS]
    except OSError:
        pids = []
    for pid in pids:
        name = _program(ctx, pid)
        if name is None:
            continue
        if pid == "2" and name == "kthreadd":
            out.sees_host = True
        out.programs.add(name)
    for rel in ("tcp", "tcp6"):
        text = read_small(ctx.path("proc", "net", rel), 8 << 20)
        if text is not None:
            out.ports_read = True
            out.ports |= listening_ports(text)
    return out


def fill_observability(ctx: CollectContext, host: HostFacts) -> None:
    """Set the *_running facts of ``host``: True on a process or a port, False only when
    the node's processes and ports were both visible, else unavailable with the reason."""
    s = scan(ctx)
    for fld, (names, port) in EXPORTERS.items():
        if s.programs & names or port in s.ports:
            setattr(host, fld, True)
        elif s.sees_host and s.ports_read:
            setattr(host, fld, False)
        else:
            host.mark_unavailable(
                fld,
                UnavailableReason.NOT_COLLECTED,
                "the node's processes are not visible from here (another PID namespace or "
                "hidepid) and nothing listens on its port",
            )
