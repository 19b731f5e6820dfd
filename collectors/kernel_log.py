"""Kernel log collector: Xid, SXid, AER, bus loss, OOM kills and NVLink errors.

Sources, first that answers wins: ``ctx.kernel_log_file``; ``journalctl -k``;
``dmesg --time-format iso`` (plain ``dmesg`` with the boot time from
/proc/uptime on old util-linux); ``/dev/kmsg`` read non-blocking.
"""

from __future__ import annotations

import errno
import os
import re
from datetime import datetime, timedelta
from pathlib import Path

from gpu_triage.collectors.base import CollectContext, CollectorUnavailable
from gpu_triage.collectors.parsers.kernel_log import KernelLog, parse_kernel_log
from gpu_triage.io.commands import CommandResult
from gpu_triage.model.facts import Facts, KernelEvent

# Words in a tool's error output that mean "you may not read this", not "absent".
_DENIED = re.compile(
    r"(?i)operation not permitted|permission denied|insufficient permissions|"
    r"not seeing messages|access denied|EPERM"
)
_NO_JOURNAL = re.compile(r"(?i)no journal files were (?:found|opened)|failed to open journal")
_KMSG_MAX_RECORDS = 500_000  # the ring buffer holds far fewer; a guard against a stuck reader


def _log_lines(text: str) -> bool:
    """Whether a journalctl answer holds any log line (not only '-- No entries --')."""
    return any(
        line.strip() and not line.startswith(("-- ", "Hint:", "No journal files"))
        for line in text.splitlines()
    )


class KernelLogUnanswered(RuntimeError):
    """A kernel log source exists but did not answer in time, and no other did."""


