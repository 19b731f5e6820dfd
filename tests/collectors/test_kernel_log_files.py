"""Kernel log files: what may be read, how much of it, and several files at once."""

from __future__ import annotations

import os
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from gpu_triage.collectors import base
from gpu_triage.collectors.base import CollectContext, CollectorUnavailable
from gpu_triage.collectors.kernel_log import KernelLogCollector
from gpu_triage.collectors.log_files import CHUNK, open_log, read_capped, window_start
from gpu_triage.io.commands import CommandResult
from gpu_triage.model.facts import Facts


def _iso(dt: datetime) -> str:
    return dt.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f+00:00")


def _log(end: datetime, hours: float, lines: int, xid_every: int = 100) -> str:
    """A journal-style log of ``lines`` lines up to ``end``, an Xid 13 every ``xid_every``."""
    step = hours * 3600 / lines
    out = []
    for i in range(lines):
        stamp = _iso(end - timedelta(seconds=(lines - 1 - i) * step))
        if i % xid_every == 0:
            out.append(f"{stamp} node kernel: NVRM: Xid (PCI:0000:41:00): 13, pid={i}, name=p, x")
        else:
            out.append(f"{stamp} node kernel: cni0: port 3(veth{i:08x}) entered forwarding state")
    return "\n".join(out) + "\n"


def _collect(ctx: CollectContext) -> Facts:
    facts = Facts()
    KernelLogCollector().collect(ctx, facts)
    return facts


@pytest.mark.parametrize("path", ["/dev/zero", "/dev/urandom", "/"])
def test_named_device_or_directory_is_refused(tmp_path: Path, path: str) -> None:
    ctx = CollectContext(root=tmp_path, kernel_log_file=Path(path))
    with pytest.raises(CollectorUnavailable, match="not a regular file or a FIFO"):
        _collect(ctx)


def test_named_symlink_to_a_device_is_refused(tmp_path: Path) -> None:
    link = tmp_path / "kern.log"
    link.symlink_to("/dev/zero")
    with pytest.raises(CollectorUnavailable, match=r"kern\.log is not a regular file"):
        _collect(CollectContext(root=tmp_path, kernel_log_file=link))


def test_named_fifo_is_read(tmp_path: Path) -> None:
    fifo = tmp_path / "dmesg.fifo"
    os.mkfifo(fifo)
    text = _log(datetime.now(UTC), 1, 300)

    def writer() -> None:
        with fifo.open("w") as fh:  # blocks until the collector opens the other end
            fh.write(text)

    t = threading.Thread(target=writer, daemon=True)
    t.start()
    # The collector runs in a thread of its own too: a FIFO read that blocks must fail
    # this test, never hang the suite.
    box: list[Facts] = []
    reader = threading.Thread(
        target=lambda: box.append(_collect(CollectContext(root=tmp_path, kernel_log_file=fifo))),
        daemon=True,
    )
    reader.start()
    reader.join(90)
    t.join(5)
    assert not reader.is_alive(), "the kernel-log collector blocked on the FIFO"
    assert box and [x.pid for x in box[0].xids] == [0, 100, 200]


