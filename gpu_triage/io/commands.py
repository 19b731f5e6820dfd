"""Running commands: the one place that starts subprocesses, and the one result class.

Commands are argument lists, never shell lines. Each runs in its own session (process
group) with a minimal environment (a fixed PATH and the C locale, so outputs parse the
same everywhere). :func:`run_command` waits for the command (collectors, integrations);
:func:`run_streaming` (asyncio) hands its merged stdout and stderr over line by line as
they arrive (runbook steps in the TUI). A timeout, a cancel event or the cancellation
of the awaiting task ends a streaming command: the whole process group gets SIGTERM,
then SIGKILL after a grace period, so nothing it started outlives it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import selectors
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gpu_triage.io.proctree import MARKER, become_subreaper, children_with_marker, kill_tree

# Commands run with a minimal, predictable environment: a fixed PATH and the C locale
# so outputs parse the same everywhere.
SAFE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
MAX_LINE_CHARS = 4096  # longer lines are cut (a binary blob is not worth showing)
MAX_OUTPUT_CHARS = 2_000_000  # what is kept for parsing and the record
GRACE_S = 2.0  # between SIGTERM and SIGKILL
READ_CHUNK = 65536
MAX_CAPTURE_BYTES = 16 << 20  # stdout kept of one waited-for command; beyond: truncated
MAX_STDERR_BYTES = 1 << 20
EXIT_GRACE_S = 0.5  # how long the pipes may stay open after the command exited
KILL_WAIT_S = 2.0  # the longest wait after a kill
POLL_S = 0.1
TRUNCATED_MARK = " …[line truncated]"


def minimal_env(search_path: str | None = None) -> dict[str, str]:
    """The whole environment of a command: ``search_path`` (directories tried before the
    fixed PATH: test fakes, a site's tools) and the C locale."""
    path = f"{search_path}:{SAFE_PATH}" if search_path else SAFE_PATH
    env = {"PATH": path, "LC_ALL": "C", "LANG": "C"}
    for keep in ("KUBECONFIG", "HOME"):
        if keep in os.environ:
            env[keep] = os.environ[keep]
    return env


@dataclass
class CommandResult:
    """What running a command gave. A streaming run merges stderr into ``stdout``."""

    argv: list[str]
    returncode: int | None = None
    stdout: str = ""
    stderr: str = ""
    duration_s: float = 0.0
    timed_out: bool = False
    cancelled: bool = False
    missing: bool = False  # the executable was not found
    denied: bool = False  # the executable could not be run (permission)
    error: str = ""
    truncated: bool = False  # output beyond the cap was dropped (and the command ended)
    left_running: int = 0  # processes it started that could not be killed
    lines: int = 0  # lines seen (streaming)
    pgid: int | None = field(default=None, repr=False)

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not (self.timed_out or self.cancelled)

    @property
    def output(self) -> str:
        """Everything it printed: stdout, then stderr (merged in arrival order when streamed)."""
        return self.stdout + self.stderr

    @property
    def status(self) -> str:
        """One word for people: ok, exit N, timed out, cancelled, not found, denied."""
        if self.missing:
            return "not found"
        if self.denied:
            return "permission denied"
        if self.cancelled:
            return "cancelled"
        if self.timed_out:
            return "timed out"
        if self.returncode is None:
            return "did not start"
        if self.returncode < 0:
            return f"killed by signal {-self.returncode}"
        return "ok" if self.returncode == 0 else f"exit {self.returncode}"


def run_command(
    argv: list[str],
    timeout_s: float,
    *,
    stdin: str | None = None,
    cancel: threading.Event | None = None,
    search_path: str | None = None,
    max_stdout: int = MAX_CAPTURE_BYTES,
    max_stderr: int = MAX_STDERR_BYTES,
) -> CommandResult:
    """Run ``argv`` (never through a shell) and wait for it, within bounds.

    * ``timeout_s`` (or ``cancel`` being set) ends it: ``timed_out`` (``cancelled``).
    * Output beyond ``max_stdout``/``max_stderr`` bytes ends it too: what came first is
      kept and ``truncated`` says so (a command that prints without end cannot fill
      memory).
    * However it ends, everything it started is killed: its process group, and
      descendants that left the group (``setsid``, daemons), found by the marker in
      their environment and re-parented to us as a child subreaper
      (:mod:`gpu_triage.io.proctree`). A descendant that keeps the pipes open after
      the command exited is killed after :data:`EXIT_GRACE_S`. Every wait after a kill
      is bounded; ``left_running`` counts processes that could not be killed (stuck in
      the kernel)."""
    start = time.monotonic()
    res = CommandResult(list(argv))
    if not argv or not argv[0]:
        res.error = res.stderr = "empty command"
        return res
    if cancel is not None and cancel.is_set():
        res.cancelled = True  # never start what has already been given up on
        return res
    token = secrets.token_hex(8)
    env = minimal_env(search_path)
    env[MARKER] = token
    become_subreaper()
    try:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            start_new_session=True,  # its own process group, so a kill reaches children
        )
    except FileNotFoundError:
        res.missing, res.stderr = True, f"{argv[0]}: command not found"
        return res
    except PermissionError as exc:
        res.denied, res.stderr = True, f"{argv[0]}: {exc}"
        return res
    except OSError as exc:
        res.error = res.stderr = f"{argv[0]}: {exc}"
        return res
    res.pgid = proc.pid
    out, err = bytearray(), bytearray()
    assert proc.stdout is not None and proc.stderr is not None
    streams = {proc.stdout.fileno(): (out, max_stdout), proc.stderr.fileno(): (err, max_stderr)}
    if stdin is not None and proc.stdin is not None:
        with contextlib.suppress(OSError):
            proc.stdin.write(stdin.encode())  # small inputs only: written before reading
        with contextlib.suppress(OSError):
            proc.stdin.close()
    deadline = start + max(timeout_s, 0.0)
    kill = False
    try:
        kill = _pump(proc, streams, deadline, cancel, res)
    finally:
        marker = f"{MARKER}={token}".encode()
        if kill or proc.poll() is None or children_with_marker(marker):
            res.left_running = kill_tree(proc.pid, marker, wait_s=KILL_WAIT_S)
        proc.stdout.close()
        proc.stderr.close()
        try:
            proc.wait(KILL_WAIT_S)
        except subprocess.TimeoutExpired:
            res.left_running = max(res.left_running, 1)
    res.returncode = proc.returncode
    res.stdout = out.decode("utf-8", errors="replace")
    res.stderr = err.decode("utf-8", errors="replace")
    res.duration_s = time.monotonic() - start
    return res


