"""RoCE ports (an RDMA device whose link layer is Ethernet): congestion control and
congestion counters, for the host collector.

RoCE needs the network to be told how to handle congestion: ECN marking with DCQCN
(the receiver's *notification point* answers a marked packet with a CNP, the sender's
*reaction point* slows down) and, for lossless RoCE, PFC on the RDMA traffic's priority
(or 802.3x global pause). What a node can see of that:

- ECN: ``/sys/class/net/IF/ecn/roce_np/enable/N`` and ``roce_rp/enable/N`` (mlx5, one
  file per priority 0-7, ``1`` when on);
- PFC: ``dcb pfc show dev IF`` (iproute2) or, without it, MLNX_OFED's ``mlnx_qos -i IF``;
  global pause: ``ethtool --show-pause IF``;
- congestion counters, read twice over the collection window (the host collector's
  sleep) and turned into rates: the port's ``hw_counters`` (np_cnp_sent, rp_cnp_handled,
  np_ecn_marked_roce_packets, out_of_sequence, packet_seq_err) and the interface's
  ``ethtool -S`` pause counters (rx/tx_prioN_pause, rx/tx_pause_ctrl_phy,
  rx/tx_prioN_pause_duration, tx_pause_storm_error_events) and RDMA packets
  (rx/tx_vport_rdma_unicast_packets: whether the port carries RoCE traffic at all; a
  frontend ConnectX port in Ethernet mode has an RDMA device too, and PFC off there is
  no fault).

Adaptive routing is not here: it is chosen by the switches and the subnet manager, and
nothing under /sys/class/infiniband or /sys/class/net says whether it is on.

The interface name comes from the node (``gid_attrs/ndevs/0``) and is passed to the tools
as one argument, only when it is a valid Linux interface name. Of ``ethtool -S``'s
thousands of lines only those used are kept as evidence.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from pathlib import Path

from gpu_triage.collectors.base import CollectContext
from gpu_triage.collectors.parsers import ParseError
from gpu_triage.collectors.parsers.roce import (
    PRIORITIES,
    parse_dcb_pfc,
    parse_ethtool_pause,
    parse_ethtool_stats,
    parse_mlnx_qos_pfc,
    pause_counters,
)
from gpu_triage.io.files import read_small
from gpu_triage.model.facts import IbPortFacts, UnavailableReason

NAME = "host"
HW_COUNTERS = (
    "np_cnp_sent",
    "rp_cnp_handled",
    "np_ecn_marked_roce_packets",
    "out_of_sequence",
    "packet_seq_err",
)
_IFNAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:@-]{0,14}$")  # IFNAMSIZ - 1, no leading '-'
_KEPT_STAT = re.compile(r"pause|storm|rdma")
TOOL_TIMEOUT_S = 5.0
RATE_FIELDS = (
    "cnp_sent_per_s",
    "cnp_handled_per_s",
    "ecn_marked_per_s",
    "out_of_sequence_per_s",
)
PAUSE_FIELDS = (
    "rx_pause_per_s",
    "tx_pause_per_s",
    "rx_paused_pct",
    "tx_paused_pct",
    "pause_storm_events",
    "pause_storm_events_added",
    "rdma_packets_per_s",
)


@dataclass
class RocePort:
    ca: str
    port: int
    pdir: Path
    netdev: str | None


@dataclass
class RoceReading:
    """One reading of every RoCE port's counters."""

    at: float = 0.0
    hw: dict[tuple[str, int], dict[str, int]] = field(default_factory=dict)
    stats: dict[str, dict[str, int]] = field(default_factory=dict)
    stats_error: dict[str, tuple[UnavailableReason, str]] = field(default_factory=dict)


def _read(path: Path) -> str | None:
    return read_small(path, 4096)


def _int(text: str | None) -> int | None:
    try:
        return int(text.strip()) if text is not None else None
    except ValueError:
        return None


def _netdev(pdir: Path) -> str | None:
    """The port's Ethernet interface: GID 0's netdev, else the device's only one."""
    name = (_read(pdir / "gid_attrs" / "ndevs" / "0") or "").strip()
    if not name:
        try:
            names = sorted(p.name for p in (pdir.parent.parent / "device" / "net").iterdir())
        except OSError:
            names = []
        name = names[0] if len(names) == 1 else ""
    return name if _IFNAME.match(name) else None


def roce_ports(ctx: CollectContext) -> list[RocePort]:
    """Every RDMA port whose link layer is Ethernet."""
    base = ctx.path("sys", "class", "infiniband")
    try:
        cas = sorted(base.iterdir())
    except OSError:
        return []
    out: list[RocePort] = []
    for ca in cas:
        try:
            pdirs = sorted((ca / "ports").iterdir(), key=lambda p: p.name)
        except OSError:
            continue
        for pdir in pdirs:
            layer = (_read(pdir / "link_layer") or "").strip().lower()
            port = _int(pdir.name)
            if layer == "ethernet" and port is not None:
                out.append(RocePort(ca.name, port, pdir, _netdev(pdir)))
    return out


