"""Snapshots from saved command output (`gpu-triage collect --from-text PARSER FILE`).

Each file goes through the named parser; the results are folded together as a live
collection would be, and each file becomes a collector status of its own."""

from __future__ import annotations

import time
from pathlib import Path

from gpu_triage.collectors.merge import update_facts
from gpu_triage.collectors.parsers import ParseError
from gpu_triage.collectors.parsers.registry import get_parser
from gpu_triage.collectors.runner import tie_to_gpus
from gpu_triage.model.catalog import kinds
from gpu_triage.model.facts import Facts
from gpu_triage.model.snapshot import (
    TEXT_PREFIX,
    CollectorState,
    CollectorStatus,
    RawOutput,
    Snapshot,
)


def snapshot_from_texts(items: list[tuple[str, Path]], description: str = "") -> Snapshot:
    facts = Facts()
    statuses: list[CollectorStatus] = []
    raw: list[RawOutput] = []
    for parser_name, path in items:
        parser = get_parser(parser_name)  # KeyError names the known parsers
        text = path.read_bytes().decode("utf-8", errors="replace")
        name = f"{TEXT_PREFIX}{parser_name}:{path.name}"
        start = time.monotonic()
        try:
            part = parser(text, str(path))
        except ParseError as exc:
            statuses.append(
                CollectorStatus(
                    name=name,
                    state=CollectorState.FAILED,
                    duration_s=time.monotonic() - start,
                    error=str(exc),
                )
            )
            continue
        produced = update_facts(facts, part)
        statuses.append(
            CollectorStatus(
                name=name,
                state=CollectorState.OK,
                duration_s=round(time.monotonic() - start, 4),
                kinds=_with_siblings(produced),
            )
        )
        raw.append(RawOutput(collector=name, source=str(path), text=text))
    tie_to_gpus(facts)
    host = facts.host.hostname if facts.host and facts.host.hostname else ""
    return Snapshot(
        hostname=host or "",
        facts=facts,
        collectors=statuses,
        raw=raw,
        description=description or "built from saved command output",
    )


def _with_siblings(produced: list[str]) -> list[str]:
    """A kernel log read that found no Xid still proves there were none: every event kind
    of that read counts as collected."""
    if any(kinds()[k].event for k in produced):
        return sorted(set(produced) | {k for k, i in kinds().items() if i.event})
    return produced
