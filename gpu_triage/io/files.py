"""How gpu-triage writes files: one model for every output, lock, history and state file.

gpu-triage runs as root and writes into directories other accounts may own or write
(node_exporter's textfile directory, shared log directories). Every file it writes or
reads back goes through here; SECURITY.md ("Files") states the same model for users.

- **Not a regular file**: ``-`` (stdout), a character device, a FIFO (and ``/dev/stdout``
  style links into ``/proc/self/fd``) are written directly, with no ``O_CREAT`` and no
  ``O_TRUNC``: never replaced, and never given a lock or state file beside them. Block
  devices, sockets and directories are refused.
- **A regular target** is written to a new temporary file beside it (``O_CREAT|O_EXCL|
  O_NOFOLLOW``), fsynced, given its mode (``DEFAULT_MODE`` 0644 unless asked, whatever the
  umask), then renamed over the target. Readers see the old file or the new one.
- **Opened in place** (a lock, a JSONL history, a state file read back): ``O_NOFOLLOW``
  (and ``O_EXCL`` where it is created), then ``fstat`` must show a regular file with one
  link, owned by the effective user. A planted symlink, hard link or another account's
  file is refused with a message naming it, never followed or written.
- Names are opened relative to a descriptor of their directory, so a directory swapped
  after it was checked is not followed either. As root, a directory that group or others
  can write is refused unless it is sticky (``/tmp``-like: nobody can rename or delete
  root's files in it).
- A target named through a symbolic link is refused (name the file itself), except links
  owned by root or the user that lead to a device, a FIFO or a ``/proc/self/fd`` entry.
- Lock waits are bounded: ``DEFAULT_LOCK_TIMEOUT_S`` unless asked, then
  :class:`LockTimeout` names the lock.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import secrets
import stat
import sys
import time
from collections.abc import Iterator
from pathlib import Path

DEFAULT_MODE = 0o644
DEFAULT_LOCK_TIMEOUT_S = 30.0
STDOUT = "-"

StrPath = str | os.PathLike[str]

_NOFOLLOW = os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NOCTTY


class UnsafeFile(OSError):
    """A path the file model refuses; the message names it and says why."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class LockTimeout(UnsafeFile):
    """Another run held the lock for longer than the timeout."""


def _is_root() -> bool:
    return os.geteuid() == 0


def _what(st: os.stat_result) -> str:
    mode = st.st_mode
    for test, word in (
        (stat.S_ISDIR, "directory"),
        (stat.S_ISBLK, "block device"),
        (stat.S_ISSOCK, "socket"),
        (stat.S_ISLNK, "symbolic link"),
        (stat.S_ISCHR, "character device"),
        (stat.S_ISFIFO, "FIFO"),
    ):
        if test(mode):
            return word
    return "regular file" if stat.S_ISREG(mode) else "special file"


def _via_proc_fd(path: str) -> bool:
    """``/dev/stdout``, ``/dev/fd/N``, ``/proc/self/fd/N``: a descriptor of this process."""
    p = os.path.abspath(path)
    for _ in range(40):  # the kernel's own limit on links followed
        if p.startswith("/proc/") or os.path.realpath(os.path.dirname(p)).startswith("/proc/"):
            return True
        try:
            target = os.readlink(p)
        except OSError:
            return False
        p = os.path.normpath(os.path.join(os.path.dirname(p), target))
    return False


def target_kind(path: StrPath) -> str:
    """``"stdout"``, ``"special"`` (written in place) or ``"regular"`` (written by
    rename); :class:`UnsafeFile` for what the model refuses."""
    p = os.fspath(path)
    if p == STDOUT:
        return "stdout"
    try:
        st = os.lstat(p)
    except FileNotFoundError:
        return "regular"
    if stat.S_ISREG(st.st_mode):
        return "regular"
    if stat.S_ISCHR(st.st_mode) or stat.S_ISFIFO(st.st_mode):
        return "special"
    if stat.S_ISLNK(st.st_mode):
        return _link_kind(p, st)
    raise UnsafeFile(f"{p}: is a {_what(st)}, not something gpu-triage writes to")


