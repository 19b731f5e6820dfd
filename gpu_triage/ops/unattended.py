"""Unattended runs: evaluate, write findings for machines, and the `--interval` loop.

Nothing here imports Textual. Writes are atomic (JSON, Markdown, Prometheus) or whole
appended lines (JSONL), by the model of :mod:`gpu_triage.io.files`. One run holds the locks
of all its outputs and of its state file from reading the state to writing it back, so
concurrent runs take turns and never lose each other's first-seen times.
"""

from __future__ import annotations

import ctypes
import gc
import signal
import socket
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
from gpu_triage.engine.findings import EngineInfo, FindingsDocument, RulebookInfo, Summary
from gpu_triage.engine.verdict import ExitCode, one_line
from gpu_triage.io import jsonio
from gpu_triage.io.files import (
    DEFAULT_LOCK_TIMEOUT_S,
    DEFAULT_MODE,
    append_line,
    locked,
    write_atomic,
)
from gpu_triage.io.stopping import StopFlag
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


class Stopped(Exception):
    """A stop signal came while the snapshot was being taken: this run writes nothing."""


class RunError(Exception):
    """A run that could not finish as it should. ``doc`` is what was written instead
    (an *unknown* document naming the failure, or the findings whose outputs failed)."""

    def __init__(self, message: str, doc: FindingsDocument) -> None:
        super().__init__(message)
        self.doc = doc


def describe(exc: BaseException) -> str:
    """One line naming an exception: its type and the first line of its message."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


def failure_document(spec: RunSpec, reason: str, hostname: str = "") -> FindingsDocument:
    """An *unknown* findings document for a run that produced no findings: monitoring
    reading the outputs sees exit 3 and why, never the previous run's healthy result."""
    book = spec.book
    doc = FindingsDocument(
        hostname=hostname or socket.gethostname(),
        engine=EngineInfo(name="none", requested=spec.engine),
        rulebook=RulebookInfo(
            fingerprint=book.fingerprint,
            rules=len(book.rules),
            sources=book.sources,
            disabled=book.disabled,
            overlays=book.overlays,
        ),
        summary=Summary(),
    )
    doc.exit_status = int(ExitCode.UNKNOWN)
    doc.verdict = one_line(f"UNKNOWN (exit 3): {reason}")
    return doc


def _write_all(spec: RunSpec, doc: FindingsDocument, facts: Facts | None) -> list[str]:
    """Write every output that can be written; the failures, in words. The caller holds
    the outputs' lock."""
    failed: list[str] = []
    for fmt, path in [(spec.fmt, spec.out), *spec.also]:
        try:
            write_output(doc, facts, fmt, path, mode=spec.mode)
        except Exception as exc:  # noqa: BLE001 - one output's failure must not cost the others
            failed.append(f"cannot write {path or 'stdout'}: {describe(exc)}")
    return failed


def run_once(
    spec: RunSpec, now: datetime | None = None, *, stop: threading.Event | None = None
) -> FindingsDocument:
    """One run: snapshot, evaluate, write every output, save the history.

    Whatever fails, every output that can be written is written: an *unknown* document
    when there are no findings to write, then :class:`RunError` says what failed."""
    outputs = [spec.out, *(path for _, path in spec.also)]
    try:
        snap, source = spec.get_snapshot()
    except Stopped:
        raise
    except Exception as exc:
        reason = f"no snapshot: {describe(exc)}"
        doc = failure_document(spec, reason)
        with locked(*outputs, timeout=spec.lock_timeout):
            failed = _write_all(spec, doc, None)
        raise RunError("; ".join([reason, *failed]), doc) from exc
    if stop is not None and stop.is_set():
        raise Stopped
    # Collection is done; from reading the state to writing it back, every file this run
    # writes is locked, so a concurrent run waits instead of losing this one's update.
    with locked(*outputs, spec.history.path, timeout=spec.lock_timeout):
        now = now or datetime.now(UTC)
        try:
            if spec.history.path is not None:
                spec.history = History.load(spec.history.path, now)
            spec.history.xids.prepare(snap)
            spec.history.counters.prepare(snap, now)
            spec.history.baselines.prepare(snap, now)
            doc = evaluate(snap, spec.book, engine=spec.engine, source=source)
            spec.history.xids.record(snap, now)
            spec.history.counters.record(snap, now)
            spec.history.baselines.record(snap, now)
            if spec.min_severity != "info":
                floor = SEVERITIES.index(spec.min_severity)
                doc.findings = [
                    f for f in doc.findings if SEVERITIES.index(f.severity.value) >= floor
                ]
            spec.history.apply(doc, now)
        except Exception as exc:
            reason = f"evaluation failed: {describe(exc)}"
            doc = failure_document(spec, reason, snap.hostname)
            failed = _write_all(spec, doc, snap.facts)
            raise RunError("; ".join([reason, *failed]), doc) from exc
        failed = _write_all(spec, doc, snap.facts)
        try:
            spec.history.save()
        except Exception as exc:  # noqa: BLE001 - the findings are written; say what was not
            failed.append(f"cannot save the state: {describe(exc)}")
    if failed:
        raise RunError("; ".join(failed), doc)
    return doc


