"""Writing output files so that a failed or killed run never truncates the previous one."""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path


def is_special(path: str | os.PathLike[str]) -> bool:
    """A target that exists and is not a regular file (a device, a FIFO): written in
    place, never replaced, and never given lock or state files beside it."""
    try:
        return not stat.S_ISREG(os.stat(path).st_mode)
    except FileNotFoundError:
        return False


def write_atomic(path: str | os.PathLike[str], text: str) -> None:
    """Write ``text`` to a temporary file beside ``path``, fsync it, then rename it over
    ``path``. Readers see the old file or the new one, never a part."""
    target = Path(path)
    if is_special(target):
        with open(target, "w", encoding="utf-8") as fh:
            fh.write(text)
        return
    directory = target.parent if str(target.parent) else Path(".")
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    with contextlib.suppress(OSError):  # make the rename itself durable
        dfd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)


@contextlib.contextmanager
def locked(path: str | os.PathLike[str]) -> Iterator[None]:
    """Hold an exclusive lock beside ``path`` (``.<name>.lock``): two runs writing the same
    output take turns instead of interleaving."""
    import fcntl

    target = Path(path)
    if is_special(target):
        yield
        return
    lock_path = target.with_name(f".{target.name}.lock")
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def append_line(path: str | os.PathLike[str], line: str) -> None:
    """Append one whole line with a single write, then fsync (JSONL history)."""
    data = line.encode("utf-8")
    if not data.endswith(b"\n"):
        data += b"\n"
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        written = os.write(fd, data)
        if written != len(data):  # a full disk mid-line: cut the partial line back off
            size = os.fstat(fd).st_size
            os.ftruncate(fd, size - written)
            raise OSError(f"short write to {path}: {written} of {len(data)} bytes")
        os.fsync(fd)
    finally:
        os.close(fd)
