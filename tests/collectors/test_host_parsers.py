"""Host tool parsers: driven by the real-output answer key, plus hand-written formats."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from gpu_triage.collectors.parsers import ParseError
from gpu_triage.collectors.parsers.fio import fill_host_from_fio, parse_fio
from gpu_triage.collectors.parsers.ibstat import parse_ibstat, parse_ibstat_cas
from gpu_triage.collectors.parsers.iostat import (
    disk_facts,
    parse_iostat,
    parse_iostat_cpu,
    parse_iostat_x,
)
from gpu_triage.collectors.parsers.iperf3 import parse_iperf3
from gpu_triage.collectors.parsers.meminfo import parse_meminfo, parse_meminfo_kib
from gpu_triage.collectors.parsers.mpstat import fill_host_from_mpstat, parse_mpstat
from gpu_triage.collectors.parsers.pressure import parse_pressure
from gpu_triage.model.facts import UnavailableReason

DATA = Path(__file__).resolve().parent.parent / "data" / "real-outputs"
# Hand-written inputs for formats the real samples do not cover.
HAND = Path(__file__).resolve().parent.parent / "data" / "hand-written"
KEY: dict[str, Any] = yaml.safe_load((DATA / "expected.yaml").read_text())
SAMPLES: dict[str, dict[str, Any]] = KEY["samples"]
# Keys of a sample entry that describe it rather than state a parsed value.
META = {"kind", "format", "context", "expected_rule_signal", "other_facts", "note"}


def samples(prefix: str) -> list[str]:
    return sorted(name for name in SAMPLES if name.startswith(prefix))


def text_of(name: str) -> str:
    return (DATA / name).read_text()


def same(expected: Any, got: Any) -> bool:
    """Numbers as numbers ('percent columns: numbers as printed'), the rest as printed text."""
    if isinstance(expected, bool):
        return got == expected
    if isinstance(expected, int | float):
        return got is not None and float(got) == float(expected)
    return str(got) == str(expected)


def test_conventions_block_is_read() -> None:
    conv = KEY["conventions"]
    assert "percent columns" in conv and "line" in conv
    assert KEY["schema_version"] == 1


# --------------------------------------------------------------------------- mpstat (key)


@pytest.mark.parametrize("name", samples("mpstat/"))
def test_mpstat_key(name: str) -> None:
    exp = SAMPLES[name]
    assert set(exp) - META <= {"banner", "rows"}
    res = parse_mpstat(text_of(name), source=name)
    banner = exp["banner"]
    assert (res.kernel, res.hostname, res.date, res.arch, res.ncpu) == (
        banner["kernel"],
        banner["hostname"],
        banner["date"],
        banner["arch"],
        banner["ncpu"],
    )
    rows = {r.line: r for r in res.rows}
    assert len(res.rows) == len(exp["rows"])
    for erow in exp["rows"]:
        row = rows[erow["line"]]
        assert row.time == erow["time"]
        assert row.cpu == str(erow["cpu"])
        columns = {k: v for k, v in erow.items() if k not in ("line", "time", "cpu")}
        assert row.values == columns  # header-named columns, numbers as printed
    host = fill_host_from_mpstat(res)
    overall = next(r for r in exp["rows"] if r["cpu"] == "all")
    assert host.cpu_iowait_pct == overall["%iowait"]
    assert host.cpu_steal_pct == overall["%steal"]
    assert host.cpu_idle_pct == overall["%idle"]
    assert host.cpu_count == banner["ncpu"]
    cores = [r for r in exp["rows"] if r["cpu"] != "all"]
    if cores:
        busy = {r["cpu"]: 100 - r["%idle"] - r["%iowait"] for r in cores}
        top = max(busy, key=lambda c: busy[c])
        assert host.busiest_core == top
        assert host.busiest_core_busy_pct == pytest.approx(busy[top])
        assert host.cores_saturated == 0
    else:
        assert host.busiest_core is None


MPSTAT_OLD_AVERAGE = """\
Linux 2.6.18-194.el5 (oldbox)   03/19/2010