def _pump(
    proc: subprocess.Popen[bytes],
    streams: dict[int, tuple[bytearray, int]],
    deadline: float,
    cancel: threading.Event | None,
    res: CommandResult,
) -> bool:
    """Read both pipes until they close; True when the command must be killed."""
    exited_at: float | None = None
    with selectors.DefaultSelector() as sel:
        for fd in streams:
            sel.register(fd, selectors.EVENT_READ)
        while sel.get_map():
            now = time.monotonic()
            if cancel is not None and cancel.is_set():
                res.cancelled = True
                return True
            if now >= deadline:
                res.timed_out = True
                return True
            if exited_at is None and proc.poll() is not None:
                exited_at = now
            if exited_at is not None and now - exited_at >= EXIT_GRACE_S:
                return True  # it exited; something it started still holds the pipes
            for key, _ in sel.select(min(deadline - now, POLL_S)):
                fd = int(key.fd)
                try:
                    chunk = os.read(fd, READ_CHUNK)
                except OSError:
                    chunk = b""
                if not chunk:
                    sel.unregister(fd)
                    continue
                buf, cap = streams[fd]
                room = cap - len(buf)
                buf += chunk[: max(room, 0)]
                if len(chunk) > room:
                    res.truncated = True
                    return True
    return False


def kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the process group a command started in (it and anything it spawned)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()


class _Lines:
    """Split a byte stream into text lines, cutting over-long ones, keeping a bounded copy."""

    def __init__(self, on_line: Callable[[str], None], max_line: int, max_total: int) -> None:
        self.on_line, self.max_line, self.max_total = on_line, max_line, max_total
        self.pending = b""
        self.kept: list[str] = []
        self.kept_chars = 0
        self.count = 0
        self.truncated = False
        self._skipping = False  # inside an over-long line, already emitted

    def feed(self, data: bytes) -> None:
        self.pending += data
        while True:
            nl = self.pending.find(b"\n")
            if nl < 0:
                if len(self.pending) > self.max_line * 4 and not self._skipping:
                    self._emit(self.pending, cut=True)
                    self._skipping = True
                if self._skipping:
                    self.pending = b""
                return
            raw, self.pending = self.pending[:nl], self.pending[nl + 1 :]
            if self._skipping:
                self._skipping = False
                continue
            self._emit(raw)

    def close(self) -> None:
        if self.pending and not self._skipping:
            self._emit(self.pending)
        self.pending = b""

    def _emit(self, raw: bytes, cut: bool = False) -> None:
        line = raw.decode("utf-8", errors="replace").rstrip("\r")
        if len(line) > self.max_line:
            line, cut = line[: self.max_line], True
        if cut:
            line += TRUNCATED_MARK
        self.count += 1
        if self.kept_chars + len(line) + 1 <= self.max_total:
            self.kept.append(line)
            self.kept_chars += len(line) + 1
        else:
            self.truncated = True
        self.on_line(line)