def _link_kind(p: str, st: os.stat_result) -> str:
    if st.st_uid not in (0, os.geteuid()):
        raise UnsafeFile(
            f"{p}: is a symbolic link owned by uid {st.st_uid}: refusing to follow it "
            "(it may have been planted; name the file itself)"
        )
    try:
        to = os.stat(p)
    except OSError:
        to = None
    if to is not None and (stat.S_ISCHR(to.st_mode) or stat.S_ISFIFO(to.st_mode)):
        return "special"
    if to is not None and _via_proc_fd(p):
        return "special"  # a descriptor of this process (a shell redirect): write through
    raise UnsafeFile(
        f"{p}: is a symbolic link: refusing to follow or replace it (name the file itself)"
    )


def is_special(path: StrPath) -> bool:
    """Stdout, a device or a FIFO: written in place, with nothing created beside it."""
    try:
        return target_kind(path) != "regular"
    except UnsafeFile:
        return False


# --------------------------------------------------------------------------- checks


def _open_dir(path: StrPath) -> int:
    """A descriptor of the directory ``path`` lives in, checked when running as root."""
    directory = os.path.dirname(os.fspath(path)) or "."
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        if _is_root():
            st = os.fstat(fd)
            group_writable = st.st_mode & stat.S_IWGRP and st.st_gid != 0
            others = st.st_mode & stat.S_IWOTH or group_writable
            if others and not st.st_mode & stat.S_ISVTX:
                who = "others" if st.st_mode & stat.S_IWOTH else f"group {st.st_gid}"
                raise UnsafeFile(
                    f"{directory}: writable by {who} and not sticky: refusing to write "
                    "there as root (another account could swap or plant files in it); "
                    "use a directory only root can write, or make it sticky (chmod +t)"
                )
    except BaseException:
        os.close(fd)
        raise
    return fd


def _check_own(fd: int, path: StrPath) -> os.stat_result:
    """What an in-place open must find: a regular file, one link, ours. The caller
    closes ``fd`` either way."""
    st = os.fstat(fd)
    problem = ""
    if not stat.S_ISREG(st.st_mode):
        problem = f"is a {_what(st)}, not a regular file"
    elif st.st_uid != os.geteuid():
        problem = f"is owned by uid {st.st_uid}, not by uid {os.geteuid()} running gpu-triage"
    elif st.st_nlink != 1:
        problem = f"has {st.st_nlink} hard links (it may be another file's second name)"
    if problem:
        raise UnsafeFile(f"{os.fspath(path)}: {problem}: refusing to use it (remove it if stale)")
    return st


def _open_in_place(path: StrPath, dfd: int, flags: int, mode: int) -> tuple[int, bool]:
    """Open (or create, exclusively) the file ``path`` names in ``dfd``; return the
    descriptor and whether it was created. Never follows a symlink."""
    name = os.path.basename(os.fspath(path))
    for _ in range(10):
        try:
            return os.open(name, flags | _NOFOLLOW | os.O_NONBLOCK, dir_fd=dfd), False
        except FileNotFoundError:
            pass
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise UnsafeFile(
                    f"{os.fspath(path)}: is a symbolic link: refusing to follow it"
                ) from None
            raise
        try:
            fd = os.open(name, flags | os.O_CREAT | os.O_EXCL | _NOFOLLOW, 0o600, dir_fd=dfd)
        except FileExistsError:
            continue  # created meanwhile: open what is there, with the same checks
        os.fchmod(fd, mode)  # the mode asked for, whatever the umask
        return fd, True
    raise UnsafeFile(f"{os.fspath(path)}: keeps appearing and disappearing: refusing it")


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def _fsync_dir(dfd: int) -> None:
    with contextlib.suppress(OSError):  # make a rename or a creation itself durable
        os.fsync(dfd)


