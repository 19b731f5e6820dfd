"""`gpu-triage tui` hands the TUI a typed TuiOptions built from its flags."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpu_triage.cli import main
from gpu_triage.ops.session import TuiOptions


def test_cli_builds_typed_tui_options(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[TuiOptions] = []
    monkeypatch.setattr("gpu_triage.tui.app.run_tui", lambda opts: seen.append(opts) or 0)
    argv = ["tui", "--demo", "--engine", "reference", "--window", "2.5"]
    argv += ["--record", str(tmp_path / "r.jsonl"), "--rules", str(tmp_path), "--no-builtin"]
    argv += ["--symptom", "slow"]
    assert main(argv) == 0
    assert seen == [
        TuiOptions(
            rules=(tmp_path,),
            include_builtin=False,
            engine="reference",
            demo="incident",
            window_s=2.5,
            record=tmp_path / "r.jsonl",
            symptom="slow",
        )
    ]