async def run_streaming(
    argv: list[str],
    timeout_s: float,
    on_line: Callable[[str], None],
    *,
    cancel: asyncio.Event | None = None,
    env: dict[str, str] | None = None,
    max_line_chars: int = MAX_LINE_CHARS,
    max_output_chars: int = MAX_OUTPUT_CHARS,
    grace_s: float = GRACE_S,
) -> CommandResult:
    """Run ``argv``, calling ``on_line`` for each output line as it arrives.

    Returns when the command exits, times out (``timed_out``) or ``cancel`` is set
    (``cancelled``); in the last two cases its process group has been killed. If the
    awaiting task itself is cancelled, the group is killed and CancelledError propagates.
    ``on_line`` is called on the event loop's thread."""
    result = CommandResult(list(argv))
    start = time.monotonic()
    if not argv or not argv[0]:
        result.error = "empty command"
        return result
    token = secrets.token_hex(8)
    become_subreaper()
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            env={**(minimal_env() if env is None else env), MARKER: token},
            start_new_session=True,  # its own process group: killing it reaches children
        )
    except FileNotFoundError:
        result.missing, result.error = True, f"{argv[0]}: command not found"
        return result
    except PermissionError as exc:
        result.denied, result.error = True, f"{argv[0]}: {exc}"
        return result
    except OSError as exc:
        result.error = f"{argv[0]}: {exc}"
        return result
    result.pgid = proc.pid
    lines = _Lines(on_line, max_line_chars, max_output_chars)

    async def pump() -> None:
        assert proc.stdout is not None
        while data := await proc.stdout.read(READ_CHUNK):
            lines.feed(data)
        lines.close()
        await proc.wait()

    pump_task = asyncio.ensure_future(pump())
    waiters: set[asyncio.Future[Any]] = {pump_task}
    cancel_task: asyncio.Future[Any] | None = None
    if cancel is not None:
        cancel_task = asyncio.ensure_future(cancel.wait())
        waiters.add(cancel_task)
    try:
        done, _ = await asyncio.wait(waiters, timeout=timeout_s, return_when="FIRST_COMPLETED")
        if pump_task not in done:
            if cancel_task is not None and cancel_task in done:
                result.cancelled = True
            else:
                result.timed_out = True
    finally:
        if cancel_task is not None:
            cancel_task.cancel()
        if proc.returncode is None:
            await _terminate_group(proc, grace_s)
        marker = f"{MARKER}={token}".encode()
        if result.timed_out or result.cancelled or children_with_marker(marker):
            # descendants that left the group (setsid) carry the marker: none outlives it
            await asyncio.to_thread(kill_tree, proc.pid, marker, wait_s=KILL_WAIT_S)
        if not pump_task.done():
            # The pipe closes once every process holding it is gone; do not wait forever
            # on a grandchild that escaped the group.
            with contextlib.suppress(TimeoutError, asyncio.CancelledError):
                await asyncio.wait_for(pump_task, 1.0)
            pump_task.cancel()
        lines.close()
        result.duration_s = time.monotonic() - start
    result.returncode = proc.returncode
    result.stdout = "\n".join(lines.kept)
    result.truncated = lines.truncated
    result.lines = lines.count
    return result


async def _terminate_group(proc: asyncio.subprocess.Process, grace_s: float) -> None:
    """SIGTERM the process group, wait ``grace_s``, then SIGKILL it; reap the leader."""
    for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            pass
        except PermissionError:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(sig)
        try:
            await asyncio.wait_for(asyncio.shield(proc.wait()), wait)
        except TimeoutError:
            continue
        # The leader is gone; make sure nothing else of its group survives, and give
        # the kernel a moment to take the rest away.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        deadline = time.monotonic() + 1.0
        while group_alive(proc.pid) and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        return


def group_alive(pgid: int) -> bool:
    """Whether a live (not zombie) process of group ``pgid`` still exists.

    Zombies are ignored: once killed, a child orphaned by the group's leader waits for
    init to reap it, which in containers can take a while, but it runs nothing."""
    proc = "/proc"
    if not os.path.isdir(proc):
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    for entry in os.listdir(proc):
        if not entry.isdigit():
            continue
        try:
            with open(f"{proc}/{entry}/stat", "rb") as fh:
                stat = fh.read().decode(errors="replace")
        except OSError:
            continue
        # pid (comm) state ppid pgrp ...; comm may contain spaces and parentheses.
        fields = stat[stat.rfind(")") + 2 :].split()
        if len(fields) >= 3 and fields[2] == str(pgid) and fields[0] not in ("Z", "X"):
            return True
    return False