# --------------------------------------------------------------------------- writing


def _write_direct(path: StrPath, data: bytes, kind: str, timeout: float) -> None:
    if kind == "stdout":
        sys.stdout.write(data.decode("utf-8"))
        sys.stdout.flush()
        return
    # O_NONBLOCK: a FIFO nobody reads fails (ENXIO) instead of hanging; retried for a while.
    deadline = time.monotonic() + timeout
    flags = os.O_WRONLY | os.O_APPEND | os.O_NOCTTY | os.O_CLOEXEC | os.O_NONBLOCK
    while True:
        try:
            fd = os.open(path, flags)
            break
        except OSError as exc:
            if exc.errno != errno.ENXIO or time.monotonic() >= deadline:
                raise
            time.sleep(0.05)
    try:
        st = os.fstat(fd)
        if stat.S_ISREG(st.st_mode) and not _via_proc_fd(os.fspath(path)):
            raise UnsafeFile(f"{os.fspath(path)}: was replaced by a regular file: refusing")
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
        _write_all(fd, data)
    finally:
        os.close(fd)


def write_atomic(
    path: StrPath,
    text: str,
    *,
    mode: int = DEFAULT_MODE,
    timeout: float = DEFAULT_LOCK_TIMEOUT_S,
) -> None:
    """Write ``text`` to ``path`` by the model above: in place for stdout, devices and
    FIFOs; otherwise a temporary file beside it, fsynced and renamed over it."""
    data = text.encode("utf-8", errors="replace")
    kind = target_kind(path)
    if kind != "regular":
        _write_direct(path, data, kind, timeout)
        return
    dfd = _open_dir(path)
    try:
        name = os.path.basename(os.fspath(path))
        if not name:
            raise UnsafeFile(f"{os.fspath(path)}: names a directory, not a file")
        tmp, fd = "", -1
        for _ in range(100):
            tmp = f".{name}.{secrets.token_hex(6)}.tmp"
            try:
                fd = os.open(
                    tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, 0o600, dir_fd=dfd
                )
                break
            except FileExistsError:
                continue
        if fd < 0:
            raise UnsafeFile(f"{os.fspath(path)}: cannot create a temporary file beside it")
        try:
            try:
                _write_all(fd, data)
                os.fchmod(fd, mode)
                os.fsync(fd)
            finally:
                os.close(fd)
            os.rename(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=dfd)
            raise
        _fsync_dir(dfd)
    finally:
        os.close(dfd)


def append_line(
    path: StrPath,
    line: str,
    *,
    mode: int = DEFAULT_MODE,
    timeout: float = DEFAULT_LOCK_TIMEOUT_S,
) -> None:
    """Append one whole line with a single write, then fsync (JSONL). A file whose last
    line is partial (a killed writer) gets a newline first, so this record stays whole."""
    data = line.encode("utf-8", errors="replace")
    if not data.endswith(b"\n"):
        data += b"\n"
    kind = target_kind(path)
    if kind != "regular":
        _write_direct(path, data, kind, timeout)
        return
    dfd = _open_dir(path)
    try:
        fd, created = _open_in_place(path, dfd, os.O_RDWR | os.O_APPEND, mode)
        try:
            st = _check_own(fd, path)
            if st.st_size and os.pread(fd, 1, st.st_size - 1) != b"\n":
                data = b"\n" + data
            fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
            written = os.write(fd, data)
            if written != len(data):  # a full disk mid-line: cut the partial line back off
                size = os.fstat(fd).st_size
                os.ftruncate(fd, size - written)
                raise OSError(f"short write to {os.fspath(path)}: {written} of {len(data)} bytes")
            os.fsync(fd)
        finally:
            os.close(fd)
        if created:
            _fsync_dir(dfd)
    finally:
        os.close(dfd)