M_MMAP_THRESHOLD = -3  # glibc mallopt parameter
MMAP_THRESHOLD_BYTES = 256 << 10


def _libc() -> Any:
    try:
        return ctypes.CDLL(None)
    except OSError:
        return None


def _map_big_buffers() -> None:
    """A run's command outputs are buffers of up to tens of MiB, made in several threads.
    glibc raises its mmap threshold after the first big free, so later ones land in
    per-thread arenas and stay there: RSS climbs by hundreds of MiB. A fixed threshold
    keeps big buffers mmapped, returned to the OS when freed."""
    libc = _libc()
    mallopt = getattr(libc, "mallopt", None)
    if mallopt is not None:
        mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)


def _give_back_memory() -> None:
    """Return freed memory to the OS between runs: a daemon's RSS stays flat."""
    trim = getattr(_libc(), "malloc_trim", None)
    if trim is not None:
        trim(0)


def run_loop(
    spec: RunSpec,
    interval_s: float,
    *,
    max_runs: int | None = None,
    on_run: Callable[[FindingsDocument], Any] | None = None,
    stop: threading.Event | None = None,
    report: Callable[[str], Any] | None = None,
) -> int:
    """Run every ``interval_s`` seconds on a fixed schedule (no drift: run k starts at
    start + k * interval; a run that overran skips the slots it missed).

    Each run is isolated: a run that fails is written as an *unknown* document (exit 3)
    and reported, and the loop goes on. ``stop`` (the CLI's held SIGTERM/SIGINT) ends
    the loop after the current run, or during the collection of one, which then writes
    nothing; without it, handlers are installed here. An output is never left
    half-written. Returns the exit code of the last run (3 when none finished)."""
    say = report or (lambda msg: print(f"gpu-triage: {msg}", file=sys.stderr, flush=True))
    previous: dict[int, Any] = {}
    if stop is None:
        stop = StopFlag()  # a handler may set it (threading.Event.set could deadlock)
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGINT):
                previous[sig] = signal.signal(sig, lambda *_: stop.set())
    start = time.monotonic()
    runs = 0
    code = int(ExitCode.UNKNOWN)
    # What exists now (the rulebook, modules) lives as long as the loop: freeze it out of
    # the collector's sight, so collecting each run's garbage stays cheap.
    gc.collect()
    gc.freeze()
    _map_big_buffers()
    say(f"loop ready: a run every {interval_s:g} s; SIGTERM stops it")
    try:
        while not stop.is_set():
            try:
                doc = run_once(spec, stop=stop)
                code = int(doc.exit_code)
            except Stopped:
                break
            except RunError as exc:  # this run's status is "unknown"; the loop goes on
                doc, code = exc.doc, int(ExitCode.UNKNOWN)
                say(f"run {runs + 1}: {exc}")
            except Exception as exc:  # noqa: BLE001 - one run's failure never ends the loop
                doc = failure_document(spec, f"run failed: {describe(exc)}")
                code = int(ExitCode.UNKNOWN)
                say(f"run {runs + 1}: {describe(exc)}")
            runs += 1
            gc.collect()  # a run's reference cycles (and the outputs they hold) go now
            _give_back_memory()
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
