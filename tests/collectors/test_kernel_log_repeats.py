"""Repeated identical lines: the parser memoises what a message says (its stamp split,
the Xid fields, the device it names) and builds the events of identical Xid lines as
copies of one validated model. Every event must still be exactly what parsing that line
alone gives: its own line number, stamp, age, raw line and mutable fields."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from gpu_triage.collectors.parsers import kernel_log, kernel_timestamps
from gpu_triage.collectors.parsers.kernel_log import KernelLogParser, parse_kernel_log
from gpu_triage.collectors.parsers.kernel_timestamps import LineSplitter
from gpu_triage.model.facts import UnavailableReason, XidEvent

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
MSG = "NVRM: Xid (PCI:0000:41:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."
MSG13 = (
    "NVRM: Xid (PCI:0000:3b:00): 13, pid=2231, name=python3, Graphics SM Warp Exception on "
    "(GPC 1, TPC 0, SM 0): Out Of Range Address"
)


def _journal(n: int, msg: str, start: datetime, step_s: float = 3.0) -> str:
    return "".join(
        f"{(start + timedelta(seconds=i * step_s)).isoformat()} gpu-node-07 kernel: {msg}\n"
        for i in range(n)
    )


def _alone(line: str, no: int) -> XidEvent:
    """The Xid of ``line`` parsed on its own, renumbered as line ``no``."""
    (xid,) = parse_kernel_log(line + "\n", now=NOW).xids
    return xid.model_copy(update={"line": no})


@pytest.mark.parametrize("msg", [MSG, MSG13])
def test_identical_lines_each_keep_their_own_line_stamp_and_raw(msg: str) -> None:
    start = NOW - timedelta(hours=1)
    text = _journal(300, msg, start)
    log = parse_kernel_log(text, now=NOW)
    assert [x.line for x in log.xids] == list(range(1, 301))
    lines = text.splitlines()
    for i in (0, 1, 150, 299):
        assert log.xids[i] == _alone(lines[i], i + 1)
        assert log.xids[i].time == start + timedelta(seconds=3 * i)
        assert log.xids[i].age_s == pytest.approx(3600 - 3 * i)
        assert log.xids[i].raw == lines[i]
        assert log.xids[i].model_fields_set == _alone(lines[i], i + 1).model_fields_set


def test_copies_do_not_share_mutable_fields_and_still_validate() -> None:
    log = parse_kernel_log(_journal(3, MSG13, NOW - timedelta(minutes=5)), now=NOW)
    a, b, c = log.xids
    a.mark_unavailable("pid", UnavailableReason.NOT_SUPPORTED)
    assert "pid" in a.unavailable and not b.unavailable and not c.unavailable
    b.gpu_index = 3
    assert (a.gpu_index, b.gpu_index) == (None, 3)
    with pytest.raises(ValueError):
        c.code = "not a number"  # type: ignore[assignment]  # the copy keeps validating
    assert XidEvent.model_validate(a.model_dump()) == a


def test_storm_with_interleaved_other_lines_keeps_counts_and_order() -> None:
    start = NOW - timedelta(minutes=30)
    parts = []
    for i in range(200):
        t = (start + timedelta(seconds=i)).isoformat()
        parts.append(f"{t} gpu-node-07 kernel: {MSG13 if i % 2 else MSG}\n")
        if i % 7 == 0:
            parts.append(f"{t} gpu-node-07 kernel: eth0: link up, 100Gbps\n")
    text = "".join(parts)
    log = parse_kernel_log(text, now=NOW)
    assert len(log.xids) == 200
    assert [x.code for x in log.xids] == [79 if i % 2 == 0 else 13 for i in range(200)]
    numbered = dict(enumerate(text.splitlines(), 1))
    assert all(numbered[x.line] == x.raw for x in log.xids)
    # the Xid 79s are one ongoing bus loss per minute window, each line counted in it
    assert sum(b.raw.count("\n") + 1 for b in log.bus_losses) >= 100


def test_memos_stay_bounded_and_exact_past_their_size(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kernel_timestamps, "MEMO_SIZE", 8)
    monkeypatch.setattr(kernel_log, "MEMO_SIZE", 8)
    start = NOW - timedelta(minutes=10)
    lines = [
        f"{(start + timedelta(seconds=i)).isoformat()} node kernel: "
        f"NVRM: Xid (PCI:0000:{i % 20:02x}:00): 31, pid={1000 + i % 20}, name=job, MMU Fault"
        for i in range(100)
    ]
    parser = KernelLogParser(now=NOW)
    parser.feed("\n".join(lines) + "\n")
    log = parser.finish()
    assert len(parser.xid_memo) <= 8 and len(parser.driver_memo) <= 8
    assert len(parser._splitter._memo) <= 8
    for i, x in enumerate(log.xids):
        assert (x.line, x.pid, x.pci_bus_id) == (i + 1, 1000 + i % 20, f"0000:{i % 20:02x}:00.0")


def test_splitter_memo_keeps_inner_dmesg_stamp_per_line() -> None:
    """A syslog line keeping the dmesg seconds inside the message: same text after the
    syslog stamp only when the seconds match, and the host prefix is not stripped twice."""
    sp = LineSplitter(year=2026)
    a = sp.line(1, "Nov 30 10:00:00 node kernel: [  100.5] NVRM: Xid (PCI:0000:01:00): 79, x")
    b = sp.line(2, "Nov 30 10:00:01 node kernel: [  101.5] NVRM: Xid (PCI:0000:01:00): 79, x")
    c = sp.line(3, "Nov 30 10:00:02 node kernel: [  101.5] NVRM: Xid (PCI:0000:01:00): 79, x")
    assert a is not None and b is not None and c is not None
    assert (a.monotonic_s, b.monotonic_s, c.monotonic_s) == (100.5, 101.5, 101.5)
    assert a.text == b.text == c.text == "NVRM: Xid (PCI:0000:01:00): 79, x"
    # the same message after an ISO stamp with a host: the host is stripped there too
    d = sp.line(4, "2026-11-30T10:00:03+00:00 node kernel: NVRM: Xid (PCI:0000:01:00): 79, x")
    assert d is not None and d.text == a.text and d.time_text == "2026-11-30T10:00:03+00:00"
    # a short-full journal line names the host in its own pattern: "kernel:" stays text
    e = sp.line(5, "2026-11-30 10:00:04 UTC node kernel: kernel: message")
    assert e is not None and e.text == "kernel: message"


@pytest.mark.parametrize("raw", ["", "   ", "\t\r", "\x00\x00", "\u3000 \xa0"])
def test_splitter_blank_lines_are_none(raw: str) -> None:
    assert LineSplitter().line(1, raw) is None


def test_splitter_cleans_cr_nul_and_caps_length() -> None:
    sp = LineSplitter()
    ln = sp.line(7, "[  5.0] NVRM: Xid (PCI:0000:01:00): 79, x\r\r")
    assert ln is not None and ln.raw.endswith("79, x") and ln.monotonic_s == 5.0
    ln = sp.line(8, "[  5.0] NV\x00RM: GPU at PCI:0000:01:00: GPU-1")
    assert ln is not None and ln.text == "NVRM: GPU at PCI:0000:01:00: GPU-1"
    ln = sp.line(9, "x" * (kernel_timestamps.MAX_LINE_CHARS + 50))
    assert ln is not None and len(ln.raw) == kernel_timestamps.MAX_LINE_CHARS


def test_xid_memo_tells_a_closing_quote_by_the_whole_line() -> None:
    """The same message after two prefixes (a host name is any node string): whether its
    trailing quote closes a pasted quoted string depends on the whole line, so the memo
    of the message's fields must tell the two apart."""
    msg = "NVRM: Xid (PCI:0000:01:00): 13, pid=1, name=a, Graphics Exception'"
    plain = f"Nov 30 10:00:00 node kernel: {msg}"
    quoted_host = f"Nov 30 10:00:01 no'de kernel: {msg}"
    a, b, c = parse_kernel_log(f"{plain}\n{quoted_host}\n{plain}\n", year=2026).xids
    alone = [parse_kernel_log(line + "\n", year=2026).xids[0] for line in (plain, quoted_host)]
    assert (a.message, b.message, c.message) == (
        alone[0].message,
        alone[1].message,
        alone[0].message,
    )
    assert alone[0].message != alone[1].message  # the case the memo must tell apart
