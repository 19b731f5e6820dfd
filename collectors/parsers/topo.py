"""Parser for ``nvidia-smi topo -m`` (the connection matrix).

The header names the columns: devices (``GPU0`` ..., ``NIC0`` ... or old ``mlx4_0``),
then ``CPU Affinity`` and, on newer drivers, ``NUMA Affinity`` and ``GPU NUMA ID``.
Pastes turn tabs into spaces, drop the header, and collapse the affinity columns
into each other (``0-55,112-167 0N/A``, ``56-111,168-2231  N/A``); the parser
undoes what it can and reports the rest as missing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from gpu_triage.collectors.parsers import ParseError
from gpu_triage.collectors.parsers.nvidia_smi.values import MAX_LINE_CHARS, as_text
from gpu_triage.model.facts import TopoFacts

__all__ = ["Topology", "parse_topo_matrix"]

_CONN_RE = re.compile(r"^(?:X|SYS|SOC|NODE|PHB|PXB|PIX|PSB|C2C|NV\d+)$")
_DEVICE_RE = re.compile(r"^(?:GPU\d+|NIC\d+|CPU\d+|mlx\d+_\d+|[a-z][a-z0-9]*_\d+)$")
_CPULIST_RE = re.compile(r"^\d+(?:-\d+)?(?:,\d+(?:-\d+)?)*$")
_LEGEND_RE = re.compile(r"^\s*(NIC\d+)\s*:\s*(\S+)\s*$")
_AFFINITY_LABELS = ("CPU Affinity", "NUMA Affinity", "GPU NUMA ID")


@dataclass
class Topology:
    """The matrix as pairs, plus what the affinity columns say per device."""

    pairs: list[TopoFacts] = field(default_factory=list)
    devices: list[str] = field(default_factory=list)
    cpu_affinity: dict[str, str | None] = field(default_factory=dict)
    numa_node: dict[str, int | None] = field(default_factory=dict)
    gpu_numa_id: dict[str, int | None] = field(default_factory=dict)
    nic_legend: dict[str, str] = field(default_factory=dict)


def _cpulist_ok(text: str) -> bool:
    """A CPU list whose ranges go upwards (so '168-2231' splits as '168-223' + '1')."""
    if not _CPULIST_RE.match(text):
        return False
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        if hi and int(hi) < int(lo):
            return False
    return True


def _split_glued(tokens: list[str]) -> list[str]:
    """Split 'N/A' glued to a neighbour: '0N/A' -> '0', 'N/A'."""
    out: list[str] = []
    for tok in tokens:
        parts = [p for p in re.split(r"(N/A)", tok) if p]
        out.extend(parts)
    return out


def _bounds(part: str) -> tuple[int, int] | None:
    """'168-223' -> (168, 223); anything that is not a numeric range -> None."""
    lo, _, hi = part.partition("-")
    if lo.isdigit() and hi.isdigit():
        return int(lo), int(hi)
    return None


def _unglue_cpu(cpu: str, ranges_seen: list[str]) -> tuple[str, str] | None:
    """'56-111,168-2231' -> ('56-111,168-223', '1'): a NUMA digit glued to the CPU list.

    Prefers the split whose last range has the width of another range printed on
    this matrix (SMT siblings and sockets come in equal sizes).
    """
    widths = set()
    for lst in ranges_seen:
        for part in lst.split(","):
            bounds = _bounds(part)
            if bounds is not None:
                widths.add(bounds[1] - bounds[0])
    for part in cpu.split(","):
        bounds = _bounds(part)
        if bounds is not None and bounds[1] >= bounds[0]:
            widths.add(bounds[1] - bounds[0])
    candidates = []
    for k in (1, 2):
        head, tail = cpu[:-k], cpu[-k:]
        if not head or not tail.isdigit() or not _cpulist_ok(head) or head.endswith((",", "-")):
            continue
        last = head.split(",")[-1]
        lo, _, hi = last.partition("-")
        same_width = bool(hi) and (int(hi) - int(lo)) in widths
        candidates.append((not same_width, k, head, tail))
    if not candidates:
        return None
    candidates.sort()
    _, _, head, tail = candidates[0]
    return head, tail


def _int_or_none(text: str | None) -> int | None:
    return int(text) if text is not None and re.fullmatch(r"-?\d+", text) else None


def parse_topo_matrix(text: str | bytes, source: str = "<text>") -> Topology:
    """Parse ``nvidia-smi topo -m``: one :class:`TopoFacts` per off-diagonal cell.

    Columns come from the header when it is there; without it the device cells are
    the leading connection tokens and columns are named ``GPU<n>`` (columns holding
    NVLink cells or a GPU's ``X``) then ``NIC<n>``. Raises :class:`ParseError` when the
    text has no matrix rows.
    """
    text = as_text(text)
    topo = Topology()
    header: list[str] | None = None
    n_affinity: int | None = None
    rows: list[tuple[str, list[str], list[str]]] = []  # (device, cells, affinity tokens)

    for raw_line in text.splitlines():
        if len(raw_line) > MAX_LINE_CHARS:
            continue
        line = raw_line.expandtabs(8)
        lm = _LEGEND_RE.match(line)
        if lm:
            topo.nic_legend[lm.group(1)] = lm.group(2)
            continue
        tokens = line.split()
        if not tokens:
            continue
        if header is None and (
            "Affinity" in line or (len(tokens) > 1 and all(_DEVICE_RE.match(t) for t in tokens[:2]))
        ):
            head = line
            for label in _AFFINITY_LABELS:
                head = head.replace(label, " ")
            header = head.split()
            n_affinity = sum(1 for label in _AFFINITY_LABELS if label in line)
            continue
        name = tokens[0]
        if not _DEVICE_RE.match(name) or len(tokens) < 2:
            continue
        if header is not None and name in header:
            ncols = len(header)
            cells, tail = tokens[1 : 1 + ncols], tokens[1 + ncols :]
            if len(cells) < ncols or not all(_CONN_RE.match(c) for c in cells):
                continue
        else:
            k = 1
            while k < len(tokens) and _CONN_RE.match(tokens[k]):
                k += 1
            cells, tail = tokens[1:k], tokens[k:]
            if not cells:
                continue
        rows.append((name, cells, tail))

    if not rows:
        if text.strip() and header is None:
            raise ParseError("no nvidia-smi topo -m matrix rows", source=source)
        return topo

    columns = header or _infer_columns(rows)
    topo.devices = list(columns)

    # affinity: how many columns to expect
    expected = n_affinity
    if expected is None:
        expected = max(len(_split_glued(tail)) for _, _, tail in rows)
    cpu_lists = [t[0] for _, _, t in rows if t and _cpulist_ok(t[0])]
    for name, cells, tail in rows:
        for col, cell in zip(columns, cells, strict=False):
            if col == name or cell == "X":
                continue
            topo.pairs.append(TopoFacts(a=name, b=col, connection=cell, source=source))
        if not name.startswith("GPU") or not tail:
            continue
        tokens = _split_glued(tail)
        cpu = tokens[0]
        numa: str | None = tokens[1] if len(tokens) > 1 and expected >= 2 else None
        gpu_numa: str | None = tokens[2] if len(tokens) > 2 and expected >= 3 else None
        if expected >= 3 and len(tokens) == 2 and tokens[1] == "N/A":
            # the NUMA column is missing: its digit is glued onto the CPU list
            split = _unglue_cpu(cpu, cpu_lists)
            if split is not None:
                cpu, numa, gpu_numa = split[0], split[1], tokens[1]
        topo.cpu_affinity[name] = cpu if _cpulist_ok(cpu) else None
        if expected >= 2:
            topo.numa_node[name] = _int_or_none(numa)
        if expected >= 3:
            topo.gpu_numa_id[name] = _int_or_none(gpu_numa)
    return topo


def _infer_columns(rows: list[tuple[str, list[str], list[str]]]) -> list[str]:
    """Column names for a matrix pasted without its header.

    GPU columns come first, then NICs, and every row has its ``X`` in its own column:
    a ``NICk`` row with ``X`` at cell j puts the first NIC column at j - k, which fixes
    the GPU count even for a tail fragment holding NIC rows only. Without such a row,
    NVLink cells and GPU rows give a lower bound."""
    ncols = max(len(cells) for _, cells, _ in rows)
    gpu_cols = 0
    from_nic: int | None = None
    for name, cells, _ in rows:
        m = re.fullmatch(r"(GPU|NIC)(\d+)", name)
        if m and m.group(1) == "NIC" and "X" in cells:
            from_nic = cells.index("X") - int(m.group(2))
        for j, cell in enumerate(cells):
            if cell.startswith("NV") or (cell == "X" and name.startswith("GPU")):
                gpu_cols = max(gpu_cols, j + 1)
        if m and m.group(1) == "GPU":
            gpu_cols = max(gpu_cols, int(m.group(2)) + 1)
    if from_nic is not None and 0 <= from_nic <= ncols:
        gpu_cols = from_nic
    gpu_cols = min(gpu_cols, ncols)
    return [f"GPU{i}" for i in range(gpu_cols)] + [f"NIC{i}" for i in range(ncols - gpu_cols)]
