"""Helpers for the TUI tests: apps on the demo incident or on small test rulebooks,
headless, with everything they write under tmp_path."""

from __future__ import annotations

import io
import os
import re
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from gpu_triage.model.demos import demo_snapshot_path
from gpu_triage.model.snapshot import Snapshot, load_snapshot

ROOT = Path(__file__).resolve().parents[2]
REAL = ROOT / "tests" / "data" / "real-outputs"
H100_Q = (
    REAL
    / "nvidia-smi-q"
    / "h100-sxm-565-full-q-gpu0-clocks-event-reasons-replays7-thamada-nvsim.txt"
)
SNAPSHOT_DIR = Path(__file__).parent / "snapshots"


@pytest.fixture(autouse=True)
def _quiet(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Nothing from the machine running the tests: state under tmp_path, no blinking."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    from textual.widgets import Input

    monkeypatch.setattr(Input, "_toggle_cursor", lambda _self: None, raising=False)


def demo_snapshot() -> Snapshot:
    return load_snapshot(demo_snapshot_path())


def screen_text(app: Any) -> str:
    """The current screen as plain text (what a monochrome terminal would show)."""
    from rich.console import Console

    width, height = app.size
    console = Console(
        width=width,
        height=height,
        file=io.StringIO(),
        force_terminal=True,
        color_system=None,
        record=True,
        legacy_windows=False,
        safe_box=False,
    )
    console.print(
        app.screen._compositor.render_update(full=True, screen_stack=app._background_screens)
    )
    return "\n".join(line.rstrip() for line in console.export_text().splitlines())


# A scrollbar's thumb is drawn with eighth blocks (two cells: "▆▆"); which eighth depends
# on sub-cell rounding that varies between runs. Goldens keep where a thumb is, not which.
_THUMB = re.compile(r"(?<![▁-█])([▁-█])\1(?![▁-█])")


def check_golden(name: str, text: str) -> None:
    """Compare with tests/tui/snapshots/<name>.txt; GPU_TRIAGE_UPDATE_SNAPSHOTS=1 rewrites."""
    path = SNAPSHOT_DIR / f"{name}.txt"
    text = _THUMB.sub("▒▒", text.rstrip("\n"))
    if os.environ.get("GPU_TRIAGE_UPDATE_SNAPSHOTS") or not path.exists():
        path.write_text(text + "\n", encoding="utf-8")
        if not os.environ.get("GPU_TRIAGE_UPDATE_SNAPSHOTS"):
            pytest.fail(f"new golden file {path}: look at it, then run the test again")
        return
    want = _THUMB.sub("▒▒", path.read_text(encoding="utf-8").rstrip("\n"))
    assert text == want, f"{name} differs from {path} (GPU_TRIAGE_UPDATE_SNAPSHOTS=1 updates)"


def write_rulebook(tmp_path: Path, *, step_cmd: list[str], sleep_cmd: list[str]) -> Path:
    """A small rulebook: a GPU rule whose first step prints a recorded nvidia-smi -q,
    whose second step sleeps, and a rule that waits on a yes/no question."""
    d = tmp_path / "rules"
    d.mkdir()
    import json

    (d / "test.yaml").write_text(
        textwrap.dedent(
            f"""\
            id: test-thermal
            title: GPU {{gpu.index}} is hot
            version: 1
            severity: warning
            stage: FD1
            symptom: GPU {{gpu.index}} reports a thermal slowdown.
            cause: Cooling.
            fix: Fix the airflow.
            when: gpu.throttle_hw_thermal_slowdown or gpu.throttle_sw_thermal_slowdown
            references: [guide/T2]
            runbook:
              - title: Read the clock-event reasons
                command: {json.dumps(step_cmd)}
                meaning: Thermal slowdown active means heat.
                decision: Fix cooling when active.
                parser: nvidia-smi-q
                confirms_when: gpu.throttle_hw_thermal_slowdown or gpu.throttle_sw_thermal_slowdown
              - title: Wait a long time
                command: {json.dumps(sleep_cmd)}
                meaning: Nothing.
                decision: Nothing.
            ---
            id: test-question
            title: Training is stalled on this node
            version: 1
            severity: info
            stage: FD4
            symptom: Someone says training is stalled.
            cause: Unknown.
            fix: Look closer.
            when: answer.training_stalled
            questions:
              - id: training_stalled
                text: Is the training job stalled?
                type: yes_no
            references: [guide/FD4]
            """
        ),
        encoding="utf-8",
    )
    return d


def python_cat(path: Path) -> list[str]:
    return [sys.executable, "-c", f"import sys; sys.stdout.write(open({str(path)!r}).read())"]


SLEEPER = [sys.executable, "-c", "import time; print('sleeping', flush=True); time.sleep(60)"]


def as_local_node(session: Any, tmp_path: Path) -> None:
    """Make the session's snapshot come from "this" node: a machine and boot id under
    ``tmp_path`` that the session reads as the local host's."""
    from gpu_triage.io.node_identity import local_identity

    root = tmp_path / "identity"
    (root / "etc").mkdir(parents=True, exist_ok=True)
    (root / "proc" / "sys" / "kernel" / "random").mkdir(parents=True, exist_ok=True)
    (root / "etc" / "machine-id").write_text("0123456789abcdef0123456789abcdef\n")
    (root / "proc" / "sys" / "kernel" / "random" / "boot_id").write_text(
        "11111111-2222-3333-4444-555555555555\n"
    )
    here = local_identity(root)
    session.identity_root = root
    session.snapshot.node_id, session.snapshot.boot_id = here.node_id, here.boot_id
