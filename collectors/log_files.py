"""Reading a log file within bounds: the newest part, in chunks, never the whole file at once.

A kernel log file can be any size (a storm writes gigabytes) and any kind of path (a FIFO
from process substitution, or /dev/zero by mistake). :func:`open_log` refuses what is not a
regular file or a FIFO; :func:`read_capped` yields at most ``cap`` bytes of whole lines,
the newest ones of a regular file; :func:`window_start` walks a file backwards in bounded
chunks to where its lines enter a time window.
"""

from __future__ import annotations

import os
import select
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

CHUNK = 1 << 20
# What a named kernel log is read of at most: its newest 32 MiB (about four hours of a
# 500 MB, three-day log; a storm's first minutes are in its newest part anyway).
MAX_BYTES = 32 << 20


class LogFileError(Exception):
    """The path cannot be read as a log (with the reason, naming the path)."""


@dataclass
class Span:
    """What was read of a file."""

    size: int | None  # None for a FIFO
    start: int = 0  # offset of the first byte read
    read: int = 0
    truncated: bool = False  # the cap kept some of it unread

    def describe(self, path: Path) -> str:
        if not self.truncated:
            return str(path)
        if self.size is None:
            return f"{path} (first {_mib(self.read)} MiB read: the read limit)"
        return f"{path} (last {_mib(self.read)} MiB of {_mib(self.size)} MiB read: the read limit)"


FIFO_WAIT_S = 60  # longest wait for a FIFO's first writer (beyond any collector budget)


def _mib(n: int) -> str:
    return f"{n / 2**20:.0f}" if n >= 2**20 else f"{n / 2**20:.2f}"


def open_log(path: Path) -> tuple[int, os.stat_result]:
    """A descriptor on ``path`` if it is a regular file or a FIFO; LogFileError otherwise.
    The first open does not block, so what it is is known before waiting on it."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except PermissionError as exc:
        raise LogFileError(f"no permission to read the kernel log {path}: {exc.strerror}") from exc
    except OSError as exc:
        raise LogFileError(f"cannot read kernel log file {path}: {exc.strerror or exc}") from exc
    st = os.fstat(fd)
    if not (stat.S_ISREG(st.st_mode) or stat.S_ISFIFO(st.st_mode)):
        os.close(fd)
        raise LogFileError(
            f"kernel log {path} is not a regular file or a FIFO ({_kind(st.st_mode)}): not read"
        )
    if stat.S_ISFIFO(st.st_mode):
        # No writer yet would read as an empty log: wait for one (the collector's deadline
        # bounds the wait) on this descriptor. Linux reports POLLHUP only once a writer has
        # come and gone, so poll waits for the first writer and never misses one that has
        # already written and closed (a blocking reopen would then wait forever).
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        if not poller.poll(FIFO_WAIT_S * 1000):
            os.close(fd)
            raise LogFileError(f"kernel log FIFO {path}: no writer within {FIFO_WAIT_S} s")
    os.set_blocking(fd, True)
    return fd, st


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return name
    return "not a file"


def read_capped(
    fd: int, st: os.stat_result, cap: int = MAX_BYTES, start: int | None = None
) -> tuple[Iterator[bytes], Span]:
    """Chunks of whole lines, at most ``cap`` bytes: from ``start`` (default: the newest
    ``cap`` bytes) of a regular file, from the beginning of a FIFO. The Span fills in as
    the chunks are read."""
    if not stat.S_ISREG(st.st_mode):
        span = Span(size=None)
        return _chunks(fd, span, cap, skip_partial=False), span
    size = st.st_size
    begin = max(0, size - cap) if start is None else max(0, min(start, size))
    span = Span(size=size, start=begin, truncated=begin > 0 and start is None)
    os.lseek(fd, begin, os.SEEK_SET)
    return _chunks(fd, span, cap, skip_partial=begin > 0), span


def _chunks(fd: int, span: Span, cap: int, *, skip_partial: bool) -> Iterator[bytes]:
    pending = b""
    while span.read < cap:
        data = os.read(fd, min(CHUNK, cap - span.read))
        if not data:
            break
        span.read += len(data)
        if skip_partial:
            cut = data.find(b"\n")
            if cut == -1:
                continue  # still inside the line the cut started in
            data, skip_partial = data[cut + 1 :], False
        data = pending + data
        end = data.rfind(b"\n")
        pending, data = data[end + 1 :], data[: end + 1]
        if data:
            yield data
    else:
        span.truncated = span.truncated or bool(os.read(fd, 1))  # the cap: more follows
    if pending:
        yield pending


def window_start(
    fd: int,
    size: int,
    since: datetime,
    stamp_of: Callable[[str], datetime | None],
    cap: int = MAX_BYTES,
) -> int:
    """Offset of a chunk boundary at or before the first line logged at ``since`` or later,
    found by reading ``fd`` backwards chunk by chunk (at most ``cap`` bytes back); 0 when
    the whole file is newer, ``size - cap`` when the window reaches further back than that.
    ``stamp_of`` dates a line (None when it cannot)."""
    pos = size
    while pos > 0 and size - pos < cap:
        pos = max(0, pos - CHUNK)
        os.lseek(fd, pos, os.SEEK_SET)
        data = os.read(fd, CHUNK)
        lines = data.split(b"\n")[1:] if pos > 0 else data.split(b"\n")
        for raw in lines[:50]:  # the first dated line of the chunk
            when = stamp_of(raw.decode("utf-8", errors="replace"))
            if when is not None:
                if _before(when, since):
                    return pos
                break
    return max(0, pos)


def _before(when: datetime, since: datetime) -> bool:
    if (when.tzinfo is None) != (since.tzinfo is None):
        when, since = when.astimezone(), since.astimezone()
    return when < since