def _run_stats(ctx: CollectContext, netdev: str) -> tuple[dict[str, int] | None, str]:
    argv = ["ethtool", "-S", netdev]
    res = ctx.run(NAME, argv, min(ctx.command_timeout_s, TOOL_TIMEOUT_S))
    if res.missing:
        return None, "no ethtool"
    # keep only the lines used: ethtool -S prints thousands of counters per interface
    if ctx.raw and ctx.raw[-1].source == " ".join(argv):
        used = [ln for ln in res.stdout.splitlines() if _KEPT_STAT.search(ln)]
        ctx.raw[-1] = ctx.raw[-1].model_copy(update={"text": "\n".join(used)})
    if not res.ok:
        return None, f"ethtool -S {netdev}: {(res.stderr.strip() or res.error)[:200]}"
    try:
        return parse_ethtool_stats(res.stdout, f"ethtool -S {netdev}"), ""
    except ParseError as exc:
        return None, str(exc)[:200]


def read_roce(ctx: CollectContext, ports: list[RocePort]) -> RoceReading:
    """The ports' hw_counters and their interfaces' ethtool -S, now."""
    reading = RoceReading(at=time.monotonic())
    for p in ports:
        counters: dict[str, int] = {}
        for name in HW_COUNTERS:
            value = _int(_read(p.pdir / "hw_counters" / name))
            if value is not None:
                counters[name] = value
        reading.hw[(p.ca, p.port)] = counters
        if p.netdev and p.netdev not in reading.stats and p.netdev not in reading.stats_error:
            stats, why = _run_stats(ctx, p.netdev)
            if stats is not None:
                reading.stats[p.netdev] = stats
            else:
                reason = (
                    UnavailableReason.NOT_SUPPORTED
                    if why == "no ethtool"
                    else UnavailableReason.ERROR
                )
                reading.stats_error[p.netdev] = (reason, why)
    return reading


def _ecn(ctx: CollectContext, port: IbPortFacts, netdev: str) -> None:
    for fld, point in (("ecn_np_prios", "roce_np"), ("ecn_rp_prios", "roce_rp")):
        base = ctx.path("sys", "class", "net", netdev, "ecn", point, "enable")
        flags = [_int(_read(base / str(prio))) for prio in range(PRIORITIES)]
        known = [f for f in flags if f is not None]
        if known:
            setattr(port, fld, sum(1 for f in known if f))
        else:
            port.mark_unavailable(
                fld, UnavailableReason.NOT_SUPPORTED, f"no {base} (not an mlx5 RoCE interface)"
            )


def _pfc(ctx: CollectContext, port: IbPortFacts, netdev: str) -> None:
    tried: list[str] = []
    for argv, parse in (
        (["dcb", "pfc", "show", "dev", netdev], parse_dcb_pfc),
        (["mlnx_qos", "-i", netdev], parse_mlnx_qos_pfc),
    ):
        res = ctx.run(NAME, argv, min(ctx.command_timeout_s, TOOL_TIMEOUT_S))
        if res.missing:
            tried.append(f"no {argv[0]}")
            continue
        try:
            flags = parse(res.stdout, " ".join(argv))
        except ParseError as exc:
            tried.append((res.stderr.strip() or str(exc))[:160])
            continue
        on = [str(prio) for prio, f in enumerate(flags) if f]
        port.pfc_prios = ",".join(on) or "none"
        port.pfc_enabled_count = len(on)
        return
    reason = (
        UnavailableReason.NOT_SUPPORTED
        if all(t.startswith("no ") for t in tried)
        else UnavailableReason.ERROR
    )
    for fld in ("pfc_prios", "pfc_enabled_count"):
        port.mark_unavailable(fld, reason, "; ".join(tried))


def _pause(ctx: CollectContext, port: IbPortFacts, netdev: str) -> None:
    argv = ["ethtool", "--show-pause", netdev]
    res = ctx.run(NAME, argv, min(ctx.command_timeout_s, TOOL_TIMEOUT_S))
    try:
        if res.missing:
            raise ParseError("no ethtool", source=" ".join(argv))
        port.pause_rx_enabled, port.pause_tx_enabled = parse_ethtool_pause(
            res.stdout, " ".join(argv)
        )
    except ParseError as exc:
        reason = UnavailableReason.NOT_SUPPORTED if res.missing else UnavailableReason.ERROR
        for fld in ("pause_rx_enabled", "pause_tx_enabled"):
            port.mark_unavailable(fld, reason, (res.stderr.strip() or str(exc))[:200])