10:00:01     CPU   %user   %nice %system %iowait    %irq   %soft  %steal   %idle    intr/s
10:00:02     all   30.00    0.00   10.00    5.00    0.00    0.00    0.00   55.00   1000.00
10:00:02       0   95.00    0.00    3.00    0.00    0.00    0.00    0.00    2.00    500.00
10:00:02       1    5.00    0.00   17.00   10.00    0.00    0.00    0.00   68.00    500.00

10:00:02     CPU   %user   %nice %system %iowait    %irq   %soft  %steal   %idle    intr/s
10:00:03     all   20.00    0.00   10.00    5.00    0.00    0.00    0.00   65.00   1000.00
10:00:03       0   60.00    0.00   10.00    0.00    0.00    0.00    0.00   30.00    500.00
10:00:03       1    0.00    0.00   10.00   10.00    0.00    0.00    0.00   80.00    500.00

Average:     CPU   %user   %nice %system %iowait    %irq   %soft  %steal   %idle    intr/s
Average:     all   25.00    1.00   10.00    5.00    0.50    0.50    0.00   58.00   1000.00
Average:       0   97.50    0.00    2.00    0.00    0.00    0.00    0.00    0.50    500.00
Average:       1    2.50    0.00   13.50   10.00    0.00    0.00    0.00   74.00    500.00
"""


def test_mpstat_old_columns_use_average_block() -> None:
    res = parse_mpstat(MPSTAT_OLD_AVERAGE)
    assert res.ncpu is None and res.hostname == "oldbox"
    assert len(res.rows) == 9
    assert all(r.average for r in res.selected)
    host = fill_host_from_mpstat(res)
    assert host.cpu_user_pct == 26.0  # %user + %nice
    assert host.cpu_system_pct == 11.0  # %system + %irq + %soft
    assert host.cpu_iowait_pct == 5.0 and host.cpu_idle_pct == 58.0
    assert host.busiest_core == 0 and host.busiest_core_busy_pct == 99.5
    assert host.cores_saturated == 1
    assert host.cpu_count == 2


MPSTAT_DE_NO_AVERAGE = """\
Linux 6.1.0-18-amd64 (rechner)  19.03.2024  _x86_64_        (2 CPU)

14:00:01     CPU    %usr   %nice    %sys %iowait    %irq   %soft  %steal  %guest  %gnice   %idle
14:00:02     all    1,50    0,00    0,50   40,00    0,00    0,00    2,00    0,00    0,00   56,00
14:00:02       0    3,00    0,00    1,00   80,00    0,00    0,00    4,00    0,00    0,00   12,00
14:00:02       1    0,00    0,00    0,00    0,00    0,00    0,00    0,00    0,00    0,00    0,00

14:00:02     CPU    %usr   %nice    %sys %iowait    %irq   %soft  %steal  %guest  %gnice   %idle
14:00:03     all    2,50    0,00    0,50   42,00    0,00    0,00    3,00    0,00    0,00   52,00
14:00:03       0    5,00    0,00    1,00   84,00    0,00    0,00    6,00    0,00    0,00    4,00
14:00:03       1    0,00    0,00    0,00    0,00    0,00    0,00    0,00    0,00    0,00    0,00
"""


def test_mpstat_decimal_commas_last_block_offline_cpu() -> None:
    res = parse_mpstat(MPSTAT_DE_NO_AVERAGE)
    assert [r.line for r in res.selected] == [9, 10, 11]
    host = fill_host_from_mpstat(res)
    assert host.cpu_iowait_pct == 42.0 and host.cpu_steal_pct == 3.0
    # cpu1 prints all zeros: offline, not 100% busy.
    assert host.busiest_core == 0 and host.busiest_core_busy_pct == 12.0
    assert host.cores_saturated == 0


MPSTAT_LOCALIZED_AVERAGE = """\
Linux 5.14.0 (hote)  19/03/2024  _x86_64_  (1 CPU)

