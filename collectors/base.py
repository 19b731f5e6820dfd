"""What every collector shares: the protocol, the context it runs in, and command running.

A collector reads one source (NVML, the kernel log, /proc and /sys, kubectl ...)
and fills part of a :class:`~gpu_triage.model.facts.Facts`. It never raises past the
runner: a missing source is :class:`CollectorUnavailable`, anything else is
recorded as a failure of that collector alone.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from gpu_triage.model.facts import Facts
from gpu_triage.model.snapshot import RawOutput

# Commands run with a minimal, predictable environment: a fixed PATH and the C locale
# so outputs parse the same everywhere.
SAFE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
MAX_RAW_CHARS = 2_000_000


def minimal_env() -> dict[str, str]:
    env = {"PATH": SAFE_PATH, "LC_ALL": "C", "LANG": "C"}
    for keep in ("KUBECONFIG", "HOME"):
        if keep in os.environ:
            env[keep] = os.environ[keep]
    return env


class CollectorUnavailable(Exception):
    """The source this collector reads does not exist here (no driver, no kubectl ...)."""


@dataclass
class CommandResult:
    argv: list[str]
    returncode: int | None
    stdout: str
    stderr: str
    duration_s: float
    timed_out: bool = False
    missing: bool = False  # the executable was not found
    denied: bool = False  # the executable could not be run (permission)

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out


def run_command(argv: list[str], timeout_s: float, *, stdin: str | None = None) -> CommandResult:
    """Run ``argv`` (never through a shell) with a timeout; kill its process group on expiry."""
    start = time.monotonic()
    try:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=minimal_env(),
            start_new_session=True,  # its own process group, so a timeout kills children too
        )
    except FileNotFoundError:
        return CommandResult(argv, None, "", f"{argv[0]}: command not found", 0.0, missing=True)
    except PermissionError as exc:
        return CommandResult(argv, None, "", f"{argv[0]}: {exc}", 0.0, denied=True)
    try:
        out, err = proc.communicate(stdin.encode() if stdin is not None else None, timeout_s)
        timed_out = False
    except subprocess.TimeoutExpired:
        kill_group(proc)
        out, err = proc.communicate()
        timed_out = True
    return CommandResult(
        argv,
        proc.returncode,
        out.decode("utf-8", errors="replace"),
        err.decode("utf-8", errors="replace"),
        time.monotonic() - start,
        timed_out=timed_out,
    )


def kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the process group a command started in (it and anything it spawned)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()


@dataclass
class CollectContext:
    """What a collector gets: where the filesystem is, how long to sample, where raw output goes."""

    root: Path = Path("/")
    window_s: float = 1.0
    command_timeout_s: float = 10.0
    kernel_log_file: Path | None = None  # read this file instead of journalctl/dmesg
    since_s: float = 2 * 3600.0  # how far back to read the kernel log
    raw: list[RawOutput] = field(default_factory=list)

    def path(self, *parts: str) -> Path:
        """A path under the root, e.g. ``ctx.path('proc', 'stat')``."""
        return self.root.joinpath(*parts)

    def keep_raw(self, collector: str, source: str, text: str) -> None:
        truncated = len(text) > MAX_RAW_CHARS
        self.raw.append(
            RawOutput(
                collector=collector, source=source, text=text[:MAX_RAW_CHARS], truncated=truncated
            )
        )

    def run(self, collector: str, argv: list[str], timeout_s: float | None = None) -> CommandResult:
        """Run a command and keep its output as raw evidence."""
        res = run_command(argv, timeout_s or self.command_timeout_s)
        if not res.missing:
            self.keep_raw(collector, " ".join(argv), res.stdout)
        return res


class Collector(Protocol):
    name: str
    kinds: tuple[str, ...]  # fact kinds (catalogue names) it produces

    def collect(self, ctx: CollectContext, facts: Facts) -> None:
        """Fill ``facts``, an empty Facts of its own (the runner merges the parts named in
        ``kinds``); raise CollectorUnavailable when the source is absent."""
        ...
