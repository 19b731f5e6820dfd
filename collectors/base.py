"""What every collector shares: the protocol and the context it runs in.

A collector reads one source (NVML, the kernel log, /proc and /sys, kubectl ...)
and fills part of a :class:`~gpu_triage.model.facts.Facts`. It never raises past the
runner: a missing source is :class:`CollectorUnavailable`, anything else is
recorded as a failure of that collector alone.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from gpu_triage.io.commands import CommandResult, run_command
from gpu_triage.model.facts import Facts
from gpu_triage.model.snapshot import RawOutput

MAX_RAW_CHARS = 2_000_000


class CollectorUnavailable(Exception):
    """The source this collector reads does not exist here (no driver, no kubectl ...)."""


@dataclass
class CollectContext:
    """What a collector gets: where the filesystem is, how long to sample, where raw output goes."""

    root: Path = Path("/")
    window_s: float = 1.0
    command_timeout_s: float = 10.0
    # read these files (merged by time) instead of journalctl/dmesg
    kernel_log_file: Path | Sequence[Path] | None = None
    kernel_log_max_bytes: int = 32 << 20  # of a file, its newest part (see log_files)
    since_s: float = 2 * 3600.0  # how far back to read the kernel log
    raw: list[RawOutput] = field(default_factory=list)
    # Directories searched for commands before the fixed PATH (fakes in tests, a site's
    # tools); None: the fixed PATH alone.
    search_path: str | None = None
    # Set by the runner when it gives up on the collector (its deadline passed, or the
    # run is stopping): the command running is killed at once.
    cancel: threading.Event = field(default_factory=threading.Event)
    deadline: float | None = None  # time.monotonic() by which the collector must be done
    unanswered: list[str] = field(default_factory=list)  # commands that timed out here
    in_command: int = 0  # commands running now (the runner waits for their kill)

    def timed_out_commands(self) -> list[str]:
        """Commands that existed but did not answer in time (a failure, not an absence)."""
        return list(self.unanswered)

    def path(self, *parts: str) -> Path:
        """A path under the root, e.g. ``ctx.path('proc', 'stat')``."""
        return self.root.joinpath(*parts)

    def keep_raw(self, collector: str, source: str, text: str, *, truncated: bool = False) -> None:
        truncated = truncated or len(text) > MAX_RAW_CHARS
        self.raw.append(
            RawOutput(
                collector=collector, source=source, text=text[:MAX_RAW_CHARS], truncated=truncated
            )
        )

    def run(self, collector: str, argv: list[str], timeout_s: float | None = None) -> CommandResult:
        """Run a command and keep its output as raw evidence. It ends by the collector's
        deadline at the latest, and at once when the runner cancels the collector."""
        timeout = timeout_s or self.command_timeout_s
        if self.deadline is not None:
            timeout = min(timeout, max(self.deadline - time.monotonic(), 0.0))
        self.in_command += 1
        try:
            res = run_command(argv, timeout, cancel=self.cancel, search_path=self.search_path)
        finally:
            self.in_command -= 1
        if res.timed_out or res.cancelled:
            self.unanswered.append(" ".join(argv))
        if not res.missing:
            self.keep_raw(collector, " ".join(argv), res.stdout, truncated=res.truncated)
        return res


class Collector(Protocol):
    name: str
    kinds: tuple[str, ...]  # fact kinds (catalogue names) it produces

    def collect(self, ctx: CollectContext, facts: Facts) -> None:
        """Fill ``facts``, an empty Facts of its own (the runner merges the parts named in
        ``kinds``); raise CollectorUnavailable when the source is absent."""
        ...