10:38:38 AM  CPU    %usr   %nice    %sys %iowait    %irq   %soft  %steal  %guest  %gnice   %idle
10:38:39 AM  all   10,00    0,00    5,00    0,00    0,00    0,00    0,00    0,00    0,00   85,00
10:38:39 AM    0   10,00    0,00    5,00    0,00    0,00    0,00    0,00    0,00    0,00   85,00
Moyenne :    all   12,00    0,00    4,00    1,00    0,00    0,00    0,00    0,00    0,00   83,00
Moyenne :      0   12,00    0,00    4,00    1,00    0,00    0,00    0,00    0,00    0,00   83,00
"""


def test_mpstat_localized_average_label() -> None:
    res = parse_mpstat(MPSTAT_LOCALIZED_AVERAGE)
    assert res.rows[0].time == "10:38:39 AM"
    assert res.selected[0].average and res.selected[0].time is None
    assert fill_host_from_mpstat(res).cpu_idle_pct == 83.0


MPSTAT_JSON = json.dumps(
    {
        "sysstat": {
            "hosts": [
                {
                    "nodename": "n1",
                    "sysname": "Linux",
                    "release": "6.5.0",
                    "machine": "x86_64",
                    "number-of-cpus": 2,
                    "date": "03/19/2024",
                    "statistics": [
                        {
                            "timestamp": "10:00:01",
                            "cpu-load": [
                                {
                                    "cpu": "all",
                                    "usr": 50.0,
                                    "nice": 0.0,
                                    "sys": 5.0,
                                    "iowait": 0.0,
                                    "irq": 0.0,
                                    "soft": 0.0,
                                    "steal": 0.0,
                                    "guest": 0.0,
                                    "gnice": 0.0,
                                    "idle": 45.0,
                                },
                                {
                                    "cpu": "0",
                                    "usr": 95.0,
                                    "nice": 0.0,
                                    "sys": 4.0,
                                    "iowait": 0.0,
                                    "irq": 0.0,
                                    "soft": 0.0,
                                    "steal": 0.0,
                                    "guest": 0.0,
                                    "gnice": 0.0,
                                    "idle": 1.0,
                                },
                                {
                                    "cpu": "1",
                                    "usr": 5.0,
                                    "nice": 0.0,
                                    "sys": 6.0,
                                    "iowait": 0.0,
                                    "irq": 0.0,
                                    "soft": 0.0,
                                    "steal": 0.0,
                                    "guest": 0.0,
                                    "gnice": 0.0,
                                    "idle": 89.0,
                                },
                            ],
                        }
                    ],
                }
            ]
        }
    }
)


MPSTAT_INTERVAL_NO_P = """\
Linux 4.18.0 (h)  03/19/2024  _x86_64_  (8 CPU)

