"""RoCE tool outputs for the tests and the fact-producer measurement.

**[recalled]**: no real output of ``ethtool -S`` (mlx5), ``dcb pfc show``, ``mlnx_qos -i``
or ``ethtool --show-pause`` is in /work/shared/real-outputs. These are written in the
tools' formats as their documentation and source print them (mlx5 counter names from
the kernel's mlx5 counters documentation; ``dcb`` from iproute2's dcb-pfc(8);
``mlnx_qos`` from MLNX_OFED's mlnx-tools), with the variations pastes and versions bring.
"""

from __future__ import annotations

from pathlib import Path


def ethtool_s(
    *,
    rx_pause: int,
    tx_pause: int,
    rx_us: int,
    tx_us: int,
    storms: int = 0,
    ctrl: int = 0,
    rdma: int = 1723114407,
) -> str:
    """An mlx5 ``ethtool -S`` excerpt (the real one has ~1,500 lines) with PFC on prio 3."""
    return f"""NIC statistics:
     rx_packets: 1826353117
     rx_bytes: 2521190553164
     tx_packets: 1720145544
     tx_bytes: 2398013321290
     rx_vport_rdma_unicast_packets: {rdma}
     tx_vport_rdma_unicast_packets: 1620033101
     rx_out_of_buffer: 0
     rx_discards_phy: 0
     rx_pause_ctrl_phy: {ctrl}
     tx_pause_ctrl_phy: 0
     rx_prio0_bytes: 20411
     rx_prio0_packets: 301
     rx_prio0_discards: 0
     rx_prio0_pause: 0
     rx_prio0_pause_duration: 0
     tx_prio0_pause: 0
     tx_prio0_pause_duration: 0
     rx_prio0_pause_transition: 0
     rx_prio3_bytes: 2521190532753
     rx_prio3_packets: 1826352816
     rx_prio3_discards: 0
     rx_prio3_pause: {rx_pause}
     rx_prio3_pause_duration: {rx_us}
     tx_prio3_pause: {tx_pause}
     tx_prio3_pause_duration: {tx_us}
     rx_prio3_pause_transition: 911
     tx_pause_storm_warning_events: 0
     tx_pause_storm_error_events: {storms}
     module_unplug: 0
     module_bus_stuck: 0
"""


# iproute2 dcb (5.11+): PFC on priority 3 only
DCB_PFC_PRIO3 = """pfc-cap 8 macsec-bypass off delay 4096
prio-pfc 0:off 1:off 2:off 3:on 4:off 5:off 6:off 7:off
"""
DCB_PFC_OFF = """pfc-cap 8 macsec-bypass off delay 0
prio-pfc 0:off 1:off 2:off 3:off 4:off 5:off 6:off 7:off
"""
# MLNX_OFED 5.x mlnx_qos: trust dscp, PFC on priority 3, with the buffer row
MLNX_QOS_PRIO3 = """DCBX mode: OS controlled
Priority trust state: dscp
dscp2prio mapping:
\tprio:0 dscp:07,06,05,04,03,02,01,00,
\tprio:3 dscp:31,30,29,28,27,26,25,24,
default priority:
Receive buffer size (bytes): 130944,130944,0,0,0,0,0,0,
Cable len: 7
PFC configuration:
\tpriority    0   1   2   3   4   5   6   7
\tenabled     0   0   0   1   0   0   0   0
\tbuffer      0   0   0   1   0   0   0   0
tc: 0 ratelimit: unlimited, tsa: vendor
\t priority:  1
tc: 1 ratelimit: unlimited, tsa: vendor
\t priority:  0
"""
# MLNX_OFED 4.x: no DCBX/buffer lines, trailing spaces, everything off
MLNX_QOS_OLD_OFF = (
    "Priority trust mode: pcp\n"
    "PFC configuration:\n"
    "\tpriority    0   1   2   3   4   5   6   7\n"
    "\tenabled     0   0   0   0   0   0   0   0   \n"
    "\n"
    "tc: 0 ratelimit: unlimited, tsa: vendor\n"
    "\t priority:  1 \n"
)
PAUSE_OFF = """Pause parameters for ens1f0np0:
Autonegotiate:\toff
RX:\t\toff
TX:\t\toff
"""
PAUSE_ON = """Pause parameters for ens1f0np0:
Autonegotiate:\ton
RX:\t\ton
TX:\t\ton
RX negotiated: on
TX negotiated: on
"""

HW_FIRST = {
    "np_cnp_sent": 1_000,
    "rp_cnp_handled": 2_000,
    "np_ecn_marked_roce_packets": 3_000,
    "out_of_sequence": 10,
    "packet_seq_err": 1,
}


def tools(
    bin_dir: Path,
    root: Path,
    *,
    pfc: str | None = DCB_PFC_PRIO3,
    qos: str | None = None,
    pause: str = PAUSE_OFF,
) -> str:
    """Fake ethtool / dcb / mlnx_qos answering from files: ``ethtool -S IF`` prints the
    file ``ethtool-S-IF.txt`` under ``root`` (the fake root rewrites it at its sleep).
    A tool given None is not installed. Returns the search path."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    (bin_dir / "pause.txt").write_text(pause)
    ethtool = (
        "#!/bin/sh\n"
        f'if [ "$1" = "-S" ]; then cat "{root}/ethtool-S-$2.txt"; exit $?; fi\n'
        f'if [ "$1" = "--show-pause" ]; then cat "{bin_dir}/pause.txt"; exit 0; fi\n'
        "exit 1\n"
    )
    scripts = {"ethtool": ethtool}
    if pfc is not None:
        (bin_dir / "dcb.txt").write_text(pfc)
        scripts["dcb"] = f'#!/bin/sh\ncat "{bin_dir}/dcb.txt"\n'
    if qos is not None:
        (bin_dir / "qos.txt").write_text(qos)
        scripts["mlnx_qos"] = f'#!/bin/sh\ncat "{bin_dir}/qos.txt"\n'
    for name, text in scripts.items():
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    return str(bin_dir)
