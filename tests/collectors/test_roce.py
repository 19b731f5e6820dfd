"""RoCE: the ethtool / dcb / mlnx_qos parsers and the host collector's RoCE facts (ECN,
PFC, congestion counters over the window) on a fake /sys with the tools faked at the
subprocess boundary. Formats are **[recalled]** (see roce_outputs)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpu_triage.collectors.base import CollectContext
from gpu_triage.collectors.host import HostCollector
from gpu_triage.collectors.parsers import ParseError
from gpu_triage.collectors.parsers.roce import (
    parse_dcb_pfc,
    parse_ethtool_pause,
    parse_ethtool_stats,
    parse_mlnx_qos_pfc,
    pause_counters,
)
from gpu_triage.model.facts import Facts, IbPortFacts, UnavailableReason

try:
    from tests.collectors import roce_outputs as out
    from tests.collectors.fakeroot import FakeRoot, build_fake_root
except ImportError:  # tests/ is not a package: pytest put this folder on sys.path
    import roce_outputs as out  # type: ignore[no-redef]
    from fakeroot import FakeRoot, build_fake_root  # type: ignore[no-redef]

PRIO3 = [False, False, False, True, False, False, False, False]
BDF = "0000:5e:00.0"
IF = "ens1f0np0"


# --------------------------------------------------------------------------- parsers


def test_ethtool_stats_skips_header_prompt_and_junk() -> None:
    text = "$ sudo ethtool -S ens1f0np0\n" + out.ethtool_s(rx_pause=5, tx_pause=6, rx_us=7, tx_us=8)
    text += "     a wrapped line without a value\n-- more --\n"
    stats = parse_ethtool_stats(text)
    assert stats["rx_prio3_pause"] == 5 and stats["tx_prio3_pause_duration"] == 8
    assert "NIC statistics" not in stats


def test_ethtool_stats_flattened_indentation() -> None:
    text = out.ethtool_s(rx_pause=1, tx_pause=2, rx_us=3, tx_us=4).replace("     ", "")
    assert parse_ethtool_stats(text)["tx_prio3_pause"] == 2


def test_ethtool_stats_of_junk_is_a_parse_error() -> None:
    with pytest.raises(ParseError, match="ethtool -S"):
        parse_ethtool_stats("Cannot get stats information: Operation not supported\n")


def test_pause_counters_sum_pfc_and_global_pause() -> None:
    stats = parse_ethtool_stats(out.ethtool_s(rx_pause=100, tx_pause=7, rx_us=50, tx_us=0, ctrl=3))
    p = pause_counters(stats)
    assert (p.rx_frames, p.tx_frames) == (103, 7)
    assert p.rx_duration_us == {0: 0, 3: 50} and p.storm_events == 0


def test_pause_counters_absent_are_none_not_zero() -> None:
    p = pause_counters({"rx_packets": 10, "tx_packets": 11})  # a driver without them
    assert (p.rx_frames, p.tx_frames, p.rx_duration_us, p.storm_events) == (None,) * 4


def test_dcb_pfc() -> None:
    assert parse_dcb_pfc(out.DCB_PFC_PRIO3) == PRIO3
    assert parse_dcb_pfc(out.DCB_PFC_OFF) == [False] * 8
    # `dcb pfc show dev IF prio-pfc` prints the list alone; a paste may wrap it
    assert parse_dcb_pfc("prio-pfc 0:off 1:off 2:off 3:on\n 4:off 5:off 6:off 7:off") == PRIO3


def test_dcb_error_is_a_parse_error() -> None:
    with pytest.raises(ParseError):
        parse_dcb_pfc("Error: Device does not support DCB.\n")


def test_mlnx_qos_new_and_old_versions() -> None:
    assert parse_mlnx_qos_pfc(out.MLNX_QOS_PRIO3) == PRIO3
    assert parse_mlnx_qos_pfc(out.MLNX_QOS_OLD_OFF) == [False] * 8
    flattened = out.MLNX_QOS_PRIO3.replace("\t", "").replace("    ", " ")
    assert parse_mlnx_qos_pfc(flattened) == PRIO3


def test_mlnx_qos_without_the_block_is_a_parse_error() -> None:
    with pytest.raises(ParseError, match="PFC configuration"):
        parse_mlnx_qos_pfc("Priority trust state: dscp\nCable len: 7\n")
    with pytest.raises(ParseError, match="rows"):
        parse_mlnx_qos_pfc("PFC configuration:\n\tpriority 0 1 2\n(cut)\n")


def test_ethtool_pause() -> None:
    assert parse_ethtool_pause(out.PAUSE_OFF) == (False, False)
    assert parse_ethtool_pause(out.PAUSE_ON) == (True, True)  # "RX negotiated" is not RX
    with pytest.raises(ParseError):
        parse_ethtool_pause("Pause parameters for eth0:\nAutonegotiate: off\n")


# --------------------------------------------------------------------------- collector


@pytest.fixture
def fake(tmp_path: Path) -> FakeRoot:
    return build_fake_root(tmp_path / "root")


def _roce(
    fake: FakeRoot,
    *,
    first: str,
    second: str,
    hw_second: dict[str, int] | None = None,
    ecn: str = "00010000",
) -> None:
    fake.pci_device(BDF, "0x15b3", "0x020000")
    fake.roce_port(
        "mlx5_2",
        BDF,
        IF,
        ecn_np=ecn,
        ecn_rp=ecn,
        hw_first=out.HW_FIRST,
        hw_second=hw_second or out.HW_FIRST,
    )
    fake.write(f"ethtool-S-{IF}.txt", first)
    fake.second[f"ethtool-S-{IF}.txt"] = second


def collect(fake: FakeRoot, search_path: str, window_s: float = 2.0) -> tuple[Facts, list[str]]:
    facts = Facts()
    ctx = CollectContext(root=fake.root, window_s=window_s, search_path=search_path)
    HostCollector(sleep=fake.sleep).collect(ctx, facts)
    return facts, [r.source for r in ctx.raw]


def _port(facts: Facts) -> IbPortFacts:
    return next(p for p in facts.ib_ports if p.ca_name == "mlx5_2")


def test_roce_port_configuration_and_rates(fake: FakeRoot, tmp_path: Path) -> None:
    _roce(
        fake,
        first=out.ethtool_s(rx_pause=1_000, tx_pause=0, rx_us=0, tx_us=0),
        second=out.ethtool_s(
            rx_pause=61_000, tx_pause=0, rx_us=1_200_000, tx_us=0, rdma=1_725_114_407
        ),
        hw_second={
            "np_cnp_sent": 1_000,
            "rp_cnp_handled": 402_000,
            "np_ecn_marked_roce_packets": 3_000,
            "out_of_sequence": 30,
            "packet_seq_err": 1,
        },
    )
    facts, raw = collect(fake, out.tools(tmp_path / "bin", fake.root))
    p = _port(facts)
    assert (p.link_layer, p.netdev) == ("ethernet", IF)
    assert (p.ecn_np_prios, p.ecn_rp_prios) == (1, 1)
    assert (p.pfc_prios, p.pfc_enabled_count) == ("3", 1)
    assert (p.pause_rx_enabled, p.pause_tx_enabled) == (False, False)
    assert p.roce_window_s == 2.0
    assert (p.cnp_handled_per_s, p.cnp_sent_per_s, p.out_of_sequence_per_s) == (200_000, 0, 10)
    assert (p.rx_pause_per_s, p.tx_pause_per_s) == (30_000, 0)
    assert (p.rx_paused_pct, p.tx_paused_pct) == (60.0, 0.0)
    assert (p.pause_storm_events, p.pause_storm_events_added) == (0, 0)
    assert p.rdma_packets_per_s == 1_000_000  # it carries RoCE traffic
    # the InfiniBand port of the same node has none of it, and no reason either
    ib = next(q for q in facts.ib_ports if q.ca_name == "mlx5_0")
    assert ib.netdev is None and "netdev" not in ib.unavailable
    assert f"ethtool -S {IF}" in raw and f"dcb pfc show dev {IF}" in raw


def test_ethtool_evidence_keeps_only_the_lines_used(fake: FakeRoot, tmp_path: Path) -> None:
    text = out.ethtool_s(rx_pause=1, tx_pause=2, rx_us=3, tx_us=4)
    _roce(fake, first=text, second=text)
    facts = Facts()
    ctx = CollectContext(root=fake.root, search_path=out.tools(tmp_path / "bin", fake.root))
    HostCollector(sleep=fake.sleep).collect(ctx, facts)
    kept = next(r.text for r in ctx.raw if r.source == f"ethtool -S {IF}")
    assert "rx_prio3_pause: 1" in kept and "rx_bytes" not in kept
    assert "rx_vport_rdma_unicast_packets" in kept


def test_ecn_off_and_pfc_off_from_mlnx_qos(fake: FakeRoot, tmp_path: Path) -> None:
    text = out.ethtool_s(rx_pause=0, tx_pause=0, rx_us=0, tx_us=0)
    _roce(fake, first=text, second=text, ecn="00000000")
    bin_dir = tmp_path / "bin"
    search = out.tools(bin_dir, fake.root, pfc=None, qos=out.MLNX_QOS_OLD_OFF)
    # a dcb that the driver refuses: mlnx_qos answers instead
    (bin_dir / "dcb").write_text("#!/bin/sh\necho 'Error: no DCB' >&2\nexit 1\n")
    (bin_dir / "dcb").chmod(0o755)
    p = _port(collect(fake, search)[0])
    assert (p.ecn_np_prios, p.ecn_rp_prios) == (0, 0)
    assert (p.pfc_prios, p.pfc_enabled_count) == ("none", 0)


def test_no_tools_leaves_reasons(fake: FakeRoot, tmp_path: Path) -> None:
    _roce(fake, first="", second="")
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    for name in ("ethtool", "dcb", "mlnx_qos"):  # installed nowhere, whatever the host has
        (empty / name).write_text("#!/bin/sh\necho 'not installed' >&2\nexit 127\n")
        (empty / name).chmod(0o755)
    p = _port(collect(fake, str(empty))[0])
    assert p.pfc_enabled_count is None and "pfc_enabled_count" in p.unavailable
    assert p.tx_paused_pct is None and "tx_paused_pct" in p.unavailable
    assert p.pause_rx_enabled is None and "pause_rx_enabled" in p.unavailable
    # sysfs still answers: ECN and the CNP counters do not need the tools
    assert p.ecn_np_prios == 1 and p.cnp_handled_per_s == 0


def test_hw_counters_missing_and_reset(fake: FakeRoot, tmp_path: Path) -> None:
    text = out.ethtool_s(rx_pause=500, tx_pause=0, rx_us=0, tx_us=0)
    reset = out.ethtool_s(rx_pause=40, tx_pause=0, rx_us=0, tx_us=0)  # driver reloaded
    _roce(fake, first=text, second=reset)
    pdir = f"sys/devices/pci0000:00/{BDF}/infiniband/mlx5_2/ports/1/hw_counters"
    fake.remove(f"{pdir}/np_ecn_marked_roce_packets")
    p = _port(collect(fake, out.tools(tmp_path / "bin", fake.root))[0])
    assert p.ecn_marked_per_s is None
    assert p.unavailable["ecn_marked_per_s"].reason is UnavailableReason.NOT_SUPPORTED
    assert p.rx_pause_per_s == 20.0  # what accrued since the reset


def test_hostile_netdev_name_is_not_passed_to_tools(fake: FakeRoot, tmp_path: Path) -> None:
    text = out.ethtool_s(rx_pause=0, tx_pause=0, rx_us=0, tx_us=0)
    _roce(fake, first=text, second=text)
    pdir = f"sys/devices/pci0000:00/{BDF}/infiniband/mlx5_2/ports/1"
    fake.write(f"{pdir}/gid_attrs/ndevs/0", "--help;rm -rf /\n")
    fake.remove(f"sys/devices/pci0000:00/{BDF}/net")  # no fallback either
    facts, raw = collect(fake, out.tools(tmp_path / "bin", fake.root))
    p = _port(facts)
    assert p.netdev is None and "netdev" in p.unavailable
    assert not any("help" in r for r in raw)
    assert p.cnp_handled_per_s == 0  # the port's own counters are still read


def test_a_fifo_planted_as_a_counter_does_not_block(fake: FakeRoot, tmp_path: Path) -> None:
    import os

    text = out.ethtool_s(rx_pause=0, tx_pause=0, rx_us=0, tx_us=0)
    _roce(fake, first=text, second=text)
    pdir = fake.root / f"sys/devices/pci0000:00/{BDF}/infiniband/mlx5_2/ports/1/hw_counters"
    (pdir / "rp_cnp_handled").unlink()
    os.mkfifo(pdir / "rp_cnp_handled")
    fake.second = {k: v for k, v in fake.second.items() if not k.endswith("rp_cnp_handled")}
    p = _port(collect(fake, out.tools(tmp_path / "bin", fake.root))[0])
    assert p.cnp_handled_per_s is None and "cnp_handled_per_s" in p.unavailable
    assert p.cnp_sent_per_s == 0