15:00:00     CPU    %usr   %nice    %sys %iowait    %irq   %soft  %steal  %guest  %gnice   %idle
15:00:01     all    5.00    0.00    1.00    0.00    0.00    0.00    0.00    0.00    0.00   94.00
15:00:02     all    7.00    0.00    1.00    0.00    0.00    0.00    0.00    0.00    0.00   92.00
"""


def test_mpstat_interval_without_p_uses_last_row() -> None:
    res = parse_mpstat(MPSTAT_INTERVAL_NO_P)
    assert [r.line for r in res.selected] == [5]
    assert fill_host_from_mpstat(res).cpu_idle_pct == 92.0


def test_mpstat_json() -> None:
    host = fill_host_from_mpstat(parse_mpstat(MPSTAT_JSON))
    assert host.hostname == "n1" and host.cpu_count == 2
    assert host.cpu_user_pct == 50.0 and host.busiest_core == 0 and host.cores_saturated == 1


def test_mpstat_not_mpstat() -> None:
    with pytest.raises(ParseError):
        parse_mpstat("hello\nworld\n")
    with pytest.raises(ParseError):
        parse_mpstat('{"sysstat": 3}')


# --------------------------------------------------------------------------- iostat (key)


@pytest.mark.parametrize("name", samples("iostat/"))
def test_iostat_key(name: str) -> None:
    exp = SAMPLES[name]
    assert set(exp) - META <= {"rows"}
    res = parse_iostat(text_of(name), source=name)
    assert len(res.rows) == len(exp["rows"])
    rows = {r.line: r for r in res.rows}
    for erow in exp["rows"]:
        row = rows[erow["line"]]
        assert row.device == erow["device"]
        columns = {k: v for k, v in erow.items() if k not in ("line", "device")}
        assert row.values == columns
    # The facts come from the last report (the first averages since boot).
    disks = parse_iostat_x(text_of(name), source=name)
    last = exp["rows"][-1]
    assert [d.name for d in disks] == [last["device"]]
    disk = disks[0]
    assert disk.write_mib_s == pytest.approx(last["wkB/s"] / 1024, abs=1e-3)
    assert disk.read_iops == last["r/s"] and disk.write_iops == last["w/s"]
    assert disk.write_await_ms == last["w_await"] and disk.util_pct == last["%util"]
    assert disk.unavailable["rotational"].reason is UnavailableReason.NOT_SUPPORTED
    # expected_rule_signal: the first block saturated at ~178 MiB/s of writes.
    first = disk_facts(res.rows[0])
    assert first.util_pct == 100.0 and first.write_mib_s == pytest.approx(178.5)


IOSTAT_OLD = (HAND / "iostat/iostat-x-sysstat9-sectors-two-reports.txt").read_text()


def test_iostat_old_layout_sectors_and_single_await() -> None:
    disks = {d.name: d for d in parse_iostat_x(IOSTAT_OLD)}
    assert set(disks) == {"sda", "dm-0"}
    sda = disks["sda"]
    assert sda.read_mib_s == 100.0 and sda.write_mib_s == 5.0
    assert sda.read_iops == 100.0 and sda.write_iops == 50.0
    assert sda.read_await_ms == sda.write_await_ms == 33.33
    assert sda.util_pct == 99.0
    host = parse_iostat_cpu(IOSTAT_OLD)
    assert host.cpu_iowait_pct == 40.0 and host.cpu_steal_pct == 1.5
    assert host.cpu_user_pct == 10.0 and host.cpu_idle_pct == 43.5


IOSTAT_KB = (HAND / "iostat/iostat-xk-sysstat10-await-split.txt").read_text()


def test_iostat_sysstat10_kb_layout() -> None:
    (disk,) = parse_iostat_x(IOSTAT_KB)
    assert disk.read_mib_s == 250.0 and disk.write_mib_s == 1.0
    assert disk.read_await_ms == 0.5 and disk.write_await_ms == 20.6


IOSTAT_V12_DE = (HAND / "iostat/iostat-x-sysstat12-de-decimal-comma.txt").read_text()


def test_iostat_sysstat12_layout_decimal_commas() -> None:
    disks = {d.name: d for d in parse_iostat_x(IOSTAT_V12_DE)}
    nvme = disks["nvme0n1"]
    assert nvme.read_mib_s == 512.0 and nvme.read_iops == 512.0
    assert nvme.read_await_ms == 1.25 and nvme.util_pct == 100.0
    assert parse_iostat_cpu(IOSTAT_V12_DE).cpu_iowait_pct == 0.1


IOSTAT_HUMAN = (HAND / "iostat/iostat-xh-human-device-last.txt").read_text()


def test_iostat_human_readable_device_last() -> None:
    disks = {d.name: d for d in parse_iostat_x(IOSTAT_HUMAN)}
    assert disks["sda"].read_mib_s == 1.5 and disks["sda"].util_pct == 99.5
    assert disks["nvme0n1"].read_mib_s == pytest.approx(31.4 / 1024, abs=1e-3)


IOSTAT_JSON = json.dumps(
    {
        "sysstat": {
            "hosts": [
                {
                    "nodename": "n",
                    "statistics": [
                        {
                            "avg-cpu": {
                                "user": 1.0,
                                "nice": 0.0,
                                "system": 1.0,
                                "iowait": 0.5,
                                "steal": 0.0,
                                "idle": 97.5,
                            },
                            "disk": [
                                {
                                    "disk_device": "sda",
                                    "r/s": 1.0,
                                    "w/s": 1.0,
                                    "rkB/s": 1024.0,
                                    "wkB/s": 0.0,
                                    "r_await": 1.0,
                                    "w_await": 1.0,
                                    "aqu-sz": 0.0,
                                    "util": 1.0,
                                }
                            ],
                        },
                        {
                            "avg-cpu": {
                                "user": 5.0,
                                "nice": 0.0,
                                "system": 1.0,
                                "iowait": 30.0,
                                "steal": 2.0,
                                "idle": 62.0,
                            },
                            "disk": [
                                {
                                    "disk_device": "sda",
                                    "r/s": 100.0,
                                    "w/s": 0.0,
                                    "rkB/s": 102400.0,
                                    "wkB/s": 0.0,
                                    "r_await": 9.5,
                                    "w_await": 0.0,
                                    "aqu-sz": 0.95,
                                    "util": 97.0,
                                }
                            ],
                        },
                    ],
                }
            ]
        }
    }
)


def test_iostat_json_last_report() -> None:
    (disk,) = parse_iostat_x(IOSTAT_JSON)
    assert disk.read_mib_s == 100.0 and disk.util_pct == 97.0 and disk.read_await_ms == 9.5
    host = parse_iostat_cpu(IOSTAT_JSON)
    assert host.cpu_iowait_pct == 30.0 and host.cpu_steal_pct == 2.0


def test_iostat_wrapped_device_name() -> None:
    text = (
        "Device:         rrqm/s   wrqm/s     r/s     w/s    rkB/s    wkB/s avgrq-sz avgqu-sz"
        "   await r_await w_await  svctm  %util\n"
        "vg_data-lv_scratch\n"
        "                  0.00     0.00   10.00    0.00  1024.00     0.00   204.80     0.10"
        "   10.00   10.00    0.00   1.00   1.00\n"
    )
    (disk,) = parse_iostat_x(text)
    assert disk.name == "vg_data-lv_scratch" and disk.read_mib_s == 1.0


def test_iostat_not_iostat() -> None:
    with pytest.raises(ParseError):
        parse_iostat_x("nothing to see\n")


# --------------------------------------------------------------------------- /proc files (key)


@pytest.mark.parametrize("name", samples("proc/meminfo"))
def test_meminfo_key(name: str) -> None:
    exp = SAMPLES[name]
    assert set(exp) - META <= {"values_kb", "mem_available_present"}
    text = text_of(name)
    kib = parse_meminfo_kib(text)
    for key, value in exp["values_kb"].items():
        assert kib[key] == value, key
    host = parse_meminfo(text)
    assert ("MemAvailable" in kib) is exp["mem_available_present"]
    assert host.mem_total_mib == pytest.approx(exp["values_kb"]["MemTotal"] / 1024, abs=0.01)
    if not exp["mem_available_present"]:
        assert host.mem_available_mib is None and host.mem_available_pct is None
        assert host.unavailable["mem_available_mib"].reason is UnavailableReason.NOT_SUPPORTED
    swap_used = exp["values_kb"]["SwapTotal"] - exp["values_kb"]["SwapFree"]
    assert host.swap_used_mib == pytest.approx(swap_used / 1024)


def test_meminfo_modern() -> None:
    text = "MemTotal: 1048576 kB\nMemAvailable: 262144 kB\nSwapTotal: 0 kB\nSwapFree: 0 kB\n"
    host = parse_meminfo(text)
    assert host.mem_available_pct == 25.0 and "mem_available_mib" not in host.unavailable


@pytest.mark.parametrize("name", samples("proc/pressure"))
def test_pressure_key(name: str) -> None:
    exp = SAMPLES[name]
    assert set(exp) - META <= {"psi"}
    ((resource, expected),) = exp["psi"].items()
    assert resource in ("cpu", "io", "memory")
    got = parse_pressure(text_of(name))
    assert got == expected
    assert isinstance(got["some"]["total"], int)


def test_pressure_grep_output_and_cpu_without_full() -> None:
    text = "/proc/pressure/cpu:some avg10=0.25 avg60=0.10 avg300=0.05 total=123\n"
    assert parse_pressure(text) == {
        "some": {"avg10": 0.25, "avg60": 0.10, "avg300": 0.05, "total": 123}
    }
    assert parse_pressure("garbage") == {}


# --------------------------------------------------------------------------- ibstat (key)

_CA_FIELDS = {
    "ca_type": "CA type",
    "num_ports": "Number of ports",
    "firmware": "Firmware version",
    "hardware_version": "Hardware version",
    "node_guid": "Node GUID",
    "system_image_guid": "System image GUID",
}
_PORT_FIELDS = {
    "state": "State",
    "physical_state": "Physical state",
    "rate": "Rate",
    "base_lid": "Base lid",
    "lmc": "LMC",
    "sm_lid": "SM lid",
    "capability_mask": "Capability mask",
    "port_guid": "Port GUID",
    "link_layer": "Link layer",
}


@pytest.mark.parametrize("name", samples("ib/"))
def test_ibstat_key(name: str) -> None:
    exp = SAMPLES[name]
    assert set(exp) - META <= {"cas", "noise_lines"}
    text = text_of(name)
    cas = {ca.name: ca for ca in parse_ibstat_cas(text)}
    assert set(cas) == {c["name"] for c in exp["cas"]}
    ports = {(p.ca_name, p.port): p for p in parse_ibstat(text)}
    for eca in exp["cas"]:
        ca = cas[eca["name"]]
        assert set(eca) <= {"name", "ports", *_CA_FIELDS}
        for key, printed in _CA_FIELDS.items():
            assert same(eca[key], ca.fields[printed]), key
        for num, eport in eca["ports"].items():
            got = ca.ports[int(num)]
            assert set(eport) <= set(_PORT_FIELDS)
            for key, value in eport.items():
                assert same(value, got[_PORT_FIELDS[key]]), key
            facts = ports[(eca["name"], int(num))]
            assert facts.state == eport["state"].lower()
            assert facts.phys_state == eport["physical_state"].lower()
            assert facts.rate_gbps == float(eport["rate"])
            if "link_layer" in eport:
                assert facts.link_layer == eport["link_layer"].lower()
    if "noise_lines" in exp:
        lines = text.splitlines()
        kept = [ln for i, ln in enumerate(lines, 1) if i not in exp["noise_lines"]]
        assert all(lines[i - 1].startswith("ibwarn") for i in exp["noise_lines"])
        assert parse_ibstat("\n".join(kept)) == parse_ibstat(text)


def test_ibstat_flattened_and_garbage() -> None:
    text = "CA 'mlx5_0'\nCA type: MT4129\nPort 1:\nState: Initializing\nPhysical state: Polling\n"
    (port,) = parse_ibstat(text)
    assert (port.state, port.phys_state, port.rate_gbps) == ("init", "polling", None)
    with pytest.raises(ParseError, match="no CA"):  # a fragment with no port block: said, not []
        parse_ibstat("State: Active\nno CA here\n")
    with pytest.raises(ParseError, match="ibv_devinfo"):
        parse_ibstat("hca_id:\tmlx5_0\n\tphys_port_cnt:\t1\n\t\tport:\t1\n")
    (single,) = parse_ibstat("CA: 'mlx5_2'\nPort 1:\nState: Active\nRate: 400\n")
    assert (single.ca_name, single.rate_gbps) == ("mlx5_2", 400.0)
    (bare,) = parse_ibstat("Port 1:\n\t\tState: Armed\n\t\tPhysical state: LinkUp\n")
    assert (bare.ca_name, bare.state) == (None, "armed")


# --------------------------------------------------------------------------- iperf3

IPERF3_P4 = (HAND / "iperf3/iperf3-P4-sum.txt").read_text()

IPERF3_SINGLE_MBITS = """\
[ ID] Interval           Transfer     Bandwidth       Retr
[  4]   0.00-10.00  sec  1.09 GBytes   938 Mbits/sec    0             sender
[  4]   0.00-10.00  sec  1.09 GBytes   936 Mbits/sec                  receiver
"""

IPERF3_UDP_KBITS = """\
[ ID] Interval           Transfer     Bitrate         Jitter    Lost/Total Datagrams
[  5]   0.00-10.00  sec  1.25 MBytes  1049 Kbits/sec  0.000 ms  0/906 (0%)  sender
[  5]   0.00-10.04  sec  1.25 MBytes  1045 Kbits/sec  0.021 ms  0/906 (0%)  receiver
"""

IPERF3_JSON = json.dumps(
    {
        "start": {"connected": [{"socket": 5}]},
        "intervals": [],
        "end": {
            "streams": [{"receiver": {"bits_per_second": 23.3e9}}],
            "sum_sent": {"seconds": 10.0, "bits_per_second": 93.7e9, "retransmits": 0},
            "sum_received": {"seconds": 10.04, "bits_per_second": 93.2e9},
        },
    }
)


@pytest.mark.parametrize(
    ("text", "gbps"),
    [
        (IPERF3_P4, 93.2),
        (IPERF3_SINGLE_MBITS, 0.936),
        (IPERF3_UDP_KBITS, 0.001045),
        (IPERF3_JSON, 93.2),
        ("$ iperf3 -c x -J\n" + IPERF3_JSON, 93.2),
        ("[  5]   0.00-10.00  sec  1.1 GBytes  9.4 Gbits/sec  0  sender\n", None),
        ('{"error": "unable to connect to server: Connection refused"}', None),
        ("[SUM]  0.0-10.0 sec  10.9 GBytes  9.36 Gbits/sec\n", 9.36),  # iperf 2
        ("", None),
        ("iperf3: error - unable to connect to server", None),
    ],
)
def test_iperf3(text: str, gbps: float | None) -> None:
    got = parse_iperf3(text)
    if gbps is None:
        assert got is None
    else:
        assert got == pytest.approx(gbps)


# --------------------------------------------------------------------------- fio

FIO3_SEQREAD = (HAND / "fio/fio3-seqread-libaio.txt").read_text()

FIO3_TWO_JOBS_RANDRW = (HAND / "fio/fio3-randrw-two-jobs-no-group-reporting.txt").read_text()

FIO2_OLD = (HAND / "fio/fio2-seqread-old-format.txt").read_text()

FIO3_TWO_GROUPS_KB1000 = """\
seq: (groupid=0, jobs=1): err= 0: pid=1: Mon Jan  8 12:00:00 2024
  read: IOPS=3000, BW=3146MB/s (3000MiB/s)(184GB/60001msec)
