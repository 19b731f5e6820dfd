"""Bounds of one node's snapshot: what gpu-triage evaluates, and what it refuses.

A node beyond these is not a node (or not one snapshot): evaluating it would take
minutes and gigabytes while the incident waits, so it is refused with a message that
says which bound, and the run exits UNKNOWN (3). Every cost of the evaluation is linear
in the snapshot, so anything within the bounds evaluates in seconds at most
(``benchmarks/bench_evaluate.py``).
"""

from __future__ import annotations

from typing import Any

MAX_GPUS = 4096
MAX_EVENTS = 1_000_000  # kernel-log events of all kinds together
MAX_ITEMS = 1_000_000  # items of any other one kind (processes, links, topology pairs ...)
MAX_SNAPSHOT_BYTES = 2 * 1024**3

# Facts attributes holding kernel-log events.
EVENT_LISTS = ("xids", "sxids", "aers", "bus_losses", "ooms", "nvlink_errors", "pcie_limits")


class SnapshotTooLarge(ValueError):
    """A snapshot beyond the bounds of one node."""


def check_counts(counts: dict[str, int], name: str = "snapshot") -> None:
    """``counts``: Facts attribute -> number of items. Raises SnapshotTooLarge."""
    gpus = counts.get("gpus", 0)
    if gpus > MAX_GPUS:
        raise SnapshotTooLarge(
            f"{name}: {gpus:,} GPUs, more than one node has (at most {MAX_GPUS:,} are evaluated)"
        )
    events = sum(counts.get(k, 0) for k in EVENT_LISTS)
    if events > MAX_EVENTS:
        raise SnapshotTooLarge(
            f"{name}: {events:,} kernel-log events, more than {MAX_EVENTS:,} "
            "(collect a shorter window: --window, or trim the log)"
        )
    for attr, n in counts.items():
        if attr not in EVENT_LISTS and attr != "gpus" and n > MAX_ITEMS:
            raise SnapshotTooLarge(f"{name}: {n:,} {attr}, more than {MAX_ITEMS:,}")


def counts_of(facts: Any) -> dict[str, int]:
    """Item counts of a Facts model or of its JSON form (a dict), without validating it."""
    items = facts.items() if isinstance(facts, dict) else vars(facts).items()
    return {k: len(v) for k, v in items if isinstance(v, list)}
