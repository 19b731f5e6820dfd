"""The compiled rulebook, cached: in memory for the process, on disk for cold starts.

The key is a hash of every rule file's name and text, the package version, the Python
version and the size and time of the compiler's and the models' source files: a changed
rule file, an upgrade, an edited checkout or another interpreter is a miss, never a
stale hit. Whatever goes wrong with the disk cache (missing, corrupt, truncated, owned
by someone else, unwritable, a symlink) is a miss and the rulebook is compiled as if
there were no cache; the cache never decides a result.

Where: ``$GPU_TRIAGE_CACHE_DIR`` when set (empty or ``off``: no disk cache); as root
``/var/cache/gpu-triage``; otherwise ``$XDG_CACHE_HOME/gpu-triage`` or
``~/.cache/gpu-triage``. The directory is used only when it is a real directory (not a
symlink) owned by the current user and writable by nobody else, and a file only when it
is a regular file with the same owner and mode, opened without following symlinks: so
what is unpickled was written by this user (as root: by root), like the code itself.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import pickle
import stat
import sys
from pathlib import Path
from typing import Any

from gpu_triage import __version__
from gpu_triage.engine.loader import Source

FORMAT = b"gpu-triage rulebook cache 1\n"
MAX_BYTES = 64 * 1024 * 1024
KEEP = 8  # cache files kept in the directory (the newest)
ENV = "GPU_TRIAGE_CACHE_DIR"

# What is cached is the compiler's Rulebook; the compiler checks the type of a hit (this
# module does not import the compiler, which imports it).
_MEMORY: dict[str, object] = {}


def key_of(sources: list[Source], flags: tuple[Any, ...] = ()) -> str:
    h = hashlib.sha256()
    h.update(FORMAT)
    h.update(repr((__version__, sys.version, flags, _code_stamp())).encode())
    for s in sources:
        for part in (s.name, s.rulebook, s.text):
            data = part.encode("utf-8", "surrogatepass")
            h.update(len(data).to_bytes(8, "big"))
            h.update(data)
    return h.hexdigest()[:40]


_STAMP: list[tuple[tuple[str, int, int], ...]] = []


def _code_stamp() -> tuple[tuple[str, int, int], ...]:
    """Name, size and modification time of the compiler's and the models' source files:
    an edited checkout (same version number, other code) is a miss too."""
    if not _STAMP:
        import gpu_triage.model

        out = []
        for d in (Path(__file__).parent, Path(gpu_triage.model.__file__).parent):
            with contextlib.suppress(OSError):
                for entry in os.scandir(d):
                    if entry.name.endswith(".py"):
                        st = entry.stat()
                        out.append((entry.name, st.st_size, st.st_mtime_ns))
        _STAMP.append(tuple(sorted(out)))
    return _STAMP[0]


def cache_dir() -> Path | None:
    env = os.environ.get(ENV)
    if env is not None:
        return Path(env) if env.strip() and env.strip().lower() != "off" else None
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        return Path("/var/cache/gpu-triage")
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "gpu-triage"


def get(key: str) -> object | None:
    hit = _MEMORY.get(key)
    if hit is not None:
        return hit
    book = _read(key)
    if book is not None:
        _MEMORY[key] = book
    return book


def put(key: str, book: Any) -> None:
    _MEMORY[key] = book
    _write(key, book)


def clear_memory() -> None:
    _MEMORY.clear()


def _name(key: str) -> str:
    return f"rulebook-{key}.pickle"


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


def _read(key: str) -> object | None:
    dfd = _open_dir(create=False)
    if dfd is None:
        return None
    try:
        try:
            fd = os.open(_name(key), os.O_RDONLY | os.O_NOFOLLOW, dir_fd=dfd)
        except OSError:
            return None
        with os.fdopen(fd, "rb") as fh:
            st = os.fstat(fh.fileno())
            if not stat.S_ISREG(st.st_mode) or not _owned_and_private(st):
                return None
            if st.st_size > MAX_BYTES:
                return None
            data = fh.read(MAX_BYTES + 1)
        book = _decode(data, key)
        if book is None:  # corrupt or truncated: drop it, it is rewritten below
            with contextlib.suppress(OSError):
                os.unlink(_name(key), dir_fd=dfd)
        return book
    finally:
        os.close(dfd)


def _decode(data: bytes, key: str) -> object | None:
    head = FORMAT + key.encode() + b"\n"
    if not data.startswith(head):
        return None
    rest = data[len(head) :]
    digest, _, payload = rest.partition(b"\n")
    if hashlib.sha256(payload).hexdigest().encode() != digest:
        return None
    try:
        book: object = pickle.loads(payload)  # noqa: S301 - our own file, see the docstring
    except Exception:  # noqa: BLE001 - any failure to read back is a miss
        return None
    return book


def _write(key: str, book: Any) -> None:
    # Computed once here so a cold start reads them from the cache too.
    _ = book.fingerprint, book.kind_fields
    try:
        payload = pickle.dumps(book, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:  # noqa: BLE001 - something unpicklable: no disk cache for it
        return
    data = FORMAT + key.encode() + b"\n" + hashlib.sha256(payload).hexdigest().encode()
    data += b"\n" + payload
    if len(data) > MAX_BYTES:
        return
    dfd = _open_dir(create=True)
    if dfd is None:
        return
    tmp = f".{_name(key)}.{os.getpid()}.tmp"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600, dir_fd=dfd)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, _name(key), src_dir_fd=dfd, dst_dir_fd=dfd)
        _prune(dfd)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=dfd)
    finally:
        os.close(dfd)


def _prune(dfd: int) -> None:
    entries = []
    for name in os.listdir(dfd):
        if name.startswith("rulebook-") and name.endswith(".pickle"):
            with contextlib.suppress(OSError):
                st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
                entries.append((st.st_mtime, name))
    for _, name in sorted(entries, reverse=True)[KEEP:]:
        with contextlib.suppress(OSError):
            os.unlink(name, dir_fd=dfd)