rand: (groupid=1, jobs=1): err= 0: pid=2: Mon Jan  8 12:01:00 2024
  read: IOPS=1.2M, BW=4915MB/s (4688MiB/s)(295GB/60001msec)
"""

# --numjobs=8 --group_reporting: one header for the eight jobs (fio 3.28 layout).
FIO3_GROUP_REPORTING_8 = (HAND / "fio/fio3-seqread-numjobs8-group-reporting.txt").read_text()

FIO_JSON_GROUPED = json.dumps(
    {
        "fio version": "fio-3.28",
        "global options": {"rw": "read", "bs": "1M", "numjobs": "8", "group_reporting": ""},
        "jobs": [
            {
                "jobname": "concread",
                "groupid": 0,
                "error": 0,
                "job options": {"name": "concread"},
                "read": {"bw_bytes": 1526726656, "bw": 1490944, "iops": 1456.0},
            }
        ],
    }
)

FIO_JSON = "note: both iodepth >= 1 and synchronous I/O engine are selected\n" + json.dumps(
    {
        "fio version": "fio-3.28",
        "jobs": [
            {
                "jobname": "seqread",
                "groupid": 0,
                "error": 0,
                "read": {
                    "io_bytes": 128849018880,
                    "bw_bytes": 2147483648,
                    "bw": 2097152,
                    "iops": 2048.0,
                },
                "write": {"io_bytes": 0, "bw_bytes": 0, "bw": 0, "iops": 0.0},
            },
        ],
    }
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (FIO3_SEQREAD, {"read_mib_s": 2048.0, "read_iops": 2048.0, "read_jobs": 1}),
        (FIO3_GROUP_REPORTING_8, {"read_mib_s": 1456.0, "read_iops": 1456.0, "read_jobs": 8}),
        (
            FIO3_TWO_JOBS_RANDRW,
            {
                "read_mib_s": 1176.0,
                "read_iops": 301000.0,
                "write_mib_s": 504.0,
                "write_iops": 129000.0,
                "read_jobs": 2,
            },
        ),
        (FIO2_OLD, {"read_mib_s": 511.145, "read_iops": 511.0, "read_jobs": 1}),
        # kb_base=1000: MB means 10^6 bytes; the best of two stonewalled groups.
        (FIO3_TWO_GROUPS_KB1000, {"read_mib_s": 4687.5, "read_iops": 1_200_000.0, "read_jobs": 1}),
        (FIO_JSON, {"read_mib_s": 2048.0, "read_iops": 2048.0, "read_jobs": 1}),
        (FIO_JSON_GROUPED, {"read_mib_s": 1456.0, "read_iops": 1456.0, "read_jobs": 8}),
        ("fio: pid=0, err=2/file:filesetup.c:xxx, func=open, error=No such file", {}),
        ("", {}),
    ],
)
def test_fio(text: str, expected: dict[str, float]) -> None:
    got = parse_fio(text)
    assert set(got) == set(expected)
    for key, value in expected.items():
        assert got[key] == pytest.approx(value, rel=1e-3), key


def test_fio_fills_host() -> None:
    host = fill_host_from_fio(parse_fio(FIO3_SEQREAD))
    assert host.storage_read_mib_s == 2048.0 and host.storage_read_iops == 2048.0


# --------------------------------------------------------------------------- garbage


PARSERS = [
    lambda t: parse_mpstat(t),
    lambda t: parse_iostat_x(t),
    lambda t: parse_iostat_cpu(t),
    lambda t: parse_meminfo(t),
    parse_pressure,
    parse_ibstat,
    parse_iperf3,
    parse_fio,
]


@pytest.mark.parametrize("parser", PARSERS)
@pytest.mark.parametrize(
    "text",
    [
        "",
        "\x00\xff garbage \n\n",
        "CPU %idle\nall x y z\n",
        "Device r/s\nsda 1 2 3 4\n",
        "{not json",
        '{"sysstat": {"hosts": []}}',
        '{"end": 5, "jobs": 3}',
        "avg-cpu: %user\n",
        "MemTotal:\n",
        "read: IOPS=, BW=MiB/s\n",
    ],
)
def test_garbage_does_not_crash(parser: Any, text: str) -> None:
    with contextlib.suppress(ParseError):  # the only failure a parser may report
        parser(text)


@settings(max_examples=150, deadline=None)
@given(
    st.text(
        alphabet=st.sampled_from(list("0123456789 .,:%/{}[]\"'\nCPUalDevicesumkMGB=-")),
        max_size=300,
    )
)
def test_fuzz_only_parse_error(text: str) -> None:
    for parser in PARSERS:
        with contextlib.suppress(ParseError):
            parser(text)
