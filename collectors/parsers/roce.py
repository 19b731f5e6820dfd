"""RoCE NIC output: ``ethtool -S`` statistics, PFC from ``dcb pfc show`` or ``mlnx_qos``,
global pause from ``ethtool --show-pause``.

No real output of these tools is in the shared corpus: the formats below are the tools'
as printed by ethtool 5.x/6.x (``NIC statistics:`` then ``name: value`` lines), iproute2's
``dcb`` (``prio-pfc 0:off 1:off ... 3:on``) and MLNX_OFED's ``mlnx_qos -i IF`` (a ``PFC
configuration:`` block with ``priority`` and ``enabled`` rows), **[recalled]** from the
tools' documentation and source. Each parser therefore keys on the few words that do
not change between versions, accepts any indentation (pastes flatten tabs), skips
prompts and lines it does not know, and raises :class:`ParseError` only when the text
holds nothing of its format.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from gpu_triage.collectors.parsers import ParseError

PRIORITIES = 8  # IEEE 802.1p priorities
MAX_STATS = 20_000  # a ConnectX-7 prints ~2,000 counters; more is not ethtool

_STAT = re.compile(r"^\s*([A-Za-z0-9_.\[\]\-]{1,96}):\s+(\d{1,20})\s*$")
_PRIO_PAUSE = re.compile(r"^(rx|tx)_prio(\d)_pause$")
_PRIO_DURATION = re.compile(r"^(rx|tx)_prio(\d)_pause_duration$")
_DCB_PFC = re.compile(r"\bprio-pfc((?:\s+\d:(?:on|off))+)")
_DCB_ITEM = re.compile(r"(\d):(on|off)")
_QOS_ROW = re.compile(r"^\s*(priority|enabled)\s*:?\s+((?:\d\s*){1,8})\s*$", re.IGNORECASE)
_PAUSE = re.compile(r"^\s*(Autonegotiate|RX|TX)\s*:\s*(on|off)\b", re.IGNORECASE)


def parse_ethtool_stats(text: str, source: str = "ethtool -S") -> dict[str, int]:
    """``ethtool -S IF`` -> counter name -> value. Lines that are not ``name: number``
    (the ``NIC statistics:`` header, a prompt, a wrapped line) are skipped."""
    out: dict[str, int] = {}
    for line in text.splitlines():
        m = _STAT.match(line)
        if m and len(out) < MAX_STATS:
            out[m.group(1)] = int(m.group(2))
    if not out:
        raise ParseError("no 'name: value' statistics lines", source=source)
    return out


@dataclass
class PauseCounters:
    """The pause counters of one ``ethtool -S`` reading (mlx5 names)."""

    rx_frames: int | None = None  # per-priority pause frames + global (ctrl_phy)
    tx_frames: int | None = None
    rx_duration_us: dict[int, int] | None = None  # priority -> time paused, microseconds
    tx_duration_us: dict[int, int] | None = None
    storm_events: int | None = None  # tx_pause_storm_error_events: the NIC stopped a storm


def pause_counters(stats: dict[str, int]) -> PauseCounters:
    """Sum the pause frame counters: ``rx/tx_prioN_pause`` (PFC) and
    ``rx/tx_pause_ctrl_phy`` (global 802.3x pause); keep the per-priority pause
    durations. A counter the driver does not print stays None (not 0)."""
    frames: dict[str, int | None] = {"rx": None, "tx": None}
    durations: dict[str, dict[int, int]] = {"rx": {}, "tx": {}}
    for name, value in stats.items():
        m = _PRIO_PAUSE.match(name)
        direction = m.group(1) if m else None
        if direction is None and name in ("rx_pause_ctrl_phy", "tx_pause_ctrl_phy"):
            direction = name[:2]
        if direction is not None:
            frames[direction] = (frames[direction] or 0) + value
            continue
        d = _PRIO_DURATION.match(name)
        if d:
            durations[d.group(1)][int(d.group(2))] = value
    storm = stats.get("tx_pause_storm_error_events")
    return PauseCounters(
        rx_frames=frames["rx"],
        tx_frames=frames["tx"],
        rx_duration_us=durations["rx"] or None,
        tx_duration_us=durations["tx"] or None,
        storm_events=storm,
    )


def parse_dcb_pfc(text: str, source: str = "dcb pfc show") -> list[bool]:
    """iproute2 ``dcb pfc show dev IF``: ``prio-pfc 0:off 1:off 2:off 3:on ...`` -> eight
    flags, priority 0 first (a priority it does not print is off)."""
    m = _DCB_PFC.search(text)
    if not m:
        raise ParseError("no 'prio-pfc N:on|off' list", source=source)
    flags = [False] * PRIORITIES
    for prio, state in _DCB_ITEM.findall(m.group(1)):
        if int(prio) < PRIORITIES:
            flags[int(prio)] = state == "on"
    return flags


def parse_mlnx_qos_pfc(text: str, source: str = "mlnx_qos") -> list[bool]:
    """MLNX_OFED ``mlnx_qos -i IF``: the ``PFC configuration:`` block's ``priority`` row
    (0..7) and ``enabled`` row (0/1 per priority) -> eight flags. Older versions print
    the block without a ``buffer`` row; the rows may be indented any way."""
    lines = text.splitlines()
    start = next((i for i, ln in enumerate(lines) if "PFC configuration" in ln), None)
    if start is None:
        raise ParseError("no 'PFC configuration:' block", source=source)
    prios: list[int] | None = None
    for ln in lines[start + 1 : start + 8]:
        m = _QOS_ROW.match(ln)
        if not m:
            continue
        values = [int(v) for v in m.group(2).split()]
        if m.group(1).lower() == "priority":
            prios = values
        elif prios is not None and len(values) == len(prios):
            flags = [False] * PRIORITIES
            for prio, on in zip(prios, values, strict=True):
                if prio < PRIORITIES:
                    flags[prio] = on == 1
            return flags
    raise ParseError("'PFC configuration:' without 'priority' and 'enabled' rows", source=source)


def parse_ethtool_pause(text: str, source: str = "ethtool --show-pause") -> tuple[bool, bool]:
    """``ethtool --show-pause IF`` (``-a``) -> (RX pause on, TX pause on): 802.3x global
    pause, the other way to make a port lossless."""
    seen: dict[str, bool] = {}
    for line in text.splitlines():
        m = _PAUSE.match(line)
        if m:
            seen[m.group(1).upper()] = m.group(2).lower() == "on"
    if "RX" not in seen or "TX" not in seen:
        raise ParseError("no 'RX:' and 'TX:' pause lines", source=source)
    return seen["RX"], seen["TX"]
