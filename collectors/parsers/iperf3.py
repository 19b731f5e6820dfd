"""iperf3 (text or ``-J`` JSON) -> receiver throughput in Gb/s.

Text: the final summary's ``receiver`` line; with ``-P`` the ``[SUM]`` receiver line.
Bits are decimal (Kbits = 1000 bits) and bytes binary (KBytes = 1024 bytes), as in
iperf3's own unit formatting. Output without sender/receiver markers (iperf 2 style)
falls back to the last ``[SUM]`` line, else the last bitrate line.
"""

from __future__ import annotations

import json
import re

_RATE = re.compile(r"(?<![\d.,])(\d{1,15}(?:[.,]\d{1,15})?)\s*([KMGT]?)(bits|Bytes)/sec")
_BIT_SCALE = {"": 1.0, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}
_BYTE_SCALE = {"": 8.0, "K": 8.0 * 1024, "M": 8.0 * 1024**2, "G": 8.0 * 1024**3, "T": 8.0 * 1024**4}


def _gbps(line: str) -> float | None:
    m = _RATE.search(line)
    if not m:
        return None
    num = float(m.group(1).replace(",", "."))
    scale = (_BIT_SCALE if m.group(3) == "bits" else _BYTE_SCALE)[m.group(2)]
    return num * scale / 1e9


def _parse_json(text: str) -> float | None:
    try:
        doc, _ = json.JSONDecoder().raw_decode(text)
    except ValueError:
        return None
    end = doc.get("end") if isinstance(doc, dict) else None
    if not isinstance(end, dict):
        return None
    # TCP: sum_received; UDP: sum (receiver-side loss already counted).
    for key in ("sum_received", "sum"):
        part = end.get(key)
        if isinstance(part, dict) and isinstance(part.get("bits_per_second"), int | float):
            return float(part["bits_per_second"]) / 1e9
    return None


def parse_iperf3(text: str) -> float | None:
    """Receiver throughput in Gb/s, or None when the text has no final summary."""
    start = re.search(r"^[ \t]*\{", text, re.MULTILINE)  # JSON, maybe after a pasted prompt
    if start is not None and '"end"' in text:
        return _parse_json(text[start.start() :].lstrip())
    lines = [ln for ln in text.splitlines() if _RATE.search(ln)]
    receiver = [ln for ln in lines if ln.rstrip().endswith("receiver")]
    if receiver:
        sums = [ln for ln in receiver if "[SUM]" in ln]
        return _gbps((sums or receiver)[-1])
    if any(ln.rstrip().endswith("sender") for ln in lines):
        return None  # a summary without its receiver line: do not report the sender rate
    sums = [ln for ln in lines if "[SUM]" in ln]
    return _gbps((sums or lines)[-1]) if lines else None
