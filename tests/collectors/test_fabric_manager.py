"""Fabric Manager: its unit state, version and log, from outputs and from a live (fake) node.

The outputs are hand-written from the documented formats (tests/data/hand-written/
fabric-manager/README.md says which lines are recalled); no HGX machine was at hand."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from gpu_triage.collectors.base import CollectContext
from gpu_triage.collectors.fabric import FabricManagerCollector, read_log_tail
from gpu_triage.collectors.from_text import intake_paste
from gpu_triage.collectors.parsers import ParseError
from gpu_triage.collectors.parsers.fabric_manager import (
    parse_fm_log,
    parse_fm_version,
    parse_systemctl_unit,
)
from gpu_triage.engine.compiler import Rulebook
from gpu_triage.engine.evaluate import evaluate
from gpu_triage.engine.inputs import EvalInput
from gpu_triage.io.commands import CommandResult
from gpu_triage.model.facts import Facts, GpuFacts, HostFacts, UnavailableReason
from tests.collectors.fakeroot import FakeRoot

DATA = Path(__file__).resolve().parents[1] / "data" / "hand-written" / "fabric-manager"


def read(name: str) -> str:
    return (DATA / name).read_text()


@pytest.mark.parametrize(
    ("name", "installed", "state", "sub", "result"),
    [
        ("systemctl-status-failed.txt", True, "failed", None, "exit-code"),
        ("systemctl-status-running.txt", True, "active", "running", None),
        ("systemctl-status-auto-restart.txt", True, "activating", "auto-restart", None),
        ("systemctl-status-not-found.txt", False, "inactive", None, None),
        ("systemctl-show-failed.txt", True, "failed", "failed", "exit-code"),
        ("systemctl-show-not-found.txt", False, "inactive", "dead", "success"),
    ],
)
def test_unit_state(
    name: str, installed: bool, state: str, sub: str | None, result: str | None
) -> None:
    f = parse_systemctl_unit(read(name), name)
    assert (f.fm_installed, f.fm_active_state, f.fm_sub_state, f.fm_result) == (
        installed,
        state,
        sub,
        result,
    )


@pytest.mark.parametrize(
    ("text", "state", "installed"),
    [("active\n", "active", None), ("failed\n", "failed", None), ("unknown\n", "inactive", False)],
)
def test_is_active_one_word(text: str, state: str, installed: bool | None) -> None:
    f = parse_systemctl_unit(text)
    assert (f.fm_active_state, f.fm_installed) == (state, installed)


def test_status_of_another_unit_is_refused() -> None:
    other = read("systemctl-status-running.txt").replace(
        "nvidia-fabricmanager.service - NVIDIA fabric manager service",
        "nvidia-persistenced.service - NVIDIA Persistence Daemon",
    )
    with pytest.raises(ParseError, match="another unit"):
        parse_systemctl_unit(other)
    with pytest.raises(ParseError, match="another unit"):
        parse_systemctl_unit("Id=nvidia-persistenced.service\nActiveState=active\n")


def test_crlf_and_a_prompt_free_paste_read_the_same() -> None:
    text = read("systemctl-status-failed.txt").replace("\n", "\r\n")
    assert parse_systemctl_unit(text).fm_active_state == "failed"


def test_version_line() -> None:
    assert parse_fm_version(read("nv-fabricmanager-version.txt")) == "535.104.05"
    with pytest.raises(ParseError):
        parse_fm_version("nv-fabricmanager: command not found\n")


def test_log_newest_start_wins_and_errors_are_counted() -> None:
    fabric, sxids = parse_fm_log(read("fabricmanager-version-mismatch.log"))
    assert fabric.fm_version == "535.104.05"
    assert fabric.fm_log_errors == 1
    assert fabric.fm_log_error == (
        "request to query NVSwitch device information from NVSwitch driver failed"
    )
    assert fabric.fm_switches_mismatch is False and sxids == []


def test_log_switch_count_refusal() -> None:
    fabric, _ = parse_fm_log(read("fabricmanager-switches-missing.log"))
    assert fabric.fm_switches_mismatch is True
    assert fabric.fm_version == "570.124.06"


def test_a_restart_after_the_refusal_clears_it() -> None:
    text = read("fabricmanager-switches-missing.log") + (
        "[Sep 09 2025 08:00:00] [INFO] [tid 77] Fabric Manager version 570.124.06 is running "
        "with the following configuration options\n"
    )
    fabric, _ = parse_fm_log(text)
    assert fabric.fm_switches_mismatch is False


def test_log_nvswitch_errors_become_sxids_with_switch_and_port() -> None:
    _, sxids = parse_fm_log(read("fabricmanager-nvswitch-errors.log"))
    assert [(s.code, s.pci_bus_id, s.link, s.fatal) for s in sxids] == [
        (20034, "0000:86:00.0", 33, True),
        (12028, "0000:86:00.0", 40, False),
    ]
    assert sxids[0].line == 2


def test_log_lines_in_a_journal_prefix_are_read() -> None:
    text = (
        "Jul 23 07:53:55 dgx-01 nv-fabricmanager[841]: [Jul 23 2024 07:53:55] [ERROR] "
        "[tid 841] detected number of NVSwitches don't match with any supported system "
        "topology, aborting fabric manager\n"
    )
    fabric, _ = parse_fm_log(text)
    assert fabric.fm_switches_mismatch is True


def test_log_text_is_kept_printable_and_short() -> None:
    evil = "[Jul 23 2024 07:53:55] [ERROR] [tid 1] \x1b[2J" + "A" * 2000 + "\n"
    fabric, _ = parse_fm_log(evil)
    assert fabric.fm_log_error is not None
    assert "\x1b" not in fabric.fm_log_error and len(fabric.fm_log_error) <= 300


def test_not_a_log_is_an_error() -> None:
    with pytest.raises(ParseError, match="Fabric Manager log"):
        parse_fm_log("hello\nworld\n")


def test_a_pasted_session_is_split_and_read() -> None:
    paste = (
        "$ systemctl status nvidia-fabricmanager\n"
        + read("systemctl-status-failed.txt")
        + "$ nv-fabricmanager --version\n"
        + read("nv-fabricmanager-version.txt")
        + "$ sudo tail /var/log/fabricmanager.log\n"
        + read("fabricmanager-nvswitch-errors.log")
    )
    intake = intake_paste(paste)
    parsers = [p.parser for p in intake.pieces if p.state == "parsed"]
    assert parsers == ["systemctl-fabricmanager", "nv-fabricmanager-version", "fabricmanager-log"]
    assert not [p for p in intake.pieces if p.state != "parsed"]
    fabric = intake.facts.fabric
    assert fabric is not None
    assert (fabric.fm_active_state, fabric.fm_version) == ("failed", "535.104.05")
    assert [s.code for s in intake.facts.sxids] == [20034, 12028]
    # the FM log proves nothing of Xids: their absence is not "no Xid"
    log_piece = next(p for p in intake.pieces if p.parser == "fabricmanager-log")
    assert "xid" not in log_piece.kinds


def test_pasted_version_and_status_judged_by_the_rules(builtin_book: Rulebook) -> None:
    intake = intake_paste(
        "$ systemctl status nvidia-fabricmanager\n"
        + read("systemctl-status-failed.txt")
        + "$ nv-fabricmanager --version\n"
        + read("nv-fabricmanager-version.txt")
    )
    facts = intake.facts.model_copy(update={"host": HostFacts(driver_version="550.90.07")})
    doc = evaluate(EvalInput(facts), builtin_book, engine="reference")
    fired = {f.rule_id for f in doc.findings}
    assert {"fabric-manager-not-running", "fabric-manager-version-mismatch"} <= fired


# ----------------------------------------------------------------- the live collector


class _OnlyFakes(CollectContext):
    """Runs the fake tools alone: a command without a fake is missing, whatever the test
    machine has installed (systemctl is on most of them)."""

    def run(self, collector: str, argv: list[str], timeout_s: float | None = None) -> CommandResult:
        if not (Path(self.search_path or "") / argv[0]).exists():
            return CommandResult(argv=argv, missing=True, error="not found")
        return super().run(collector, argv, timeout_s)


def _tools(tmp: Path, systemctl: str | None, fm: str | None) -> str:
    bindir = tmp / "bin"
    bindir.mkdir()
    for name, out in (("systemctl", systemctl), ("nv-fabricmanager", fm)):
        if out is None:
            continue
        (bindir / name).write_text(f"#!/bin/sh\ncat <<'EOF'\n{out}EOF\n")
        (bindir / name).chmod(0o755)
    return str(bindir)


def _node(tmp: Path, switches: int) -> FakeRoot:
    root = FakeRoot(tmp / "root")
    for i in range(switches):
        root.pci_device(f"0000:{0x84 + i:02x}:00.0", "0x10de", "0x068000")
    root.pci_device("0000:18:00.0", "0x10de", "0x030200")  # a GPU: not a switch
    root.pci_device("0000:19:00.0", "0x15b3", "0x020700")  # a Mellanox HCA
    return root


def _collect(tmp: Path, switches: int, systemctl: str | None, fm: str | None) -> Facts:
    root = _node(tmp, switches)
    ctx = _OnlyFakes(root=root.root, search_path=_tools(tmp, systemctl, fm))
    facts = Facts()
    FabricManagerCollector().collect(ctx, facts)
    return facts


def test_live_failed_unit_and_version(tmp_path: Path) -> None:
    facts = _collect(
        tmp_path, 4, read("systemctl-show-failed.txt"), read("nv-fabricmanager-version.txt")
    )
    f = facts.fabric
    assert f is not None
    assert (f.nvswitch_count, f.fm_installed, f.fm_active_state, f.fm_version) == (
        4,
        True,
        "failed",
        "535.104.05",
    )
    assert f.why_unavailable("fm_log_error") is not None  # no log in the fake root


def test_live_without_systemd_or_binary(tmp_path: Path) -> None:
    facts = _collect(tmp_path, 0, None, None)
    f = facts.fabric
    assert f is not None
    assert f.nvswitch_count == 0 and f.fm_installed is False
    why = f.why_unavailable("fm_active_state")
    assert why is not None and why.reason == UnavailableReason.NOT_SUPPORTED


def test_live_log_is_read_from_the_root(tmp_path: Path) -> None:
    root = _node(tmp_path, 4)
    root.write("var/log/fabricmanager.log", read("fabricmanager-switches-missing.log"))
    ctx = _OnlyFakes(
        root=root.root,
        search_path=_tools(tmp_path, read("systemctl-show-failed.txt"), None),
    )
    facts = Facts()
    FabricManagerCollector().collect(ctx, facts)
    assert facts.fabric is not None
    assert facts.fabric.fm_switches_mismatch is True
    assert facts.fabric.fm_version == "570.124.06"  # from the log: no binary
    kept = [r for r in ctx.raw if "fabricmanager.log" in r.source]
    assert kept and "INFO" not in kept[0].text  # only the lines used are kept


def test_a_planted_symlink_log_is_not_followed(tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_text("[Jul 23 2024 07:53:55] [ERROR] [tid 1] root:x:0:0 secret\n")
    (tmp_path / "log").mkdir()
    os.symlink(secret, tmp_path / "log" / "fabricmanager.log")
    text, why = read_log_tail(str(tmp_path / "log" / "fabricmanager.log"), 1 << 20)
    assert text is None and "symbolic link" in why


def test_a_fifo_log_does_not_block(tmp_path: Path) -> None:
    fifo = tmp_path / "fabricmanager.log"
    os.mkfifo(fifo)
    assert stat.S_ISFIFO(fifo.stat().st_mode)
    text, why = read_log_tail(str(fifo), 1 << 20)
    assert text is None and "not a regular file" in why


def test_only_the_newest_part_of_a_large_log_is_read(tmp_path: Path) -> None:
    log = tmp_path / "fabricmanager.log"
    old = "[Jul 22 2024 09:11:48] [ERROR] [tid 2] old error\n" * 50_000
    new = "[Jul 23 2024 07:53:55] [ERROR] [tid 3] newest error\n"
    log.write_text(old + new)
    text, _ = read_log_tail(str(log), 4096)
    assert text is not None and len(text) <= 4096
    assert text.endswith(new) and text.startswith("[")  # whole lines only
    fabric, _ = parse_fm_log(text)
    assert fabric.fm_log_error == "newest error"


def test_a_pcie_node_with_no_fabric_manager_is_quiet(
    tmp_path: Path, builtin_book: Rulebook
) -> None:
    facts = _collect(tmp_path, 0, read("systemctl-show-not-found.txt"), None)
    facts.gpus = [GpuFacts(index=0, pci_bus_id="0000:18:00.0", fabric_state="not_supported")]
    facts.host = HostFacts(driver_version="550.90.07")
    doc = evaluate(EvalInput(facts), builtin_book, engine="reference")
    assert not [f for f in doc.findings if f.rule_id.startswith("fabric-manager")]
