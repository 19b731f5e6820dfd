"""A findings document or a snapshot given to `gpu-triage fleet`, as one run record.

A snapshot is evaluated here with the built-in rulebook (reference evaluator); a findings
document is taken as it is (it lists no GPU inventory, so its node counts no GPUs).
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from gpu_triage.io import jsonio
from gpu_triage.model.limits import MAX_SNAPSHOT_BYTES

Record = tuple[dict[str, Any], str]  # (run record, "") or ({}, problem)

_BOOK: list[Any] = []


def _book() -> Any:
    if not _BOOK:
        from gpu_triage.engine.compiler import load_rulebook

        _BOOK.append(load_rulebook())
    return _BOOK[0]


def open_regular(path: str) -> Any:
    """A binary file object for a regular file; a FIFO or a device (which could block or
    never end) is refused with OSError before anything is read."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(0, "not a regular file")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def records_from_document(path: Path) -> Iterator[Record]:
    try:
        with open_regular(str(path)) as fh:
            raw = fh.read(MAX_SNAPSHOT_BYTES + 1)
    except OSError as exc:
        yield {}, f"{path}: cannot read: {exc.strerror or exc}"
        return
    if len(raw) > MAX_SNAPSHOT_BYTES:
        yield (
            {},
            f"{path}: larger than a snapshot of one node can be ({MAX_SNAPSHOT_BYTES:,} bytes)",
        )
        return
    try:
        data = jsonio.loads(raw.decode("utf-8", "replace"))
    except jsonio.NonFiniteNumber as exc:
        yield {}, f"{path}:{exc.line}:{exc.col}: {exc.token}: not a finite number"
        return
    except json.JSONDecodeError as exc:
        yield {}, f"{path}:{exc.lineno}:{exc.colno}: not JSON: {exc.msg}"
        return
    except RecursionError:
        yield {}, f"{path}: JSON nested too deeply"
        return
    yield from _from_data(data, path)


def _from_data(data: Any, path: Path) -> Iterator[Record]:
    from gpu_triage.ops.exporters import run_record

    if isinstance(data, dict) and "facts" in data and "collectors" in data:
        from gpu_triage.engine.evaluate import evaluate
        from gpu_triage.model.snapshot import SnapshotError, parse_snapshot

        try:
            snap = parse_snapshot(json.dumps(data), str(path))
        except SnapshotError as exc:
            yield {}, str(exc)
            return
        doc = evaluate(snap, _book(), engine="reference")
        yield run_record(doc, snap.facts), ""
        return
    if isinstance(data, dict) and "findings" in data and "engine" in data:
        from gpu_triage.engine.findings import FindingsDocument

        try:
            yield run_record(FindingsDocument.model_validate(data)), ""
        except ValueError as exc:
            first = str(exc).splitlines()[0]
            yield {}, f"{path}: invalid findings document: {first}"
        return
    if isinstance(data, dict) and "host" in data and "findings" in data:
        yield data, ""  # one run record saved as .json
        return
    yield {}, f"{path}: neither a snapshot, a findings document nor a run record"
