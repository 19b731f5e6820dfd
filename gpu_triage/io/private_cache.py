"""The private disk cache that cold starts read: files only this user can have written.

What is cached is pickled (a compiled rulebook, the models' validation schemas), and
unpickling runs code: so a file is read only when nobody but its owner could have
written it, the same trust the code itself has.

Where: ``$GPU_TRIAGE_CACHE_DIR`` when set (empty or ``off``: no disk cache); as root
``/var/cache/gpu-triage``; otherwise ``$XDG_CACHE_HOME/gpu-triage`` or
``~/.cache/gpu-triage``. The directory is used only when it is a real directory (not a
symlink) owned by the current user and writable by nobody else, and a file only when it
is a regular file with the same owner and mode, opened without following symlinks.

Each file starts with a header naming its format and key and the SHA-256 of its
payload: a truncated, corrupt or foreign file is a miss (and is removed), never an
error. Whatever goes wrong (missing, unwritable, full disk, someone else's file) the
caller builds what it wanted as if there were no cache.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
from pathlib import Path

MAX_BYTES = 64 * 1024 * 1024
ENV = "GPU_TRIAGE_CACHE_DIR"


def cache_dir() -> Path | None:
    env = os.environ.get(ENV)
    if env is not None:
        return Path(env) if env.strip() and env.strip().lower() != "off" else None
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        return Path("/var/cache/gpu-triage")
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "gpu-triage"


def _open_dir(create: bool) -> int | None:
    """A descriptor of the cache directory, if it is safe to use."""
    path = cache_dir()
    if path is None:
        return None
    try:
        if create:
            path.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        return None
    st = os.fstat(fd)
    if not _owned_and_private(st) or not stat.S_ISDIR(st.st_mode):
        os.close(fd)
        return None
    return fd


def _owned_and_private(st: os.stat_result) -> bool:
    uid = os.geteuid() if hasattr(os, "geteuid") else st.st_uid
    return st.st_uid == uid and not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


def _header(fmt: bytes, key: str) -> bytes:
    return fmt + key.encode() + b"\n"


def read(name: str, fmt: bytes, key: str) -> bytes | None:
    """The payload of cache file ``name`` written with this format and key, or None."""
    dfd = _open_dir(create=False)
    if dfd is None:
        return None
    try:
        try:
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW, dir_fd=dfd)
        except OSError:
            return None
        with os.fdopen(fd, "rb") as fh:
            st = os.fstat(fh.fileno())
            if not stat.S_ISREG(st.st_mode) or not _owned_and_private(st):
                return None
            if st.st_size > MAX_BYTES:
                return None
            data = fh.read(MAX_BYTES + 1)
        payload = _payload(data, _header(fmt, key))
        if payload is None:  # corrupt, truncated or another key's: dropped, rewritten later
            drop(name)
        return payload
    finally:
        os.close(dfd)


def _payload(data: bytes, head: bytes) -> bytes | None:
    if not data.startswith(head):
        return None
    digest, _, payload = data[len(head) :].partition(b"\n")
    if hashlib.sha256(payload).hexdigest().encode() != digest:
        return None
    return payload


def drop(name: str) -> None:
    """Remove a cache file that turned out unusable (it is rebuilt and rewritten)."""
    dfd = _open_dir(create=False)
    if dfd is None:
        return
    try:
        with contextlib.suppress(OSError):
            os.unlink(name, dir_fd=dfd)
    finally:
        os.close(dfd)


def write(name: str, fmt: bytes, key: str, payload: bytes, *, keep: tuple[str, int] | None) -> None:
    """Write ``payload`` as cache file ``name`` (atomically: a reader sees the old file or
    the new one, never half of one). ``keep``: (prefix, n) keeps only the newest n files
    whose names start with prefix. A failure leaves no cache, never an error."""
    data = _header(fmt, key) + hashlib.sha256(payload).hexdigest().encode() + b"\n" + payload
    if len(data) > MAX_BYTES:
        return
    dfd = _open_dir(create=True)
    if dfd is None:
        return
    tmp = f".{name}.{os.getpid()}.tmp"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600, dir_fd=dfd)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
        if keep is not None:
            _prune(dfd, *keep)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=dfd)
    finally:
        os.close(dfd)


def _prune(dfd: int, prefix: str, keep: int) -> None:
    entries = []
    for name in os.listdir(dfd):
        if name.startswith(prefix):
            with contextlib.suppress(OSError):
                st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
                entries.append((st.st_mtime, name))
    for _, name in sorted(entries, reverse=True)[keep:]:
        with contextlib.suppress(OSError):
            os.unlink(name, dir_fd=dfd)


def source_stamp(paths: list[Path]) -> tuple[tuple[str, int, int], ...]:
    """Name, size and modification time of every ``.py`` file in these directories: an
    edited checkout (same version number, other code) changes it."""
    out = []
    for d in paths:
        with contextlib.suppress(OSError):
            for entry in os.scandir(d):
                if entry.name.endswith(".py"):
                    st = entry.stat()
                    out.append((f"{d.name}/{entry.name}", st.st_size, st.st_mtime_ns))
    return tuple(sorted(out))
