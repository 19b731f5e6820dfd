"""Finding and ending every process a command started, including those that left its group.

A command runs in its own session, but a descendant can call ``setsid`` (or double-fork
like a daemon) and leave the process group, keeping the command's stdout open. Two
things find such descendants all the same:

* every command gets a marker in its environment (``GPU_TRIAGE_RUN``), which children
  inherit and which survives ``setsid``; ``/proc/PID/environ`` shows it;
* gpu-triage makes itself a child subreaper (``prctl(PR_SET_CHILD_SUBREAPER)``), so an
  orphaned descendant is re-parented to gpu-triage instead of init: it cannot get away
  from the process tree, and once killed it is reaped here (no zombies pile up).
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time

MARKER = "GPU_TRIAGE_RUN"
PR_SET_CHILD_SUBREAPER = 36
_subreaper_lock = threading.Lock()
_subreaper: bool | None = None


def become_subreaper() -> bool:
    """Make this process the reaper of its orphaned descendants (Linux 3.4+); once."""
    global _subreaper
    with _subreaper_lock:
        if _subreaper is None:
            import ctypes  # here: a process that runs no command does not load it

            try:
                libc = ctypes.CDLL(None, use_errno=True)
                _subreaper = libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
            except (OSError, AttributeError):
                _subreaper = False
        return _subreaper


def _stat(pid: int) -> tuple[str, int] | None:
    """(state, ppid) of a process, None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            text = fh.read().decode(errors="replace")
    except OSError:
        return None
    fields = text[text.rfind(")") + 2 :].split()
    if len(fields) < 2:
        return None
    try:
        return fields[0], int(fields[1])
    except ValueError:
        return None


def _has_marker(pid: int, token: bytes) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as fh:
            env = fh.read(1 << 20)
    except OSError:
        return False
    return token in env.split(b"\0")


def _all_pids() -> list[int]:
    try:
        return [int(e) for e in os.listdir("/proc") if e.isdigit()]
    except OSError:
        return []


def find_tree(root: int, token: bytes) -> dict[int, int]:
    """Live processes that belong to the command: descendants of ``root`` and anything
    carrying its marker. Returns pid -> ppid."""
    parents: dict[int, int] = {}
    states: dict[int, str] = {}
    for pid in _all_pids():
        st = _stat(pid)
        if st is not None:
            states[pid], parents[pid] = st
    found: dict[int, int] = {}
    for pid in parents:
        if pid == os.getpid():
            continue
        if pid == root or _has_marker(pid, token):
            found[pid] = parents[pid]
    # descendants of what was found (a child that cleared its environment)
    changed = True
    while changed:
        changed = False
        for pid, ppid in parents.items():
            if pid not in found and ppid in found:
                found[pid] = ppid
                changed = True
    me = os.getpid()
    return {p: pp for p, pp in found.items() if states.get(p) not in ("Z", "X") or pp == me}


def kill_tree(root: int, token: bytes, *, wait_s: float = 2.0) -> int:
    """SIGKILL everything that belongs to the command, until nothing is left or
    ``wait_s`` passes; reap those that were re-parented to us. Returns how many
    processes were still alive (unkillable, e.g. in uninterruptible sleep) at the end."""
    deadline = time.monotonic() + wait_s
    members: set[int] = set()
    while True:
        alive = 0
        for pid in find_tree(root, token):
            members.add(pid)
            st = _stat(pid)
            if st is not None and st[0] not in ("Z", "X"):
                alive += 1
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
        if not alive or time.monotonic() >= deadline:
            break
        time.sleep(0.01)
    # Once all are dead, every orphan among them has been re-parented to us (the
    # subreaper) and waits as a zombie: reap them. Never the root: Popen waits for it.
    for pid in members - {root}:
        _reap(pid)
    return alive


def _reap(pid: int) -> None:
    """Collect an orphan that was re-parented to us (never our own Popen child)."""
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)


def _my_children() -> list[int]:
    out: list[int] = []
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return out
    for t in tasks:
        try:
            with open(f"/proc/self/task/{t}/children", "rb") as fh:
                out += [int(x) for x in fh.read().split()]
        except (OSError, ValueError):
            continue
    return out


def children_with_marker(token: bytes) -> bool:
    """Whether an orphan of the command was re-parented to us (cheap: our children only)."""
    return any(_has_marker(pid, token) for pid in _my_children())
