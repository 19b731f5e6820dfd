"""sysstat ``mpstat`` (with or without ``-P ALL``, any interval/count) -> CPU utilisation.

Columns are taken from each header line (the one naming ``CPU`` and ``%idle``), so old
(``%user %nice %system ... intr/s``) and new (``%usr ... %guest %gnice``) layouts both
work. Rows are aligned to the header from the right: whatever precedes the CPU column
is the time stamp (``10:38:38``, ``10:38:38 AM``) or a localised ``Average:`` label,
and the latter marks the averages block. Decimal commas (``0,19``) are accepted.
``mpstat -N ALL`` prints NUMA nodes under a ``NODE`` header: those rows give the
busiest node, never cores (``-P ALL -N ALL`` prints both tables, read separately).
``mpstat -o JSON`` output is read too.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from gpu_triage.collectors.parsers import ParseError
from gpu_triage.model.facts import HostFacts

SATURATED_BUSY_PCT = 90.0

_BANNER = re.compile(
    r"^(?P<os>\S+)\s+(?P<kernel>\S+)\s+\((?P<host>[^)]*)\)\s+(?P<date>\S+)"
    r"(?:\s+(?P<arch>[^\s(]+))?(?:\s+\((?P<ncpu>\d+)\s+CPU\))?"
)
_TIME = re.compile(r"^\d{1,2}[:.]\d{2}(?:[:.]\d{2})?$")
_NUMBER = re.compile(r"^-?\d+(?:[.,]\d+)?$")
# JSON keys of `mpstat -o JSON` -> the column names printed by the text format.
_JSON_KEYS = {
    "usr": "%usr",
    "nice": "%nice",
    "sys": "%sys",
    "iowait": "%iowait",
    "irq": "%irq",
    "soft": "%soft",
    "steal": "%steal",
    "guest": "%guest",
    "gnice": "%gnice",
    "idle": "%idle",
}


@dataclass
class MpstatRow:
    """One CPU row; ``values`` keyed by column name exactly as the header prints it."""

    line: int
    cpu: str  # "all" or the core id as printed
    values: dict[str, float]
    time: str | None = None  # None on the averages block
    average: bool = False
    node: bool = False  # a NUMA node row of `mpstat -N` (the header says NODE, not CPU)

    def get(self, *names: str) -> float | None:
        """First of ``names`` present (old and new sysstat name the same column differently)."""
        for name in names:
            if name in self.values:
                return self.values[name]
        return None

    @property
    def busy_pct(self) -> float | None:
        """100 - %idle - %iowait: time the core was doing work."""
        idle = self.get("%idle")
        if idle is None or not any(self.values.values()):
            return None  # sysstat prints an offline CPU as all zeros
        return round(max(0.0, 100.0 - idle - (self.get("%iowait") or 0.0)), 2)


@dataclass
class MpstatResult:
    kernel: str | None = None
    hostname: str | None = None
    date: str | None = None
    arch: str | None = None
    ncpu: int | None = None
    rows: list[MpstatRow] = field(default_factory=list)  # every row of every block
    selected: list[MpstatRow] = field(default_factory=list)  # the CPU block the summary uses
    selected_nodes: list[MpstatRow] = field(default_factory=list)  # the NODE block it uses

    @property
    def overall(self) -> MpstatRow | None:
        rows = self.selected + self.selected_nodes  # `mpstat -N ALL` alone has its 'all' there
        return next((r for r in rows if r.cpu.lower() == "all"), None)

    @property
    def nodes(self) -> list[MpstatRow]:
        return [r for r in self.selected_nodes if r.cpu.isdigit()]

    @property
    def busiest_node(self) -> MpstatRow | None:
        nodes = [r for r in self.nodes if r.busy_pct is not None]
        return max(nodes, key=lambda r: r.busy_pct or 0.0) if nodes else None

    @property
    def cores(self) -> list[MpstatRow]:
        return [r for r in self.selected if r.cpu.isdigit()]

    @property
    def busiest_core(self) -> MpstatRow | None:
        cores = [r for r in self.cores if r.busy_pct is not None]
        return max(cores, key=lambda r: r.busy_pct or 0.0) if cores else None

    @property
    def cores_saturated(self) -> int | None:
        cores = [r for r in self.cores if r.busy_pct is not None]
        if not cores:
            return None
        return sum(1 for r in cores if (r.busy_pct or 0.0) > SATURATED_BUSY_PCT)


def _float(token: str) -> float | None:
    if not _NUMBER.match(token):
        return None
    return float(token.replace(",", "."))


def _is_header(tokens: list[str]) -> bool:
    return ("CPU" in tokens or "NODE" in tokens) and "%idle" in tokens


def _label(tokens: list[str]) -> str | None:
    """The column a header starts its table at: CPU (per core) or NODE (per NUMA node)."""
    return next((t for t in tokens if t in ("CPU", "NODE")), None)


def parse_mpstat(text: str, source: str = "mpstat") -> MpstatResult:
    """Parse mpstat output; uses the averages block when present, else the last block.

    Raises ParseError when the text has no mpstat CPU header at all.
    """
    stripped = text.lstrip()
    if stripped.startswith("{"):
        return _parse_json(stripped, source)
    result = MpstatResult()
    columns: list[str] | None = None  # header from the CPU (or NODE) column rightwards
    node_table = False
    blocks: list[list[MpstatRow]] = []
    seen_header = False
    for lineno, raw in enumerate(text.splitlines(), start=1):
        tokens = raw.split()
        if not tokens:
            continue
        if result.kernel is None and not seen_header:
            m = _BANNER.match(raw.strip())
            if m and "CPU" not in tokens[:3] and "NODE" not in tokens[:3]:
                result.kernel, result.hostname = m.group("kernel"), m.group("host")
                result.date, result.arch = m.group("date"), m.group("arch")
                result.ncpu = int(m.group("ncpu")) if m.group("ncpu") else None
                continue
        label = _label(tokens)
        if label is not None:
            # Any header ends the current block; only %idle headers start a CPU block
            # (-I / -A print interrupt tables with their own headers).
            columns = tokens[tokens.index(label) :] if _is_header(tokens) else None
            node_table = label == "NODE"
            seen_header = True
            blocks.append([])
            continue
        if columns is None or len(tokens) < len(columns):
            continue
        tail, prefix = tokens[-len(columns) :], tokens[: -len(columns)]
        cpu = tail[0]
        if not (cpu.isdigit() or cpu.lower() == "all"):
            continue
        numbers = [_float(t) for t in tail[1:]]
        if any(n is None for n in numbers):
            continue  # a wrapped or collapsed row: skip rather than misalign
        timed = bool(prefix) and _TIME.match(prefix[0]) is not None
        row = MpstatRow(
            line=lineno,
            cpu=cpu,
            values={c: n for c, n in zip(columns[1:], numbers, strict=True) if n is not None},
            time=" ".join(prefix) if timed else None,
            average=bool(prefix) and not timed,
            node=node_table,
        )
        result.rows.append(row)
        # `mpstat 1 5` prints one header then a row per interval, and a localised
        # average may follow without its own header: a new stamp is a new block.
        last = blocks[-1][-1] if blocks[-1] else None
        if last is not None and (last.time, last.average) != (row.time, row.average):
            blocks.append([])
        blocks[-1].append(row)
    if not seen_header:
        raise ParseError("no mpstat header (a line naming CPU or NODE and %idle)", source=source)
    blocks = [b for b in blocks if b]
    result.selected = _pick([b for b in blocks if not b[0].node])
    result.selected_nodes = _pick([b for b in blocks if b[0].node])
    return result


def _pick(blocks: list[list[MpstatRow]]) -> list[MpstatRow]:
    """The averages block when there is one, else the last block."""
    averages = [b for b in blocks if all(r.average for r in b)]
    if averages:
        return averages[-1]
    return blocks[-1] if blocks else []


def _parse_json(text: str, source: str) -> MpstatResult:
    try:
        doc = json.loads(text)
        host = doc["sysstat"]["hosts"][0]
        stats = host.get("statistics") or []
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        raise ParseError(f"not mpstat -o JSON output: {exc}", source=source) from exc
    result = MpstatResult(
        kernel=host.get("release"),
        hostname=host.get("nodename"),
        date=host.get("date"),
        arch=host.get("machine"),
        ncpu=host.get("number-of-cpus"),
    )
    for stat in stats:
        block: list[MpstatRow] = []
        for entry in stat.get("cpu-load") or []:
            values = {
                col: float(entry[key])
                for key, col in _JSON_KEYS.items()
                if isinstance(entry.get(key), int | float)
            }
            block.append(
                MpstatRow(
                    line=0,
                    cpu=str(entry.get("cpu", "")),
                    values=values,
                    time=(stat.get("timestamp") or None),
                )
            )
        result.rows.extend(block)
        if block:
            result.selected = block
    return result


def fill_host_from_mpstat(result: MpstatResult, host: HostFacts | None = None) -> HostFacts:
    """Copy CPU utilisation into HostFacts.

    user = %usr + %nice (+ %guest + %gnice), system = %sys + %irq + %soft, so that
    user + system + iowait + steal + idle = 100, as the /proc/stat collector reports.
    """
    host = host if host is not None else HostFacts(source="mpstat")
    overall = result.overall
    if overall is not None:
        usr = overall.get("%usr", "%user")
        if usr is not None:
            extra = ("%nice", "%guest", "%gnice")
            host.cpu_user_pct = round(usr + sum(overall.get(c) or 0.0 for c in extra), 2)
        sys_ = overall.get("%sys", "%system")
        if sys_ is not None:
            kernel = (overall.get("%irq") or 0.0) + (overall.get("%soft") or 0.0)
            host.cpu_system_pct = round(sys_ + kernel, 2)
        host.cpu_iowait_pct = overall.get("%iowait")
        host.cpu_steal_pct = overall.get("%steal")
        host.cpu_idle_pct = overall.get("%idle")
    busiest = result.busiest_core
    if busiest is not None:
        host.busiest_core = int(busiest.cpu)
        host.busiest_core_busy_pct = busiest.busy_pct
        host.cores_saturated = result.cores_saturated
    node = result.busiest_node
    if node is not None:
        host.busiest_numa_node = int(node.cpu)
        host.busiest_numa_node_busy_pct = node.busy_pct
    if result.ncpu is not None:
        host.cpu_count = result.ncpu
    elif result.cores:
        host.cpu_count = len(result.cores)
    if result.hostname:
        host.hostname = result.hostname
    if result.kernel:
        host.kernel = result.kernel
    return host