def _rate(a: int | None, b: int | None, elapsed: float) -> float | None:
    """Growth per second; a counter that went down was reset: what it holds now."""
    if a is None or b is None:
        return None
    return round((b - a if b >= a else b) / elapsed, 3)


def _counters(port: IbPortFacts, a: dict[str, int], b: dict[str, int], elapsed: float) -> None:
    def grown(*names: str) -> float | None:
        rates = [_rate(a.get(n), b.get(n), elapsed) for n in names]
        known = [r for r in rates if r is not None]
        return round(sum(known), 3) if known else None

    values: dict[str, float | int | None] = {
        "cnp_sent_per_s": grown("np_cnp_sent"),
        "cnp_handled_per_s": grown("rp_cnp_handled"),
        "ecn_marked_per_s": grown("np_ecn_marked_roce_packets"),
        "out_of_sequence_per_s": grown("out_of_sequence", "packet_seq_err"),
    }
    _set_rates(port, values, "counter absent from the port's hw_counters")


def _set_rates(port: IbPortFacts, values: dict[str, float | int | None], absent: str) -> None:
    """Each value on ``port``; one that could not be computed is unavailable, ``absent``
    saying why."""
    for fld, value in values.items():
        if value is None:
            port.mark_unavailable(fld, UnavailableReason.NOT_SUPPORTED, absent)
        else:
            setattr(port, fld, value)


def _paused_pct(a: dict[int, int] | None, b: dict[int, int] | None, elapsed: float) -> float | None:
    if not a or not b:
        return None
    worst = 0.0
    for prio, after in b.items():
        before = a.get(prio)
        if before is None:
            continue
        grown = after - before if after >= before else after
        worst = max(worst, 100.0 * grown / (elapsed * 1e6))
    return round(min(worst, 100.0), 2)


def _rdma(stats: dict[str, int]) -> int | None:
    names = ("rx_vport_rdma_unicast_packets", "tx_vport_rdma_unicast_packets")
    known = [stats[n] for n in names if n in stats]
    return sum(known) if known else None


def _pauses(
    port: IbPortFacts, a: dict[str, int] | None, b: dict[str, int] | None, elapsed: float
) -> None:
    if a is None or b is None:
        return
    pa, pb = pause_counters(a), pause_counters(b)
    values: dict[str, float | int | None] = {
        "rx_pause_per_s": _rate(pa.rx_frames, pb.rx_frames, elapsed),
        "tx_pause_per_s": _rate(pa.tx_frames, pb.tx_frames, elapsed),
        "rx_paused_pct": _paused_pct(pa.rx_duration_us, pb.rx_duration_us, elapsed),
        "tx_paused_pct": _paused_pct(pa.tx_duration_us, pb.tx_duration_us, elapsed),
        "pause_storm_events": pb.storm_events,
        "pause_storm_events_added": None
        if pa.storm_events is None or pb.storm_events is None
        else max(0, pb.storm_events - pa.storm_events),
        "rdma_packets_per_s": _rate(_rdma(a), _rdma(b), elapsed),
    }
    _set_rates(port, values, "counter absent from ethtool -S")


def fill_roce(
    ctx: CollectContext,
    ib_ports: list[IbPortFacts],
    ports: list[RocePort],
    first: RoceReading,
    second: RoceReading,
) -> None:
    """Set the RoCE facts of the host collector's ports from the two readings."""
    by_key = {(p.ca_name, p.port): p for p in ib_ports}
    elapsed = max(second.at - first.at, ctx.window_s, 1e-3)
    for rp in ports:
        port = by_key.get((rp.ca, rp.port))
        if port is None:
            continue
        port.roce_window_s = round(elapsed, 3)
        _counters(
            port, first.hw.get((rp.ca, rp.port), {}), second.hw.get((rp.ca, rp.port), {}), elapsed
        )
        if rp.netdev is None:
            for fld in ("netdev", "ecn_np_prios", "ecn_rp_prios", "pfc_prios", "pfc_enabled_count"):
                port.mark_unavailable(
                    fld, UnavailableReason.NOT_SUPPORTED, "no Ethernet interface for the port"
                )
            continue
        port.netdev = rp.netdev
        port.source = f"{port.source}; /sys/class/net/{rp.netdev}/ecn, ethtool, dcb or mlnx_qos"
        _ecn(ctx, port, rp.netdev)
        _pfc(ctx, port, rp.netdev)
        _pause(ctx, port, rp.netdev)
        why = first.stats_error.get(rp.netdev) or second.stats_error.get(rp.netdev)
        if why:
            for fld in PAUSE_FIELDS:
                port.mark_unavailable(fld, why[0], why[1])
        else:
            _pauses(port, first.stats.get(rp.netdev), second.stats.get(rp.netdev), elapsed)
