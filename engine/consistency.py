"""Findings that cannot contradict each other on one GPU, by construction.

A rule that reassures ("the GPUs are busy and compute-bound: nothing is wrong on this
node") carries the tag ``asserts:healthy``. When a critical rule fired on a GPU (it fell
off the bus, its memory failed), no reassuring finding may speak for that GPU: its
bindings on that GPU are taken out before findings are built, so the reassurance covers
only the other GPUs, or is not reported at all. One pass over the decisions: linear.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from gpu_triage.engine.findings import Status
from gpu_triage.engine.inputs import Binding
from gpu_triage.engine.model import Severity
from gpu_triage.model.catalog import kinds

HEALTHY_TAG = "asserts:healthy"


def gpus_of(binding: Binding) -> set[str]:
    """PCI bus ids of the GPUs a binding is about (the GPU itself, or the GPU an event,
    process or link belongs to)."""
    out: set[str] = set()
    table = kinds()
    for kind, item in binding.items():
        if item is None or kind not in table:
            continue
        bus = table[kind].gpu_of(item)
        if bus:
            out.add(bus)
    return out


def critical_gpus(decided: Iterable[tuple[Severity, Status, Sequence[Binding]]]) -> set[str]:
    """GPUs with a fired critical finding."""
    out: set[str] = set()
    for severity, status, bindings in decided:
        if severity is Severity.CRITICAL and status is Status.FIRED:
            for b in bindings:
                out |= gpus_of(b)
    return out


def healthy_bindings(bindings: Sequence[Binding], failing: set[str]) -> list[Binding]:
    """The bindings of a reassuring rule that say nothing about a failing GPU."""
    return [b for b in bindings if not (gpus_of(b) & failing)]