def test_named_file_beyond_the_cap_reads_its_newest_part(tmp_path: Path) -> None:
    path = tmp_path / "big.log"
    path.write_text(_log(datetime.now(UTC), 10, 20_000))
    size = path.stat().st_size
    ctx = CollectContext(root=tmp_path, kernel_log_file=path, kernel_log_max_bytes=size // 4)
    facts = _collect(ctx)
    pids = [x.pid for x in facts.xids]
    # the newest quarter of the file: the last ~50 of 200 Xids, none of the first ones
    assert pids and pids[-1] == 19_900 and 40 <= len(pids) <= 51 and min(pids) > 14_000
    assert all("(last " in x.source and "MiB read: the read limit)" in x.source for x in facts.xids)
    [raw] = ctx.raw
    assert raw.truncated and raw.source.startswith(str(path))
    # whole lines only: the cut line is not parsed as a fragment
    assert all(x.raw.count(" kernel: ") == 1 for x in facts.xids)


def test_named_file_within_the_cap_is_read_whole(tmp_path: Path) -> None:
    path = tmp_path / "small.log"
    path.write_text(_log(datetime.now(UTC) - timedelta(days=30), 10, 2_000))
    ctx = CollectContext(root=tmp_path, kernel_log_file=path, since_s=60)
    facts = _collect(ctx)
    assert len(facts.xids) == 20  # all of them, however old: the incident named
    assert [r.truncated for r in ctx.raw] == [False]
    assert {x.source for x in facts.xids} == {str(path)}


def test_two_named_files_merge_by_time(tmp_path: Path) -> None:
    now = datetime.now(UTC)
    a, b = tmp_path / "a.log", tmp_path / "b.log"
    a.write_text(
        f"{_iso(now - timedelta(minutes=30))} n kernel: NVRM: Xid (PCI:0000:41:00): 13, one\n"
        f"{_iso(now - timedelta(minutes=10))} n kernel: NVRM: Xid (PCI:0000:41:00): 31, three\n"
    )
    b.write_text(
        f"{_iso(now - timedelta(minutes=20))} n kernel: NVRM: Xid (PCI:0000:41:00): 43, two\n"
        f"{_iso(now - timedelta(minutes=10))} n kernel: NVRM: Xid (PCI:0000:41:00): 31, three\n"
    )
    facts = _collect(CollectContext(root=tmp_path, kernel_log_file=[a, b]))
    # interleaved, not the last file's: the line both hold once
    assert [x.code for x in facts.xids] == [13, 43, 31]


def _no_commands(monkeypatch: pytest.MonkeyPatch) -> None:
    def missing(argv: list[str], timeout_s: float, **_: Any) -> CommandResult:
        return CommandResult(argv, None, "", f"{argv[0]}: command not found", 0.0, missing=True)

    monkeypatch.setattr(base, "run_command", missing)


def test_live_syslog_file_is_read_back_to_the_window_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _no_commands(monkeypatch)
    (tmp_path / "var" / "log").mkdir(parents=True)
    path = tmp_path / "var" / "log" / "kern.log"
    path.write_text(_log(datetime.now(UTC), 48, 60_000))
    ctx = CollectContext(root=tmp_path, since_s=3600)
    facts = _collect(ctx)
    # the last hour of 48: 1/48 of 600 Xids, read from a chunk boundary before the window
    assert 11 <= len(facts.xids) <= 13
    assert all(x.age_s is not None and x.age_s <= 3600 for x in facts.xids)
    [raw] = ctx.raw
    assert len(raw.text) < path.stat().st_size / 2  # not the whole file
    assert len(raw.text) <= path.stat().st_size / 48 + 2 * CHUNK


def test_window_start_walks_back_in_chunks(tmp_path: Path) -> None:
    now = datetime.now(UTC)
    path = tmp_path / "k.log"
    path.write_text(_log(now, 10, 100_000))
    fd, st = open_log(path)
    try:

        def stamp_of(line: str) -> datetime | None:
            try:
                return datetime.fromisoformat(line.split(" ", 1)[0])
            except ValueError:
                return None

        start = window_start(fd, st.st_size, now - timedelta(hours=1), stamp_of)
        assert (st.st_size - start) % CHUNK == 0 or start == 0
        assert st.st_size * 0.85 < start < st.st_size * 0.9 + 1
        chunks, span = read_capped(fd, st, start=start)
        text = b"".join(chunks).decode()
        first = datetime.fromisoformat(text.split(" ", 1)[0])
        assert first < now - timedelta(hours=1) and span.read == st.st_size - start
        assert not span.truncated
    finally:
        os.close(fd)


def test_fifo_whose_writer_already_wrote_and_left_is_read_not_waited_on(tmp_path: Path) -> None:
    """The writer came, wrote everything and closed before the collector looked (our own
    reader kept the pipe's data alive): reopening the FIFO to block for a writer waited
    forever; the data must be read and the call must end."""
    fifo = tmp_path / "dmesg.fifo"
    os.mkfifo(fifo)
    keep = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        with fifo.open("w") as fh:
            fh.write(_log(datetime.now(UTC), 1, 300))
        box: list[Facts] = []
        t = threading.Thread(
            target=lambda: box.append(
                _collect(CollectContext(root=tmp_path, kernel_log_file=fifo))
            ),
            daemon=True,
        )
        t.start()
        t.join(20)
        assert not t.is_alive(), "the collector blocked on a FIFO with no writer left"
    finally:
        os.close(keep)
    assert box and [x.pid for x in box[0].xids] == [0, 100, 200]
