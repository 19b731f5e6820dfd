"""A one-shot command ends its process without the interpreter's teardown (cold start):
its output is whole, its exit code the verdict's, and the durable_rules worker it started
ends with it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path


def _workers(home: Path) -> set[int]:
    """The durable_rules workers started by a run whose HOME is ``home`` (the worker
    keeps HOME from its parent's environment: other tests' workers have another)."""
    mark = f"HOME={home}".encode()
    out = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmd = Path(f"/proc/{entry}/cmdline").read_bytes()
            env = Path(f"/proc/{entry}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"gpu_triage.engine.durable_worker" in cmd and mark in env:
            out.add(int(entry))
    return out


def test_run_exits_with_its_verdict_its_output_whole_and_no_worker_left(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    env = {**os.environ, "GPU_TRIAGE_CACHE_DIR": str(tmp_path / "cache"), "HOME": str(home)}
    out = tmp_path / "findings.json"
    res = subprocess.run(
        [sys.executable, "-m", "gpu_triage", "run", "--demo", "--format", "json"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    doc = json.loads(res.stdout)  # stdout flushed whole before the process ended
    assert res.returncode == doc["exit_status"] != 0
    res = subprocess.run(
        [sys.executable, "-m", "gpu_triage", "run", "--demo", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert json.loads(out.read_text())["exit_status"] == res.returncode
    deadline = time.monotonic() + 10
    while True:  # the workers those runs started see their stdin close and end
        left = _workers(home)
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert not left
