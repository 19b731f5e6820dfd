"""/proc/pressure/{cpu,io,memory} (PSI) -> {"some"|"full": {avg10, avg60, avg300, total}}.

Lines are matched anywhere in the text, so indented pastes and ``grep -r`` output
(``/proc/pressure/io:some avg10=...``) parse the same as the file itself.
"""

from __future__ import annotations

import re

_LINE = re.compile(r"\b(some|full)\s+((?:\w+=[\d.,]+\s*)+)")
_PAIR = re.compile(r"(\w+)=([\d.,]+)")


def parse_pressure(text: str) -> dict[str, dict[str, float]]:
    """Parse one PSI file; ``{}`` when no some/full line is found.

    Averages are percentages (floats); ``total`` is microseconds of stall (an int).
    """
    out: dict[str, dict[str, float]] = {}
    for raw in text.splitlines():
        m = _LINE.search(raw)
        if not m:
            continue
        values: dict[str, float] = {}
        for key, num in _PAIR.findall(m.group(2)):
            try:
                values[key] = int(num) if key == "total" else float(num.replace(",", "."))
            except ValueError:
                continue
        if values:
            out[m.group(1)] = values
    return out
