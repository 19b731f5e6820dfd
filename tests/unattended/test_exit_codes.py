"""The exit-code contract, path by path (README "Unattended use", engine/verdict.py).

0 only when every collector that could matter answered and nothing fired at warning or
above; 3 whenever gpu-triage could not look; 2 when a critical finding explains the
blindness; 64 for every usage error; 3 with one line for anything unexpected."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gpu_triage.engine.compiler import load_rulebook
from gpu_triage.engine.evaluate import evaluate
from gpu_triage.engine.findings import FindingsDocument
from gpu_triage.model.facts import SiteInventory
from gpu_triage.model.snapshot import CollectorState, CollectorStatus, Snapshot, load_snapshot
from tests.conftest import ROOT, SNAPSHOTS

REAL = ROOT / "tests" / "data" / "real-outputs"


@pytest.fixture(scope="module")
def book():  # type: ignore[no-untyped-def]
    return load_rulebook()


def healthy() -> Snapshot:
    return load_snapshot(SNAPSHOTS / "healthy-busy.json")


def judged(snap: Snapshot, book) -> FindingsDocument:  # type: ignore[no-untyped-def]
    return evaluate(snap, book, engine="reference")


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpu_triage", *args], capture_output=True, text=True, timeout=120
    )


def test_healthy_is_0_and_says_so(book) -> None:  # type: ignore[no-untyped-def]
    doc = judged(healthy(), book)
    assert doc.exit_code == 0 and doc.verdict.startswith("HEALTHY (exit 0): every collector")


def test_a_collector_not_present_is_not_a_reason_for_3(book) -> None:  # type: ignore[no-untyped-def]
    snap = healthy()
    snap.collectors.append(
        CollectorStatus(name="kubernetes", state=CollectorState.UNAVAILABLE, error="no kubectl")
    )
    snap.collectors.append(
        CollectorStatus(name="slurm", state=CollectorState.UNAVAILABLE, error="no scontrol")
    )
    assert judged(snap, book).exit_code == 0


def test_truncated_output_is_recorded_and_still_ok(book) -> None:  # type: ignore[no-untyped-def]
    snap = healthy()
    snap.collectors.append(
        CollectorStatus(name="kubernetes", state=CollectorState.OK, truncated=True)
    )
    doc = judged(snap, book)
    assert doc.exit_code == 0 and "output cut at the cap: kubernetes" in doc.verdict


@pytest.mark.parametrize("state", [CollectorState.TIMED_OUT, CollectorState.FAILED])
def test_kernel_log_timed_out_or_failed_is_3_not_0(book, state: CollectorState) -> None:  # type: ignore[no-untyped-def]
    """The reproduction: the kernel-log collector timed out, every Xid rule could not be
    evaluated, and the run said "healthy"."""
    snap = healthy()
    kl = next(c for c in snap.collectors if c.name == "kernel_log")
    kl.state, kl.error, kl.kinds = state, "did not finish within 16.0s", []
    snap.facts.xids = []
    doc = judged(snap, book)
    assert doc.exit_code == 3
    word = "timed out" if state is CollectorState.TIMED_OUT else "failed"
    assert doc.verdict.startswith(f"UNKNOWN (exit 3): could not look: kernel_log {word}")
    assert any(f.rule_id.startswith("xid-") for f in doc.cannot_evaluate)


def test_a_timed_out_minor_collector_is_3_too(book) -> None:  # type: ignore[no-untyped-def]
    snap = healthy()
    snap.collectors.append(
        CollectorStatus(name="kubernetes", state=CollectorState.TIMED_OUT, error="hung")
    )
    assert judged(snap, book).exit_code == 3


def test_nvml_unavailable_on_a_node_with_nvidia_pci_devices_is_3(book) -> None:  # type: ignore[no-untyped-def]
    doc = judged(load_snapshot(SNAPSHOTS / "no-gpu-collector.json"), book)
    assert doc.exit_code == 3 and "8 NVIDIA PCI device(s)" in doc.verdict
    assert doc.summary.critical == 0 and doc.summary.warning == 0  # "idle", yet not healthy


def test_no_gpu_facts_where_the_inventory_expects_gpus_is_3(book) -> None:  # type: ignore[no-untyped-def]
    snap = load_snapshot(SNAPSHOTS / "no-gpu-collector.json")
    assert snap.facts.host is not None
    snap.facts.host.gpu_count_pci = None
    snap.facts.site = SiteInventory(expected_gpu_count=8, source="site.yaml")
    doc = judged(snap, book)
    assert doc.exit_code == 3 and "the inventory expects 8 GPU(s)" in doc.verdict


def test_no_nvidia_gpu_visible_at_all_is_3(book) -> None:  # type: ignore[no-untyped-def]
    snap = load_snapshot(SNAPSHOTS / "no-gpu-collector.json")
    assert snap.facts.host is not None
    snap.facts.host.gpu_count_pci = 0
    doc = judged(snap, book)
    assert doc.exit_code == 3 and "no NVIDIA GPU visible" in doc.verdict


def test_a_critical_finding_that_explains_the_blindness_is_2(book) -> None:  # type: ignore[no-untyped-def]
    snap = load_snapshot(SNAPSHOTS / "xid79.json")  # a GPU off the bus
    host = next(c for c in snap.collectors if c.name == "host")
    host.state, host.error = CollectorState.TIMED_OUT, "stuck reading sysfs"
    doc = judged(snap, book)
    assert doc.exit_code == 2
    assert doc.verdict.startswith("CRITICAL (exit 2): ")
    assert "also could not look: host timed out" in doc.verdict


def test_warning_and_blind_is_3(book) -> None:  # type: ignore[no-untyped-def]
    snap = load_snapshot(SNAPSHOTS / "input-bound.json")
    snap.collectors[1].state = CollectorState.FAILED
    doc = judged(snap, book)
    assert doc.summary.warning and doc.exit_code == 3


def test_pasted_outputs_are_judged_on_what_they_hold(tmp_path: Path) -> None:
    """`collect --from-text` holds only what was pasted: what it does not contain (here:
    the kernel log, the host, Kubernetes) is not provided, never a reason for 3."""
    table = REAL / "nvidia-smi" / "table-8x-h100-sxm-565-new-format-thamada-nvsim.txt"
    snap_file = tmp_path / "pasted.json"
    r = cli("collect", "--from-text", "nvidia-smi", str(table), "--out", str(snap_file))
    assert r.returncode == 0, r.stderr
    out = tmp_path / "f.json"
    r = cli("run", "--snapshot", str(snap_file), "--out", str(out), "--engine", "reference")
    doc = FindingsDocument.model_validate_json(out.read_text())
    assert r.returncode == doc.exit_code != 3, doc.verdict
    # and one holding no GPU at all (a meminfo paste) is not "no NVIDIA GPU visible"
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       16384000 kB\nMemFree:  8000000 kB\n")
    r = cli("collect", "--from-text", "meminfo", str(meminfo), "--out", str(snap_file))
    assert r.returncode == 0, r.stderr
    r = cli("run", "--snapshot", str(snap_file), "--out", str(out), "--engine", "reference")
    assert r.returncode != 3, r.stderr


def test_a_pasted_file_that_cannot_be_parsed_is_a_failure(book) -> None:  # type: ignore[no-untyped-def]
    snap = Snapshot(
        collectors=[
            CollectorStatus(name="text:nvidia-smi:x.txt", state=CollectorState.FAILED, error="?")
        ]
    )
    assert judged(snap, book).exit_code == 3


@pytest.mark.parametrize(
    "args",
    [
        ["run", "--format", "xml"],
        ["explain", "foo"],  # no --snapshot
        ["bogus"],
        ["run", "--interval", "abc"],
        ["run", "--interval", "0"],
        ["run", "--interval", "nan"],
        ["rules", "lint", "--bogus"],
        ["rules"],
        ["npd", "--severity", "info"],
        ["run", "--also", "xml:x"],
    ],
)
def test_every_usage_error_is_64(args: list[str]) -> None:
    r = cli(*args)
    assert r.returncode == 64, (args, r.returncode, r.stderr)
    assert r.stderr.strip()


def test_help_and_version_are_0() -> None:
    assert cli("--version").returncode == 0
    assert cli("run", "--help").returncode == 0


def test_an_unexpected_error_is_3_with_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from gpu_triage import cli as top
    from gpu_triage.cli import explain

    def boom(_args: object) -> int:
        raise RuntimeError("the explainer broke\nsecond line")

    monkeypatch.setattr(explain, "cmd_explain", boom)
    assert top.main(["explain", "x", "--snapshot", "y"]) == 3
    err = capsys.readouterr().err
    assert err == "gpu-triage: internal error in explain: RuntimeError: the explainer broke\n"


def test_an_evaluation_crash_writes_an_unknown_document(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A crash after the snapshot: every output still gets a document saying exit 3 and
    why, never the previous run's "healthy"."""
    from gpu_triage import cli as top
    from gpu_triage.ops import unattended

    def boom(*_a: object, **_k: object) -> None:
        raise ZeroDivisionError("rule arithmetic")

    out, prom = tmp_path / "f.json", tmp_path / "f.prom"
    out.write_text('{"previous": "healthy"}')
    monkeypatch.setattr(unattended, "evaluate", boom)
    code = top.main(["run", "--demo", "--out", str(out), "--also", f"prometheus:{prom}"])
    assert code == 3
    doc = FindingsDocument.model_validate_json(out.read_text())
    assert doc.exit_code == 3
    assert doc.verdict == "UNKNOWN (exit 3): evaluation failed: ZeroDivisionError: rule arithmetic"
    assert prom.read_text().startswith("# gpu-triage: UNKNOWN (exit 3): evaluation failed")
    assert "evaluation failed" in capsys.readouterr().err


