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
    assert main(argv) == 0
    assert seen == [
        TuiOptions(
            rules=(tmp_path,),
            include_builtin=False,
            engine="reference",
            demo="incident",
            window_s=2.5,
            record=tmp_path / "r.jsonl",
        )
    ]


@pytest.mark.parametrize(
    ("engine", "order"), [("auto", "prespawn textual"), ("reference", "textual")]
)
def test_tui_starts_the_durable_worker_before_importing_textual(
    engine: str, order: str, tmp_path: Path
) -> None:
    """The worker's interpreter starts beside Textual's import (cold start), and only when
    the durable engine may be used."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "log = []\n"
        "class Spy:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'textual': log.append('textual')\n"
        "sys.meta_path.insert(0, Spy())\n"
        "from gpu_triage.engine import durable_worker\n"
        "durable_worker.prespawn = lambda: log.append('prespawn')\n"
        "from gpu_triage.cli import main\n"
        f"rc = main(['tui', '--snapshot', 'missing.json', '--engine', {engine!r}])\n"
        "print(rc, ' '.join(log))\n"
    )
    res = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=tmp_path
    )
    rc, *log = res.stdout.split()
    assert rc == "3"  # the missing snapshot, after the start
    assert " ".join(dict.fromkeys(log)) == order  # the first time each happened
