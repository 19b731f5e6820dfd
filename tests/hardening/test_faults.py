"""Faults injected on purpose: collectors that hang, crash, print garbage, are missing or
denied; a disk that fills; rule files others can write; commands from rules."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gpu_triage.collectors.base import CollectContext, CollectorUnavailable
from gpu_triage.collectors.host import HostCollector
from gpu_triage.collectors.kernel_log import KernelLogCollector
from gpu_triage.collectors.runner import collect_snapshot
from gpu_triage.io.commands import run_command
from gpu_triage.model.facts import Facts
from gpu_triage.model.snapshot import CollectorState
from tests.conftest import SNAPSHOTS

ROOT = Path(__file__).resolve().parents[2]


class Hangs:
    name, kinds, budget_s = "hangs", ("host",), 0.3

    def collect(self, ctx: CollectContext, facts: Facts) -> None:
        time.sleep(30)


class HangsInACommand:
    """Runs a real command that never ends; its own timeout must kill it and its children."""

    name, kinds, budget_s = "stuck_command", ("scheduler",), 5.0

    def collect(self, ctx: CollectContext, facts: Facts) -> None:
        res = ctx.run(self.name, ["sh", "-c", "sleep 60 & sleep 60"], timeout_s=0.5)
        if res.timed_out:
            raise TimeoutError("sh timed out after 0.5 s and was killed")


class Crashes:
    name, kinds = "crashes", ("disk",)

    def collect(self, ctx: CollectContext, facts: Facts) -> None:
        raise RuntimeError("boom")


class Missing:
    name, kinds = "missing_tool", ("nic",)

    def collect(self, ctx: CollectContext, facts: Facts) -> None:
        res = ctx.run(self.name, ["gpu-triage-no-such-tool", "--version"])
        if res.missing:
            raise CollectorUnavailable("gpu-triage-no-such-tool not found")


def test_every_collector_fault_is_recorded_and_bounded(tmp_path: Path) -> None:
    garbage = tmp_path / "kern.log"
    garbage.write_bytes(os.urandom(200_000) + b"\nNVRM: Xid (PCI:0000:3b:00): 79, pid=1\n")
    ctx = CollectContext(window_s=0.2, kernel_log_file=garbage)
    start = time.monotonic()
    snap = collect_snapshot(
        [Hangs(), HangsInACommand(), Crashes(), Missing(), KernelLogCollector()], ctx
    )
    elapsed = time.monotonic() - start
    states = {c.name: (c.state, c.error) for c in snap.collectors}
    assert states["hangs"][0] is CollectorState.TIMED_OUT
    assert states["stuck_command"][0] is CollectorState.FAILED
    assert "timed out" in states["stuck_command"][1]
    assert states["crashes"] == (CollectorState.FAILED, "RuntimeError: boom")
    assert states["missing_tool"][0] is CollectorState.UNAVAILABLE
    assert states["kernel_log"][0] is CollectorState.OK  # garbage skipped, the Xid kept
    assert [x.code for x in snap.facts.xids] == [79]
    assert elapsed < 3.0, elapsed


def test_a_timed_out_command_leaves_no_process_behind() -> None:
    marker = f"gpu-triage-fault-{os.getpid()}"
    res = run_command(["sh", "-c", f"sleep 60 & exec -a {marker} sleep 60"], 0.3)
    assert res.timed_out
    time.sleep(0.2)
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    assert marker not in ps


def test_denied_executable_is_recorded(tmp_path: Path) -> None:
    tool = tmp_path / "tool"
    tool.write_text("#!/bin/sh\necho hi\n")
    tool.chmod(0o644)  # not executable, for root too
    res = run_command([str(tool)], 5.0)
    assert res.denied and not res.ok and "Permission denied" in res.stderr


def test_garbage_proc_tree_marks_fields_unavailable(tmp_path: Path) -> None:
    (tmp_path / "proc").mkdir()
    for name in ("stat", "meminfo", "loadavg", "vmstat", "diskstats"):
        (tmp_path / "proc" / name).write_bytes(os.urandom(512))
    facts = Facts()
    HostCollector(sleep=lambda s: None).collect(CollectContext(root=tmp_path, window_s=0.1), facts)
    assert facts.host is not None and facts.host.cpu_iowait_pct is None
    assert facts.host.mem_available_mib is None


def test_commands_get_a_minimal_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "do-not-leak")
    monkeypatch.setenv("LD_PRELOAD", "/tmp/evil.so")
    out = run_command(["env"], 5.0).stdout
    keys = {line.split("=", 1)[0] for line in out.splitlines() if "=" in line}
    assert "AWS_SECRET_ACCESS_KEY" not in keys and "LD_PRELOAD" not in keys
    # GPU_TRIAGE_RUN: the marker that finds the command's descendants (io/proctree.py)
    allowed = {"PATH", "LC_ALL", "LANG", "HOME", "KUBECONFIG", "PWD", "SHLVL", "_"}
    assert keys <= allowed | {"GPU_TRIAGE_RUN"}


def test_unattended_runs_never_run_runbook_commands(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    rule = (
        "id: site-trap\ntitle: trap rule\nversion: 1\nseverity: critical\nstage: FD1\n"
        "symptom: s\ncause: c\nfix: f\nwhen: gpu.index >= 0\nreferences: [guide/T1]\n"
        f"runbook:\n  - title: would create a file\n    command: [touch, '{marker}']\n"
        "    meaning: m\n    decision: d\n"
        "tests:\n  - {name: fires, facts: {gpus: [{index: 0}]}, expect: {fires: true}}\n"
        "  - {name: quiet, facts: {gpus: []}, expect: {fires: false}}\n"
    )
    (tmp_path / "trap.yaml").write_text(rule)
    code = (
        "import sys; from gpu_triage.cli import main; "
        f"rc = main(['run', '--snapshot', {str(SNAPSHOTS / 'healthy-busy.json')!r}, "
        f"'--rules', {str(tmp_path)!r}, '--allow-untrusted-rules', "
        f"'--out', {str(tmp_path / 'out.json')!r}]); "
        "print(rc, 'gpu_triage.io.commands' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["2", "False"]
    assert not marker.exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="the trust check applies when running as root")
def test_rule_files_others_can_write_are_refused_as_root(tmp_path: Path) -> None:
    good = (
        (ROOT / "tests/engine/test_lint.py").read_text().split('GOOD = """\\\n')[1].split('"""')[0]
    )
    f = tmp_path / "site.yaml"
    f.write_text(good)
    f.chmod(0o666)
    r = subprocess.run(
        [sys.executable, "-m", "gpu_triage", "rules", "list", "--rules", str(tmp_path)],
        capture_output=True,
        text=True,
    )
    assert r.returncode != 0 and "writable by users other than root" in r.stderr
    assert str(f) in r.stderr
    ok = subprocess.run(
        [
            sys.executable,
            "-m",
            "gpu_triage",
            "rules",
            "list",
            "--rules",
            str(tmp_path),
            "--allow-untrusted-rules",
        ],
        capture_output=True,
        text=True,
    )
    assert ok.returncode == 0 and "site-hot-gpu" in ok.stdout
    f.chmod(0o644)
    assert (
        subprocess.run(
            [sys.executable, "-m", "gpu_triage", "rules", "list", "--rules", str(tmp_path)],
            capture_output=True,
        ).returncode
        == 0
    )


@pytest.fixture
def small_fs(tmp_path: Path):
    """A 256 KiB tmpfs: a disk that fills up for real (root only; skipped elsewhere)."""
    mnt = tmp_path / "small"
    mnt.mkdir()
    r = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mnt)], capture_output=True
    )
    if r.returncode != 0:
        pytest.skip("cannot mount a tmpfs here")
    yield mnt
    subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def test_full_disk_keeps_the_previous_output(small_fs: Path) -> None:
    out = small_fs / "findings.json"
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "gpu_triage",
            "run",
            "--snapshot",
            str(SNAPSHOTS / "healthy-busy.json"),
            "--format",
            "markdown",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0
    previous = out.read_text()
    try:  # fill the disk to the last block
        with (small_fs / "filler").open("wb", buffering=0) as fh:
            while True:
                fh.write(b"x" * 1024)
    except OSError:
        pass
    r = subprocess.run(
        [sys.executable, "-m", "gpu_triage", "run", "--demo", "--out", str(out)],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 3 and "cannot write" in r.stderr and "No space left" in r.stderr
    assert out.read_text() == previous
    assert not [p for p in small_fs.iterdir() if p.name.endswith(".tmp")]
    jsonl = small_fs / "history.jsonl"
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "gpu_triage",
            "run",
            "--demo",
            "--format",
            "jsonl",
            "--out",
            str(jsonl),
        ],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 3
    assert not jsonl.exists() or all(json.loads(line) for line in jsonl.read_text().splitlines())


def test_read_only_output_directory(small_fs: Path) -> None:
    out = small_fs / "findings.json"
    out.write_text("previous")
    r = subprocess.run(["mount", "-o", "remount,ro", str(small_fs)], capture_output=True)
    if r.returncode != 0:
        pytest.skip("cannot remount read-only here")
    r = subprocess.run(
        [sys.executable, "-m", "gpu_triage", "run", "--demo", "--out", str(out)],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 3 and "cannot write" in r.stderr and "Read-only" in r.stderr
    assert out.read_text() == "previous"


def test_redacted_snapshot_holds_no_identifiers(tmp_path: Path) -> None:
    out = tmp_path / "s.json"
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "gpu_triage",
            "collect",
            "--window",
            "0.2",
            "--redact",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr
    import socket

    text = out.read_text()
    host = socket.gethostname()
    import re

    doc = json.loads(text)
    assert doc["redacted"] is True and doc["hostname"] != host
    assert not re.search(rf"(?<![\w-]){re.escape(host)}(?![\w-])", text)
    findings = out.with_name("findings.json")
    r = subprocess.run(
        [sys.executable, "-m", "gpu_triage", "run", "--snapshot", str(out), "--out", str(findings)],
        capture_output=True,
        text=True,
    )
    # still evaluable (this machine has no GPU, so the verdict is "unknown", by contract)
    assert r.returncode in (0, 1, 2, 3), r.stderr
    evaluated = json.loads(findings.read_text())
    assert evaluated["summary"]["rules_evaluated"] > 0 and "no snapshot" not in r.stderr