def test_an_output_that_cannot_be_written_is_3_naming_it(tmp_path: Path) -> None:
    """(Every output is locked before any is written: one that cannot even be locked
    stops the writes, with exit 3 and its name; the loop test covers a later failure.)"""
    out = tmp_path / "f.json"
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    r = cli("run", "--demo", "--out", str(out), "--also", f"jsonl:{blocked}/h.jsonl")
    assert r.returncode == 3 and str(blocked) in r.stderr


def test_an_unreadable_snapshot_is_3_and_written_as_unknown(tmp_path: Path) -> None:
    bad, out = tmp_path / "s.json", tmp_path / "f.json"
    bad.write_text("[" * 100_000)
    r = cli("run", "--snapshot", str(bad), "--out", str(out))
    assert r.returncode == 3 and "no snapshot" in r.stderr
    assert json.loads(out.read_text())["exit_status"] == 3


def test_every_report_says_the_verdict_on_its_first_line(tmp_path: Path) -> None:
    snap = str(SNAPSHOTS / "no-gpu-collector.json")
    for fmt in ("markdown", "prometheus", "jsonl"):
        out = tmp_path / f"r.{fmt}"
        assert cli("run", "--snapshot", snap, "--format", fmt, "--out", str(out)).returncode == 3
        first = out.read_text().splitlines()[0]
        assert "UNKNOWN (exit 3): could not look: GPU facts unavailable" in first, (fmt, first)
    out = tmp_path / "r.json"
    cli("run", "--snapshot", snap, "--out", str(out))
    assert next(iter(json.loads(out.read_text()))) == "verdict"  # the first key


def test_a_check_that_crashes_is_npd_unknown(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """node-problem-detector knows 0, 1 and 2: a crash while checking is its Unknown (2),
    never Python's 1 (which it would read as NonOK)."""
    from gpu_triage import cli as top
    from gpu_triage.cli import check

    def boom(_args: object) -> None:
        raise OSError("no /proc")

    monkeypatch.setattr(check, "_check_findings", boom)
    assert top.main(["npd"]) == 2
    assert capsys.readouterr().out.startswith("gpu-triage: OSError: no /proc")
