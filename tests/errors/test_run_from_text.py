"""`gpu-triage run --from-text`: the same intake as `collect --from-text`, evaluated at
once, with the from-text exit contract (what a paste does not hold is not provided,
never a reason for 3; a paste with nothing readable in it is 3, never healthy)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parents[1] / "data"
HEALTHY_TABLE = DATA / "real-outputs/nvidia-smi/table-8x-h100-sxm-565-new-format-thamada-nvsim.txt"

MISMATCH_SESSION = (
    "root@gpu-node-3:~# nvidia-smi\n"
    "Failed to initialize NVML: Driver/library version mismatch\n"
    "NVML library version: 570.133\n"
    "root@gpu-node-3:~# dmesg | tail -n 2\n"
    "[ 8812.102233] NVRM: API mismatch: the client has the version 570.133.20, but\n"
    "[ 8812.102236] NVRM: this kernel module has the version 570.86.15.  Please\n"
)


def run(
    args: list[str], tmp_path: Path, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "GPU_TRIAGE_CACHE_DIR": str(tmp_path / "cache")}
    return subprocess.run(
        [sys.executable, "-m", "gpu_triage", "run", "--engine", "reference", *args],
        capture_output=True,
        text=True,
        input=stdin,
        env=env,
        cwd=tmp_path,
        timeout=120,
    )


def test_a_pasted_session_with_a_mismatch_is_critical(tmp_path: Path) -> None:
    paste = tmp_path / "session.txt"
    paste.write_text(MISMATCH_SESSION)
    r = run(["--from-text", str(paste)], tmp_path)
    assert r.returncode == 2, r.stderr
    doc = json.loads(r.stdout)
    assert doc["findings"][0]["rule_id"] == "driver-library-version-mismatch"


def test_stdin_and_forced_kind_are_read(tmp_path: Path) -> None:
    r = run(["--from-text", "-", "--format", "markdown"], tmp_path, stdin=MISMATCH_SESSION)
    assert r.returncode == 2, r.stderr
    assert "driver" in r.stdout.lower()
    forced = run(["--from-text", f"nvidia-smi:{HEALTHY_TABLE}"], tmp_path)
    assert forced.returncode in (0, 1), forced.stderr  # healthy or a warning: never 3


def test_kinds_the_paste_does_not_hold_are_no_reason_for_3(tmp_path: Path) -> None:
    # An nvidia-smi table alone: no kernel log, no lspci, no Kubernetes were provided.
    r = run(["--from-text", str(HEALTHY_TABLE)], tmp_path)
    assert r.returncode in (0, 1), r.stderr
    doc = json.loads(r.stdout)
    assert "could not look" not in doc["verdict"]


def test_nothing_readable_is_unknown_not_healthy(tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("the job hangs forever after 10 minutes\nrestarting fixes it\n")
    r = run(["--from-text", str(notes)], tmp_path)
    assert r.returncode == 3, r.stderr
    assert f"{notes}:1-2" in r.stderr and "not recognised" in r.stderr


@pytest.mark.parametrize(
    "extra",
    [["--snapshot", "x.json"], ["--demo"], ["--interval", "5"]],
    ids=["snapshot", "demo", "interval"],
)
def test_from_text_with_another_source_is_a_usage_error(tmp_path: Path, extra: list[str]) -> None:
    paste = tmp_path / "p.txt"
    paste.write_text(MISMATCH_SESSION)
    r = run(["--from-text", str(paste), *extra], tmp_path)
    assert r.returncode == 64, r.stderr
    assert "--from-text" in r.stderr


def test_a_missing_file_is_a_usage_error_naming_it(tmp_path: Path) -> None:
    r = run(["--from-text", str(tmp_path / "nope.txt")], tmp_path)
    assert r.returncode == 64
    assert "nope.txt" in r.stderr


def test_symptom_and_error_text_combine_with_the_paste(tmp_path: Path) -> None:
    paste = tmp_path / "smi.txt"
    paste.write_text(HEALTHY_TABLE.read_text())
    job = tmp_path / "job.txt"
    job.write_text("RuntimeError: CUDA error: uncorrectable ECC error encountered\n")
    r = run(["--from-text", str(paste), "--error-text", str(job), "--symptom", "crash"], tmp_path)
    doc = json.loads(r.stdout)
    assert doc["findings"][0]["rule_id"] == "job-hit-uncorrectable-ecc", r.stderr
    assert r.returncode in (1, 2)
