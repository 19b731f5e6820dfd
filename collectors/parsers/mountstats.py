"""``/proc/self/mountstats``: per-operation NFS client statistics -> network-filesystem facts.

Every mount has a ``device ... mounted on ... with fstype ...`` line; NFS mounts (nfs,
nfs4) follow it with an indented block whose ``per-op statistics`` section has one line
per RPC operation::

    READ: 1204 1204 0 185112 157952632 52 4317 4478 0

operations, transmissions, major timeouts, bytes sent, bytes received, cumulative queue
time, cumulative round-trip time and cumulative execute time (ms), and on newer kernels
the operations that failed. The counters run since the mount; two readings over a
window (the host collector) give the window's figures, one reading (a paste) the
averages since mount.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from gpu_triage.collectors.parsers import ParseError
from gpu_triage.model.facts import MountFacts, UnavailableReason

NFS_TYPES = ("nfs", "nfs4")
# Operations that only look up or check names and attributes: what a small-file or
# many-directories workload pays per file before reading a byte.
METADATA_OPS = frozenset(
    {"GETATTR", "LOOKUP", "ACCESS", "OPEN", "OPEN_NOATTR", "CLOSE", "READDIR", "READDIRPLUS"}
)
MAX_MOUNTS = 4096  # a node with more NFS mounts than this is not reading a dataset from each

_DEVICE = re.compile(
    r"^device (?P<dev>\S{1,4096}) mounted on (?P<mnt>\S{1,4096}) with fstype (?P<fs>[\w.]{1,32})"
)
_OP = re.compile(r"^\s*(?P<name>[A-Z][A-Z0-9_]{0,31}):\s+(?P<nums>\d+(?:\s+\d+){7,8})\s*$")
_AGE = re.compile(r"^\s*age:\s+(\d{1,12})\s*$")


@dataclass
class OpCounters:
    """One ``per-op statistics`` line (cumulative since the mount)."""

    ops: int
    transmissions: int
    major_timeouts: int
    bytes_sent: int
    bytes_received: int
    queue_ms: int
    rtt_ms: int
    execute_ms: int

    def minus(self, before: OpCounters) -> OpCounters:
        """The counters added since ``before`` (a remount restarts them: then all of now)."""
        if self.ops < before.ops:
            return self
        return OpCounters(
            *(max(0, a - b) for a, b in zip(self._values(), before._values(), strict=True))
        )

    def _values(self) -> tuple[int, ...]:
        return (
            self.ops,
            self.transmissions,
            self.major_timeouts,
            self.bytes_sent,
            self.bytes_received,
            self.queue_ms,
            self.rtt_ms,
            self.execute_ms,
        )


@dataclass
class NfsMount:
    device: str
    mountpoint: str
    fstype: str
    age_s: int | None = None
    ops: dict[str, OpCounters] = field(default_factory=dict)
    line: int = 0


def parse_mountstats(text: str, source: str = "mountstats") -> list[NfsMount]:
    """The NFS mounts of a mountstats text, in order; raises ParseError when the text has
    no ``device ... mounted on`` line at all."""
    mounts: list[NfsMount] = []
    current: NfsMount | None = None
    seen_device = False
    for lineno, raw in enumerate(text.splitlines(), start=1):
        m = _DEVICE.match(raw)
        if m:
            seen_device = True
            current = None
            if m.group("fs") in NFS_TYPES and len(mounts) < MAX_MOUNTS:
                current = NfsMount(m.group("dev"), m.group("mnt"), m.group("fs"), line=lineno)
                mounts.append(current)
            continue
        if current is None:
            continue
        if (age := _AGE.match(raw)) is not None:
            current.age_s = int(age.group(1))
            continue
        op = _OP.match(raw)
        if op is not None:
            nums = [int(n) for n in op.group("nums").split()]
            current.ops[op.group("name")] = OpCounters(*nums[:8])
    if not seen_device:
        raise ParseError("no 'device ... mounted on ... with fstype' line", source=source)
    return mounts


def _avg(total: int, ops: int) -> float | None:
    return round(total / ops, 3) if ops else None


def mount_facts(
    mount: NfsMount,
    before: NfsMount | None = None,
    interval_s: float | None = None,
    source: str = "mountstats",
) -> MountFacts:
    """Facts of one NFS mount: over the window when an earlier reading is given, else
    since the mount."""
    ops = mount.ops
    if before is not None:
        ops = {k: v.minus(before.ops[k]) if k in before.ops else v for k, v in ops.items()}
    read = ops.get("READ")
    meta = [c for name, c in ops.items() if name in METADATA_OPS]
    meta_ops = sum(c.ops for c in meta)
    server = mount.device.rpartition(":")[0] if ":" in mount.device else None
    f = MountFacts(
        device=mount.device,
        mountpoint=mount.mountpoint,
        fstype=mount.fstype,
        server=server or None,
        interval_s=round(interval_s, 3) if before is not None and interval_s else None,
        age_s=mount.age_s,
        source=source,
    )
    window = f.interval_s if before is not None else mount.age_s
    if read is not None:
        f.read_ops = read.ops
        f.read_ops_s = round(read.ops / window, 2) if window else None
        f.read_rtt_ms = _avg(read.rtt_ms, read.ops)
        f.read_exe_ms = _avg(read.execute_ms, read.ops)
        f.read_kib_per_op = _avg(read.bytes_received, read.ops * 1024) if read.ops else None
        f.read_retransmissions = max(0, read.transmissions - read.ops)
        f.read_major_timeouts = read.major_timeouts
    f.metadata_ops = meta_ops if meta else None
    f.metadata_exe_ms = _avg(sum(c.execute_ms for c in meta), meta_ops) if meta else None
    for name in ("read_rtt_ms", "read_exe_ms", "read_kib_per_op"):
        if getattr(f, name) is None:
            f.mark_unavailable(name, UnavailableReason.NOT_SUPPORTED, "no READ operations counted")
    return f
