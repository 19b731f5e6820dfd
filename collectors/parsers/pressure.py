"""/proc/pressure/{cpu,io,memory} (PSI) -> {"some"|"full": {avg10, avg60, avg300, total}}.

Lines are matched anywhere in the text, so indented pastes and ``grep -r`` output
(``/proc/pressure/io:some avg10=...``) parse the same as the file itself.
"""

from __future__ import annotations

import re

from gpu_triage.collectors.parsers import ParseError
from gpu_triage.model.facts import HostFacts

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


RESOURCES = ("cpu", "io", "irq", "memory")
# A label naming the resource: grep -H / -n prefixes, `head` banners, a bare path or name.
_LABEL = re.compile(r"(?:pressure/|^\s*==>\s*\S*?|^\s*)(cpu|io|irq|memory)\b(?=\s*(?::|<==|$))")
_RESOURCE_WORD = re.compile(r"(?<![a-z])(cpu|io|irq|memory)(?![a-z])")
_FIELDS = {
    ("cpu", "some"): "psi_cpu_some_avg10",
    ("io", "some"): "psi_io_some_avg10",
    ("io", "full"): "psi_io_full_avg10",
    ("memory", "some"): "psi_memory_some_avg10",
    ("memory", "full"): "psi_memory_full_avg10",
}


def parse_pressure_text(
    text: str, source: str = "/proc/pressure", resource: str | None = None
) -> dict[str, dict[str, dict[str, float]]]:
    """Pasted PSI: resource -> {"some"|"full": values}, for any of

    - ``grep -H . /proc/pressure/*`` or ``grep -n``: a path label on every line;
    - ``head /proc/pressure/*`` (``==> /proc/pressure/io <==``) or a path/name line;
    - ``cat /proc/pressure/*``: no labels; the files come in name order (cpu, io,
      [irq: a 'full' line alone], memory), each a 'some' line then an optional 'full';
    - one file's two lines: its resource is ``resource``, else the one resource named
      in ``source`` (the command or file name), else a ParseError says to name it.
    """
    labelled: list[tuple[str | None, str, dict[str, float]]] = []
    label: str | None = None  # set by a label line or prefix; kept for the lines after it
    for raw in text.splitlines():
        m = _LINE.search(raw)
        lm = _LABEL.search(raw[: m.start()] if m else raw)
        if lm:
            label = lm.group(1)
        if m:
            values = _values(m.group(2))
            if values:
                labelled.append((label, m.group(1), values))
    if not labelled:
        raise ParseError("no 'some avg10=...' or 'full avg10=...' line", source=source)
    out: dict[str, dict[str, dict[str, float]]] = {}
    if all(lbl is not None for lbl, _, _ in labelled):
        for lbl, kind, values in labelled:
            out.setdefault(lbl or "", {})[kind] = values
        return out
    groups: list[dict[str, dict[str, float]]] = []
    for _, kind, values in labelled:
        if kind == "some" or not groups or "full" in groups[-1]:
            groups.append({})
        groups[-1][kind] = values
    if len(groups) == 1:
        name = resource or _single_resource(source)
        if name is None:
            raise ParseError(
                "PSI lines without the resource they belong to (cpu, io or memory): "
                "paste `grep -H . /proc/pressure/*`, or name the kind, e.g. "
                "--from-text proc-pressure-memory:FILE",
                source=source,
            )
        return {name: groups[0]}
    names = ["cpu", "io", "memory"]
    if len(groups) == 4 or any(set(g) == {"full"} for g in groups):
        names = ["cpu", "io", "irq", "memory"]
    if len(groups) != len(names):
        raise ParseError(
            f"{len(groups)} unlabelled PSI blocks: cannot tell which is cpu, io or memory; "
            "paste `grep -H . /proc/pressure/*` instead",
            source=source,
        )
    return dict(zip(names, groups, strict=True))


def _values(pairs: str) -> dict[str, float]:
    values: dict[str, float] = {}
    for key, num in _PAIR.findall(pairs):
        try:
            values[key] = int(num) if key == "total" else float(num.replace(",", "."))
        except ValueError:
            continue
    return values


def _single_resource(source: str) -> str | None:
    named = set(_RESOURCE_WORD.findall(source.lower()))
    return named.pop() if len(named) == 1 else None


def fill_host_from_pressure(psi: dict[str, dict[str, dict[str, float]]], source: str) -> HostFacts:
    host = HostFacts(source=source)
    for (resource, kind), fld in _FIELDS.items():
        avg10 = psi.get(resource, {}).get(kind, {}).get("avg10")
        if avg10 is not None:
            setattr(host, fld, float(avg10))
    return host
