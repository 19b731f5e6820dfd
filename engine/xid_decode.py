"""What an Xid line's text and its neighbours add to its code, for the rules to read.

- Xid 74: the seven registers, each bit set classed by NVIDIA's WORKFLOW_NVLINK_ERR
  (rulebook/xid/nvlink-decode.yaml), and the worst class of the line.
- Xid 144-150: unit, intrInfo and errorStatus matched against NVIDIA's "Xid 144-150 Decode"
  rows: the row's immediate bucket, severity and investigatory bucket.
- Xid 154: the recovery action the line changed to (what NVML would say, when it cannot).
- Every Xid: the incident it belongs to on its GPU (one per process, boot or burst), so
  that "the GPU keeps failing" counts incidents, not lines.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from gpu_triage.engine.compiler import Rulebook
from gpu_triage.engine.model import Nvlink5Rule
from gpu_triage.model.facts import XidEvent
from gpu_triage.model.xid_message import (
    driver_major,
    parse_nvlink5,
    parse_recovery_action,
    parse_xid74,
)

NVLINK5_CODES = frozenset(range(144, 151))
# The class of an Xid 74 line is that of its worst bit (worst first).
XID74_RANK = (
    "fabric_reset",
    "hardware",
    "field_diag",
    "signal_integrity",
    "ecc_threshold",
    "ecc_parity",
    "report_if_repeated",
    "unexpected",
    "unlisted",
    "sympathetic",
    "ignore",
)
# Lines of one GPU further apart than this are separate incidents (an application's
# fault logs its burst within seconds; a rerun or another job comes later).
BURST_GAP_S = 120.0
_SEVERITY_WORDS = {"fatal": "Fatal", "link_fatal": "Link Fatal", "non_fatal": "Non-fatal"}


def bucket_meaning(name: str | None, book: Rulebook) -> str | None:
    if not name:
        return None
    key = name.strip()
    return book.xid_buckets.get(key) or book.xid_buckets.get(key.split(" (")[0].strip())


def message_update(event: XidEvent, book: Rulebook, driver: str | None) -> dict[str, object]:
    """Fields decoded from the message of one event (empty when there is nothing to decode)."""
    code = event.code
    if code == 74:
        return _xid74(event, book)
    if code in NVLINK5_CODES:
        return _nvlink5(event, book, driver)
    if code == 154:
        action = parse_recovery_action(event.message)
        return {"recovery_action_to": action} if action else {}
    return {}


def _xid74(event: XidEvent, book: Rulebook) -> dict[str, object]:
    msg = parse_xid74(event.message)
    if msg is None:
        return {}
    out: dict[str, object] = {
        "nvlink_link": msg.link,
        "nvlink_fatal_printed": msg.fatal,
        "xid74_registers": ", ".join(f"0x{r:x}" for r in msg.registers),
    }
    classes: list[str] = []
    words: list[str] = []
    for reg, value in enumerate(msg.registers):
        bit = 0
        while value >> bit:
            if (value >> bit) & 1:
                cls, meaning = book.xid74_bits.get(
                    (reg, bit), ("unlisted", "not in NVIDIA's table")
                )
                classes.append(cls)
                words.append(f"Reg{reg} bit {bit}: {meaning}")
            bit += 1
    if classes:
        out["xid74_class"] = min(classes, key=_rank)
        out["xid74_decode"] = "; ".join(words)
    else:
        out["xid74_decode"] = "no register bit set"
    return out


def _rank(cls: str) -> int:
    return XID74_RANK.index(cls) if cls in XID74_RANK else len(XID74_RANK)


def _nvlink5(event: XidEvent, book: Rulebook, driver: str | None) -> dict[str, object]:
    msg = parse_nvlink5(event.message)
    if msg is None:
        return {}
    out: dict[str, object] = {
        "nvlink_link": msg.link,
        "nvlink_fatal_printed": msg.fatal,
        "nvlink_unit": msg.unit,
        "nvlink_intr_info": msg.intr_info,
        "nvlink_error_status": msg.error_status,
        "nvlink_reason": msg.reason,
        "nvlink_subcode": msg.subcode(driver_major(driver)),
    }
    assert event.code is not None
    row = match_nvlink5(
        book.nvlink5_rules.get(event.code, []), msg.unit, msg.error_status, msg.reason
    )
    if row is None:
        return out
    imm = bucket_meaning(row.immediate, book)
    inv = bucket_meaning(row.investigatory, book) if row.investigatory else None
    status = (
        f"reason {row.reason:06b}"
        if row.reason is not None
        else f"errorStatus 0x{msg.error_status:x}"
    )
    summary = f"{row.unit} {status}: {row.immediate} / {_SEVERITY_WORDS[row.severity]}{row.note}"
    if row.investigatory:
        summary += f" / {row.investigatory}"
    if row.promoted:
        summary += f" (-> {row.promoted} when promoted)"
    out.update(
        decode_immediate=row.immediate,
        decode_immediate_meaning=imm,
        decode_severity=row.severity,
        decode_investigatory=row.investigatory or None,
        decode_investigatory_meaning=inv,
        decode_promoted=row.promoted or None,
        decode_summary=summary,
    )
    return out


def match_nvlink5(
    rows: Sequence[Nvlink5Rule], unit: str, error_status: int, reason: int
) -> Nvlink5Rule | None:
    """The decode row for a printed unit: a row's unit names ("TLW_RX/TLW_RX_PIPE0") are
    aliases; NETIR link-event rows match the reason, the others the errorStatus."""
    for row in rows:
        if unit not in row.unit.upper().split("/"):
            continue
        if row.reason is not None:
            if row.reason == reason:
                return row
        elif row.error_status == error_status:
            return row
    return None


# --------------------------------------------------------------------------- incidents


def assign_incidents(events: list[XidEvent]) -> list[str | None]:
    """An incident label per event (same order): on each GPU, a new incident starts with a
    different process, a reboot (the seconds-since-boot stamp going back) or a gap of more
    than BURST_GAP_S. Events without a GPU or without any way to tell get None."""
    labels: list[str | None] = [None] * len(events)
    # one C call per event for what the sequence compares
    get = operator.itemgetter("pci_bus_id", "source", "line", "pid", "monotonic_s", "time")
    by_gpu: dict[str, list[tuple[Any, ...]]] = {}
    for i, ev in enumerate(events):
        bus, src, line, pid, mono, t = get(ev.__dict__)
        if bus:
            row = (src, line or 0, i, pid, mono, t)  # sorted by the log's order, then ours
            slot = by_gpu.get(bus)
            if slot is None:
                by_gpu[bus] = [row]
            else:
                slot.append(row)
    for bus, rows in by_gpu.items():
        rows.sort(key=_ORDER)
        n = 0
        label = f"{bus}#0"
        # The previous event's source, process, seconds since boot and time: a new
        # incident when the source or the process changes, the clock since boot goes
        # back (a reboot) or jumps, or the time jumps (compared inline: once per event).
        p_src: Any = _NO_EVENT
        p_pid = p_mono = p_time = None
        for src, _, i, pid, mono, t in rows:
            pid = pid or None  # pid 0 is the kernel's, not a process
            if p_src is not _NO_EVENT:
                new = src != p_src or (pid is not None and p_pid is not None and pid != p_pid)
                if not new and mono is not None and p_mono is not None:
                    new = mono < p_mono or mono - p_mono > BURST_GAP_S
                if not new and t is not None and p_time is not None:
                    try:
                        gap: float | None = (t - p_time).total_seconds()
                    except (TypeError, OverflowError):  # naive beside aware, or out of range
                        gap = _gap_s(p_time, t)
                    new = gap is not None and abs(gap) > BURST_GAP_S
                if new:
                    n += 1
                    label = f"{bus}#{n}"
            labels[i] = label
            p_src, p_pid, p_mono, p_time = src, pid, mono, t
    return labels


_NO_EVENT = object()
_ORDER = operator.itemgetter(0, 1, 2)  # source, line, input index


def _gap_s(a: datetime | None, b: datetime | None) -> float | None:
    if a is None or b is None:
        return None
    try:
        if (a.tzinfo is None) != (b.tzinfo is None):
            a, b = a.astimezone(), b.astimezone()
        return (b - a).total_seconds()
    except (OverflowError, ValueError):
        return None
