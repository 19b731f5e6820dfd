"""Unattended runs: evaluate, write findings for machines, and the `--interval` loop.

Nothing here imports Textual. Writes are atomic (JSON, Markdown, Prometheus) or whole
appended lines (JSONL), by the model of :mod:`gpu_triage.io.files`. One run holds the locks
of all its outputs and of its state file from reading the state to writing it back, so
concurrent runs take turns and never lose each other's first-seen times.
"""

from __future__ import annotations

import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from gpu_triage.engine.compiler import Rulebook
from gpu_triage.engine.evaluate import evaluate
from gpu_triage.engine.findings import FindingsDocument
from gpu_triage.io import jsonio
from gpu_triage.io.files import (
    DEFAULT_LOCK_TIMEOUT_S,
    DEFAULT_MODE,
    append_line,
    locked,
    write_atomic,
)
from gpu_triage.model.facts import Facts
from gpu_triage.model.snapshot import Snapshot
from gpu_triage.ops.history import History

FORMATS = ("json", "jsonl", "markdown", "prometheus")


def render(doc: FindingsDocument, facts: Facts | None, fmt: str) -> str:
    if fmt == "json":
        return jsonio.dump_model(doc, indent=2) + "\n"
    if fmt == "markdown":
        from gpu_triage.ops.report import findings_markdown

        return findings_markdown(doc)
    from gpu_triage.ops.exporters import jsonl_line, prometheus_text

    if fmt == "jsonl":
        return jsonl_line(doc, facts)
    if fmt == "prometheus":
        return prometheus_text(doc, facts)
    raise ValueError(f"unknown format {fmt!r}")


def write_output(
    doc: FindingsDocument,
    facts: Facts | None,
    fmt: str,
    out: Path | None,
    *,
    mode: int = DEFAULT_MODE,
) -> None:
    """Write one format; the caller holds the lock (see :func:`run_once`)."""
    text = render(doc, facts, fmt)
    if out is None:
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    if fmt == "jsonl":
        append_line(out, text, mode=mode)
    else:
        write_atomic(out, text, mode=mode)


# --------------------------------------------------------------------------- runs


@dataclass
class RunSpec:
    book: Rulebook
    engine: str
    fmt: str
    out: Path | None
    min_severity: str
    get_snapshot: Callable[[], tuple[Snapshot, str]]
    history: History
    also: list[tuple[str, Path]] = field(default_factory=list)  # more (format, path) outputs
    lock_timeout: float = DEFAULT_LOCK_TIMEOUT_S
    mode: int = DEFAULT_MODE  # of the outputs (the state file stays 0600)


SEVERITIES = ("info", "warning", "critical")


def run_once(spec: RunSpec, now: datetime | None = None) -> FindingsDocument:
    snap, source = spec.get_snapshot()
    outputs = [spec.out, *(path for _, path in spec.also)]
    # Collection is done; from reading the state to writing it back, every file this run
    # writes is locked, so a concurrent run waits instead of losing this one's update.
    with locked(*outputs, spec.history.path, timeout=spec.lock_timeout):
        if spec.history.path is not None:
            spec.history = History.load(spec.history.path)
        now = now or datetime.now(UTC)
        spec.history.xids.prepare(snap)
        spec.history.counters.prepare(snap, now)
        doc = evaluate(snap, spec.book, engine=spec.engine, source=source)
        spec.history.xids.record(snap, now)
        spec.history.counters.record(snap, now)
        if spec.min_severity != "info":
            floor = SEVERITIES.index(spec.min_severity)
            doc.findings = [f for f in doc.findings if SEVERITIES.index(f.severity.value) >= floor]
        spec.history.apply(doc, now)
        write_output(doc, snap.facts, spec.fmt, spec.out, mode=spec.mode)
        for fmt, path in spec.also:
            write_output(doc, snap.facts, fmt, path, mode=spec.mode)
        spec.history.save()
    return doc


def run_loop(
    spec: RunSpec,
    interval_s: float,
    *,
    max_runs: int | None = None,
    on_run: Callable[[FindingsDocument], Any] | None = None,
) -> int:
    """Run every ``interval_s`` seconds on a fixed schedule (no drift: run k starts at
    start + k * interval; a run that overran skips the slots it missed). SIGTERM and
    SIGINT end the loop after the current run; an output is never left half-written."""
    stop = threading.Event()
    previous: dict[int, Any] = {}
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGINT):
            previous[sig] = signal.signal(sig, lambda *_: stop.set())
    start = time.monotonic()
    runs = 0
    code = 0
    try:
        while not stop.is_set():
            doc = run_once(spec)
            code = int(doc.exit_code)
            runs += 1
            if on_run is not None:
                on_run(doc)
            if max_runs is not None and runs >= max_runs:
                break
            slot = int((time.monotonic() - start) // interval_s) + 1
            stop.wait(max(0.0, start + slot * interval_s - time.monotonic()))
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    return code
