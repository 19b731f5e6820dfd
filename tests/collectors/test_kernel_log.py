"""Kernel log parser and collector: real samples checked against the answer key, plus
hand-written lines for every format the samples do not cover."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from gpu_triage.collectors import base
from gpu_triage.collectors.base import CollectContext, CollectorUnavailable
from gpu_triage.collectors.kernel_log import KernelLogCollector
from gpu_triage.collectors.parsers.kernel_log import (
    LINE_KINDS,
    MAX_RAW_LINES,
    KernelLog,
    KernelLogParser,
    LineKind,
    _candidates,
    parse_kernel_log,
)
from gpu_triage.collectors.parsers.kernel_timestamps import month_number, parse_iso
from gpu_triage.collectors.pci import normalize_pci
from gpu_triage.io.commands import CommandResult
from gpu_triage.model.facts import Facts, KernelEvent

DATA = Path(__file__).resolve().parent.parent / "data" / "real-outputs"
KEY: dict[str, Any] = yaml.safe_load((DATA / "expected.yaml").read_text())["samples"]
KINDS = ("xid", "sxid", "aer", "oom")
SAMPLES = sorted(name for name in KEY if name.split("/")[0] in KINDS)
SEVERITIES = {
    "Corrected": "corrected",
    "Uncorrected (Non-Fatal)": "uncorrected_nonfatal",
    "Uncorrected (Fatal)": "uncorrected_fatal",
}
# the samples are from 2024-2026; stamps without a year are dated by this
YEAR = 2026


def _parse(name: str) -> KernelLog:
    text = (DATA / name).read_text(encoding="utf-8")
    return parse_kernel_log(text, source=name, year=YEAR)


def _lines(ev: KernelEvent) -> range:
    """The file lines an event was built from (merged events span several)."""
    assert ev.line is not None
    return range(ev.line, ev.line + ev.raw.count("\n") + 1)


def _covering(events: list[Any], line: int) -> Any:
    found = [ev for ev in events if line in _lines(ev)]
    assert found, f"no event covers line {line}"
    return found[0]


def _file_line(name: str, line: int) -> str:
    return (DATA / name).read_text(encoding="utf-8").split("\n")[line - 1].rstrip("\r")


def _cases(section: str) -> list[Any]:
    out = []
    for name in SAMPLES:
        for i, exp in enumerate(KEY[name].get(section) or []):
            out.append(pytest.param(name, exp, id=f"{name.split('/')[-1]}#{i}"))
    return out


# --------------------------------------------------------------------------- answer key


def test_fixtures_are_copied() -> None:
    assert SAMPLES, "no kernel log samples in the answer key"
    for name in SAMPLES:
        assert (DATA / name).is_file(), name


@pytest.mark.parametrize("name", SAMPLES)
def test_sample_parses_and_counts(name: str) -> None:
    exp = KEY[name]
    log = _parse(name)
    text = (DATA / name).read_text(encoding="utf-8")
    assert log.lines_read == len(text.rstrip("\n").split("\n"))
    assert len(log.xids) == len(exp.get("xid_events") or [])
    assert sorted({x.code for x in log.xids}) == sorted(exp.get("xid_codes") or [])
    assert len(log.sxids) == len(exp.get("sxid_events") or [])
    assert len(log.ooms) == len(exp.get("oom_kills") or [])
    assert len(log.bus_losses) == len(exp.get("fallen_off_bus") or [])
    for ev in log.events():
        assert ev.source == name
        assert _file_line(name, ev.line or 0) in ev.raw.split("\n")


@pytest.mark.parametrize(("name", "exp"), _cases("xid_events"))
def test_xid_event(name: str, exp: dict[str, Any]) -> None:
    log = _parse(name)
    [ev] = [x for x in log.xids if x.line == exp["line"]]
    assert ev.code == exp["xid"]
    assert ev.pci_bus_id == normalize_pci(str(exp["pci"]))
    assert ev.pci_bus_id is not None and ev.pci_bus_id.endswith(".0")
    pid = exp["pid"]
    # pid='<unknown>' is not a number: the model keeps None
    assert ev.pid == (pid if isinstance(pid, int) else None)
    assert ev.process_name == exp["name"]
    assert ev.channel == (str(exp["channel"]) if exp["channel"] is not None else None)
    assert ev.message == exp["message"]
    assert ev.raw.split("\n")[0].endswith(exp["raw_after_code"])
    if "ts" in exp:
        assert ev.time_text == str(exp["ts"])
        assert ev.time is not None
    else:
        assert ev.time_text is None and ev.time is None
    if "monotonic" in exp:
        assert ev.monotonic_s == float(exp["monotonic"])


@pytest.mark.parametrize(("name", "exp"), _cases("sxid_events"))
def test_sxid_event(name: str, exp: dict[str, Any]) -> None:
    log = _parse(name)
    [ev] = [x for x in log.sxids if x.line == exp["line"]]
    assert ev.code == exp["sxid"]
    assert ev.pci_bus_id == normalize_pci(str(exp["pci"])) == str(exp["pci"])
    assert ev.time_text == str(exp["ts"])
    assert ev.time == parse_iso(str(exp["ts"]))
    assert ev.message is not None and ev.message.startswith("Data {")
    for word in exp.get("data") or []:
        assert str(word) in ev.message
    assert ev.fatal is None  # a Data line says neither


@pytest.mark.parametrize(("name", "exp"), _cases("aer_events"))
def test_aer_event(name: str, exp: dict[str, Any]) -> None:
    log = _parse(name)
    lines = exp.get("lines") or [exp["line"]]
    ev = _covering(log.aers, lines[0])
    for line in lines:
        assert line in _lines(ev)
    assert ev.reporter == exp["reporter"]
    if "severity" in exp:
        assert ev.severity == SEVERITIES[exp["severity"]]
    if "type" in exp:
        assert ev.error_type == exp["type"]
    for bit in exp.get("error_bits") or []:
        assert bit["name"] in ev.errors
    if "message" in exp:
        assert exp["message"] in ev.raw


@pytest.mark.parametrize(("name", "exp"), _cases("cant_recover"))
def test_aer_cant_recover(name: str, exp: dict[str, Any]) -> None:
    log = _parse(name)
    [ev] = [a for a in log.aers if a.line == exp["line"]]
    assert ev.pci_bus_id == exp["pci_bdf"]
    assert ev.device_is_gpu is (exp["driver"] == "nvidia")


def test_aer_block_ties_gpu_behind_root_port() -> None:
    name = "aer/aer-uncorrected-fatal-cmplto-nvidia-cant-recover-dmesg-H-returnn1500.log"
    log = _parse(name)
    block = _covering(log.aers, 5)
    assert block.pci_bus_id == "0000:00:03.0" and block.device_is_gpu is False
    assert block.errors == ["SDES", "CmpltTO"]
    # the GPU the fatal error takes down: the nvidia "can't recover" after the block
    gpu = next(a for a in log.aers if a.line == 9)
    assert gpu.severity == "uncorrected_fatal" and gpu.reporter == "pcieport 0000:00:03.0"
    for ev in log.aers:  # dmesg -H: relative stamps only
        assert ev.time is None and ev.monotonic_s is None
        assert ev.time_text is not None and ev.time_text.startswith("+")
    # recovery lines of the reporter join the block
    assert "device recovery failed" in block.raw and "link has been reset" in block.raw


@pytest.mark.parametrize(("name", "exp"), _cases("oom_kills"))
def test_oom_kill(name: str, exp: dict[str, Any]) -> None:
    log = _parse(name)
    [ev] = [o for o in log.ooms if o.pid == exp["pid"]]
    assert ev.line == exp["line"]
    assert ev.process_name == exp["process"]
    assert ev.anon_rss_kib == exp["anon_rss_kb"]
    assert ev.time_text == str(exp["ts"])
    con = KEY[name]["oom_constraint"]
    assert con["pid"] == ev.pid
    assert ev.constraint == con["constraint"]
    assert ev.task_cgroup == con["task_memcg"]
    assert ev.cgroup is None  # global OOM: no memory cgroup hit its limit
    assert con["line"] in _lines(ev) or _file_line(name, con["line"]) in ev.raw
    for reap in KEY[name].get("oom_reaper") or []:
        assert _file_line(name, reap["line"]) in ev.raw


@pytest.mark.parametrize(("name", "exp"), _cases("fallen_off_bus"))
def test_fallen_off_bus(name: str, exp: dict[str, Any]) -> None:
    log = _parse(name)
    [ev] = [b for b in log.bus_losses if b.pci_bus_id == exp["pci_bdf"]]
    assert _file_line(name, exp["line"]) in ev.raw
    assert ev.message == "GPU has fallen off the bus."


def test_xid79_yields_bus_loss_too() -> None:
    log = _parse("xid/xid-79-rtx5090-gsp-ogkm1151.log")
    [xid] = log.xids
    [loss] = log.bus_losses
    assert xid.code == 79 and xid.line == loss.line == 3
    assert loss.pci_bus_id == xid.pci_bus_id == "0000:06:00.0"


@pytest.mark.parametrize(
    "name", [n for n in SAMPLES if KEY[n].get("gpu_identity_lines")], ids=lambda n: n
)
def test_gpu_identity_lines(name: str) -> None:
    log = _parse(name)
    for ident in KEY[name]["gpu_identity_lines"]:
        if "uuid" in ident:
            assert log.gpu_uuids[normalize_pci(str(ident["pci"])) or ""] == ident["uuid"]


def test_xid74_nvlink_and_xid154_recovery_in_message() -> None:
    name = "xid/xid-74-45-154-a100-talos-vllm40652.log"
    exp = KEY[name]
    log = _parse(name)
    [x74] = [x for x in log.xids if x.code == 74]
    assert f"link {exp['nvlink']['link']}" in (x74.message or "")
    assert "fatal" in (x74.message or "")
    [x154] = [x for x in log.xids if x.code == 154]
    ra = exp["recovery_action"]
    assert x154.line == ra["line"]
    assert f"from {ra['from']} to {ra['to']}" in (x154.message or "")
    # the Xid 74 line is an Xid, not a separate NVLink error
    assert log.nvlink_errors == []


def test_xid120_crashcat_continuation_lines_join_the_xid() -> None:
    log = _parse("xid/xid-120-gsp-crashcat-journal-ogkm829.log")
    [ev] = log.xids
    assert list(_lines(ev)) == [8, 9, 10, 11]
    assert "RISC-V CSR State" in ev.raw
    assert ev.message and "Reported by" not in ev.message


def test_xid119_banner_lines_stay_out() -> None:
    log = _parse("xid/xid-119-a100-domain0001-dmesg-T-vllm40652.log")
    assert [x.raw.count("\n") for x in log.xids] == [0, 0]
    assert [x.pci_bus_id for x in log.xids] == ["0001:6c:00.0", "0001:96:00.0"]
    assert log.xids[0].time == datetime(2026, 4, 26, 23, 12, 26)


def test_polish_months_and_dedup_counts() -> None:
    log = _parse("xid/xid-38-109-polish-locale-ogkm1045.log")
    assert {x.time for x in log.xids} == {datetime(2026, 4, 15, 7, 56, 59)}
    assert [x.code for x in log.xids].count(109) == 5


def test_syslog_inner_monotonic_and_absolute_time() -> None:
    log = _parse("xid/xid-48-64-dbe-page-retirement-syslog-gpuoperator1146.log")
    ev = log.xids[0]
    assert ev.time == datetime(2026, 12, 2, 11, 38, 47)
    assert ev.monotonic_s == 219.470994
    assert ev.pci_bus_id == "0000:07:00.0"


# --------------------------------------------------------------------------- Xid formats


def _one_xid(line: str) -> Any:
    log = parse_kernel_log(line)
    assert len(log.xids) == 1, log.xids
    return log.xids[0]


@pytest.mark.parametrize(
    ("line", "want"),
    [
        pytest.param(
            "NVRM: Xid (PCI:0000:41:00): 79, pid=1234, name=python, GPU has fallen off the bus.",
            {
                "code": 79,
                "pci": "0000:41:00.0",
                "pid": 1234,
                "name": "python",
                "channel": None,
                "message": "GPU has fallen off the bus.",
            },
            id="pid-name",
        ),
        pytest.param(
            "NVRM: Xid (PCI:0000:07:00): 48, pid='<unknown>', name=<unknown>, An uncorrectable",
            {"code": 48, "pid": None, "name": "<unknown>", "message": "An uncorrectable"},
            id="unknown-pid-name",
        ),
        pytest.param(
            "NVRM: Xid (PCI:0000:3b:00): 43, pid=2880, name=python3, Ch 0000003a",
            {"code": 43, "pid": 2880, "name": "python3", "channel": "0000003a", "message": ""},
            id="ch-only",
        ),
        pytest.param(
            "NVRM: Xid (PCI:0000:3b:00): 31, pid=1, name=a b, Ch 00000010, intr 00000000. "
            "MMU Fault: ENGINE GRAPHICS",
            {
                "code": 31,
                "name": "a b",
                "channel": "00000010",
                "message": "intr 00000000. MMU Fault: ENGINE GRAPHICS",
            },
            id="name-with-space",
        ),
        pytest.param(
            "NVRM: Xid (PCI:0000:07:00): 109, pid=326, name=modprobe, channel 0x00000007, "
            "errorString CTX SWITCH TIMEOUT, Info 0x74007",
            {"channel": "0x00000007", "message": "errorString CTX SWITCH TIMEOUT, Info 0x74007"},
            id="channel-0x",
        ),
        pytest.param(
            "NVRM: Xid (PCI:0000:02:00): 31, Channel ID 00000052 intr 00040000",
            {
                "code": 31,
                "pid": None,
                "name": None,
                "channel": "00000052",
                "message": "intr 00040000",
            },
            id="old-channel-id",
        ),
        pytest.param(
            "NVRM: Xid (0000:01:00): 13, 0001 00000000 0000a097 00001b0c 00000000 00000000",
            {
                "code": 13,
                "pci": "0000:01:00.0",
                "channel": None,
                "message": "0001 00000000 0000a097 00001b0c 00000000 00000000",
            },
            id="old-no-PCI-prefix",
        ),
        pytest.param(
            "NVRM: Xid (PCI:0000:01:00): 13, pid=9, name=x, Graphics Exception: ChID 0010, "
            "Class 0000c5c0, Offset 00000000, Data 00000000",
            {
                "channel": None,
                "message": "Graphics Exception: ChID 0010, Class 0000c5c0, "
                "Offset 00000000, Data 00000000",
            },
            id="chid-is-message",
        ),
        pytest.param(
            "NVRM: Xid (PCI:0000:41:00 GPU-I:05): 31, pid=4242, name=python3, Ch 00000008, "
            "intr 00000000. MMU Fault",
            {
                "pci": "0000:41:00.0",
                "gpu_instance": 5,
                "channel": "00000008",
                "message": "intr 00000000. MMU Fault",
            },
            id="mig-in-paren",
        ),
        pytest.param(
            "NVRM: Xid (PCI:0000:41:00): 43, pid=4242, name=python3, GPU-I:03, Ch 00000009",
            {"gpu_instance": 3, "channel": "00000009", "message": ""},
            id="mig-field",
        ),
        pytest.param(
            "NVRM: Xid (PCI:...): 79, GPU has fallen off the bus.",
            {"code": 79, "pci": None, "message": "GPU has fallen off the bus."},
            id="redacted-pci",
        ),
        pytest.param(
            "NVRM: Xid (PCI:0000:3B:0A): 62, pid=1, name=x, 0000(0000) 00000000 00000000",
            {"pci": "0000:3b:0a.0", "message": "0000(0000) 00000000 00000000"},
            id="upper-case-pci",
        ),
        pytest.param(
            "NVRM: Xid (PCI:10000:01:00): 94, pid=7, name=t, Contained: SM (0x1). RST: No",
            {"pci": "10000:01:00.0", "message": "Contained: SM (0x1). RST: No"},
            id="vmd-domain",
        ),
        pytest.param(
            "NVRM: Xid (PCI:0000:c1:00): 154",
            {"code": 154, "message": ""},
            id="code-only",
        ),
        pytest.param(
            "NVRM: Xid (PCI:0000:48:00): 45, pid=1, name=w, channel 0x00000010 caused by previous "
            "Xid 45",
            {"channel": "0x00000010", "message": "caused by previous Xid 45"},
            id="caused-by-previous",
        ),
    ],
)
def test_xid_formats(line: str, want: dict[str, Any]) -> None:
    ev = _one_xid(line)
    names = {"pci": "pci_bus_id", "name": "process_name"}
    for key, value in want.items():
        assert getattr(ev, names.get(key, key)) == value, key
    assert ev.raw == line and ev.line == 1


def test_sxid_and_xid_are_not_confused() -> None:
    log = parse_kernel_log(
        "nvidia-nvswitch0: SXid (PCI:0000:3b:00.0): 12028, Non-fatal, Link 32 egress error\n"
        "NVRM: _kgspLogXid119: ****** GSP Timeout ******\n"
    )
    assert log.xids == [] and len(log.sxids) == 1


def test_xid74_register_dump_continuation_and_nvlink_line() -> None:
    log = parse_kernel_log(
        "[ 10.000000] NVRM: Xid (PCI:0000:b3:00): 74, pid=1, name=x, NVLink: fatal error "
        "detected on link 3(0x0, 0x0, 0x10000, 0x0, 0x0, 0x0, 0x0)\n"
        "[ 10.000001] NVRM:     0x00000000 0x00010000 0x00000000 0x00000000\n"
        "[ 10.000002] NVRM: NVLink: fatal error detected on link 3(0x0, 0x10000)\n"
        "[ 10.000100] NVRM: GPU at PCI:0000:b3:00: GPU-aaaa\n"
    )
    [xid] = log.xids
    assert list(_lines(xid)) == [1, 2, 3]
    [nv] = log.nvlink_errors
    assert nv.link == 3 and nv.line == 3 and nv.monotonic_s == 10.000002
    assert nv.message == "NVLink: fatal error detected on link 3(0x0, 0x10000)"


def test_wrapped_paste_joins_raw_but_not_unrelated_lines() -> None:
    log = parse_kernel_log(
        "[ 5.0] NVRM: Xid (PCI:0000:01:00): 13, Graphics SM Warp Exception on\n"
        "    (GPC 0, TPC 1): Out Of Range Address\n"
        "[ 5.1] nvidia-modeset: something else\n"
    )
    [xid] = log.xids
    assert list(_lines(xid)) == [1, 2]


def test_sxid_three_line_report_merges() -> None:
    log = parse_kernel_log(
        "nvidia-nvswitch3: SXid (PCI:0000:c1:00.0): 20034, Fatal, Link 30 LTSSM Fault Up\n"
        "nvidia-nvswitch3: SXid (PCI:0000:c1:00.0): 20034, Severity 1 Engine instance 30 "
        "Sub-engine instance 00\n"
        "nvidia-nvswitch3: SXid (PCI:0000:c1:00.0): 20034, Data {0x50610002, 0x10100030}\n"
        "nvidia-nvswitch0: SXid (PCI:0000:3b:00.0): 12028, Non-fatal, Link 32 egress "
        "non-posted PRIV error (First)\n"
    )
    first, second = log.sxids
    assert (first.code, first.fatal, first.link, first.pci_bus_id) == (
        20034,
        True,
        30,
        "0000:c1:00.0",
    )
    assert first.message == "Fatal, Link 30 LTSSM Fault Up"
    assert list(_lines(first)) == [1, 2, 3]
    assert (second.code, second.fatal, second.link) == (12028, False, 32)


# --------------------------------------------------------------------------- timestamps

BOOT = datetime(2024, 5, 1, 9, 0, 0, tzinfo=UTC)
NOW = datetime(2024, 5, 1, 12, 0, 0, tzinfo=UTC)
XID = "NVRM: Xid (PCI:0000:41:00): 79, GPU has fallen off the bus."


@pytest.mark.parametrize(
    ("prefix", "time_text", "time", "mono"),
    [
        pytest.param(
            "[  199.234935] ",
            "199.234935",
            BOOT + timedelta(seconds=199.234935),
            199.234935,
            id="dmesg",
        ),
        pytest.param(
            "[  199.234935 <    0.000056>] ",
            "199.234935",
            BOOT + timedelta(seconds=199.234935),
            199.234935,
            id="dmesg-d",
        ),
        pytest.param(
            "<4>[  199.234935] ",
            "199.234935",
            BOOT + timedelta(seconds=199.234935),
            199.234935,
            id="dmesg-r",
        ),
        pytest.param(
            "kern  :err   : [  199.234935] ",
            "199.234935",
            BOOT + timedelta(seconds=199.234935),
            199.234935,
            id="dmesg-x",
        ),
        pytest.param(
            "[Wed May  1 10:00:00 2024] ",
            "Wed May  1 10:00:00 2024",
            datetime(2024, 5, 1, 10, 0, 0),
            None,
            id="dmesg-T",
        ),
        pytest.param(
            "2024-05-01T10:00:00,123456+00:00 ",
            "2024-05-01T10:00:00,123456+00:00",
            datetime(2024, 5, 1, 10, 0, 0, 123456, tzinfo=UTC),
            None,
            id="dmesg-iso",
        ),
        pytest.param(
            "kern  :err   : 2024-05-01T12:00:00,000001+02:00 ",
            "2024-05-01T12:00:00,000001+02:00",
            datetime(2024, 5, 1, 10, 0, 0, 1, tzinfo=UTC),
            None,
            id="dmesg-iso-x",
        ),
        pytest.param(
            "2024-05-01T10:00:00+0000 gpu7 kernel: ",
            "2024-05-01T10:00:00+0000",
            datetime(2024, 5, 1, 10, tzinfo=UTC),
            None,
            id="journal-short-iso",
        ),
        pytest.param(
            "2024-05-01T10:00:00.500000+00:00 gpu7 kernel: ",
            "2024-05-01T10:00:00.500000+00:00",
            datetime(2024, 5, 1, 10, 0, 0, 500000, tzinfo=UTC),
            None,
            id="journal-short-iso-precise",
        ),
        pytest.param(
            "Tue 2024-05-01 10:00:00 UTC gpu7 kernel: ",
            "Tue 2024-05-01 10:00:00 UTC",
            datetime(2024, 5, 1, 10, tzinfo=UTC),
            None,
            id="journal-short-full",
        ),
        pytest.param(
            "May  1 10:00:00 gpu7 kernel: ",
            "May  1 10:00:00",
            datetime(2024, 5, 1, 10),
            None,
            id="syslog",
        ),
        pytest.param(
            "May 01 10:00:00.250000 gpu7 kernel: ",
            "May 01 10:00:00.250000",
            datetime(2024, 5, 1, 10, 0, 0, 250000),
            None,
            id="journal-short-precise",
        ),
        pytest.param(
            "May  1 10:00:00 gpu7 kernel: [  199.234935] ",
            "May  1 10:00:00",
            datetime(2024, 5, 1, 10),
            199.234935,
            id="syslog-inner-dmesg",
        ),
        pytest.param(
            "[  199.234935] gpu7 kernel: ",
            "199.234935",
            BOOT + timedelta(seconds=199.234935),
            199.234935,
            id="journal-short-monotonic",
        ),
        pytest.param(
            "maj 01 10:00:00 gpu7 kernel: ",
            "maj 01 10:00:00",
            datetime(2024, 5, 1, 10),
            None,
            id="syslog-polish",
        ),
        pytest.param(
            "Mai 01 10:00:00 gpu7 kernel: ",
            "Mai 01 10:00:00",
            datetime(2024, 5, 1, 10),
            None,
            id="syslog-german",
        ),
        pytest.param(
            "5月 01 10:00:00 gpu7 kernel: ",
            "5月 01 10:00:00",
            datetime(2024, 5, 1, 10),
            None,
            id="syslog-chinese",
        ),
        pytest.param(
            "192.168.1.5: kern: warning: [2024-05-01T10:00:00.52643656Z]: ",
            "2024-05-01T10:00:00.52643656Z",
            datetime(2024, 5, 1, 10, 0, 0, 526436, tzinfo=UTC),
            None,
            id="talosctl",
        ),
        pytest.param(
            "6,2345,199234935,-;",
            "199234935",
            BOOT + timedelta(seconds=199.234935),
            199.234935,
            id="kmsg",
        ),
        pytest.param("[  +0.000844] ", "+0.000844", None, None, id="dmesg-H-relative"),
        pytest.param(
            "[May 1 10:00] ", "May 1 10:00", datetime(2024, 5, 1, 10), None, id="dmesg-H-minute"
        ),
        pytest.param("", None, None, None, id="no-stamp"),
        pytest.param("[<    0.000844>] ", "0.000844", None, None, id="dmesg-delta"),
        pytest.param(
            "1714557600.500000 gpu7 kernel: ",
            "1714557600.500000",
            datetime(2024, 5, 1, 10, 0, 0, 500000, tzinfo=UTC),
            None,
            id="journal-short-unix",
        ),
        pytest.param(
            "[  199.234935][ T1234] ",
            "199.234935",
            BOOT + timedelta(seconds=199.234935),
            199.234935,
            id="printk-caller",
        ),
        pytest.param(
            "\x1b[32m[  199.234935]\x1b[0m ",
            "199.234935",
            BOOT + timedelta(seconds=199.234935),
            199.234935,
            id="dmesg-color",
        ),
    ],
)
def test_timestamp_forms(
    prefix: str, time_text: str | None, time: datetime | None, mono: float | None
) -> None:
    log = parse_kernel_log(prefix + XID, boot_time=BOOT, year=2024, now=NOW)
    [ev] = log.xids
    assert ev.time_text == time_text
    assert ev.time == time
    assert ev.monotonic_s == mono
    assert ev.message == "GPU has fallen off the bus."
    if time is None:
        assert ev.age_s is None
    else:
        aware = time if time.tzinfo else time.astimezone()
        assert ev.age_s == pytest.approx((NOW - aware).total_seconds(), abs=1e-3)
    [loss] = log.bus_losses
    assert loss.time == ev.time and loss.time_text == ev.time_text


def test_plain_dmesg_without_boot_time_keeps_monotonic_only() -> None:
    [ev] = parse_kernel_log("[  12.5] " + XID, now=NOW).xids
    assert ev.monotonic_s == 12.5 and ev.time is None and ev.age_s is None


def test_syslog_year_from_now_and_new_year_rollover() -> None:
    jan = datetime(2025, 1, 2, 0, 0, 0)
    log = parse_kernel_log(
        f"Dec 31 23:59:59 h kernel: {XID}\nJan  1 00:00:05 h kernel: {XID}", now=jan
    )
    assert [x.time for x in log.xids] == [
        datetime(2024, 12, 31, 23, 59, 59),
        datetime(2025, 1, 1, 0, 0, 5),
    ]
    assert [x.age_s for x in log.xids] == [86401.0, 86395.0]
    # without year or now a syslog stamp cannot be dated
    [ev] = parse_kernel_log(f"Dec 31 23:59:59 h kernel: {XID}").xids
    assert ev.time is None and ev.time_text == "Dec 31 23:59:59"


@pytest.mark.parametrize(
    ("token", "month"),
    [
        ("Apr", 4),
        ("kwi", 4),
        ("paź", 10),
        ("déc.", 12),
        ("Okt", 10),
        ("mrt", 3),
        ("12月", 12),
        ("авг", 8),
        ("xyz", None),
    ],
)
def test_month_names(token: str, month: int | None) -> None:
    assert month_number(token) == month


@pytest.mark.parametrize(
    ("text", "pci"),
    [
        ("0000:41:00", "0000:41:00.0"),
        ("PCI:0000:41:00", "0000:41:00.0"),
        ("0000:3B:00.1", "0000:3b:00.1"),
        ("PCI:...", None),
        ("PCI:0000:XX:00", None),
        ("", None),
        (None, None),
        ("PCI:0000:41:xx", None),
    ],
)
def test_normalize_pci(text: str | None, pci: str | None) -> None:
    assert normalize_pci(text) == pci


def test_parse_iso_variants() -> None:
    assert parse_iso("2024-05-01T10:00:00Z") == datetime(2024, 5, 1, 10, tzinfo=UTC)
    assert parse_iso("2024-05-01T10:00:00.123456789-0130") == datetime(
        2024, 5, 1, 10, 0, 0, 123456, tzinfo=timezone(-timedelta(hours=1, minutes=30))
    )
    assert parse_iso("2024-13-01T10:00:00") is None
    assert parse_iso("not a time") is None


# --------------------------------------------------------------------------- bus loss, NVLink


def test_fallen_off_bus_without_xid() -> None:
    log = parse_kernel_log(
        "[ 50.0] NVRM: GPU at PCI:0000:3b:00: GPU-11111111-2222-3333-4444-555555555555\n"
        "[ 50.0] NVRM: GPU Board Serial Number: 1234\n"
        "[ 50.1] NVRM: GPU 0000:3b:00.0: GPU has fallen off the bus.\n"
        "[ 60.0] NVRM: GPU at 0000:5e:00: GPU-66666666-2222-3333-4444-555555555555\n"
        "[ 60.0] NVRM: GPU has fallen off the bus.\n"
    )
    assert log.xids == []
    a, b = log.bus_losses
    assert (a.pci_bus_id, a.line, a.message) == ("0000:3b:00.0", 3, "GPU has fallen off the bus.")
    assert (b.pci_bus_id, b.line) == ("0000:5e:00.0", 5)  # named by the line before
    assert log.gpu_uuids["0000:3b:00.0"].startswith("GPU-1111")


def test_fallen_off_bus_named_as_pci_in_text() -> None:
    [ev] = parse_kernel_log(
        "NVRM: The NVIDIA GPU at PCI:0000:01:00 has fallen off the bus and is not responding\n"
    ).bus_losses
    assert ev.pci_bus_id == "0000:01:00.0"


def test_bus_loss_of_two_gpus_and_repeat_later_are_separate() -> None:
    log = parse_kernel_log(
        "[ 1.0] NVRM: Xid (PCI:0000:3b:00): 79, pid=1, name=x, GPU has fallen off the bus.\n"
        "[ 1.0] NVRM: GPU 0000:3b:00.0: GPU has fallen off the bus.\n"
        "[ 1.1] NVRM: Xid (PCI:0000:5e:00): 79, pid=1, name=x, GPU has fallen off the bus.\n"
        "[ 1.1] NVRM: GPU 0000:5e:00.0: GPU has fallen off the bus.\n",
        boot_time=BOOT,
    )
    assert [(b.pci_bus_id, b.line) for b in log.bus_losses] == [
        ("0000:3b:00.0", 1),
        ("0000:5e:00.0", 3),
    ]


@pytest.mark.parametrize(
    ("line", "link"),
    [
        ("NVRM: NVLink: fatal error detected on link 3(0x0, 0x0, 0x0)", 3),
        ("nvidia-nvlink: IBMNPU: link 2 training failed", 2),
        ("NVRM: knvlinkCoreShutdownDeviceLinks: NVLink link 11 is down unexpectedly", 11),
        ("nvidia-nvlink: nvlink_core: Link timeout on NVLink", None),
    ],
)
def test_nvlink_errors(line: str, link: int | None) -> None:
    [ev] = parse_kernel_log(f"[ 3.0] {line}").nvlink_errors
    assert ev.link == link and ev.monotonic_s == 3.0
    assert ev.message and ev.message in line


def test_nvlink_info_lines_are_not_errors() -> None:
    log = parse_kernel_log(
        "nvidia-nvlink: Nvlink Core is being initialized, major device number 240\n"
        "NVRM: nvlink link 3 trained to ACTIVE\n"
    )
    assert log.nvlink_errors == []


# --------------------------------------------------------------------------- AER


def test_aer_new_kernel_correctable_on_gpu() -> None:
    log = parse_kernel_log(
        "[ 7.0] pcieport 0000:00:01.1: AER: Correctable error message received from "
        "0000:01:00.0\n"
        "[ 7.0] nvidia 0000:01:00.0: PCIe Bus Error: severity=Correctable, type=Physical "
        "Layer, (Receiver ID)\n"
        "[ 7.0] nvidia 0000:01:00.0:   device [10de:2684] error status/mask=00000001/0000a000\n"
        "[ 7.0] nvidia 0000:01:00.0:    [ 0] RxErr                  (First)\n"
        "[ 7.0] nvidia 0000:01:00.0:    [ 6] BadTLP\n"
    )
    [ev] = log.aers
    assert ev.reporter == "pcieport 0000:00:01.1"
    assert ev.pci_bus_id == "0000:01:00.0" and ev.device_is_gpu is True
    assert (ev.severity, ev.error_type, ev.errors) == (
        "corrected",
        "Physical Layer",
        ["RxErr", "BadTLP"],
    )
    assert list(_lines(ev)) == [1, 2, 3, 4, 5]


def test_aer_old_kernel_requester_id_and_long_names() -> None:
    log = parse_kernel_log(
        "pcieport 0000:00:03.0: AER: Uncorrected (Non-Fatal) error received: id=0300\n"
        "pcieport 0000:00:03.0: PCIe Bus Error: severity=Uncorrected (Non-Fatal), "
        "type=Transaction Layer, id=0300(Requester ID)\n"
        "pcieport 0000:00:03.0:   device [10de:1db4] error status/mask=00004000/00000000\n"
        "pcieport 0000:00:03.0:    [14] Completion Timeout     (First)\n"
        "pcieport 0000:00:03.0:   TLP Header: 40000001 0000000f 90028090 00000000\n"
        "NVRM: GPU at PCI:0000:03:00: GPU-abc\n"
    )
    [ev] = log.aers
    assert ev.pci_bus_id == "0000:03:00.0"  # id=0300: bus 03, device 00, function 0
    assert ev.severity == "uncorrected_nonfatal" and ev.errors == ["CmpltTO"]
    assert ev.device_is_gpu is True  # the log names 03:00 as a GPU further on
    assert "TLP Header" in ev.raw


def test_aer_aer_tagged_lines_and_port_device() -> None:
    log = parse_kernel_log(
        "pcieport 0000:80:03.0: AER: Corrected error received: 0000:80:03.0\n"
        "pcieport 0000:80:03.0: AER: PCIe Bus Error: severity=Corrected, type=Data Link Layer, "
        "(Transmitter ID)\n"
        "pcieport 0000:80:03.0: AER:   device [8086:2f08] error status/mask=00001000/00002000\n"
        "pcieport 0000:80:03.0: AER:    [12] Timeout               \n"
        "pcieport 0000:80:03.0: AER: Corrected error received: 0000:80:03.0\n"
    )
    first, second = log.aers
    assert (first.error_type, first.errors, first.device_is_gpu) == (
        "Data Link Layer",
        ["Timeout"],
        False,
    )
    assert second.line == 5 and second.errors == []


def test_aer_firmware_first_ghes() -> None:
    log = parse_kernel_log(
        "{1}[Hardware Error]: Hardware error from APEI Generic Hardware Error Source: 0\n"
        "{1}[Hardware Error]: event severity: recoverable\n"
        "{1}[Hardware Error]:   device_id: 0000:3b:00.0\n"
        "nvidia 0000:3b:00.0: AER: aer_status: 0x00004000, aer_mask: 0x00000000\n"
        "nvidia 0000:3b:00.0:    [14] CmpltTO                (First)\n"
        "nvidia 0000:3b:00.0: AER: aer_layer=Transaction Layer, aer_agent=Requester ID\n"
    )
    [ev] = log.aers
    assert ev.severity == "uncorrected_nonfatal" and ev.error_type == "Transaction Layer"
    assert ev.errors == ["CmpltTO"] and ev.device_is_gpu is True and ev.line == 4


def test_aer_uncorrectable_fatal_new_wording() -> None:
    log = parse_kernel_log(
        "pcieport 0000:00:01.0: AER: Uncorrectable (Fatal) error message received from "
        "0000:01:00.0\n"
        "nvidia 0000:01:00.0: PCIe Bus Error: severity=Uncorrectable (Fatal), type=Transaction "
        "Layer, (Receiver ID)\n"
        "nvidia 0000:01:00.0:    [18] MalfTLP                (First)\n"
    )
    [ev] = log.aers
    assert (ev.severity, ev.errors, ev.device_is_gpu) == ("uncorrected_fatal", ["MalfTLP"], True)


# --------------------------------------------------------------------------- OOM


def test_oom_memcg_cgroup_v2() -> None:
    log = parse_kernel_log(
        "[5000.1] python invoked oom-killer: gfp_mask=0xcc0(GFP_KERNEL), order=0, "
        "oom_score_adj=0\n"
        "[5000.2] oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=cri-abc.scope,"
        "mems_allowed=0-1,3,oom_memcg=/kubepods.slice/pod1,task_memcg=/kubepods.slice/pod1/"
        "cri-abc.scope,task=python,pid=5555,uid=0\n"
        "[5000.3] Memory cgroup out of memory: Killed process 5555 (python) total-vm:1000kB, "
        "anon-rss:2048kB, file-rss:0kB, shmem-rss:0kB, UID:0 pgtables:100kB oom_score_adj:999\n"
        "[5000.9] oom_reaper: reaped process 5555 (python), now anon-rss:0kB, file-rss:0kB\n",
        boot_time=BOOT,
    )
    [ev] = log.ooms
    assert (ev.pid, ev.process_name, ev.anon_rss_kib) == (5555, "python", 2048)
    assert ev.constraint == "CONSTRAINT_MEMCG"
    assert ev.cgroup == "/kubepods.slice/pod1"
    assert ev.task_cgroup == "/kubepods.slice/pod1/cri-abc.scope"
    assert ev.line == 3 and ev.time == BOOT + timedelta(seconds=5000.3)
    # one event per kill: the constraint and reaper lines join the kill line
    assert [line.split("] ")[0] for line in ev.raw.split("\n")] == [
        "[5000.2",
        "[5000.3",
        "[5000.9",
    ]


def test_oom_old_kernel_kill_process_and_task_in() -> None:
    log = parse_kernel_log(
        "[6000.1] Task in /docker/abc killed as a result of limit of /docker/abc\n"
        "[6000.2] Memory cgroup out of memory: Kill process 777 (java) score 1000 or sacrifice "
        "child\n"
        "[6000.3] Killed process 777 (java) total-vm:123kB, anon-rss:456kB, file-rss:0kB\n"
        "[7000.0] Out of memory: Kill process 888 (bash) score 900 or sacrifice child\n"
        "[7000.0] Killed process 888 (bash) total-vm:1kB, anon-rss:2kB, file-rss:0kB\n"
    )
    a, b = log.ooms
    assert (a.pid, a.process_name, a.anon_rss_kib, a.line) == (777, "java", 456, 3)
    assert (a.constraint, a.cgroup, a.task_cgroup) == (
        "CONSTRAINT_MEMCG",
        "/docker/abc",
        "/docker/abc",
    )
    assert (b.pid, b.constraint, b.cgroup) == (888, None, None)


def test_oom_odd_process_names_and_lone_constraint_line() -> None:
    log = parse_kernel_log(
        "Out of memory: Killed process 888 ((sd-pam)) total-vm:1kB, anon-rss:2kB, file-rss:0kB\n"
        "oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=/,mems_allowed=0,global_oom,"
        "task_memcg=/,task=Web Content,pid=99,uid=1000\n"
    )
    a, b = log.ooms
    assert a.process_name == "(sd-pam)" and a.anon_rss_kib == 2
    assert (b.pid, b.constraint, b.line) == (99, "CONSTRAINT_NONE", 2)


# --------------------------------------------------------------------------- garbage


@pytest.mark.parametrize(
    "text",
    [
        "",
        "\n\n\n",
        "hello world\nnothing to see\n",
        "\x00\x01\x02\xff\xfe binary \x00 junk\n" * 50,
        "NVRM: Xid (PCI:0000:41:00): " + "9" * 5000 + ", x\n",
        "NVRM: Xid (" + "(" * 10_000 + "\n",
        "[" * 100_000,
        "Killed process " + "1" * 6000 + " (x) anon-rss:1kB\n",
        "oom-kill:pid=" + "9" * 6000 + "\n",
        "pcieport 0000:00:03.0: AER: Corrected error received: id=zzzz\n",
        "nvidia 0000:01:00.0:    [ 0] RxErr\n",
        "Feb 30 10:00:00 h kernel: " + XID + "\n",
        "[Mon Feb 30 10:00:00 2024] " + XID + "\n",
        "2024-02-30T10:00:00Z " + XID + "\n",
        "\ufeff\u2028" + XID + "\r\n",
        "x" * 3_000_000,
    ],
    ids=lambda t: repr(t[:30]),
)
def test_garbage_never_raises(text: str) -> None:
    log = parse_kernel_log(text, now=NOW, year=2024)
    assert isinstance(log, KernelLog)


def test_invalid_dates_keep_text_and_drop_time() -> None:
    log = parse_kernel_log("[Mon Feb 30 10:00:00 2024] " + XID)
    [ev] = log.xids
    assert ev.time is None and ev.time_text == "Mon Feb 30 10:00:00 2024"


def test_bytes_with_wrong_encoding_are_decoded() -> None:
    raw = ("May  1 10:00:00 h kernel: " + XID).encode("latin-1") + b"\xff\xfe\n"
    log = parse_kernel_log(raw, year=2024)  # type: ignore[arg-type]
    assert len(log.xids) == 1


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=400))
def test_fuzz_text(text: str) -> None:
    parse_kernel_log(text, now=NOW, boot_time=BOOT)


_REAL_LINES = [
    line for name in SAMPLES for line in (DATA / name).read_text(encoding="utf-8").splitlines()
]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.sampled_from(_REAL_LINES), min_size=1, max_size=20),
    st.integers(min_value=0, max_value=200),
    st.text(max_size=10),
)
def test_fuzz_mutated_real_lines(lines: list[str], cut: int, junk: str) -> None:
    text = "\n".join(line[:cut] + junk + line[cut:] for line in lines)
    parse_kernel_log(text, now=NOW, year=2026)


# --------------------------------------------------------------------------- collector


def _now_local() -> datetime:
    """Now, when the test runs (not when the module was imported: a long session's tests
    run minutes after collection, and the ages below are checked against now)."""
    return datetime.now().astimezone()


def _iso(dt: datetime) -> str:
    return dt.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S,%f+00:00")


def _recent_log() -> str:
    # relative to the moment the test runs, not to import time (a long suite is slow)
    now = datetime.now().astimezone()
    recent, old = now - timedelta(seconds=60), now - timedelta(hours=3)
    return (
        f"{_iso(old)} NVRM: Xid (PCI:0000:41:00): 13, old one\n"
        f"{_iso(recent)} NVRM: Xid (PCI:0000:41:00): 79, pid=1, name=x, GPU has fallen off "
        "the bus.\n"
        f"{_iso(recent)} Out of memory: Killed process 12 (python) total-vm:1kB, anon-rss:5kB\n"
    )


class FakeCommands:
    """Recorded outputs in place of subprocesses: argv[0] -> CommandResult builder."""

    def __init__(self, answers: dict[str, tuple[int | None, str, str]]) -> None:
        self.answers = answers
        self.calls: list[list[str]] = []

    def __call__(self, argv: list[str], timeout_s: float, **_: Any) -> Any:
        self.calls.append(list(argv))
        key = " ".join(argv) if " ".join(argv) in self.answers else argv[0]
        if key not in self.answers:
            return CommandResult(argv, None, "", f"{argv[0]}: command not found", 0.0, missing=True)
        rc, out, err = self.answers[key]
        return CommandResult(argv, rc, out, err, 0.01)


@pytest.fixture
def ctx(tmp_path: Path) -> CollectContext:
    # root under tmp: no /dev/kmsg there, so the kmsg fallback finds nothing
    return CollectContext(root=tmp_path, since_s=7200.0)


def _fake(
    monkeypatch: pytest.MonkeyPatch, answers: dict[str, tuple[int | None, str, str]]
) -> FakeCommands:
    fake = FakeCommands(answers)
    monkeypatch.setattr(base, "run_command", fake)
    return fake


def test_collector_protocol() -> None:
    c = KernelLogCollector()
    assert c.name == "kernel_log"
    assert c.kinds == (
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


def test_collector_reads_named_file_whole(ctx: CollectContext, tmp_path: Path) -> None:
    path = tmp_path / "kern.log"
    path.write_text(_recent_log())
    ctx.kernel_log_file = path
    facts = Facts()
    KernelLogCollector().collect(ctx, facts)
    # a file the user named is the incident to examine: the 3-hour-old Xid 13 stays
    assert [x.code for x in facts.xids] == [13, 79]
    assert len(facts.bus_losses) == 1 and len(facts.ooms) == 1
    assert facts.xids[1].age_s == pytest.approx(60, abs=30)
    assert facts.xids[1].source == str(path)
    assert ctx.raw and ctx.raw[0].collector == "kernel_log" and "Xid" in ctx.raw[0].text


def test_collector_file_with_bad_encoding(ctx: CollectContext, tmp_path: Path) -> None:
    path = tmp_path / "kern.log"
    path.write_bytes(b"\xff\xfe\x00garbage\n" + _recent_log().encode())
    ctx.kernel_log_file = path
    facts = Facts()
    KernelLogCollector().collect(ctx, facts)
    assert [x.code for x in facts.xids] == [13, 79]


def test_collector_missing_file_is_unavailable(ctx: CollectContext, tmp_path: Path) -> None:
    ctx.kernel_log_file = tmp_path / "absent.log"
    with pytest.raises(CollectorUnavailable):
        KernelLogCollector().collect(ctx, Facts())


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file")
def test_collector_unreadable_file(ctx: CollectContext, tmp_path: Path) -> None:
    path = tmp_path / "kern.log"
    path.write_text("x")
    path.chmod(0)
    ctx.kernel_log_file = path
    with pytest.raises(CollectorUnavailable, match="no permission"):
        KernelLogCollector().collect(ctx, Facts())


def test_collector_uses_journalctl(ctx: CollectContext, monkeypatch: pytest.MonkeyPatch) -> None:
    stamp = _now_local().strftime("%Y-%m-%dT%H:%M:%S%z")
    journal = (
        f"{stamp} gpu7 kernel: NVRM: Xid (PCI:0000:41:00): 48, pid='<unknown>', "
        "name=<unknown>, An uncorrectable double bit error (DBE)\n"
        f"{stamp} gpu7 kernel: nvidia-nvswitch1: SXid (PCI:0000:84:00.0): 12028, Non-fatal, "
        "Link 3 error\n"
    )
    fake = _fake(monkeypatch, {"journalctl": (0, journal, "")})
    facts = Facts()
    KernelLogCollector().collect(ctx, facts)
    assert fake.calls == [
        ["journalctl", "-k", "--no-pager", "-o", "short-iso", "--since=-7200s", "--lines=100000"]
    ]
    assert [x.code for x in facts.xids] == [48] and facts.xids[0].pid is None
    assert [s.link for s in facts.sxids] == [3]
    assert facts.xids[0].age_s is not None and abs(facts.xids[0].age_s) < 120
    assert ctx.raw[0].source.startswith("journalctl -k") and ctx.raw[0].text == journal


@pytest.mark.parametrize(("entries", "cut"), [(4, False), (5, True)])
def test_journal_storm_keeps_newest_lines_and_records_the_cut(
    ctx: CollectContext, monkeypatch: pytest.MonkeyPatch, entries: int, cut: bool
) -> None:
    """journalctl is asked for the newest N entries of the window (--lines): a storm
    longer than that loses its oldest lines, never the newest, and the read says so."""
    from gpu_triage.collectors import kernel_log as collector

    monkeypatch.setattr(collector, "JOURNAL_MAX_LINES", 5)
    now = _now_local()
    lines = [
        f"{(now - timedelta(seconds=entries - i)).strftime('%Y-%m-%dT%H:%M:%S%z')} gpu7 "
        f"kernel: NVRM: Xid (PCI:0000:41:00): {31 + i}, pid=7, name=a, MMU Fault\n"
        for i in range(entries)
    ]
    fake = _fake(monkeypatch, {"journalctl": (0, "".join(lines), "")})
    facts = Facts()
    KernelLogCollector().collect(ctx, facts)
    assert fake.calls[0][-1] == "--lines=5"
    assert [x.code for x in facts.xids] == [31 + i for i in range(entries)]
    assert [r.truncated for r in ctx.raw] == [cut]


def test_collector_falls_back_to_dmesg_iso(
    ctx: CollectContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = _fake(
        monkeypatch,
        {
            "journalctl": (0, "-- No entries --\n", ""),
            "dmesg --time-format iso": (0, _recent_log(), ""),
        },
    )
    facts = Facts()
    KernelLogCollector().collect(ctx, facts)
    assert [c[0] for c in fake.calls] == ["journalctl", "dmesg"]
    assert [x.code for x in facts.xids] == [79]
    assert facts.xids[0].source == "dmesg --time-format iso"


def test_collector_plain_dmesg_uses_uptime(
    ctx: CollectContext, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc" / "uptime").write_text("20000.00 1000.00\n")
    _fake(
        monkeypatch,
        {
            "dmesg --time-format iso": (1, "", "dmesg: unrecognized option '--time-format'\n"),
            "dmesg": (
                0,
                "[  100.000000] NVRM: Xid (PCI:0000:41:00): 13, too old\n"
                "[19940.000000] NVRM: Xid (PCI:0000:41:00): 31, pid=1, name=x, Ch 00000001\n",
                "",
            ),
        },
    )
    facts = Facts()
    KernelLogCollector().collect(ctx, facts)
    # 100 s after boot is ~5.5 h ago: outside the 2 h window
    assert [x.code for x in facts.xids] == [31]
    assert facts.xids[0].age_s == pytest.approx(60, abs=30)
    assert facts.xids[0].monotonic_s == 19940.0 and facts.xids[0].time is not None


def test_collector_all_denied(ctx: CollectContext, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake(
        monkeypatch,
        {
            "journalctl": (
                0,
                "-- No entries --\n",
                "Hint: You are currently not seeing messages from other users and the system.\n",
            ),
            "dmesg": (1, "", "dmesg: read kernel buffer failed: Operation not permitted\n"),
        },
    )
    with pytest.raises(CollectorUnavailable, match="no permission to read the kernel log"):
        KernelLogCollector().collect(ctx, Facts())


def test_collector_no_source(ctx: CollectContext, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake(monkeypatch, {})
    with pytest.raises(CollectorUnavailable, match="no kernel log source"):
        KernelLogCollector().collect(ctx, Facts())


def test_collector_empty_journal_is_an_answer_when_dmesg_denied(
    ctx: CollectContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fake(
        monkeypatch,
        {
            "journalctl": (0, "-- No entries --\n", ""),
            "dmesg": (1, "", "dmesg: read kernel buffer failed: Operation not permitted\n"),
        },
    )
    facts = Facts()
    KernelLogCollector().collect(ctx, facts)
    assert facts.xids == []


def test_collector_reads_kmsg(
    ctx: CollectContext, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc" / "uptime").write_text("1000.0 1.0\n")
    (tmp_path / "dev").mkdir()
    # a regular file stands in for /dev/kmsg; record continuation lines are metadata
    (tmp_path / "dev" / "kmsg").write_text(
        "3,100,990000000,-;NVRM: Xid (PCI:0000:41:00): 79, GPU has fallen off the bus.\n"
        " SUBSYSTEM=pci\n DEVICE=+pci:0000:41:00.0\n"
        "6,101,990000100,-;NVRM: GPU 0000:41:00.0: GPU has fallen off the bus.\n"
    )
    _fake(monkeypatch, {})
    facts = Facts()
    KernelLogCollector().collect(ctx, facts)
    assert [x.code for x in facts.xids] == [79]
    assert facts.xids[0].monotonic_s == 990.0
    assert facts.xids[0].age_s == pytest.approx(10, abs=30)
    [loss] = facts.bus_losses
    assert "DEVICE=" not in loss.raw


def test_collector_on_samples_keeps_undated_events(ctx: CollectContext) -> None:
    ctx.kernel_log_file = (
        DATA / "aer" / ("aer-uncorrected-fatal-cmplto-nvidia-cant-recover-dmesg-H-returnn1500.log")
    )
    facts = Facts()
    KernelLogCollector().collect(ctx, facts)
    # dmesg -H stamps cannot be dated, so nothing is dropped by the window
    assert len(facts.aers) == len(
        _parse("aer/aer-uncorrected-fatal-cmplto-nvidia-cant-recover-dmesg-H-returnn1500.log").aers
    )


def test_live_log_is_cut_to_the_window(
    ctx: CollectContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    # journalctl is asked for the window already; events it still returns that are older
    # (a clock step, a --since it ignored) are dropped, events of unknown time are kept
    _fake(monkeypatch, {"journalctl": (0, _recent_log(), "")})
    facts = Facts()
    KernelLogCollector().collect(ctx, facts)
    assert [x.code for x in facts.xids] == [79]


# --------------------------------------------------------------------------- pastes, variants

# The stamp forms a responder pastes most: dmesg, dmesg -T, journal short-iso, syslog.
STAMPS = [
    pytest.param(lambda s: f"[{400 + s:12.6f}] ", id="dmesg"),
    pytest.param(lambda s: f"[Wed May  1 10:00:{s:02.0f} 2024] ", id="dmesg-T"),
    pytest.param(lambda s: f"2024-05-01T10:00:{s:02.0f}+0000 gpu7 kernel: ", id="journal"),
    pytest.param(lambda s: f"May  1 10:00:{s:02.0f} gpu7 kernel: ", id="syslog"),
    pytest.param(lambda s: "", id="no-stamp"),
]


@pytest.mark.parametrize("stamp", STAMPS)
@pytest.mark.parametrize("pci", ["0000:02:00.0", "02:00.0", "0001:c1:00.0"])
def test_three_line_fallen_off_bus_report_keeps_first_line(stamp: Any, pci: str) -> None:
    # older drivers: the GPU and the time are on the first line, "fallen off" on the third
    text = (
        f"{stamp(1)}NVRM: The NVIDIA GPU {pci}\n"
        f"{stamp(1)}NVRM: (PCI ID: 10de:1db6) installed in this system has\n"
        f"{stamp(2)}NVRM: fallen off the bus and is not responding to commands.\n"
        f"{stamp(9)}IPv6: ADDRCONF(NETDEV_CHANGE): eth0: link becomes ready\n"
    )
    log = parse_kernel_log(text, year=2024)
    [ev] = log.bus_losses
    assert ev.pci_bus_id == normalize_pci(pci)
    assert ev.line == 1 and ev.raw == "\n".join(text.split("\n")[:3])
    first = parse_kernel_log(text.split("\n")[0] + " x fallen off the bus", year=2024)
    assert ev.time_text == first.bus_losses[0].time_text  # the first line's stamp
    assert ev.message is not None and ev.message.startswith(f"The NVIDIA GPU {pci} (PCI ID")
    assert ev.message.endswith("has fallen off the bus and is not responding to commands.")


def test_three_line_report_interrupted_is_not_joined() -> None:
    log = parse_kernel_log(
        "[ 1.0] NVRM: The NVIDIA GPU 0000:02:00.0\n"
        "[ 1.0] usb 1-1: new high-speed USB device number 2 using xhci_hcd\n"
        "[ 1.0] NVRM: fallen off the bus and is not responding to commands.\n"
    )
    [ev] = log.bus_losses
    assert ev.line == 3 and ev.pci_bus_id is None


@pytest.mark.parametrize("stamp", STAMPS)
@pytest.mark.parametrize(
    ("line", "pci"),
    [
        ("NVRM: GPU 18:00.0: GPU has fallen off the bus.", "0000:18:00.0"),
        ("NVRM: GPU 0000:18:00.0: GPU has fallen off the bus.", "0000:18:00.0"),
        ("NVRM: GPU at PCI:18:00: GPU has fallen off the bus.", "0000:18:00.0"),
        ("NVRM: GPU at 0000:01:00.0 has fallen off the bus.", "0000:01:00.0"),
    ],
)
def test_fallen_off_bus_address_with_or_without_domain(stamp: Any, line: str, pci: str) -> None:
    [ev] = parse_kernel_log(stamp(3) + line, year=2024).bus_losses
    assert ev.pci_bus_id == pci
    assert ev.message is not None and ev.message.endswith("fallen off the bus.")


@pytest.mark.parametrize("stamp", STAMPS)
@pytest.mark.parametrize(
    ("line", "constraint"),
    [
        ("Out of memory: Killed process 9876 (nginx).", None),
        ("Memory cgroup out of memory: Killed process 9876 (nginx).", "CONSTRAINT_MEMCG"),
        ("Out of memory: Kill process 9876 (nginx) score 912 or sacrifice child", None),
        ("Out of memory: Kill process 9876 (nginx).", None),
        ("Out of memory: Killed process 9876 (nginx), UID:0 total-vm:12kB", None),
    ],
)
def test_oom_kill_line_endings(stamp: Any, line: str, constraint: str | None) -> None:
    [ev] = parse_kernel_log(stamp(4) + line, year=2024).ooms
    assert (ev.pid, ev.process_name, ev.constraint) == (9876, "nginx", constraint)


@pytest.mark.parametrize(
    "prefix", ["kernel: ", "kernel[0]: ", "[ 3.0] kernel: ", "May  1 10:00:00 gpu7 kernel: "]
)
def test_bare_kernel_prefix(prefix: str) -> None:
    log = parse_kernel_log(
        f"{prefix}NVRM: NVLink: fatal error detected on link 3(0x0, 0x0, 0x0)\n"
        f"{prefix}nvidia-nvlink: IBMNPU: link 2 training failed\n"
        f"{prefix}pcieport 0000:00:01.0: AER: Corrected error received: 0000:01:00.0\n"
        f"{prefix}Out of memory: Killed process 12 (python) total-vm:1kB, anon-rss:5kB\n",
        year=2024,
    )
    assert [e.link for e in log.nvlink_errors] == [3, 2]
    assert [a.pci_bus_id for a in log.aers] == ["0000:01:00.0"]
    assert [o.pid for o in log.ooms] == [12]


@pytest.mark.parametrize(
    ("pasted", "mono"),
    [
        (
            '"[ 5.0] NVRM: Xid (PCI:0000:01:00): 79, pid=1, name=x, GPU has fallen off the bus."',
            5.0,
        ),
        (
            "'[ 5.0] NVRM: Xid (PCI:0000:01:00): 79, pid=1, name=x, GPU has fallen off the bus.'",
            5.0,
        ),
        ('  "NVRM: Xid (PCI:0000:01:00): 79, pid=1, name=x, GPU has fallen off the bus.",', None),
        ('- "NVRM: Xid (PCI:0000:01:00): 79, pid=1, name=x, GPU has fallen off the bus."', None),
        ('msg="NVRM: Xid (PCI:0000:01:00): 79, pid=1, name=x, GPU has fallen off the bus."', None),
    ],
)
def test_quoted_xid_line_closing_quote_not_in_message(pasted: str, mono: float | None) -> None:
    log = parse_kernel_log(pasted)
    [ev] = log.xids
    assert ev.message == "GPU has fallen off the bus." and ev.monotonic_s == mono
    assert ev.raw == pasted
    assert [b.message for b in log.bus_losses] == ["GPU has fallen off the bus."]


def test_wrapped_quoted_xid_line() -> None:
    log = parse_kernel_log(
        '"[ 5.0] NVRM: Xid (PCI:0000:01:00): 13, Graphics SM Warp Exception on\n'
        '    (GPC 0, TPC 1): Out Of Range Address"\n'
        '"[ 5.1] NVRM: Xid (PCI:0000:01:00): 13, pid=7, name=python, Graphics Exception"\n'
    )
    first, second = log.xids
    assert first.message == "Graphics SM Warp Exception on" and list(_lines(first)) == [1, 2]
    assert second.message == "Graphics Exception" and second.pid == 7
    # quotes inside a message are kept
    [ev] = parse_kernel_log(
        'NVRM: Xid (PCI:0000:07:00): 109, pid=3, name=m, errorString "CTX SWITCH TIMEOUT"'
    ).xids
    assert ev.message == 'errorString "CTX SWITCH TIMEOUT"'


PCIE_LIMITED = (
    "pci 0000:3b:00.0: 63.008 Gb/s available PCIe bandwidth, limited by 8.0 GT/s PCIe x8 link "
    "at 0000:3a:00.0 (capable of 252.048 Gb/s with 16.0 GT/s PCIe x16 link)"
)


@pytest.mark.parametrize("stamp", STAMPS)
def test_pcie_limited_link_is_a_fact(stamp: Any) -> None:
    log = parse_kernel_log(
        f"{stamp(1)}{PCIE_LIMITED}\n"
        f"{stamp(2)}pci 0000:5e:00.0: 252.048 Gb/s available PCIe bandwidth (16.0 GT/s PCIe x16 "
        "link)\n"
        f"{stamp(3)}nvidia 0000:c1:00.0: 252.048 Gb/s available PCIe bandwidth, limited by "
        "16.0 GT/s PCIe x16 link at 0000:c0:01.1 (capable of 504.112 Gb/s with 32.0 GT/s PCIe "
        "x16 link)\n",
        year=2024,
    )
    a, b = log.pcie_limits  # the full-bandwidth device is no event
    assert (a.pci_bus_id, a.driver, a.limited_at, a.device_is_gpu) == (
        "0000:3b:00.0",
        "pci",
        "0000:3a:00.0",
        None,
    )
    assert (a.available_gbps, a.speed_gts, a.width) == (63.008, 8.0, 8)
    assert (a.capable_gbps, a.capable_speed_gts, a.capable_width) == (252.048, 16.0, 16)
    assert (b.pci_bus_id, b.speed_gts, b.width, b.capable_speed_gts) == (
        "0000:c1:00.0",
        16.0,
        16,
        32.0,
    )
    assert b.device_is_gpu is True and b.line == 3


def test_pcie_limited_one_event_per_device_newest_reading() -> None:
    log = parse_kernel_log(
        f"[ 1.0] {PCIE_LIMITED}\n"
        "[ 2.0] NVRM: GPU at PCI:0000:3b:00: GPU-aaaa\n"
        "[ 9.0] pci 0000:3b:00.0: 126.016 Gb/s available PCIe bandwidth, limited by Unknown x16 "
        "link at <unknown> (capable of 252.048 Gb/s with 16.0 GT/s PCIe x16 link)\n"
    )
    [ev] = log.pcie_limits
    assert ev.line == 3 and ev.monotonic_s == 9.0 and ev.raw.count("\n") == 1
    assert (ev.available_gbps, ev.speed_gts, ev.width) == (126.016, None, 16)
    assert ev.limited_at is None and ev.device_is_gpu is True  # "GPU at" names it


def test_pcie_limited_boot_line_kept_by_the_live_window(
    ctx: CollectContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    boot = datetime.now().astimezone() - timedelta(days=3)
    stamp = _iso(boot)
    _fake(monkeypatch, {"journalctl": (0, f"{stamp} gpu7 kernel: {PCIE_LIMITED}\n", "")})
    facts = Facts()
    KernelLogCollector().collect(ctx, facts)
    # a link that trained narrow at boot is narrow now: outside the window, still a fact
    assert [p.pci_bus_id for p in facts.pcie_limits] == ["0000:3b:00.0"]


# --------------------------------------------------------------------------- storms, streaming


def test_identical_line_storm_keeps_every_xid_and_a_bounded_raw() -> None:
    line = "NVRM: Xid (PCI:0000:41:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off"
    log = parse_kernel_log((line + "\n") * 3000)
    assert len(log.xids) == 3000 and log.lines_read == 3000
    assert {x.line for x in log.xids} == set(range(1, 3001))
    [loss] = log.bus_losses  # no stamps: one loss, reported 3000 times
    assert loss.raw.count("\n") == MAX_RAW_LINES and "2936 more lines" in loss.raw


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=4000), max_size=12))
def test_fed_in_pieces_equals_whole(cuts: list[int]) -> None:
    text = "\n".join(_REAL_LINES) + "\n"
    whole = parse_kernel_log(text, year=2026)
    parser = KernelLogParser("<text>", year=2026)
    at = 0
    for cut in sorted(cuts):
        parser.feed(text[at : min(cut, len(text))])
        at = max(at, min(cut, len(text)))
    parser.feed(text[at:].encode())
    pieces = parser.finish()
    assert pieces.lines_read == whole.lines_read
    assert [e.model_dump() for e in pieces.events()] == [e.model_dump() for e in whole.events()]


def test_overlong_line_is_cut_at_the_same_place_in_pieces() -> None:
    text = "x" * 40_000 + " NVRM: Xid (PCI:0000:41:00): 79, late\nNVRM: Xid (PCI:0000:41:00): 13\n"
    parser = KernelLogParser()
    for i in range(0, len(text), 1000):
        parser.feed(text[i : i + 1000])
    log = parser.finish()
    assert [x.code for x in log.xids] == [13] and log.lines_read == 2


def test_a_new_line_kind_sees_only_its_lines() -> None:
    seen: list[int] = []

    def hung_task(p: KernelLogParser, ln: Any) -> bool:
        seen.append(ln.no)
        return True

    # the built-in host_health kind reads hung tasks: this stand-in takes its place
    builtin = tuple(k for k in LINE_KINDS if k.name != "host_health")
    kinds = (*builtin, LineKind("hung_task", ("blocked for more than",), hung_task))
    parser = KernelLogParser(kinds=kinds)
    parser.feed(
        "[ 1.0] IPv6: ADDRCONF(NETDEV_CHANGE): eth0: link becomes ready\n"
        "[ 2.0] INFO: task python3:4242 blocked for more than 120 seconds.\n"
        "[ 3.0] NVRM: Xid (PCI:0000:41:00): 13, blocked for more than nothing\n"
    )
    log = parser.finish()
    assert seen == [2] and [x.code for x in log.xids] == [13]  # the Xid kind comes first


# ------------------------------------------------------------------ prefilter

_KEYWORDS = sorted({(k.name, w) for k in LINE_KINDS for w in k.keywords})


@pytest.mark.parametrize(("kind", "word"), _KEYWORDS)
@settings(max_examples=25, deadline=None)
@given(
    before=st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=40),
    after=st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=40),
)
def test_every_keyword_makes_its_line_a_candidate(
    kind: str, word: str, before: str, after: str
) -> None:
    # the prefilter looks for each keyword from its rarest character on: whatever stands
    # around it, a line holding the keyword is always handed to the kinds
    text = f"chatter one\n{before}{word}{after}\nchatter two\n"
    starts = _candidates(text, KernelLogParser()._passes)
    assert text.index(f"{before}{word}") in starts


def test_the_prefilter_skips_the_mount_chatter_that_shares_a_prefix_with_errors() -> None:
    chatter = (
        "EXT4-fs (nvme0n1p2): mounted filesystem with ordered data mode. Quota mode: none.\n"
        "XFS (dm-3): Mounting V5 Filesystem\n"  # "XFS (" stays a keyword: seen, not taken
        "nvidia-nvlink: Nvlink Core is being initialized, major device number 511\n"
    )
    starts = _candidates(chatter, KernelLogParser()._passes)
    assert 0 not in starts
    log = parse_kernel_log(chatter)
    assert not list(log.events())


@pytest.mark.parametrize(
    ("line", "problem", "device"),
    [
        # kernel 5.3 on: the block layer names the error first, no function prefix
        (
            "critical medium error, dev sdb, sector 1928 op 0x0:(READ) flags 0x80700 "
            "phys_seg 1 prio class 0",
            "io_error",
            "sdb",
        ),
        ("blk_update_request: critical medium error, dev sda, sector 12345", "io_error", "sda"),
        ("print_req_error: I/O error, dev nvme0n1, sector 1024", "io_error", "nvme0n1"),
        (
            "nfs: server nas01.example not responding, timed out",
            "nfs_not_responding",
            "nas01.example",
        ),
        (
            "BTRFS error (device nvme0n1p3): bdev /dev/nvme0n1p3 errs: wr 1, rd 0",
            "fs_error",
            "nvme0n1p3",
        ),
        ("EXT4-fs critical (device sda1): ext4_lookup:1740: inode #2", "fs_error", "sda1"),
    ],
)
def test_host_problem_formats(line: str, problem: str, device: str) -> None:
    for text in (f"[ 812.5] {line}\n", f"2026-12-01T04:01:17+00:00 node-3 kernel: {line}\n"):
        log = parse_kernel_log(text)
        assert [(e.problem, e.device) for e in log.host_events] == [(problem, device)], text


def test_oom_summary_line_is_read_with_its_kill() -> None:
    text = (
        "[441280.8] python invoked oom-killer: gfp_mask=0x100cca(GFP_HIGHUSER_MOVABLE), order=0\n"
        "[441280.8] oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,"
        "mems_allowed=0-1,oom_memcg=/kubepods/pod1,task_memcg=/kubepods/pod1/c1,task=python,"
        "pid=698405,uid=1000\n"
        "[441280.9] Memory cgroup out of memory: Killed process 698405 (python) "
        "total-vm:49978204kB, anon-rss:12918388kB, file-rss:68668kB\n"
        "[441281.6] oom_reaper: reaped process 698405 (python), now anon-rss:0kB\n"
    )
    log = parse_kernel_log(text)
    assert len(log.ooms) == 1
    kill = log.ooms[0]
    assert (kill.pid, kill.process_name, kill.anon_rss_kib) == (698405, "python", 12918388)
    assert (kill.constraint, kill.cgroup, kill.task_cgroup) == (
        "CONSTRAINT_MEMCG",
        "/kubepods/pod1",
        "/kubepods/pod1/c1",
    )


def test_a_pattern_joins_the_alternation_only_by_a_first_character_it_always_has() -> None:
    from gpu_triage.collectors.parsers.kernel_log import _literal_head

    assert _literal_head(r"\[\s?\d{1,2}\]\s") == "["
    assert _literal_head("Xid") == "X"
    assert _literal_head(r"x?NVRM") is None  # may start at N
    assert _literal_head(r"\[*ab") is None
    assert _literal_head(r"(?i)nvlink") is None