def read_text(path: StrPath, *, max_bytes: int | None = None) -> str | None:
    """A file of ours read back (state): ``None`` when absent. Opened like a lock or a
    history (no symlink, one link, our own regular file), so a planted name is refused."""
    if target_kind(path) != "regular":
        raise UnsafeFile(f"{os.fspath(path)}: not a regular file")
    dfd = _open_dir(path)
    try:
        try:
            fd = os.open(
                os.path.basename(os.fspath(path)),
                os.O_RDONLY | _NOFOLLOW | os.O_NONBLOCK,
                dir_fd=dfd,
            )
        except FileNotFoundError:
            return None
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise UnsafeFile(
                    f"{os.fspath(path)}: is a symbolic link: refusing to follow it"
                ) from None
            raise
        try:
            st = _check_own(fd, path)
            if max_bytes is not None and st.st_size > max_bytes:
                raise UnsafeFile(f"{os.fspath(path)}: larger than {max_bytes} bytes")
            chunks = []
            while chunk := os.read(fd, 1 << 20):
                chunks.append(chunk)
        finally:
            os.close(fd)
        return b"".join(chunks).decode("utf-8", errors="replace")
    finally:
        os.close(dfd)


# --------------------------------------------------------------------------- locks


def lock_path(path: StrPath) -> Path:
    p = Path(path)
    return p.with_name(f".{p.name}.lock")


def _acquire(lock: Path, deadline: float, timeout: float) -> int:
    dfd = _open_dir(lock)
    try:
        fd, _ = _open_in_place(lock, dfd, os.O_RDWR, 0o644)
    finally:
        os.close(dfd)
    try:
        _check_own(fd, lock)
    except UnsafeFile:
        os.close(fd)
        raise
    delay = 0.01
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except BlockingIOError:
            pass
        if time.monotonic() >= deadline:
            os.close(fd)
            raise LockTimeout(
                f"{lock}: timed out after {timeout:g} s waiting for this lock "
                "(another gpu-triage run holds it; see --lock-timeout)"
            )
        time.sleep(min(delay, max(0.0, deadline - time.monotonic())))
        delay = min(delay * 2, 0.25)


@contextlib.contextmanager
def locked(*paths: StrPath | None, timeout: float = DEFAULT_LOCK_TIMEOUT_S) -> Iterator[None]:
    """Hold an exclusive lock beside every regular target (``.<name>.lock``), taken in
    one order so runs with overlapping targets cannot deadlock; stdout, devices and FIFOs
    get none. :class:`LockTimeout` after ``timeout`` seconds in all."""
    locks = sorted(
        {
            os.path.abspath(lock_path(p))
            for p in paths
            if p is not None and target_kind(p) == "regular"
        }
    )
    deadline = time.monotonic() + timeout
    held: list[int] = []
    try:
        for lock in locks:
            held.append(_acquire(Path(lock), deadline, timeout))
        yield
    finally:
        for fd in reversed(held):
            with contextlib.suppress(OSError):
                fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)


def ensure_file(path: StrPath, *, mode: int = DEFAULT_MODE) -> None:
    """Create ``path`` empty if absent (exclusively, no symlink followed); an existing
    one must be our own regular file."""
    if target_kind(path) != "regular":
        raise UnsafeFile(f"{os.fspath(path)}: not a regular file")
    dfd = _open_dir(path)
    try:
        fd, created = _open_in_place(path, dfd, os.O_RDONLY, mode)
        try:
            _check_own(fd, path)
        finally:
            os.close(fd)
        if created:
            _fsync_dir(dfd)
    finally:
        os.close(dfd)


def read_small(path: Path, cap: int) -> str | None:
    """The first ``cap`` bytes of a regular file (a sysfs or procfs attribute), never
    through a link and without blocking (a FIFO planted in a recorded tree cannot stall a
    collector); None otherwise."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        chunks, size = [], 0
        while size < cap and (chunk := os.read(fd, cap - size)):
            chunks.append(chunk)
            size += len(chunk)
    except OSError:
        return None
    finally:
        os.close(fd)
    return b"".join(chunks).decode("utf-8", errors="replace")
