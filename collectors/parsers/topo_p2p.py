"""``nvidia-smi topo -p2p r|w|n|a|p`` (peer-to-peer status between GPUs) -> TopoFacts.

A matrix of legend codes: ``X`` (self), ``OK``, ``NS`` (not supported), ``CNS``
(chipset not supported), ``GNS`` (GPU not supported), ``TNS`` (topology not
supported), ``U`` (unknown). The output does not say which capability it shows:
that comes from the command (``-p2p r`` read, ``w`` write, ``n`` NVLink, ``a``
atomics, ``p`` prop), given as ``capability`` or found in ``source`` (the command
line a pasted block came after). Without it, cells go to ``p2p_status``.
"""

from __future__ import annotations

import re

from gpu_triage.collectors.parsers import ParseError
from gpu_triage.model.facts import TopoFacts

CODES = ("X", "OK", "NS", "CNS", "GNS", "TNS", "U")
FIELDS = {
    "r": "p2p_read",
    "w": "p2p_write",
    "n": "p2p_nvlink",
    "a": "p2p_atomics",
    "p": "p2p_prop",
}
_DEVICE = re.compile(r"^GPU\d{1,3}$")
_CAPABILITY = re.compile(r"(?:-p2p|--p2pstatus)[\s=]*([rwnap])\b")


def capability_from(source: str) -> str | None:
    m = _CAPABILITY.search(source)
    return m.group(1) if m else None


def parse_topo_p2p(
    text: str, source: str = "nvidia-smi topo -p2p", capability: str | None = None
) -> list[TopoFacts]:
    """One TopoFacts per ordered GPU pair; raises ParseError when no matrix row is found.

    Columns come from the header (``GPU0 GPU1 ...``); without one, a row's cells are
    taken as GPU0, GPU1 ... in order (the matrix is square)."""
    cap = capability or capability_from(source)
    field = FIELDS.get(cap or "", "p2p_status")
    header: list[str] | None = None
    out: list[TopoFacts] = []
    for raw in text.splitlines():
        tokens = raw.split()
        if not tokens:
            continue
        if all(_DEVICE.match(t) for t in tokens):
            header = tokens
            continue
        if not _DEVICE.match(tokens[0]) or len(tokens) < 2:
            continue
        cells = tokens[1:]
        if not all(c in CODES for c in cells):
            continue
        columns = (
            header
            if header and len(header) == len(cells)
            else [f"GPU{i}" for i in range(len(cells))]
        )
        for col, cell in zip(columns, cells, strict=True):
            if col == tokens[0] or cell == "X":
                continue
            pair = TopoFacts(a=tokens[0], b=col, source=source)
            setattr(pair, field, cell)
            out.append(pair)
    if not out and text.strip():
        raise ParseError(
            "no nvidia-smi topo -p2p matrix rows (GPUn followed by OK/NS/...)", source=source
        )
    return out