class KernelLogCollector:
    """Reads the kernel log of the last ``ctx.since_s`` seconds and extracts its events."""

    name = "kernel_log"
    kinds: tuple[str, ...] = ("xid", "sxid", "aer", "bus_loss", "oom", "nvlink_error")

    def collect(self, ctx: CollectContext, facts: Facts) -> None:
        now = datetime.now().astimezone()
        log = self.read(ctx, now)
        keep = [*log.xids, *log.sxids, *log.aers, *log.bus_losses, *log.ooms, *log.nvlink_errors]
        # A file the user named is read whole: it is the incident they want examined,
        # however old. The live log is cut to the window.
        since = float("inf") if ctx.kernel_log_file is not None else ctx.since_s
        kept = {id(ev) for ev in keep if self._in_window(ev, since)}
        facts.xids.extend(ev for ev in log.xids if id(ev) in kept)
        facts.sxids.extend(ev for ev in log.sxids if id(ev) in kept)
        facts.aers.extend(ev for ev in log.aers if id(ev) in kept)
        facts.bus_losses.extend(ev for ev in log.bus_losses if id(ev) in kept)
        facts.ooms.extend(ev for ev in log.ooms if id(ev) in kept)
        facts.nvlink_errors.extend(ev for ev in log.nvlink_errors if id(ev) in kept)

    @staticmethod
    def _in_window(ev: KernelEvent, since_s: float) -> bool:
        # an event of unknown time is kept: dropping it could hide the cause
        return ev.age_s is None or ev.age_s <= since_s

    # ------------------------------------------------------------------ sources

    def read(self, ctx: CollectContext, now: datetime) -> KernelLog:
        """The parsed kernel log from the first source that answers."""
        if ctx.kernel_log_file is not None:
            return self._from_file(ctx, Path(ctx.kernel_log_file), now)
        denied: list[str] = []
        empty_journal: tuple[str, str] | None = None

        since = max(1, int(ctx.since_s))
        argv = ["journalctl", "-k", "--no-pager", "-o", "short-iso", f"--since=-{since}s"]
        res = ctx.run(self.name, argv)
        if self._usable(res, denied):
            if _log_lines(res.stdout):
                return parse_kernel_log(res.stdout, source=" ".join(argv), now=now)
            empty_journal = (res.stdout, " ".join(argv))  # may hold no kernel messages

        res = ctx.run(self.name, ["dmesg", "--time-format", "iso"])
        if self._usable(res, denied):
            return parse_kernel_log(res.stdout, source="dmesg --time-format iso", now=now)
        if not res.missing and not _DENIED.search(res.stderr):
            # util-linux too old for --time-format: plain seconds since boot
            res = ctx.run(self.name, ["dmesg"])
            if self._usable(res, denied):
                return parse_kernel_log(
                    res.stdout, source="dmesg", boot_time=self._boot_time(ctx, now), now=now
                )

        log = self._from_kmsg(ctx, now, denied)
        if log is not None:
            return log
        if empty_journal is not None:
            return parse_kernel_log(empty_journal[0], source=empty_journal[1], now=now)
        if stuck := ctx.timed_out_commands():
            # a source that exists but did not answer is a failure, not "not present"
            raise KernelLogUnanswered(f"no kernel log: timed out: {'; '.join(stuck)}")
        if denied:
            raise CollectorUnavailable("no permission to read the kernel log: " + "; ".join(denied))
        raise CollectorUnavailable("no kernel log source: no journalctl, dmesg or /dev/kmsg")

    @staticmethod
    def _usable(res: CommandResult, denied: list[str]) -> bool:
        """A command answered with a log; records why not when it was refused."""
        if res.missing or res.timed_out:
            return False
        said = (res.stderr + "\n" + res.stdout).strip()
        if res.denied or (_DENIED.search(said) and not _log_lines(res.stdout)):
            denied.append(f"{' '.join(res.argv)}: {said.splitlines()[0] if said else 'denied'}")
            return False
        if _NO_JOURNAL.search(said) and not _log_lines(res.stdout):
            return False
        return res.ok

    def _from_file(self, ctx: CollectContext, path: Path, now: datetime) -> KernelLog:
        try:
            data = path.read_bytes()
        except PermissionError as exc:
            raise CollectorUnavailable(f"no permission to read the kernel log: {exc}") from exc
        except OSError as exc:
            raise CollectorUnavailable(f"cannot read kernel log file {path}: {exc}") from exc
        text = data.decode("utf-8", errors="replace")
        ctx.keep_raw(self.name, str(path), text)
        return parse_kernel_log(text, source=str(path), now=now)

    @staticmethod
    def _boot_time(ctx: CollectContext, now: datetime) -> datetime | None:
        try:
            uptime = float(ctx.path("proc", "uptime").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None
        return now - timedelta(seconds=uptime)

    def _from_kmsg(self, ctx: CollectContext, now: datetime, denied: list[str]) -> KernelLog | None:
        path = ctx.path("dev", "kmsg")
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        except PermissionError as exc:
            denied.append(f"{path}: {exc.strerror}")
            return None
        except OSError:
            return None
        records: list[str] = []
        try:
            while len(records) < _KMSG_MAX_RECORDS:
                try:
                    chunk = os.read(fd, 8192)  # one record per read
                except BlockingIOError:
                    break  # no more records: the buffer is drained
                except OSError as exc:
                    if exc.errno == errno.EPIPE:
                        continue  # records were overwritten while reading; go on
                    if exc.errno in (errno.EPERM, errno.EACCES):
                        denied.append(f"{path}: {exc.strerror}")
                        return None
                    break
                if not chunk:
                    break
                records.append(chunk.decode("utf-8", errors="replace").rstrip("\n"))
        finally:
            os.close(fd)
        # continuation lines of a record (" KEY=value") are metadata, not messages
        text = "\n".join(
            line for r in records for line in r.split("\n") if line and not line[0].isspace()
        )
        ctx.keep_raw(self.name, str(path), text)
        return parse_kernel_log(
            text, source=str(path), boot_time=self._boot_time(ctx, now), now=now
        )
