"""Kernel log collector: Xid, SXid, AER, bus loss, OOM kills, NVLink errors, PCIe limits.

Sources, first that answers wins: the files in ``ctx.kernel_log_file`` (each read whole up
to ``ctx.kernel_log_max_bytes``, its newest part beyond; several merge by time);
``journalctl -k --since`` (its newest :data:`JOURNAL_MAX_LINES` entries, a cut recorded);
``dmesg --time-format iso`` (plain ``dmesg`` with the boot time from /proc/uptime on old
util-linux); ``/dev/kmsg`` read non-blocking; the tail of /var/log/kern.log (or messages,
syslog), read backwards to the window's start. Commands' output is capped by the runner
(gpu_triage.io.commands), and a cut output is recorded as truncated. Only named files are
kept whole; the live sources are cut to the window (``ctx.since_s``).
"""

from __future__ import annotations

import errno
import os
import re
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from gpu_triage.collectors.base import MAX_RAW_CHARS, CollectContext, CollectorUnavailable
from gpu_triage.collectors.log_files import LogFileError, open_log, read_capped, window_start
from gpu_triage.collectors.merge import combine_facts, merge_fields
from gpu_triage.collectors.parsers.error_text import KernelLineSieve, scan_kernel_log_errors
from gpu_triage.collectors.parsers.kernel_log import (
    KernelLog,
    KernelLogParser,
    parse_kernel_log,
)
from gpu_triage.collectors.parsers.kernel_timestamps import LineSplitter
from gpu_triage.io.commands import CommandResult
from gpu_triage.model.facts import Facts, KernelEvent

# Words in a tool's error output that mean "you may not read this", not "absent".
_DENIED = re.compile(
    r"(?i)operation not permitted|permission denied|insufficient permissions|"
    r"not seeing messages|access denied|EPERM"
)
_NO_JOURNAL = re.compile(r"(?i)no journal files were (?:found|opened)|failed to open journal")
_KMSG_MAX_RECORDS = 500_000  # the ring buffer holds far fewer; a guard against a stuck reader
# Events that state how the node is since boot, not something that happened in the window:
# a link that trained narrow at boot is still narrow now.
_STANDING = frozenset({"pcie_limits"})
# The newest entries of the window journalctl is asked for. A storm can log more than the
# runner keeps of one command's output (its first 16 MiB: the oldest lines); with a line
# limit the cut falls on the oldest lines instead, and is recorded (~13 MB of journal).
JOURNAL_MAX_LINES = 100_000
# Log files a node without journal access keeps the kernel log in, first that exists wins.
_SYSLOG_FILES = ("kern.log", "messages", "syslog")


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
    kinds: tuple[str, ...] = (
        "xid",
        "sxid",
        "aer",
        "bus_loss",
        "oom",
        "nvlink_error",
        "pcie_limit",
        "error",
        "driver",
    )

    def __init__(self) -> None:
        self._texts: list[tuple[str, str]] = []  # what was parsed, for the driver lines

    def _parse(self, text: str, *, source: str, **kw: Any) -> KernelLog:
        sieve = KernelLineSieve()  # the driver's lines only: the scan stays small
        sieve.feed(text)
        self._texts.append((sieve.text(), source))
        return parse_kernel_log(text, source=source, **kw)

    def collect(self, ctx: CollectContext, facts: Facts) -> None:
        now = datetime.now().astimezone()
        self._texts = []
        log = self.read(ctx, now)
        for text, source in self._texts:
            # NVRM driver-state lines (API mismatch, probe failures, module loads) as
            # error facts, as they are when pasted
            events, driver = scan_kernel_log_errors(text, source)
            facts.errors.extend(events)
            if driver is not None:
                if facts.driver is None:
                    facts.driver = driver
                else:
                    merge_fields(facts.driver, driver)
        self._texts = []
        # A file the user named is read whole: it is the incident they want examined,
        # however old. The live log is cut to the window.
        since = float("inf") if _named_files(ctx) else ctx.since_s
        for name in log.event_lists():
            events = getattr(log, name)
            if name not in _STANDING:
                events = [ev for ev in events if self._in_window(ev, since)]
            getattr(facts, name).extend(events)

    @staticmethod
    def _in_window(ev: KernelEvent, since_s: float) -> bool:
        # an event of unknown time is kept: dropping it could hide the cause
        return ev.age_s is None or ev.age_s <= since_s

    # ------------------------------------------------------------------ sources

    def read(self, ctx: CollectContext, now: datetime) -> KernelLog:
        """The parsed kernel log from the first source that answers."""
        files = _named_files(ctx)
        if files:
            logs = [self._from_file(ctx, path, now) for path in files]
            if len(logs) == 1:
                return logs[0]
            # several logs of one node: interleaved by time, lines held by both once
            merged = combine_facts([_as_facts(log) for log in logs])
            out = KernelLog(lines_read=sum(log.lines_read for log in logs))
            for name in out.event_lists():
                setattr(out, name, getattr(merged, name))
            return out
        denied: list[str] = []
        empty_journal: tuple[str, str] | None = None

        since = max(1, int(ctx.since_s))
        argv = ["journalctl", "-k", "--no-pager", "-o", "short-iso", f"--since=-{since}s"]
        argv.append(f"--lines={JOURNAL_MAX_LINES}")
        res = ctx.run(self.name, argv)
        if self._usable(res, denied):
            if _log_lines(res.stdout):
                if res.stdout.count("\n") >= JOURNAL_MAX_LINES:
                    _mark_cut(ctx, self.name)  # the window held more: its oldest are not read
                return self._parse(res.stdout, source=" ".join(argv), now=now)
            empty_journal = (res.stdout, " ".join(argv))  # may hold no kernel messages

        res = ctx.run(self.name, ["dmesg", "--time-format", "iso"])
        if self._usable(res, denied):
            return self._parse(res.stdout, source="dmesg --time-format iso", now=now)
        if not res.missing and not _DENIED.search(res.stderr):
            # util-linux too old for --time-format: plain seconds since boot
            res = ctx.run(self.name, ["dmesg"])
            if self._usable(res, denied):
                return self._parse(
                    res.stdout, source="dmesg", boot_time=self._boot_time(ctx, now), now=now
                )

        log = self._from_kmsg(ctx, now, denied)
        if log is not None:
            return log
        log = self._from_syslog_file(ctx, now, denied)
        if log is not None:
            return log
        if empty_journal is not None:
            return self._parse(empty_journal[0], source=empty_journal[1], now=now)
        if stuck := ctx.timed_out_commands():
            # a source that exists but did not answer is a failure, not "not present"
            raise KernelLogUnanswered(f"no kernel log: timed out: {'; '.join(stuck)}")
        if denied:
            raise CollectorUnavailable("no permission to read the kernel log: " + "; ".join(denied))
        raise CollectorUnavailable(
            "no kernel log source: no journalctl, dmesg, /dev/kmsg or /var/log/kern.log"
        )

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

    def _from_file(
        self, ctx: CollectContext, path: Path, now: datetime, start: datetime | None = None
    ) -> KernelLog:
        """``path`` read in chunks, at most ``ctx.kernel_log_max_bytes`` of it (its newest
        part), from the line logged at ``start`` on when given; a cut read is recorded."""
        try:
            fd, st = open_log(path)
        except LogFileError as exc:
            raise CollectorUnavailable(str(exc)) from exc
        cap = ctx.kernel_log_max_bytes
        parser = KernelLogParser(str(path), now=now)
        sieve = KernelLineSieve()
        raw: list[str] = []
        kept = 0
        try:
            offset = None
            if start is not None and st.st_size > 0:
                offset = window_start(fd, st.st_size, start, _stamp_reader(now), cap)
            chunks, span = read_capped(fd, st, cap, offset)
            for chunk in chunks:
                text = chunk.decode("utf-8", errors="replace")
                if kept < MAX_RAW_CHARS:
                    raw.append(text[: MAX_RAW_CHARS - kept])
                    kept += len(raw[-1])
                parser.feed(text)
                sieve.feed(text)
        except OSError as exc:
            raise CollectorUnavailable(f"cannot read kernel log file {path}: {exc}") from exc
        finally:
            os.close(fd)
        log = parser.finish()
        source = span.describe(path)
        if source != str(path):
            for name in log.event_lists():
                for ev in getattr(log, name):
                    ev.source = source
        cut = span.truncated or kept >= MAX_RAW_CHARS
        ctx.keep_raw(self.name, source, "".join(raw), truncated=cut)
        self._texts.append((sieve.text(), source))
        return log

    def _from_syslog_file(
        self, ctx: CollectContext, now: datetime, denied: list[str]
    ) -> KernelLog | None:
        """The window of the first syslog file that exists, read backwards to its start."""
        for name in _SYSLOG_FILES:
            path = ctx.path("var", "log", name)
            if not path.exists():
                continue
            try:
                return self._from_file(ctx, path, now, now - timedelta(seconds=ctx.since_s))
            except CollectorUnavailable as exc:
                denied.append(str(exc))
        return None

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
        return self._parse(text, source=str(path), boot_time=self._boot_time(ctx, now), now=now)


def _mark_cut(ctx: CollectContext, collector: str) -> None:
    """Record that the raw output the collector just read is not all there was."""
    for raw in reversed(ctx.raw):
        if raw.collector == collector:
            raw.truncated = True
            return


def _named_files(ctx: CollectContext) -> list[Path]:
    named = ctx.kernel_log_file
    if named is None:
        return []
    if isinstance(named, str | Path):
        return [Path(named)]
    return [Path(p) for p in named]


def _as_facts(log: KernelLog) -> Facts:
    return Facts(**{name: getattr(log, name) for name in log.event_lists()})


def _stamp_reader(now: datetime) -> Callable[[str], datetime | None]:
    """Dates one line (the absolute stamp forms; None for seconds-since-boot)."""

    splitter = LineSplitter(None, now)

    def stamp_of(line: str) -> datetime | None:
        ln = splitter.line(0, line)
        return None if ln is None else ln.time

    return stamp_of
